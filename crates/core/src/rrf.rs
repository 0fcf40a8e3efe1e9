//! Reciprocal rank fusion.
//!
//! score(d) = Σ_lists w_l / (k + rank_l(d)), ranks counted from 1, k = 60 by default
//! (Cormack et al., 2009; the same formula Elasticsearch's `rrf` retriever and ranx's
//! `rrf` fusion apply); a list may give several ids one rank (ties). Only the entries of
//! rank up to `window` in each list take part
//! (Elasticsearch's `rank_window_size`); a document absent from a list adds nothing to its
//! score. Ties are broken deterministically: the better best single rank wins, then the
//! earlier first appearance (reading the lists in order, each from its top).
//!
//! Fusion runs per query on the retrieval hot path, so [`RrfFuser`] keeps its map and
//! buffers between calls and allocates nothing once warm.

use alloc::vec::Vec;
use core::hash::Hash;

use hashbrown::HashMap;

/// Fusion settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RrfParams {
    /// The rank constant k (default 60).
    pub k: f64,
    /// The deepest rank of each list that takes part (default: all). Where a list gives
    /// several ids one rank, all of them at a rank up to `window` take part.
    pub window: usize,
}

impl Default for RrfParams {
    fn default() -> Self {
        RrfParams { k: 60.0, window: usize::MAX }
    }
}

/// One ranked list: ids best first, and the list's weight.
#[derive(Clone, Copy, Debug)]
pub struct RankedList<'a, Id> {
    /// Ids in rank order (rank 1 first). A repeated id counts at its first rank only.
    pub ids: &'a [Id],
    /// The list's weight w_l (1.0 for plain RRF).
    pub weight: f64,
    /// Each id's rank when ids share one (ties), non-decreasing and parallel to `ids`;
    /// `None`: the position from 1. A list whose items stand for several ids (an outline
    /// item for each chunk under it) gives them the item's rank, so a broad item does not
    /// take ranks 1 to n by itself.
    pub ranks: Option<&'a [u32]>,
}

impl<'a, Id> RankedList<'a, Id> {
    /// A list with weight 1.
    pub fn new(ids: &'a [Id]) -> Self {
        RankedList { ids, weight: 1.0, ranks: None }
    }
}

/// A fused result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fused<Id> {
    /// The id.
    pub id: Id,
    /// Its fused score.
    pub score: f64,
    /// Its best rank in any list (from 1).
    pub best_rank: usize,
    /// Order of first appearance (tie-breaker).
    pub first_seen: usize,
}

/// A reusable RRF fuser (see the module docs).
#[derive(Debug)]
pub struct RrfFuser<Id> {
    slots: HashMap<Id, usize>,
    fused: Vec<Fused<Id>>,
    /// Per list, whether an id was already counted in the current list (dedup within a
    /// list); indexed like `fused`.
    seen_in_list: Vec<usize>,
}

impl<Id: Copy + Eq + Hash> Default for RrfFuser<Id> {
    fn default() -> Self {
        RrfFuser { slots: HashMap::new(), fused: Vec::new(), seen_in_list: Vec::new() }
    }
}

impl<Id: Copy + Eq + Hash> RrfFuser<Id> {
    /// A new fuser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fuse `lists`; the result is sorted best first and valid until the next call.
    pub fn fuse(&mut self, lists: &[RankedList<'_, Id>], params: &RrfParams) -> &[Fused<Id>] {
        self.slots.clear();
        self.fused.clear();
        self.seen_in_list.clear();
        for (li, list) in lists.iter().enumerate() {
            debug_assert!(
                list.ranks.is_none_or(|r| r.len() == list.ids.len() && r.windows(2).all(|w| w[0] <= w[1])),
                "ranks must be parallel to ids and non-decreasing"
            );
            let marker = li + 1;
            for (r, &id) in list.ids.iter().enumerate() {
                let rank = list.ranks.and_then(|ranks| ranks.get(r)).map_or(r + 1, |&t| t as usize);
                if rank > params.window {
                    break;
                }
                let next = self.fused.len();
                let slot = *self.slots.entry(id).or_insert(next);
                if slot == next {
                    self.fused.push(Fused { id, score: 0.0, best_rank: rank, first_seen: next });
                    self.seen_in_list.push(0);
                }
                if self.seen_in_list[slot] == marker {
                    continue;
                }
                self.seen_in_list[slot] = marker;
                let f = &mut self.fused[slot];
                f.score += list.weight / (params.k + rank as f64);
                f.best_rank = f.best_rank.min(rank);
            }
        }
        self.fused
            .sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.best_rank.cmp(&b.best_rank)).then(a.first_seen.cmp(&b.first_seen)));
        &self.fused
    }
}

