//! Evaluation: SQuAD-style scoring, retrieval metrics at equal character budgets, and a
//! named dev/test split of the questions.
//!
//! - [`normalize_answer`], [`exact_match`], [`f1`]: SQuAD's answer scoring (lower-case,
//!   strip punctuation and the articles a/an/the, fold white space; F1 over tokens; the
//!   best over the gold answers).
//! - Budget recall ([`budget_hit`]): the ranked chunk texts (each chunk's exact document
//!   text, in rank order) are laid end to end and cut at B characters, the same B for every
//!   method, so a chunker with longer chunks gets no more text for free. A question is a hit
//!   at B when a gold answer (both normalised) lies inside the text before the cut. The
//!   answer must lie inside one chunk's part: two chunks that happen to be neighbours in the
//!   ranking are not glued into an answer (separators between chunks cost nothing).
//!   Budgets are 500, 1,000 and 2,000 characters, the evaluation's three ([`BUDGETS`]).
//! - Rank metrics over passages ([`first_hit_rank`]): recall@k is a hit anywhere in the
//!   whole texts of the top k chunks, whatever their length; MRR is 1/rank of the first
//!   chunk containing an answer, within the largest k (0 when none). They favour long
//!   passages and are reported, not targeted.
//! - [`Split`]: a deterministic dev/test split by article ([`split`]), so tuning happens
//!   on dev articles and figures are reported on test articles, which share no paragraph
//!   with them.
//! - [`squad`] reads the SQuAD JSON layout (one document per article), [`hotpot`]
//!   HotpotQA's distractor layout (one document per titled paragraph).

pub mod hotpot;
pub mod split;
pub mod squad;

pub use split::{group_splits, Split};

use docmem_core::retrieve::{MemoryIndex, RetrievedChunk, SearchParams, SearchScratch};
use docmem_core::Error;

/// The equal context budgets of the evaluation, in characters.
pub const BUDGETS: [usize; 3] = [500, 1000, 2000];

/// The rank cut-offs of recall@k.
pub const RANK_CUTOFFS: [usize; 3] = [1, 3, 8];

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

/// The parts of the ranked `chunks` that fit in `budget` characters laid end to end: every
/// chunk whole until the one the cut falls in, which is cut there. Characters are Unicode
/// scalar values; separators between chunks are not counted.
pub fn budget_parts<'a>(chunks: &[&'a str], budget: usize) -> Vec<&'a str> {
    let mut left = budget;
    let mut out = Vec::new();
    for c in chunks {
        if left == 0 {
            break;
        }
        let cut = c.char_indices().nth(left).map_or(c.len(), |(i, _)| i);
        let part = &c[..cut];
        left -= part.chars().count();
        out.push(part);
    }
    out
}

/// True when a gold answer lies inside one of the [`budget_parts`] of `chunks` at
/// `budget` characters.
pub fn budget_hit(chunks: &[&str], golds: &[&str], budget: usize) -> bool {
    budget_parts(chunks, budget).iter().any(|p| contains_answer(p, golds))
}

/// True when `context` contains one of the gold answers (both normalised, on word
/// boundaries).
pub fn contains_answer(context: &str, golds: &[&str]) -> bool {
    let c = format!(" {} ", normalize_answer(context));
    golds.iter().any(|g| {
        let g = normalize_answer(g);
        !g.is_empty() && c.contains(&format!(" {g} "))
    })
}

/// Rank (from 1) of the first whole chunk that contains a gold answer.
pub fn first_hit_rank(chunks: &[&str], golds: &[&str]) -> Option<usize> {
    chunks.iter().position(|c| contains_answer(c, golds)).map(|i| i + 1)
}

/// One question's outcome: a hit at each budget and at each rank cut-off, and the
/// reciprocal rank within the largest cut-off.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionOutcome {
    /// Hit at each budget, in the order asked.
    pub budget_hits: Vec<bool>,
    /// Hit within the top k chunks, for each k asked.
    pub rank_hits: Vec<bool>,
    /// 1/rank of the first chunk with an answer (0 past the largest k or when none).
    pub reciprocal_rank: f64,
}

/// Score one question's ranked chunk texts.
pub fn score_ranked(chunks: &[&str], golds: &[&str], budgets: &[usize], ks: &[usize]) -> QuestionOutcome {
    let first = first_hit_rank(chunks, golds);
    let max_k = ks.iter().copied().max().unwrap_or(0);
    QuestionOutcome {
        budget_hits: budgets.iter().map(|&b| budget_hit(chunks, golds, b)).collect(),
        rank_hits: ks.iter().map(|&k| first.is_some_and(|r| r <= k)).collect(),
        reciprocal_rank: first.filter(|&r| r <= max_k).map_or(0.0, |r| 1.0 / r as f64),
    }
}

