//! Cores a reader copied from another chunk's text.
//!
//! A core is what a chunk says, in the reader's words; retrieval searches cores beside the
//! chunks and answers from the chunk a core belongs to. Small readers often copy a
//! sentence of the document as a core instead, and put it on the wrong group: in a
//! Geology memory written by Qwen2.5-Coder-1.5B, 61 of 63 cores were sentences of the
//! document word for word, and 60 of those came from a chunk other than their own: the
//! cores walked the text a sentence at a time while the ranges moved a group at a time,
//! so the further down the document, the further behind (up to 31 chunks) each core
//! was. Such a core sends a question that matches
//! it to a chunk that does not hold its text, so it is dropped (the chunk and its
//! outline item stay). A copied sentence that lies inside its own chunk adds no words
//! but misleads nothing, and is kept; so is a short core (a name, a date) or a phrase
//! that does not end as a sentence (a title), which may occur anywhere by chance.

use alloc::string::String;

use crate::align::AlignedMemory;

/// The fewest characters a core must have to be judged a copy: shorter ones (a name, a
/// year) occur in many places by chance.
const MIN_COPIED_CHARS: usize = 24;

/// Drop every core of `aligned` that is a sentence of `text` copied word for word from
/// outside its own chunk; returns how many were dropped (also counted in the alignment
/// statistics). A core of several lines (chunks merged by alignment join theirs) is
/// judged a line at a time, and keeps its other lines.
pub fn drop_misplaced_cores(text: &str, aligned: &mut AlignedMemory) -> u32 {
    let mut dropped = 0;
    for s in &mut aligned.scenarios {
        let own = s.span.slice(text).unwrap_or("");
        let mut kept = String::new();
        for line in s.core.lines() {
            if is_copied_sentence(text, line) && !own.contains(line.trim()) {
                dropped += 1;
                continue;
            }
            if !kept.is_empty() {
                kept.push('\n');
            }
            kept.push_str(line);
        }
        if kept.len() != s.core.len() {
            s.core = kept;
        }
    }
    aligned.stats.misplaced_cores += dropped;
    dropped
}

/// Whether `core` is a sentence of `text`, word for word: long enough, ending as a sentence
/// ends, and found where a sentence starts (the text's start, or after white space). A
/// phrase such as a title ("History of the Roman Empire") is not judged a copy.
fn is_copied_sentence(text: &str, core: &str) -> bool {
    let core = core.trim();
    if core.chars().count() < MIN_COPIED_CHARS || !core.ends_with(['.', '!', '?', '。', '！', '？']) {
        return false;
    }
    text.match_indices(core).any(|(at, _)| text[..at].chars().next_back().is_none_or(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::align::AlignmentStats;
    use crate::memory::Scenario;
    use crate::span::Span;
    use alloc::vec;

    #[test]
    fn a_sentence_copied_onto_another_chunk_is_dropped_and_counted() {
        let text = "Igneous rock forms from cooled magma. Sediments settle in layers over ages. Heat and pressure make metamorphic rock.";
        let a = text.find("Sediments").unwrap();
        let b = text.find("Heat").unwrap();
        let mut aligned = AlignedMemory {
            scenarios: vec![
                // The next chunk's sentence, copied: dropped.
                Scenario { span: Span::new(0, a), core: " Sediments settle in layers over ages.".into(), outline_item: None },
                // Its own sentence: kept.
                Scenario { span: Span::new(a, b), core: "Sediments settle in layers over ages.".into(), outline_item: None },
                // The reader's own words: kept; a short copy from elsewhere: kept.
                Scenario { span: Span::new(b, text.len()), core: "Rock changes form under heat.".into(), outline_item: None },
            ],
            stats: AlignmentStats::default(),
        };
        assert_eq!(drop_misplaced_cores(text, &mut aligned), 1);
        let cores: Vec<&str> = aligned.scenarios.iter().map(|s| s.core.as_str()).collect();
        assert_eq!(cores, ["", "Sediments settle in layers over ages.", "Rock changes form under heat."]);
        assert_eq!(aligned.stats.misplaced_cores, 1);

        let mut short = AlignedMemory {
            scenarios: vec![Scenario { span: Span::new(0, a), core: "metamorphic rock".into(), outline_item: None }],
            stats: AlignmentStats::default(),
        };
        assert_eq!(drop_misplaced_cores(text, &mut short), 0, "a short phrase may occur anywhere");

        // Chunks merged by alignment join their cores a line each: the copied line goes.
        let mut merged = AlignedMemory {
            scenarios: vec![Scenario {
                span: Span::new(0, a),
                core: "Magma cools into rock.\nHeat and pressure make metamorphic rock.\nHeat and pressure make metamorphic".into(),
                outline_item: None,
            }],
            stats: AlignmentStats::default(),
        };
        assert_eq!(drop_misplaced_cores(text, &mut merged), 1);
        assert_eq!(
            merged.scenarios[0].core, "Magma cools into rock.\nHeat and pressure make metamorphic",
            "a phrase that is no sentence stays"
        );
    }
}
