//! Small-to-big answer context: search by small pieces, answer from the text around them.
//!
//! Small pieces (a sentence, a MoM atomic chunk) retrieve precisely, because one idea
//! matches a question better than a page does; but a small answerer reading only the
//! pieces misses the sentence before that names the subject, and is misled by paraphrased
//! cores. So each hit grows into a *window*: its neighbouring pieces of the same document
//! (scenarios for a memory, sentences for a chunk library), taken alternately before and
//! after it until the window would pass `window_chars`. Windows of one document that
//! overlap or touch merge into one, so no text is shown twice, and the windows are taken
//! in the rank of their best hit until the total passes the budget (measured by the
//! caller: tokens of the answerer's tokenizer, or characters); the window that would
//! overflow is regrown around its hit to what is left, or dropped when that is too little.
//!
//! This is the "small-to-big" or parent-document pattern of retrieval pipelines, with the
//! parent chosen per hit from the memory's own units rather than fixed pages.

use alloc::vec::Vec;

use crate::document::{DocId, Document, PAGE_BREAK};
use crate::memory::DocumentMemory;
use crate::retrieve::RetrievedChunk;
use crate::span::Span;

/// How big the windows grow, and how much of them the answerer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextParams {
    /// The most characters one window grows to around its hit (a hit longer than this is
    /// its own window).
    pub window_chars: usize,
    /// The most the windows measure together (in the caller's unit).
    pub budget: usize,
    /// The least room worth regrowing a window into, in the caller's unit: a last window
    /// smaller than this is dropped rather than shown as a fragment.
    pub min_window: usize,
}

impl Default for ContextParams {
    /// Chosen on the dev split of the SQuAD sample with the 1.5B answerer (docs/evaluation.md).
    fn default() -> Self {
        ContextParams { window_chars: 600, budget: 2000, min_window: 150 }
    }
}

/// A window of one document's text that the answerer reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The document.
    pub doc_id: DocId,
    /// The window's span in the document text (from a piece's start to a piece's end).
    pub span: Span,
    /// The hits inside it, as indexes into the hits given, best first.
    pub hits: Vec<usize>,
}

/// Pieces closer than this many bytes (white space the chunker dropped between them) are
/// neighbours: their windows merge.
const TOUCHING: usize = 2;

/// The windows around `hits` (in rank order), per [`ContextParams`]. `lookup` finds a
/// hit's document and memory; a hit whose document is gone is skipped. `measure` gives
/// the size of a text in the budget's unit.
pub fn windows<'a>(
    hits: &[RetrievedChunk],
    lookup: impl Fn(DocId) -> Option<(&'a Document, &'a DocumentMemory)>,
    params: &ContextParams,
    measure: &mut dyn FnMut(&str) -> usize,
) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::new();
    for (i, hit) in hits.iter().enumerate() {
        let Some((doc, memory)) = lookup(hit.doc_id) else { continue };
        if hit.span.slice(&doc.text).is_none() {
            continue;
        }
        // A hit inside a window already taken adds nothing new.
        if let Some(w) = out.iter_mut().find(|w| w.doc_id == hit.doc_id && w.span.start <= hit.span.start && hit.span.end <= w.span.end) {
            w.hits.push(i);
            continue;
        }
        let pieces = sorted_pieces(memory, &doc.text);
        let span = grow(&pieces, hit.span, params.window_chars, &doc.text);
        // Merge with every window of the document it overlaps or touches.
        let mut merged = Window { doc_id: hit.doc_id, span, hits: alloc::vec![i] };
        let mut at = None;
        let mut j = 0;
        while j < out.len() {
            let w = &out[j];
            if w.doc_id == merged.doc_id && w.span.start <= merged.span.end + TOUCHING && merged.span.start <= w.span.end + TOUCHING {
                let w = out.remove(j);
                merged.span = Span::new(w.span.start.min(merged.span.start), w.span.end.max(merged.span.end));
                let mut hits = w.hits;
                hits.extend(merged.hits);
                merged.hits = hits;
                at = Some(at.map_or(j, |a: usize| a.min(j)));
            } else {
                j += 1;
            }
        }
        match at {
            // A merged window keeps the place of its best-ranked part.
            Some(j) => out.insert(j, merged),
            None => out.push(merged),
        }
    }
    fit_budget(out, hits, &lookup, params, measure)
}