/// Retrieval metrics over the questions scored so far.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RetrievalScores {
    /// Questions scored.
    pub questions: usize,
    /// Budgets, in characters.
    pub budgets: Vec<usize>,
    /// Recall at each budget.
    pub budget_recall: Vec<f64>,
    /// Rank cut-offs.
    pub ks: Vec<usize>,
    /// Recall@k at each cut-off.
    pub recall: Vec<f64>,
    /// Mean reciprocal rank (within the largest k).
    pub mrr: f64,
    /// Mean number of chunks retrieved per question (enough to fill the largest budget).
    pub mean_retrieved: f64,
}

impl RetrievalScores {
    /// Empty scores for `budgets` and cut-offs `ks`.
    pub fn new(budgets: &[usize], ks: &[usize]) -> Self {
        RetrievalScores {
            questions: 0,
            budgets: budgets.to_vec(),
            budget_recall: vec![0.0; budgets.len()],
            ks: ks.to_vec(),
            recall: vec![0.0; ks.len()],
            mrr: 0.0,
            mean_retrieved: 0.0,
        }
    }

    /// Add one question's outcome (`retrieved`: the chunks it retrieved).
    pub fn add(&mut self, o: &QuestionOutcome, retrieved: usize) {
        let n = self.questions as f64;
        let mean = |old: f64, x: f64| (old * n + x) / (n + 1.0);
        for (r, &h) in self.budget_recall.iter_mut().zip(&o.budget_hits) {
            *r = mean(*r, f64::from(u8::from(h)));
        }
        for (r, &h) in self.recall.iter_mut().zip(&o.rank_hits) {
            *r = mean(*r, f64::from(u8::from(h)));
        }
        self.mrr = mean(self.mrr, o.reciprocal_rank);
        self.mean_retrieved = mean(self.mean_retrieved, retrieved as f64);
        self.questions += 1;
    }
}

/// Search until the ranked chunks fill `chars` characters (or the index runs out), and at
/// least `params.k` chunks: `k` doubles from `params.k`. The RRF window (items taken from
/// each list) grows with `k` only once `k` passes it, so the top of the ranking is a plain
/// search's. `chunk_chars` gives a hit's length in characters.
pub fn search_to_fill(
    index: &MemoryIndex,
    query: &str,
    vector: &[f32],
    params: &SearchParams,
    chars: usize,
    chunk_chars: &dyn Fn(&RetrievedChunk) -> usize,
    scratch: &mut SearchScratch,
) -> Result<Vec<RetrievedChunk>, Error> {
    let mut p = params.clone();
    p.k = p.k.max(1);
    loop {
        p.window = p.window.max(p.k);
        let hits = index.search_with(query, vector, &p, scratch)?;
        let filled: usize = hits.iter().map(chunk_chars).sum();
        if filled >= chars || hits.len() < p.k || p.k >= index.chunks() {
            return Ok(hits);
        }
        p.k = p.k.saturating_mul(2);
    }
}

/// A question to score: its text, its precomputed query vector, its gold answers.
pub struct EvalQuestion<'a> {
    /// The question (for BM25).
    pub question: &'a str,
    /// Its embedding as a query.
    pub vector: &'a [f32],
    /// Gold answers; a question without any is skipped.
    pub golds: Vec<&'a str>,
}

