//! Semantic descriptors made from a collection's memories: its distinctive keywords, and a
//! one-sentence summary by the model (or, without one, its titles and first outline items).
//!
//! Keywords are the terms of a collection's titles, outline items and core contents (a
//! baseline chunker's memory has neither, so its chunk texts stand in), scored by
//! frequency × ln(1 + collections / collections holding the term): a term every
//! collection uses tells them apart no better than "the" does.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::terms::term_set;
use crate::text::lexical_terms;
use crate::text_model::TextModel;
use crate::Error;

/// Most keywords per collection.
pub const MAX_KEYWORDS: usize = 200;

/// One collection's texts, for its descriptor.
#[derive(Clone, Debug, Default)]
pub struct CollectionTexts {
    /// Its name.
    pub name: String,
    /// Document titles.
    pub titles: Vec<String>,
    /// Outline items and core contents (or chunk texts when there are none).
    pub texts: Vec<String>,
}

/// Each collection's keywords, in the order given (see the module docs).
pub fn collection_keywords(collections: &[CollectionTexts], max_keywords: usize) -> Vec<Vec<String>> {
    let counts: Vec<HashMap<String, u32>> = collections
        .iter()
        .map(|c| {
            let mut tf: HashMap<String, u32> = HashMap::new();
            for text in c.titles.iter().chain(&c.texts) {
                // Content terms only (the stopword filter), each occurrence counted.
                let content = term_set(text);
                for t in lexical_terms(text) {
                    if content.binary_search(&t).is_ok() {
                        *tf.entry(t).or_insert(0) += 1;
                    }
                }
            }
            tf
        })
        .collect();
    let mut df: HashMap<&str, u32> = HashMap::new();
    for tf in &counts {
        for t in tf.keys() {
            *df.entry(t.as_str()).or_insert(0) += 1;
        }
    }
    let n = collections.len() as f64;
    counts
        .iter()
        .map(|tf| {
            let mut scored: Vec<(f64, &String)> =
                tf.iter().map(|(t, &f)| (f as f64 * libm::log(1.0 + n / df.get(t.as_str()).copied().unwrap_or(1) as f64), t)).collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
            let mut top: Vec<String> = scored.into_iter().take(max_keywords).map(|(_, t)| t.clone()).collect();
            top.sort_unstable();
            top
        })
        .collect()
}

/// The summary without a model: "titles: …; about: first outline items".
pub fn plain_summary(c: &CollectionTexts) -> String {
    let titles: Vec<&str> = c.titles.iter().map(String::as_str).take(5).collect();
    let about: Vec<&str> = c.texts.iter().map(|t| t.trim()).filter(|t| !t.is_empty() && t.chars().count() <= 80).take(6).collect();
    let mut s = alloc::format!("Documents: {}", titles.join(", "));
    if c.titles.len() > 5 {
        s.push_str(&alloc::format!(" and {} more", c.titles.len() - 5));
    }
    if !about.is_empty() {
        s.push_str(&alloc::format!(". About: {}", about.join("; ")));
    }
    s
}

/// A one-sentence summary of the collection by `model` from its titles and its first
/// outline items and cores (at most about 1,500 characters of them); the plain summary
/// when the reply is empty.
pub async fn model_summary(model: &mut dyn TextModel, c: &CollectionTexts) -> Result<String, Error> {
    let mut notes = alloc::format!("Collection \"{}\"\nTitles: {}\n", c.name, c.titles.join(", "));
    for t in &c.texts {
        if notes.len() + t.len() > 1500 {
            break;
        }
        notes.push_str("- ");
        notes.push_str(t.trim());
        notes.push('\n');
    }
    let request =
        "\nIn one sentence, say what this collection of documents is about and what questions it can answer. Write only the sentence.\n";
    let reply = model.complete(&notes, request, 60).await?;
    let reply = reply.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let reply = String::from(reply);
    Ok(if reply.is_empty() { plain_summary(c) } else { reply })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn texts(name: &str, title: &str, texts: &[&str]) -> CollectionTexts {
        CollectionTexts { name: name.into(), titles: vec![title.into()], texts: texts.iter().map(|s| String::from(*s)).collect() }
    }

    #[test]
    fn distinctive_terms_rank_first() {
        let cs = [
            texts("a", "Mining", &["copper copper ore in the town", "the smelter"]),
            texts("b", "Harbor", &["ice in the harbor town", "ships at the quay"]),
        ];
        let k = collection_keywords(&cs, 3);
        // "town" is in both, so the terms only one collection has win.
        assert_eq!(k[0], ["copper", "mining", "ore"]);
        assert_eq!(k[1], ["harbor", "ice", "quay"]);
        assert!(collection_keywords(&cs, 100)[0].contains(&"town".into()));
    }

    #[test]
    fn plain_summary_names_titles_and_topics() {
        let c = texts("a", "Mining", &["Copper ore", ""]);
        assert_eq!(plain_summary(&c), "Documents: Mining. About: Copper ore");
    }
}
