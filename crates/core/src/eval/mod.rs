//! Evaluation: SQuAD-style scoring and retrieval metrics at an equal context budget.
//!
//! - [`normalize_answer`], [`exact_match`], [`f1`]: SQuAD's answer scoring (lower-case,
//!   strip punctuation and the articles a/an/the, fold white space; F1 over tokens; the
//!   best over the gold answers).
//! - Retrieval at equal budget: the top-k retrieved chunks are joined in rank order and
//!   cut to `k × budget_per_rank` characters, the same for every method, so a chunker
//!   with longer chunks gets no more text for free. A question is a hit at k when that
//!   text contains a gold answer (both normalised). MRR uses the smallest k (up to the
//!   largest k measured) at which the question is a hit.
//! - [`squad`] reads the SQuAD JSON layout (one document per article).

#[cfg(feature = "serde")]
pub mod squad;

use alloc::string::String;
use alloc::vec::Vec;

/// SQuAD's answer normalisation.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower.chars().map(|c| if c.is_ascii_punctuation() || is_unicode_punct(c) { ' ' } else { c }).collect();
    let words: Vec<&str> = no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect();
    words.join(" ")
}

fn is_unicode_punct(c: char) -> bool {
    matches!(c, '‘' | '’' | '“' | '”' | '–' | '—' | '…' | '，' | '。' | '、' | '；' | '：' | '？' | '！' | '（' | '）' | '《' | '》')
}

/// 1.0 when the normalised prediction equals a normalised gold answer.
pub fn exact_match(prediction: &str, golds: &[&str]) -> f64 {
    let p = normalize_answer(prediction);
    if golds.iter().any(|g| normalize_answer(g) == p) {
        1.0
    } else {
        0.0
    }
}

/// Token F1 against the best gold answer.
pub fn f1(prediction: &str, golds: &[&str]) -> f64 {
    let p = normalize_answer(prediction);
    let pt: Vec<&str> = p.split_whitespace().collect();
    golds
        .iter()
        .map(|g| {
            let g = normalize_answer(g);
            let gt: Vec<&str> = g.split_whitespace().collect();
            if pt.is_empty() || gt.is_empty() {
                return if pt.is_empty() && gt.is_empty() { 1.0 } else { 0.0 };
            }
            let mut pool = gt.clone();
            let mut common = 0usize;
            for w in &pt {
                if let Some(i) = pool.iter().position(|x| x == w) {
                    pool.swap_remove(i);
                    common += 1;
                }
            }
            if common == 0 {
                return 0.0;
            }
            let precision = common as f64 / pt.len() as f64;
            let recall = common as f64 / gt.len() as f64;
            2.0 * precision * recall / (precision + recall)
        })
        .fold(0.0, f64::max)
}

/// The retrieved text at rank cut-off `k`: the first `k` chunks joined with a blank line,
/// cut to `k × budget_per_rank` characters.
pub fn budgeted_context(chunks: &[&str], k: usize, budget_per_rank: usize) -> String {
    let budget = k.saturating_mul(budget_per_rank);
    let mut out = String::new();
    let mut used = 0usize;
    for c in chunks.iter().take(k) {
        if used >= budget {
            break;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        for ch in c.chars() {
            if used >= budget {
                break;
            }
            out.push(ch);
            used += 1;
        }
    }
    out
}

/// True when `context` contains one of the gold answers (both normalised).
pub fn contains_answer(context: &str, golds: &[&str]) -> bool {
    let c = alloc::format!(" {} ", normalize_answer(context));
    golds.iter().any(|g| {
        let g = normalize_answer(g);
        !g.is_empty() && c.contains(&alloc::format!(" {g} "))
    })
}

/// Hits at each cut-off in `ks` and the reciprocal rank (0 when no cut-off hits).
pub fn retrieval_hits(chunks: &[&str], golds: &[&str], ks: &[usize], budget_per_rank: usize) -> (Vec<bool>, f64) {
    let hits: Vec<bool> = ks.iter().map(|&k| contains_answer(&budgeted_context(chunks, k, budget_per_rank), golds)).collect();
    let max_k = ks.iter().copied().max().unwrap_or(0);
    let rr = (1..=max_k).find(|&k| contains_answer(&budgeted_context(chunks, k, budget_per_rank), golds)).map_or(0.0, |k| 1.0 / k as f64);
    (hits, rr)
}

/// Running means of retrieval metrics.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RetrievalScores {
    /// Questions scored.
    pub questions: usize,
    /// Cut-offs.
    pub ks: Vec<usize>,
    /// Recall at each cut-off.
    pub recall: Vec<f64>,
    /// Mean reciprocal rank.
    pub mrr: f64,
}