/// The memory's piece spans in text order, trimmed, empty ones left out.
fn sorted_pieces(memory: &DocumentMemory, text: &str) -> Vec<Span> {
    let mut pieces: Vec<Span> = memory.scenarios.iter().map(|s| s.span.trim(text)).filter(|s| !s.is_empty()).collect();
    pieces.sort_unstable();
    pieces.dedup();
    pieces
}

/// `hit` grown by whole neighbouring pieces, alternately before and after, while the
/// result stays within `max_chars` characters and on the hit's page (a window never
/// crosses a [`PAGE_BREAK`], so the page a citation names holds all its text).
fn grow(pieces: &[Span], hit: Span, max_chars: usize, text: &str) -> Span {
    let chars = |s: Span| s.char_len(text);
    let same_page = |a: usize, b: usize| text.get(a..b).is_some_and(|between| !between.contains(PAGE_BREAK));
    let mut span = hit;
    // Pieces wholly before and wholly after the hit, nearest first.
    let mut before = pieces.iter().rev().filter(|p| p.end <= hit.start).peekable();
    let mut after = pieces.iter().filter(|p| p.start >= hit.end).peekable();
    loop {
        let mut grew = false;
        if let Some(p) = before.peek() {
            let wider = Span::new(p.start, span.end);
            if chars(wider) <= max_chars && same_page(p.end, span.start) {
                span = wider;
                before.next();
                grew = true;
            }
        }
        if let Some(p) = after.peek() {
            let wider = Span::new(span.start, p.end);
            if chars(wider) <= max_chars && same_page(span.end, p.start) {
                span = wider;
                after.next();
                grew = true;
            }
        }
        if !grew {
            return span;
        }
    }
}

