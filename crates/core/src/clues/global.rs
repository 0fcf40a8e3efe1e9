//! The global memory: what the clue writer knows of the whole library.
//!
//! MemoRAG keeps a model's compressed reading of the entire corpus; docmem already has a
//! compressed reading of every document, its MoM memory, so the global memory is built
//! from those: per document its title, then each outline item with the core contents of
//! the scenarios under it. When that does not fit the budget (a share of the model's
//! context), a *gist pass* (MemoRAG-lite) asks the model to compress each window of the
//! notes to its share of the budget; whatever still overflows is cut at whole lines, and
//! the memory says it was compressed.

use alloc::string::String;
use alloc::vec::Vec;

use crate::memory::DocumentMemory;
use crate::text_model::TextModel;
use crate::Error;

/// One document's part of the global memory.
#[derive(Clone, Copy, Debug)]
pub struct DocumentNotes<'a> {
    /// Its title.
    pub title: &'a str,
    /// Its memory.
    pub memory: &'a DocumentMemory,
    /// The opening of its text, shown when the memory has no outline and no cores (a
    /// baseline chunker's memory), so the title does not stand alone.
    pub lead: &'a str,
}

/// Characters of a document's opening shown for a memory without outline or cores.
pub const LEAD_CHARS: usize = 300;

/// The global memory of a library.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GlobalMemory {
    /// The text the clue writer reads.
    pub text: String,
    /// Documents it covers.
    pub documents: usize,
    /// True when the gist pass compressed it (or it was cut to fit).
    pub gist: bool,
}

/// Budget settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GlobalMemorySettings {
    /// Most tokens of the memory (0: half the model's context).
    pub max_tokens: usize,
    /// Characters of one core content kept (longer ones are cut at a word).
    pub max_core_chars: usize,
}

impl Default for GlobalMemorySettings {
    fn default() -> Self {
        GlobalMemorySettings { max_tokens: 0, max_core_chars: 240 }
    }
}

fn cut_chars(s: &str, chars: usize) -> &str {
    match s.char_indices().nth(chars) {
        None => s,
        Some((i, _)) => {
            // Back to the last space, if there is one not too far back (CJK has none).
            let head = &s[..i];
            match head.rfind(' ') {
                Some(j) if j > i / 2 => &head[..j],
                _ => head,
            }
        }
    }
}

