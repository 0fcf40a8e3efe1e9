//! HotpotQA's distractor layout: multi-hop questions over titled Wikipedia paragraphs.
//!
//! Each question comes with ten paragraphs, two of them gold (the answer needs both: a
//! *bridge* question reaches the second through an entity of the first, a *comparison*
//! question sets two entities side by side) and eight distractors found by the question's
//! words. A paragraph is one document titled as in the file, its sentences joined as
//! written (they carry their own leading spaces). Questions that share a paragraph are
//! one group of the split ([`HotpotSet::sides`]), so no paragraph is on both sides.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Split;
use docmem_core::document::Document;

#[derive(Deserialize)]
struct RawQuestion {
    #[serde(rename = "_id", default)]
    id: String,
    question: String,
    #[serde(default)]
    answer: String,
    #[serde(rename = "type", default)]
    kind: String,
    supporting_facts: Vec<(String, u32)>,
    context: Vec<(String, Vec<String>)>,
}

/// One multi-hop question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotpotQuestion {
    /// HotpotQA's id (the question text when the file has none).
    pub id: String,
    /// The question.
    pub question: String,
    /// The gold answer ("yes" or "no" for some comparisons).
    pub answer: String,
    /// `bridge` or `comparison`.
    pub kind: String,
    /// The titles of the gold (supporting) paragraphs, sorted, without repeats.
    pub gold_titles: Vec<String>,
    /// Indices into [`HotpotSet::documents`] of the question's ten paragraphs, in the
    /// file's order.
    pub paragraphs: Vec<usize>,
}

/// Every question and every distinct paragraph of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotpotSet {
    /// One document per distinct title, in order of first appearance.
    pub documents: Vec<Document>,
    /// The questions, in file order.
    pub questions: Vec<HotpotQuestion>,
}

/// Parse a HotpotQA distractor-format file (a JSON array of questions).
pub fn parse_hotpot(json: &[u8]) -> Result<HotpotSet, serde_json::Error> {
    let raw: Vec<RawQuestion> = serde_json::from_slice(json)?;
    let mut documents = Vec::new();
    let mut by_title: BTreeMap<String, usize> = BTreeMap::new();
    let mut questions = Vec::with_capacity(raw.len());
    for q in raw {
        let mut paragraphs = Vec::with_capacity(q.context.len());
        for (title, sentences) in q.context {
            let i = *by_title.entry(title.clone()).or_insert_with(|| {
                documents.push(Document::new(title, sentences.concat()));
                documents.len() - 1
            });
            paragraphs.push(i);
        }
        let mut gold_titles: Vec<String> = q.supporting_facts.into_iter().map(|(t, _)| t).collect();
        gold_titles.sort();
        gold_titles.dedup();
        let id = if q.id.is_empty() { q.question.clone() } else { q.id };
        questions.push(HotpotQuestion { id, question: q.question, answer: q.answer, kind: q.kind, gold_titles, paragraphs });
    }
    Ok(HotpotSet { documents, questions })
}

impl HotpotSet {
    /// Each question's side of the split, in the order of `questions`: questions joined
    /// by a shared paragraph (directly or through others) are one group, keyed by the
    /// first of its titles in sort order and weighed by its questions
    /// ([`super::group_splits`]).
    pub fn sides(&self) -> Vec<Split> {
        // Union-find over documents; a question joins its paragraphs.
        let mut parent: Vec<usize> = (0..self.documents.len()).collect();
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        for q in &self.questions {
            if let Some((&first, rest)) = q.paragraphs.split_first() {
                for &p in rest {
                    let (a, b) = (root(&mut parent, first), root(&mut parent, p));
                    if a != b {
                        parent[a] = b;
                    }
                }
            }
        }
        // Each group's key (its least title) and its questions.
        let mut groups: BTreeMap<usize, (&str, usize)> = BTreeMap::new();
        for (d, doc) in self.documents.iter().enumerate() {
            let g = groups.entry(root(&mut parent, d)).or_insert((doc.title.as_str(), 0));
            if doc.title.as_str() < g.0 {
                g.0 = doc.title.as_str();
            }
        }
        let of_question: Vec<Option<usize>> = self.questions.iter().map(|q| q.paragraphs.first().map(|&p| root(&mut parent, p))).collect();
        for g in of_question.iter().flatten() {
            if let Some(e) = groups.get_mut(g) {
                e.1 += 1;
            }
        }
        let roots: Vec<usize> = groups.keys().copied().collect();
        let keyed: Vec<(&str, usize)> = groups.values().copied().collect();
        let sides = super::group_splits(&keyed);
        of_question.iter().map(|g| g.and_then(|g| roots.binary_search(&g).ok()).map_or(Split::Test, |i| sides[i])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_become_documents_and_shared_ones_join_their_questions() {
        // q1 and q3 share "Paris"; q2 stands alone.
        let json = br#"[
          {"_id":"q1","question":"Where was A born?","answer":"Paris","type":"bridge","level":"hard",
           "supporting_facts":[["A",0],["Paris",1],["A",1]],
           "context":[["A",["A was born"," in Paris."]],["Paris",["Paris is a city."," It is in France."]]]},
          {"_id":"q2","question":"Is B older than C?","answer":"yes","type":"comparison",
           "supporting_facts":[["B",0],["C",0]],
           "context":[["B",["B was born in 1900."]],["C",["C was born in 1950."]]]},
          {"_id":"q3","question":"Which river?","answer":"Seine","type":"bridge",
           "supporting_facts":[["Paris",0],["Seine",0]],
           "context":[["Seine",["The Seine flows."]],["Paris",["(a second copy is ignored)"]]]}
        ]"#;
        let s = parse_hotpot(json).unwrap();
        let titles: Vec<&str> = s.documents.iter().map(|d| d.title.as_str()).collect();
        assert_eq!(titles, ["A", "Paris", "B", "C", "Seine"]);
        assert_eq!(s.documents[0].text, "A was born in Paris.");
        assert_eq!(s.questions[0].gold_titles, ["A", "Paris"]);
        assert_eq!(s.questions[2].paragraphs, [4, 1], "the first copy of Paris stands");
        assert_eq!((s.questions[1].kind.as_str(), s.questions[1].answer.as_str()), ("comparison", "yes"));
        let sides = s.sides();
        assert_eq!(sides.len(), 3);
        assert_eq!(sides[0], sides[2], "a shared paragraph keeps its questions together");
        assert_ne!(sides[0], sides[1], "two groups give both sides");
        assert!(parse_hotpot(b"{}").is_err());
    }
}