/// Score every question against an index: retrieve enough chunks to fill the largest
/// budget (see [`search_to_fill`]; at least the largest k), take their texts
/// (`chunk_text` looks them up) and apply [`score_ranked`].
pub fn score_questions(
    index: &MemoryIndex,
    questions: &[EvalQuestion<'_>],
    chunk_text: &dyn Fn(&RetrievedChunk) -> Option<String>,
    budgets: &[usize],
    ks: &[usize],
    params: &SearchParams,
) -> Result<RetrievalScores, Error> {
    let mut scores = RetrievalScores::new(budgets, ks);
    let p = SearchParams { k: ks.iter().copied().max().unwrap_or(1), ..params.clone() };
    let need = budgets.iter().copied().max().unwrap_or(0);
    let mut scratch = SearchScratch::default();
    let chars = |h: &RetrievedChunk| chunk_text(h).map_or(0, |t| t.chars().count());
    for q in questions {
        if q.golds.is_empty() {
            continue;
        }
        let hits = search_to_fill(index, q.question, q.vector, &p, need, &chars, &mut scratch)?;
        let texts: Vec<String> = hits.iter().filter_map(chunk_text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        scores.add(&score_ranked(&refs, &q.golds, budgets, ks), hits.len());
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
    fn budget_cuts_the_concatenation() {
        // 490 characters of filler, then the answer at characters 490..504 of chunk one.
        let first = "x ".repeat(245) + "Gutenberg 1455";
        assert_eq!(first.chars().count(), 504);
        let golds = ["Gutenberg 1455"];
        // The cut at 500 falls inside the answer ("Gutenberg 14|55"): a miss; at 1000 a hit.
        assert_eq!(budget_parts(&[first.as_str()], 500)[0].chars().count(), 500);
        assert!(!budget_hit(&[first.as_str()], &golds, 500));
        assert!(budget_hit(&[first.as_str()], &golds, 1000));
        // The budget is shared across ranks: after a 504-character chunk, 496 are left at
        // 1000, so an answer ending at character 500 of the second chunk is cut off.
        let second = "y ".repeat(243) + "Gutenberg 1455";
        assert_eq!(second.chars().count(), 500);
        let ranked = [first.as_str(), second.as_str()];
        assert!(!budget_hit(&ranked, &["y Gutenberg 1455"], 1000), "cut at 496 of the second chunk");
        assert!(budget_hit(&ranked, &["y Gutenberg 1455"], 2000));
        // Characters, not bytes: 500 two-byte letters fill a 500-character budget exactly.
        let wide = "é".repeat(500) + " Mainz";
        assert!(!budget_hit(&[wide.as_str()], &["Mainz"], 500));
        assert!(budget_hit(&[wide.as_str()], &["Mainz"], 506));
        // An answer is not glued together from two chunks.
        assert!(!budget_hit(&["printed by Johannes", "Gutenberg in Mainz"], &["Johannes Gutenberg"], 2000));
        // Word boundaries: "he" is not found inside "the".
        assert!(!contains_answer("the cat", &["he"]));
        assert!(budget_parts(&["abc"], 0).is_empty());
    }

    #[test]
    fn rank_metrics_use_whole_passages() {
        let long = "x ".repeat(600) + "answer here";
        let ranked = ["nothing", long.as_str(), "the answer here"];
        let o = score_ranked(&ranked, &["answer here"], &BUDGETS, &RANK_CUTOFFS);
        // Whole passages: rank 2 holds it, so recall@3 and @8 hit and RR is 1/2 ...
        assert_eq!(o.rank_hits, [false, true, true]);
        assert!((o.reciprocal_rank - 0.5).abs() < 1e-12);
        // ... but the long chunk spends the budgets before its answer, up to 2,000
        // characters, where the third chunk is reached.
        assert_eq!(o.budget_hits, [false, false, true]);
        let none = score_ranked(&ranked, &["absent"], &BUDGETS, &RANK_CUTOFFS);
        assert_eq!((none.rank_hits, none.reciprocal_rank), (vec![false; 3], 0.0));
        // A hit past the largest k counts for neither recall@k nor MRR.
        let many: Vec<&str> = (0..9).map(|i| if i == 8 { "answer here" } else { "no" }).collect();
        let o = score_ranked(&many, &["answer here"], &[], &[1, 8]);
        assert_eq!((o.rank_hits, o.reciprocal_rank), (vec![false, false], 0.0));
    }

    #[test]
    fn running_means() {
        let mut s = RetrievalScores::new(&[500], &[1, 8]);
        s.add(&QuestionOutcome { budget_hits: vec![true], rank_hits: vec![true, true], reciprocal_rank: 1.0 }, 4);
        s.add(&QuestionOutcome { budget_hits: vec![false], rank_hits: vec![false, true], reciprocal_rank: 0.5 }, 8);
        assert_eq!(s.recall, [0.5, 1.0]);
        assert_eq!(s.budget_recall, [0.5]);
        assert!((s.mrr - 0.75).abs() < 1e-12);
        assert!((s.mean_retrieved - 6.0).abs() < 1e-12);
    }

    #[test]
    fn search_fills_the_budget() {
        use docmem_core::document::Document;
        use docmem_core::embed::{EmbedRole, Embedder, HashingEmbedder};
        use docmem_core::index::SegmentParams;
        use docmem_core::memory::DocumentMemory;
        use docmem_core::retrieve::RetrievalMode;
        use docmem_core::span::Span;
        // 40 chunks of 28 characters each.
        let text: String = (0..40).map(|i| format!("Sentence number {i:02} is here. ")).collect();
        let doc = Document::new("d", text.clone());
        let spans: Vec<Span> = (0..40).map(|i| Span::new(i * 28, i * 28 + 28)).collect();
        let mem = DocumentMemory::from_spans(&doc, &spans, "fixed");
        let mut e = HashingEmbedder::new(64);
        let mut idx = MemoryIndex::new(RetrievalMode::ChunkOnly, 64, SegmentParams::default());
        idx.add_chunks(&doc, &mem, &mut e).unwrap();
        let v = e.embed(&["sentence 07"], EmbedRole::Query).unwrap().remove(0);
        let len = |h: &RetrievedChunk| h.span.len();
        let mut scratch = SearchScratch::default();
        let p = SearchParams { k: 8, ..SearchParams::default() };
        let hits = search_to_fill(&idx, "sentence 07", &v, &p, 300, &len, &mut scratch).unwrap();
        assert_eq!(hits.len(), 16, "8 chunks give 224 characters, 16 give 448");
        // The top of the ranking is the plain search's.
        assert_eq!(hits[..8], idx.search("sentence 07", &v, &p).unwrap()[..]);
        // More than the index holds: every chunk, once.
        let all = search_to_fill(&idx, "sentence 07", &v, &p, 5000, &len, &mut scratch).unwrap();
        assert_eq!(all.len(), 40);
    }
}