/// The windows, in order, that fit the budget; the first that does not is regrown around
/// its best hit to the room left (if that is at least `min_window`), and the rest dropped.
fn fit_budget<'a>(
    windows: Vec<Window>,
    hits: &[RetrievedChunk],
    lookup: &impl Fn(DocId) -> Option<(&'a Document, &'a DocumentMemory)>,
    params: &ContextParams,
    measure: &mut dyn FnMut(&str) -> usize,
) -> Vec<Window> {
    let mut out = Vec::new();
    let mut used = 0;
    for mut w in windows {
        let Some((doc, memory)) = lookup(w.doc_id) else { continue };
        let size = w.span.slice(&doc.text).map_or(0, &mut *measure);
        if used + size <= params.budget {
            used += size;
            out.push(w);
            continue;
        }
        let room = params.budget.saturating_sub(used);
        if room < params.min_window {
            break;
        }
        // Regrow around the best hit, shrinking the character cap until it fits.
        let hit = hits[w.hits[0]].span;
        let pieces = sorted_pieces(memory, &doc.text);
        let mut cap = w.span.char_len(&doc.text);
        loop {
            cap = cap * 3 / 4;
            let span = grow(&pieces, hit, cap, &doc.text);
            let size = span.slice(&doc.text).map_or(0, &mut *measure);
            if size <= room {
                w.span = span;
                w.hits.retain(|&h| span.start <= hits[h].span.start && hits[h].span.end <= span.end);
                out.push(w);
                break;
            }
            if span == hit {
                // The hit alone is too big for what is left: nothing of it is shown.
                break;
            }
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::DocumentMemory;
    use alloc::string::String;
    use alloc::vec;

    /// A document of `n` numbered sentences, chunked one sentence each.
    fn sentences(n: usize) -> (Document, DocumentMemory) {
        let text: String = (0..n).map(|i| alloc::format!("Sentence number {i:02} is here. ")).collect();
        let doc = Document::new("s.txt", text.trim_end());
        let spans: Vec<Span> = (0..n).map(|i| Span::new(i * 28, i * 28 + 27)).collect();
        assert_eq!(spans[1].slice(&doc.text), Some("Sentence number 01 is here."));
        let memory = DocumentMemory::from_spans(&doc, &spans, "sentence");
        (doc, memory)
    }

    fn hit(doc: &Document, memory: &DocumentMemory, scenario: usize) -> RetrievedChunk {
        RetrievedChunk { doc_id: doc.id, scenario: scenario as u32, span: memory.scenarios[scenario].span, score: 1.0, ranks: vec![] }
    }

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn a_hit_grows_by_neighbours_on_both_sides() {
        let (doc, memory) = sentences(10);
        let params = ContextParams { window_chars: 90, budget: 10_000, min_window: 10 };
        let w = windows(&[hit(&doc, &memory, 5)], |_| Some((&doc, &memory)), &params, &mut chars);
        assert_eq!(w.len(), 1);
        let text = w[0].span.slice(&doc.text).unwrap();
        assert_eq!(text, "Sentence number 04 is here. Sentence number 05 is here. Sentence number 06 is here.");
        // At the start of the document it grows the other way.
        let w = windows(&[hit(&doc, &memory, 0)], |_| Some((&doc, &memory)), &params, &mut chars);
        assert!(w[0].span.slice(&doc.text).unwrap().ends_with("02 is here."));
    }

    #[test]
    fn overlapping_windows_merge_and_keep_the_better_rank() {
        let (doc, memory) = sentences(20);
        let params = ContextParams { window_chars: 90, budget: 10_000, min_window: 10 };
        let hits = [hit(&doc, &memory, 15), hit(&doc, &memory, 3), hit(&doc, &memory, 5), hit(&doc, &memory, 4)];
        let w = windows(&hits, |_| Some((&doc, &memory)), &params, &mut chars);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].hits, [0]);
        // Hits 3 and 5 grow into 2..=4 and 4..=6, which overlap; hit 4 lies inside.
        assert_eq!(w[1].hits, [1, 2, 3]);
        let merged = w[1].span.slice(&doc.text).unwrap();
        assert!(merged.starts_with("Sentence number 02") && merged.ends_with("06 is here."), "{merged}");
        // No sentence is shown twice.
        let all: String = w.iter().map(|w| w.span.slice(&doc.text).unwrap()).collect();
        assert_eq!(all.matches("number 04").count(), 1);
    }

    #[test]
    fn the_budget_cuts_and_regrows_the_last_window() {
        let (doc, memory) = sentences(30);
        let params = ContextParams { window_chars: 150, budget: 200, min_window: 25 };
        let hits = [hit(&doc, &memory, 10), hit(&doc, &memory, 25)];
        let w = windows(&hits, |_| Some((&doc, &memory)), &params, &mut chars);
        assert_eq!(w.len(), 2, "{w:?}");
        let sizes: Vec<usize> = w.iter().map(|w| w.span.char_len(&doc.text)).collect();
        assert!(sizes.iter().sum::<usize>() <= 200, "{sizes:?}");
        assert!(w[1].span.slice(&doc.text).unwrap().contains("number 25"));
        // Too little room left: the last window is dropped, not shown as a fragment.
        let params = ContextParams { window_chars: 150, budget: 160, min_window: 25 };
        let w = windows(&hits, |_| Some((&doc, &memory)), &params, &mut chars);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn a_window_stays_on_its_hits_page() {
        let text = "Caxton set up a press. He printed Chaucer.\n\u{c}\nThe Gutenberg Bible was printed around 1455. It has 1,286 pages.";
        let doc = Document::new("two-pages.pdf", text);
        let spans: Vec<Span> =
            ["Caxton set up a press.", "He printed Chaucer.", "The Gutenberg Bible was printed around 1455.", "It has 1,286 pages."]
                .iter()
                .map(|s| {
                    let at = text.find(s).unwrap();
                    Span::new(at, at + s.len())
                })
                .collect();
        let memory = DocumentMemory::from_spans(&doc, &spans, "sentence");
        let params = ContextParams { window_chars: 1000, budget: 10_000, min_window: 10 };
        let w = windows(&[hit(&doc, &memory, 2), hit(&doc, &memory, 1)], |_| Some((&doc, &memory)), &params, &mut chars);
        let texts: Vec<&str> = w.iter().map(|w| w.span.slice(&doc.text).unwrap()).collect();
        assert_eq!(
            texts,
            ["The Gutenberg Bible was printed around 1455. It has 1,286 pages.", "Caxton set up a press. He printed Chaucer."]
        );
    }

    #[test]
    fn missing_documents_and_bad_spans_are_skipped() {
        let (doc, memory) = sentences(3);
        let mut bad = hit(&doc, &memory, 1);
        bad.span = Span::new(5, 10_000);
        let w = windows(&[bad, hit(&doc, &memory, 1)], |_| Some((&doc, &memory)), &ContextParams::default(), &mut chars);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].hits, [1]);
        assert!(windows(&[hit(&doc, &memory, 1)], |_| None, &ContextParams::default(), &mut chars).is_empty());
    }
}
