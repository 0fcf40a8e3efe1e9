//! When to distrust a reader's memory and fall back to a chunker.
//!
//! A small or ill-prompted model can write nothing parsable, or chunk patterns that match
//! little of the text; the aligner then repairs by stretching the few placed chunks over
//! everything, which tiles but means little. Rather than keep such a memory, extraction
//! falls back to the sentence chunker with a one-line core per chunk, and records why in
//! the provenance: a document is never lost because the model misbehaved.

use alloc::format;
use alloc::string::String;

use crate::align::AlignedMemory;
use crate::parse::ParsedMemory;

/// Thresholds for keeping a reader's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FallbackPolicy {
    /// Lowest accepted share of the text covered by placed chunks before repair.
    pub min_coverage: f32,
}

impl Default for FallbackPolicy {
    /// Half the text: below that, most spans are the aligner's repair, not the reader's.
    fn default() -> Self {
        FallbackPolicy { min_coverage: 0.5 }
    }
}

/// Why this candidate cannot be kept, or `None` when it can.
pub fn fallback_reason(parsed: &ParsedMemory, aligned: &AlignedMemory, policy: &FallbackPolicy) -> Option<String> {
    if parsed.scenarios.is_empty() {
        return Some("the reader wrote no parsable group of sentences".into());
    }
    if aligned.stats.stopped_at_work_limit {
        return Some(format!(
            "aligning the reader's {} chunks passed the alignment work limit (the align settings' max_work); {} were not placed",
            parsed.scenarios.len(),
            aligned.stats.failed
        ));
    }
    if aligned.scenarios.is_empty() {
        return Some(format!("none of the reader's {} chunks could be found in the text", parsed.scenarios.len()));
    }
    let coverage = aligned.stats.coverage_before_repair;
    if coverage < policy.min_coverage {
        return Some(format!(
            "the reader's chunks covered {:.0}% of the text before repair (threshold {:.0}%)",
            coverage * 100.0,
            policy.min_coverage * 100.0
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::align::{align_memory, AlignParams};
    use crate::parse::parse_memreader_output;

    #[test]
    fn keeps_good_output_and_names_each_failure() {
        let text = "The first part talks about rivers. The second part talks about mountains.";
        let p = FallbackPolicy::default();
        let good = parse_memreader_output(
            "<outline>\n1. Rivers\n2. Mountains\n</outline>\n<scenario><chunk>The first[MASK]rivers.</chunk>Rivers.</scenario>\n<scenario><chunk>The second[MASK]mountains.</chunk>Mountains.</scenario>",
        );
        let a = align_memory(text, &good, &AlignParams::default());
        assert_eq!(fallback_reason(&good, &a, &p), None);

        let nothing = parse_memreader_output("I cannot help with that.");
        let a = align_memory(text, &nothing, &AlignParams::default());
        assert!(fallback_reason(&nothing, &a, &p).unwrap().contains("no parsable"));

        let elsewhere = parse_memreader_output("<scenario><chunk>Completely unrelated[MASK]words here</chunk>x</scenario>");
        let a = align_memory(text, &elsewhere, &AlignParams::default());
        assert!(fallback_reason(&elsewhere, &a, &p).unwrap().contains("could be found"));

        let partial = parse_memreader_output("<scenario><chunk>The first[MASK]about</chunk>Rivers.</scenario>");
        let a = align_memory(text, &partial, &AlignParams::default());
        let why = fallback_reason(&partial, &a, &p).unwrap();
        assert!(why.contains("covered") && why.contains("threshold 50%"), "{why}");
    }

    #[test]
    fn a_reply_whose_alignment_passes_the_work_limit_falls_back_naming_it() {
        // Twenty unplaceable 1.5k-character prefixes on a 20 KB document: the case #20 timed
        // at 0.4 s before patterns were capped; with a small work limit it stops early.
        let text = "Plain words about rivers and hills. ".repeat(560);
        let chunk = format!("<scenario><chunk>{}[MASK]zz</chunk>x</scenario>", "q".repeat(1500));
        let reply = parse_memreader_output(&chunk.repeat(20));
        let params = AlignParams { max_work: 1_000_000, ..AlignParams::default() };
        let start = std::time::Instant::now();
        let a = align_memory(&text, &reply, &params);
        assert!(a.stats.stopped_at_work_limit);
        assert_eq!(a.stats.failed, 20);
        let why = fallback_reason(&reply, &a, &FallbackPolicy::default()).unwrap();
        assert!(why.contains("alignment work limit") && why.contains("20 were not placed"), "{why}");
        assert!(start.elapsed().as_secs_f64() < 0.1, "{:?}", start.elapsed());
        // The default limit is far above what a well-behaved reply needs, even one with 400
        // chunks over a 64K-character window (exact matches are paid for up to where they
        // are found, not for the whole rest of the text).
        let good = parse_memreader_output("<scenario><chunk>Plain words[MASK]and hills.</chunk>Rivers.</scenario>");
        assert!(!align_memory(&text, &good, &AlignParams::default()).stats.stopped_at_work_limit);
        let long: String =
            (0..400).map(|i| format!("Sentence {i} opens here and runs on for a while about item {i} until it ends {i}. ")).collect();
        assert!(long.len() > 30_000, "{}", long.len());
        let chunks: String =
            (0..400).map(|i| format!("<scenario><chunk>Sentence {i} opens[MASK]until it ends {i}.</chunk>Item {i}.</scenario>")).collect();
        let aligned = align_memory(&long, &parse_memreader_output(&chunks), &AlignParams::default());
        assert!(!aligned.stats.stopped_at_work_limit);
        assert_eq!(aligned.stats.exact, 400, "{:?}", aligned.stats);
    }
}