impl RetrievalScores {
    /// Empty scores for cut-offs `ks`.
    pub fn new(ks: &[usize]) -> Self {
        RetrievalScores { questions: 0, ks: ks.to_vec(), recall: alloc::vec![0.0; ks.len()], mrr: 0.0 }
    }

    /// Add one question's result.
    pub fn add(&mut self, hits: &[bool], rr: f64) {
        let n = self.questions as f64;
        for (r, &h) in self.recall.iter_mut().zip(hits) {
            *r = (*r * n + if h { 1.0 } else { 0.0 }) / (n + 1.0);
        }
        self.mrr = (self.mrr * n + rr) / (n + 1.0);
        self.questions += 1;
    }
}

/// Score every question against an index: search with its precomputed vector, take the
/// retrieved chunks' texts (`chunk_text` looks them up) and apply [`retrieval_hits`].
/// Questions without gold answers are skipped.
pub fn score_questions(
    index: &crate::retrieve::MemoryIndex,
    questions: &[(&str, &[f32], Vec<&str>)],
    chunk_text: &dyn Fn(&crate::retrieve::RetrievedChunk) -> Option<String>,
    ks: &[usize],
    budget_per_rank: usize,
) -> Result<RetrievalScores, crate::retrieve::RetrieveError> {
    let mut scores = RetrievalScores::new(ks);
    let k = ks.iter().copied().max().unwrap_or(1);
    let params = crate::retrieve::SearchParams { k, ..crate::retrieve::SearchParams::default() };
    let mut scratch = crate::retrieve::SearchScratch::default();
    for (question, vector, golds) in questions {
        if golds.is_empty() {
            continue;
        }
        let hits = index.search_with(question, vector, &params, &mut scratch)?;
        let texts: Vec<String> = hits.iter().filter_map(chunk_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (h, rr) = retrieval_hits(&refs, golds, ks, budget_per_rank);
        scores.add(&h, rr);
    }
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squad_normalisation_em_and_f1() {
        assert_eq!(normalize_answer("The  Eiffel-Tower!"), "eiffel tower");
        assert_eq!(exact_match("the Eiffel Tower", &["Eiffel Tower", "tower"]), 1.0);
        assert_eq!(exact_match("Paris", &["Eiffel Tower"]), 0.0);
        // prediction "eiffel tower paris" vs gold "eiffel tower": P 2/3, R 1 → F1 0.8.
        assert!((f1("Eiffel Tower, Paris", &["The Eiffel Tower"]) - 0.8).abs() < 1e-9);
        assert_eq!(f1("", &["x"]), 0.0);
    }

    #[test]
    fn equal_budget_cuts_long_chunks() {
        let long = "x ".repeat(300) + "answer here";
        let short = "the answer here";
        let chunks = [long.as_str(), short];
        // With 100 characters per rank, the long chunk's answer falls outside the budget.
        assert!(!contains_answer(&budgeted_context(&chunks[..1], 1, 100), &["answer here"]));
        let (hits, rr) = retrieval_hits(&chunks, &["answer here"], &[1, 3], 100);
        assert_eq!(hits, [false, false], "the long chunk spends the budget of k=3 too");
        assert_eq!(rr, 0.0);
        let (hits, rr) = retrieval_hits(&[short, long.as_str()], &["answer here"], &[1, 3], 100);
        assert_eq!((hits, rr), (alloc::vec![true, true], 1.0));
        // Word boundaries: "he" is not found inside "the".
        assert!(!contains_answer("the cat", &["he"]));
    }

    #[test]
    fn running_means() {
        let mut s = RetrievalScores::new(&[1, 8]);
        s.add(&[true, true], 1.0);
        s.add(&[false, true], 0.5);
        assert_eq!(s.recall, [0.5, 1.0]);
        assert!((s.mrr - 0.75).abs() < 1e-12);
    }
}