/// One-shot fusion (allocates; use [`RrfFuser`] in loops).
pub fn rrf<Id: Copy + Eq + Hash>(lists: &[RankedList<'_, Id>], params: &RrfParams) -> Vec<Fused<Id>> {
    RrfFuser::new().fuse(lists, params).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn ids(f: &[Fused<char>]) -> Vec<char> {
        f.iter().map(|x| x.id).collect()
    }

    #[test]
    fn hand_computed() {
        // a: 1/61 + 1/62; b: 1/62 + 1/61; c: 1/63; d: 1/61.
        let l1 = ['a', 'b', 'c'];
        let l2 = ['b', 'a'];
        let l3 = ['d'];
        let f = rrf(&[RankedList::new(&l1), RankedList::new(&l2), RankedList::new(&l3)], &RrfParams::default());
        // a and b tie on score and best rank; a appeared first.
        assert_eq!(ids(&f), ['a', 'b', 'd', 'c']);
        assert!((f[0].score - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-15);
        assert!((f[2].score - 1.0 / 61.0).abs() < 1e-15);
        assert!((f[3].score - 1.0 / 63.0).abs() < 1e-15);
    }

    #[test]
    fn tied_ranks_score_alike_and_respect_the_window() {
        // An item standing for three ids (rank 1) and one for a fourth (rank 2): the three
        // share 1/61, the fourth gets 1/62, not 1/64; a window of 1 drops the fourth.
        let ids_ = ['a', 'b', 'c', 'd'];
        let ranks = [1u32, 1, 1, 2];
        let list = RankedList { ids: &ids_, weight: 1.0, ranks: Some(&ranks) };
        let f = rrf(&[list], &RrfParams::default());
        for x in &f[..3] {
            assert!((x.score - 1.0 / 61.0).abs() < 1e-15, "{x:?}");
        }
        assert_eq!(f[3].id, 'd');
        assert!((f[3].score - 1.0 / 62.0).abs() < 1e-15);
        assert_eq!(ids(&rrf(&[list], &RrfParams { k: 60.0, window: 1 })), ['a', 'b', 'c']);
    }

    #[test]
    fn elasticsearch_formula() {
        // Elasticsearch's RRF reference: score(d) = Σ_q 1 / (rank_constant + rank(result(q), d)),
        // ranks from 1, nothing added for a query whose results lack d; rank_constant ≥ 1 is
        // allowed, and k = 1 keeps the numbers readable. Query A ranks [1, 2, 3], query B [3, 1, 4]:
        // doc 1: 1/2 + 1/3 = 0.8333, doc 3: 1/4 + 1/2 = 0.75, doc 2: 1/3, doc 4: 1/4.
        let a = [1u32, 2, 3];
        let b = [3u32, 1, 4];
        let f = rrf(&[RankedList::new(&a), RankedList::new(&b)], &RrfParams { k: 1.0, window: usize::MAX });
        let got: Vec<(u32, f64)> = f.iter().map(|x| (x.id, x.score)).collect();
        let want = [(1, 5.0 / 6.0), (3, 0.75), (2, 1.0 / 3.0), (4, 0.25)];
        for ((gi, gs), (wi, ws)) in got.iter().zip(want) {
            assert_eq!(*gi, wi);
            assert!((gs - ws).abs() < 1e-12);
        }
    }

    #[test]
    fn weights_window_and_duplicates() {
        let l1 = ['x', 'y', 'z'];
        let l2 = ['z', 'z', 'y'];
        let p = RrfParams { k: 60.0, window: 2 };
        let f = rrf(&[RankedList { ids: &l1, weight: 1.0, ranks: None }, RankedList { ids: &l2, weight: 3.0, ranks: None }], &p);
        // Window 2: l1 gives x, y; l2 gives z (once; the repeat is ignored).
        assert_eq!(ids(&f), ['z', 'x', 'y']);
        assert!((f[0].score - 3.0 / 61.0).abs() < 1e-15);
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn ranx_formula_with_missing_docs() {
        // ranx: fused(d) = Σ 1/(k + rank), absent runs contribute 0.
        let r1 = ["d1", "d2"];
        let r2 = ["d3", "d1"];
        let f = rrf(&[RankedList::new(&r1), RankedList::new(&r2)], &RrfParams::default());
        let d3 = f.iter().find(|x| x.id == "d3").unwrap();
        assert!((d3.score - 1.0 / 61.0).abs() < 1e-15);
        assert_eq!(f[0].id, "d1");
    }

    #[test]
    fn fuser_reuse_gives_same_results() {
        let mut fuser = RrfFuser::new();
        let l = vec![3u32, 1, 2];
        let first = fuser.fuse(&[RankedList::new(&l)], &RrfParams::default()).to_vec();
        let second = fuser.fuse(&[RankedList::new(&l)], &RrfParams::default()).to_vec();
        assert_eq!(first, second);
        assert!(fuser.fuse(&[], &RrfParams::default()).is_empty());
    }
}