/// The notes of `docs`, uncompressed: a `# title` line per document, then a `- item:
/// cores` line per outline item (cores of scenarios with no item on their own lines).
pub fn document_notes(docs: &[DocumentNotes<'_>], max_core_chars: usize) -> String {
    let mut s = String::new();
    for d in docs {
        s.push_str("# ");
        s.push_str(d.title.trim());
        s.push('\n');
        let m = d.memory;
        let mut loose: Vec<&str> = Vec::new();
        let mut by_item: Vec<Vec<&str>> = alloc::vec![Vec::new(); m.outline.len()];
        for sc in &m.scenarios {
            let core = cut_chars(sc.core.trim(), max_core_chars);
            if core.is_empty() {
                continue;
            }
            match sc.outline_item.and_then(|i| by_item.get_mut(i as usize)) {
                Some(v) => v.push(core),
                None => loose.push(core),
            }
        }
        for (item, cores) in m.outline.iter().zip(&by_item) {
            let item = item.trim();
            if item.is_empty() && cores.is_empty() {
                continue;
            }
            s.push_str("- ");
            s.push_str(item);
            if !cores.is_empty() {
                s.push_str(": ");
                s.push_str(&cores.join(" "));
            }
            s.push('\n');
        }
        for core in loose {
            s.push_str("- ");
            s.push_str(core);
            s.push('\n');
        }
        let lead = cut_chars(d.lead.trim(), LEAD_CHARS);
        if m.outline.is_empty() && m.scenarios.iter().all(|sc| sc.core.trim().is_empty()) && !lead.is_empty() {
            s.push_str("- ");
            s.push_str(&lead.split_whitespace().collect::<Vec<_>>().join(" "));
            s.push('\n');
        }
        s.push('\n');
    }
    s
}

fn gist_request(max_words: usize, chinese: bool) -> String {
    if chinese {
        alloc::format!("把上面的笔记压缩到 {max_words} 字以内，保留每篇文档的标题（# 开头的行）、人名、地名、数字和主题，每行一条。只写压缩后的笔记。\n")
    } else {
        alloc::format!(
            "Compress the notes above to at most {max_words} words. Keep each document's title line (starting with #), names, places, numbers and topics, one point per line. Write only the compressed notes.\n"
        )
    }
}

/// Lines of `text` taken whole while their tokens fit `budget`.
pub fn fit_to_tokens(model: &mut dyn TextModel, text: &str, budget: usize) -> Result<String, Error> {
    let mut out = String::new();
    let mut used = 0;
    for line in text.lines() {
        let t = model.count_tokens(line)? + 1;
        if used + t > budget {
            break;
        }
        used += t;
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// Build the global memory of `docs` for `model` (see the module docs). Chinese
/// instructions for the gist pass when `chinese`.
pub async fn build_global_memory(
    model: &mut dyn TextModel,
    docs: &[DocumentNotes<'_>],
    settings: &GlobalMemorySettings,
    chinese: bool,
) -> Result<GlobalMemory, Error> {
    let budget = if settings.max_tokens == 0 { model.context_tokens() / 2 } else { settings.max_tokens }.max(16);
    let notes = document_notes(docs, settings.max_core_chars);
    if model.count_tokens(&notes)? <= budget {
        return Ok(GlobalMemory { text: notes, documents: docs.len(), gist: false });
    }
    // Windows of whole lines, each small enough to be read with room for its reply.
    let window_tokens = (model.context_tokens() / 2).clamp(64, 4096);
    let mut windows: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    for line in notes.lines() {
        let t = model.count_tokens(line)? + 1;
        if used + t > window_tokens && !current.is_empty() {
            windows.push(core::mem::take(&mut current));
            used = 0;
        }
        // A single line longer than a window is cut to it.
        // (cut in characters: at most one token each, CJK included)
        let line = if t > window_tokens { cut_chars(line, window_tokens) } else { line };
        current.push_str(line);
        current.push('\n');
        used += t.min(window_tokens);
    }
    if !current.trim().is_empty() {
        windows.push(current);
    }
    let share = (budget / windows.len().max(1)).max(8);
    // About 0.75 words a token in English; a CJK character is about a token.
    let words = if chinese { share } else { share * 3 / 4 };
    let mut text = String::new();
    for w in &windows {
        let reply = model.complete(w, &gist_request(words.max(5), chinese), share).await?;
        text.push_str(reply.trim());
        text.push_str("\n\n");
    }
    let text = fit_to_tokens(model, &text, budget)?;
    Ok(GlobalMemory { text, documents: docs.len(), gist: true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::memory::{Provenance, Scenario, MEMORY_FORMAT_VERSION};
    use crate::span::Span;
    use crate::text_model::testing::Scripted;
    use crate::Document;

    fn memory(doc: &Document) -> DocumentMemory {
        DocumentMemory {
            format_version: MEMORY_FORMAT_VERSION,
            doc_id: doc.id,
            outline: alloc::vec!["Winter shipping".into(), "Mining".into()],
            scenarios: alloc::vec![
                Scenario { span: Span::new(0, 10), core: "Ice closed the port.".into(), outline_item: Some(0) },
                Scenario { span: Span::new(10, 20), core: "Copper came from the hills.".into(), outline_item: Some(1) },
                Scenario { span: Span::new(20, 30), core: "Ore went by cart.".into(), outline_item: Some(1) },
                Scenario { span: Span::new(30, 40), core: "A loose point.".into(), outline_item: None },
            ],
            provenance: Provenance::default(),
        }
    }

    #[test]
    fn notes_group_cores_under_outline_items() {
        let doc = Document::new("town.txt", "x".repeat(40));
        let m = memory(&doc);
        let notes = document_notes(&[DocumentNotes { title: "town.txt", memory: &m, lead: "" }], 240);
        assert_eq!(
            notes,
            "# town.txt\n- Winter shipping: Ice closed the port.\n- Mining: Copper came from the hills. Ore went by cart.\n- A loose point.\n\n"
        );
        assert_eq!(
            document_notes(&[DocumentNotes { title: "t", memory: &m, lead: "" }], 12).lines().nth(1),
            Some("- Winter shipping: Ice closed")
        );
        // A chunker's memory (no outline, no cores): the text's opening stands in.
        let chunks = DocumentMemory::from_spans(&doc, &[Span::new(0, 40)], "sentence");
        let notes = document_notes(&[DocumentNotes { title: "t", memory: &chunks, lead: "The harbor\nfroze.  Ships waited." }], 240);
        assert_eq!(notes, "# t\n- The harbor froze. Ships waited.\n\n");
    }

    #[test]
    fn fits_without_a_gist_pass_or_compresses_within_budget() {
        let doc = Document::new("town.txt", "x".repeat(40));
        let m = memory(&doc);
        let docs = [DocumentNotes { title: "town.txt", memory: &m, lead: "" }];
        let mut model = Scripted::new(|_| "# town.txt\n- port ice; copper; ore".into());
        let g = poll_once(build_global_memory(&mut model, &docs, &GlobalMemorySettings::default(), false)).unwrap().unwrap();
        assert!(!g.gist && g.text.contains("Copper came"));
        assert!(model.prompts.is_empty());
        let many: Vec<DocumentNotes<'_>> = (0..40).map(|_| DocumentNotes { title: "town.txt", memory: &m, lead: "" }).collect();
        let settings = GlobalMemorySettings { max_tokens: 200, ..GlobalMemorySettings::default() };
        let g = poll_once(build_global_memory(&mut model, &many, &settings, false)).unwrap().unwrap();
        assert!(g.gist && g.documents == 40);
        assert!(model.count_tokens(&g.text).unwrap() <= 200 + g.text.lines().count());
        assert!(!model.prompts.is_empty() && model.prompts[0].contains("Compress the notes above"));
    }
}
