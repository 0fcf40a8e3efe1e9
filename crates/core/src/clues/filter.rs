//! Clue hygiene: what a small model writes needs filtering before it becomes a query.
//!
//! A clue too short matches everything ("the"), one too long is a paragraph of the model's
//! own invention; a clue repeated, or the question restated, adds a list that only
//! doubles the question's weight. Length is counted in [`text_units`]: words for scripts
//! with spaces and characters for CJK, which has none (a 40-character Chinese clue is 40
//! units, not one "word").

use alloc::vec::Vec;

use super::{Clue, ClueKind};
use crate::route::terms::jaccard;
use crate::text::{is_cjk, lexical_terms};

/// Length units of `text`: each run of letters or digits outside CJK counts one, each CJK
/// character counts one.
pub fn text_units(text: &str) -> usize {
    let mut units = 0;
    let mut in_word = false;
    for c in text.chars() {
        if is_cjk(c) {
            units += 1;
            in_word = false;
        } else if c.is_alphanumeric() {
            if !in_word {
                units += 1;
            }
            in_word = true;
        } else {
            in_word = false;
        }
    }
    units
}

/// Filter settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClueFilter {
    /// Fewest units a clue may have (default 2).
    pub min_units: usize,
    /// Most units (default 60).
    pub max_units: usize,
    /// Most clues kept, in the order written (default 8).
    pub max_clues: usize,
    /// Term-set overlap (Jaccard) at or above which a clue repeats the question or an
    /// earlier clue (default 0.8).
    pub duplicate_overlap: f64,
}

impl Default for ClueFilter {
    fn default() -> Self {
        ClueFilter { min_units: 2, max_units: 60, max_clues: 8, duplicate_overlap: 0.8 }
    }
}

fn term_set(text: &str) -> Vec<alloc::string::String> {
    let mut t = lexical_terms(text);
    t.sort_unstable();
    t.dedup();
    t
}

/// The clues worth searching with, in the order written: each of a length within the
/// bounds, none repeating the question or an earlier clue, at most one draft answer, at
/// most `max_clues` in all.
pub fn filter_clues(question: &str, clues: Vec<Clue>, filter: &ClueFilter) -> Vec<Clue> {
    let mut seen: Vec<Vec<alloc::string::String>> = alloc::vec![term_set(question)];
    let mut out: Vec<Clue> = Vec::new();
    for clue in clues {
        if out.len() >= filter.max_clues {
            break;
        }
        let text = clue.text.trim();
        let units = text_units(text);
        if units < filter.min_units || units > filter.max_units {
            continue;
        }
        if clue.kind == ClueKind::Draft && out.iter().any(|c| c.kind == ClueKind::Draft) {
            continue;
        }
        let terms = term_set(text);
        if terms.is_empty() || seen.iter().any(|s| jaccard(s, &terms) >= filter.duplicate_overlap) {
            continue;
        }
        seen.push(terms);
        out.push(Clue::new(clue.kind, text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn units_count_words_and_cjk_characters() {
        assert_eq!(text_units("The harbor froze, every winter."), 5);
        assert_eq!(text_units("港口每年冬天结冰"), 8);
        assert_eq!(text_units("GPT-4 在 2023 年发布"), 7);
        assert_eq!(text_units("  "), 0);
    }

    #[test]
    fn chinese_clues_pass_the_length_filter() {
        // No spaces: a word count would call this one unit and drop it.
        let clues = vec![Clue::new(ClueKind::Span, "铜矿在山里开采"), Clue::new(ClueKind::Span, "铜")];
        let kept = filter_clues("这个镇靠什么赚钱？", clues, &ClueFilter::default());
        assert_eq!(kept, vec![Clue::new(ClueKind::Span, "铜矿在山里开采")]);
    }

    #[test]
    fn drops_repeats_of_the_question_and_of_each_other() {
        let clues = vec![
            Clue::new(ClueKind::Surrogate, "How did the town make its money?"),
            Clue::new(ClueKind::Span, "copper was mined in the hills"),
            Clue::new(ClueKind::Span, "Copper was mined in the hills."),
            Clue::new(ClueKind::Draft, "copper mining"),
            Clue::new(ClueKind::Draft, "trade in bread"),
            Clue::new(ClueKind::Span, "ore"),
        ];
        let kept = filter_clues("how did the town make its money", clues, &ClueFilter::default());
        assert_eq!(kept, vec![Clue::new(ClueKind::Span, "copper was mined in the hills"), Clue::new(ClueKind::Draft, "copper mining")]);
    }

    #[test]
    fn caps_length_and_count() {
        let long = "word ".repeat(61);
        let mut clues = vec![Clue::new(ClueKind::Span, long)];
        for i in 0..20 {
            clues.push(Clue::new(ClueKind::Span, alloc::format!("distinct clue number {i} alpha{i}")));
        }
        let kept = filter_clues("q", clues, &ClueFilter { max_clues: 3, ..ClueFilter::default() });
        assert_eq!(kept.len(), 3);
        assert!(kept[0].text.starts_with("distinct clue number 0"));
    }
}
