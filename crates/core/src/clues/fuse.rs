//! Fusing the question's ranked list with each clue's, by weighted RRF, keeping track of
//! which queries found each chunk.
//!
//! Each query (the question, then each clue) was searched through the three layers, giving
//! one ranked list of chunks; those lists are fused again with RRF, each weighted by its
//! query's kind ([`ClueWeights`]) and all of them together capped at a small share of the
//! question's weight ([`DEFAULT_CLUE_SHARE`]). The question leads: clues are guesses by a
//! small model, so they can reorder chunks the question ranked close together, and a chunk
//! only the clues found can enter below, but wild clues cannot bury the question's best
//! hits.

use alloc::vec::Vec;

use super::{Clue, ClueKind};
use crate::retrieve::RetrievedChunk;
use crate::rrf::{RankedList, RrfFuser, RrfParams};
use crate::span::Span;
use crate::DocId;

/// The default [`ClueWeights::clue_share`]: the clues together weigh a fiftieth of the
/// question, so they reorder chunks the question ranks close together and bring in chunks
/// it missed, but do not overturn its clear preferences (with RRF's k = 60 neighbouring
/// top ranks differ by about 1/3600 of a list's weight).
///
/// Chosen on the dev split of the shared SQuAD sample (24 questions, clues by the 1.5B
/// model from an outline-only global memory; `docmem eval clues --split dev --fusions
/// …`): recall at 500 characters, plain 0.792; clues at their kinds' weights (0.7 / 0.7 /
/// 0.5 each) 0.583; sharing 1, 0.25, 0.05, 0.02, 0.01 of the question's weight 0.583,
/// 0.708, 0.750, 0.833, 0.792. The small model's clues are often wrong, so they must not
/// outvote the question.
pub const DEFAULT_CLUE_SHARE: f64 = 0.02;

/// The weight of each kind of query's list.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClueWeights {
    /// The question (default 1).
    pub question: f64,
    /// A text span (default 0.7: written to look like the evidence).
    pub span: f64,
    /// A surrogate question (default 0.7).
    pub surrogate: f64,
    /// The draft answer (default 0.5: most often wrong in its details).
    pub draft: f64,
    /// When set to s: the clues' lists together weigh at most s × the question's (each
    /// scaled down alike), however many clues there are. `None`: each list keeps its
    /// kind's weight, so six clues outweigh the question about four to one. Default
    /// [`DEFAULT_CLUE_SHARE`].
    pub clue_share: Option<f64>,
}

impl Default for ClueWeights {
    fn default() -> Self {
        ClueWeights { question: 1.0, span: 0.7, surrogate: 0.7, draft: 0.5, clue_share: Some(DEFAULT_CLUE_SHARE) }
    }
}

impl ClueWeights {
    /// The weight of a query of `kind`.
    pub fn of(&self, kind: ClueKind) -> f64 {
        match kind {
            ClueKind::Question => self.question,
            ClueKind::Span => self.span,
            ClueKind::Surrogate => self.surrogate,
            ClueKind::Draft => self.draft,
        }
    }
}

/// A chunk of clue-guided retrieval.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CluedChunk {
    /// The chunk, as the query that ranked it best returned it (its per-layer ranks are
    /// that query's).
    pub chunk: RetrievedChunk,
    /// The score of the second fusion.
    pub score: f64,
    /// The queries that found it, as indices into the query list (0: the question), best
    /// rank first, each with its rank in that query's list (from 1).
    pub found_by: Vec<(usize, u32)>,
}

/// Fuse `lists[i]`, the ranked chunks of `queries[i]` (the question first, then the clues),
/// into the top `k` (see the module docs). `rrf_k` is RRF's constant (60).
pub fn fuse_clue_lists(queries: &[Clue], lists: &[Vec<RetrievedChunk>], weights: &ClueWeights, k: usize, rrf_k: f64) -> Vec<CluedChunk> {
    let keys: Vec<Vec<(DocId, Span)>> = lists.iter().map(|l| l.iter().map(|c| (c.doc_id, c.span)).collect()).collect();
    let clue_total: f64 = queries.iter().filter(|q| q.kind != ClueKind::Question).map(|q| weights.of(q.kind)).sum();
    let scale = match weights.clue_share {
        Some(share) if clue_total > 0.0 => (share * weights.question / clue_total).min(1.0),
        _ => 1.0,
    };
    let ranked: Vec<RankedList<'_, (DocId, Span)>> = keys
        .iter()
        .zip(queries)
        .map(|(ids, q)| {
            let weight = if q.kind == ClueKind::Question { weights.question } else { weights.of(q.kind) * scale };
            RankedList { ids, weight, ranks: None }
        })
        .collect();
    let mut fuser = RrfFuser::new();
    let fused = fuser.fuse(&ranked, &RrfParams { k: rrf_k, window: usize::MAX });
    let mut out = Vec::with_capacity(k.min(fused.len()));
    for f in fused.iter().take(k) {
        let mut found_by: Vec<(usize, u32)> =
            keys.iter().enumerate().filter_map(|(qi, ids)| ids.iter().position(|id| *id == f.id).map(|r| (qi, r as u32 + 1))).collect();
        found_by.sort_by_key(|&(qi, r)| (r, qi));
        let Some(&(best_q, best_r)) = found_by.first() else { continue };
        let chunk = lists[best_q][best_r as usize - 1].clone();
        out.push(CluedChunk { chunk, score: f.score, found_by });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Document;
    use alloc::vec;

    fn chunk(doc: DocId, start: usize) -> RetrievedChunk {
        RetrievedChunk { doc_id: doc, scenario: 0, span: Span::new(start, start + 10), score: 0.0, ranks: Vec::new() }
    }

    #[test]
    fn a_clue_lifts_a_chunk_and_says_so() {
        let d = Document::new("t", "x").id;
        let queries = vec![Clue::new(ClueKind::Question, "q"), Clue::new(ClueKind::Span, "s"), Clue::new(ClueKind::Draft, "a")];
        let lists = vec![vec![chunk(d, 0), chunk(d, 10), chunk(d, 20)], vec![chunk(d, 20), chunk(d, 30)], vec![chunk(d, 20)]];
        let per_kind = ClueWeights { clue_share: None, ..ClueWeights::default() };
        let out = fuse_clue_lists(&queries, &lists, &per_kind, 3, 60.0);
        // 20: 1/63 + 0.7/61 + 0.5/61 beats 0: 1/61.
        assert_eq!(out[0].chunk.span.start, 20);
        assert_eq!(out[0].found_by, vec![(1, 1), (2, 1), (0, 3)]);
        assert_eq!(out[1].chunk.span.start, 0);
        assert_eq!(out.len(), 3);
        // Only the clue found 30; with k = 4 it enters last.
        let out = fuse_clue_lists(&queries, &lists, &per_kind, 4, 60.0);
        assert_eq!(out[3].found_by, vec![(1, 2)]);
    }

    #[test]
    fn a_shared_weight_keeps_many_clues_from_outvoting_the_question() {
        let d = Document::new("t", "x").id;
        let mut queries = vec![Clue::new(ClueKind::Question, "q")];
        let mut lists = vec![vec![chunk(d, 0), chunk(d, 10)]];
        for i in 0..4 {
            queries.push(Clue::new(ClueKind::Span, alloc::format!("s{i}")));
            lists.push(vec![chunk(d, 10)]);
        }
        // Per kind, four clues carry 10 to the top; sharing a hundredth of the question's
        // weight, the question's first stays first and the clues' pick is second. (With
        // RRF's k = 60, neighbouring ranks differ by about 1/3600: a share much above
        // 1/60 reorders the top whenever the clues agree.)
        let per_kind = fuse_clue_lists(&queries, &lists, &ClueWeights { clue_share: None, ..ClueWeights::default() }, 2, 60.0);
        assert_eq!(per_kind[0].chunk.span.start, 10);
        let shared = ClueWeights { clue_share: Some(0.01), ..ClueWeights::default() };
        let out = fuse_clue_lists(&queries, &lists, &shared, 2, 60.0);
        assert_eq!(out.iter().map(|c| c.chunk.span.start).collect::<Vec<_>>(), vec![0, 10]);
    }

    #[test]
    fn the_question_alone_keeps_its_order() {
        let d = Document::new("t", "x").id;
        let queries = vec![Clue::new(ClueKind::Question, "q")];
        let lists = vec![vec![chunk(d, 5), chunk(d, 0)]];
        let out = fuse_clue_lists(&queries, &lists, &ClueWeights::default(), 8, 60.0);
        assert_eq!(out.iter().map(|c| c.chunk.span.start).collect::<Vec<_>>(), vec![5, 0]);
    }
}
