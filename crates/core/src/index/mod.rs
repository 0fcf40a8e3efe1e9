//! Vector and lexical indexes.
//!
//! One trait, [`VectorIndex`], over several structures, because each wins somewhere:
//! - [`FlatIndex`]: exact search over contiguous f32 rows. The ground truth, and the fastest
//!   choice below a few thousand vectors (most personal libraries).
//! - [`Int8Index`]: the same rows quantized to int8 for a 4× lighter scan, with the best
//!   candidates rescored in f32 so the final order is exact among them.
//! - [`HnswSegment`]: an HNSW graph for large collections (our own; the module says why),
//!   built on f32 rows and keeping int8 codes once sealed ([`HnswSegment::into_int8`]).
//! - [`SegmentedIndex`]: what a library uses. New vectors land in a flat "fresh" segment;
//!   past a threshold it is sealed into an HNSW segment of int8 rows (a quarter of the
//!   bytes to store, read and scan; recall@10 against f32 on 12,240 MiniLM sentence
//!   vectors: 0.993 for the graph, 0.996 for the exhaustive scan, `docmem bench index
//!   --vectors`);
//!   deletes are tombstones honoured at query time and dropped by [`SegmentedIndex::compact`].
//! - [`Bm25Index`]: BM25 over the same texts, one more ranked list for RRF.
//!
//! Everything serializes to a versioned, length-prefixed, checksummed binary form
//! ([`codec`]); a truncated or corrupted file is an error, never a panic or a huge
//! allocation.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::{Ordering, Reverse};

pub mod bm25;
pub mod codec;
pub mod flat;
pub mod hnsw;
pub mod int8;
pub mod segmented;

pub use bm25::{Bm25Index, Bm25Params};

pub use flat::FlatIndex;
pub use hnsw::{HnswBuilder, HnswParams, HnswScratch, HnswSegment};
pub use int8::Int8Index;
pub use segmented::{SegmentParams, SegmentedIndex};

use crate::Error;

/// How vectors are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Metric {
    /// Inner product of the vectors as given.
    Dot,
    /// Cosine similarity: vectors (and queries) are normalized to unit length on entry.
    Cosine,
}

impl Metric {
    fn code(self) -> u8 {
        match self {
            Metric::Dot => 0,
            Metric::Cosine => 1,
        }
    }

    fn from_code(c: u8) -> Result<Self, Error> {
        match c {
            0 => Ok(Metric::Dot),
            1 => Ok(Metric::Cosine),
            _ => Err(Error::InvalidField { what: "metric" }),
        }
    }
}

/// A search hit: an item id and its similarity (higher is closer).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The item id given when the vector was added.
    pub id: u32,
    /// Similarity to the query (dot or cosine).
    pub score: f32,
}

impl Hit {
    /// Order best first: higher score, then lower id (so results are deterministic).
    pub fn better_first(a: &Hit, b: &Hit) -> Ordering {
        b.score.total_cmp(&a.score).then(a.id.cmp(&b.id))
    }
}

/// Nearest-neighbour search over vectors with `u32` ids.
pub trait VectorIndex {
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Number of live vectors.
    fn len(&self) -> usize;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `k` nearest vectors to `query`, best first, written to `out` (cleared first).
    fn search_into(&self, query: &[f32], k: usize, out: &mut Vec<Hit>) -> Result<(), Error>;
    /// Allocating convenience over [`VectorIndex::search_into`].
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>, Error> {
        let mut out = Vec::new();
        self.search_into(query, k, &mut out)?;
        Ok(out)
    }
}

/// Check a vector's length and values; normalize it for [`Metric::Cosine`].
pub(crate) fn prepare(dim: usize, metric: Metric, id: u32, v: &[f32]) -> Result<Vec<f32>, Error> {
    if v.len() != dim {
        return Err(Error::DimensionMismatch { expected: dim, got: v.len() });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::NonFinite { id });
    }
    let mut v = v.to_vec();
    if metric == Metric::Cosine {
        crate::vector::normalize(&mut v);
    }
    Ok(v)
}

#[derive(Clone, Copy, PartialEq)]
struct Ranked(Hit);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    /// Greater is better.
    fn cmp(&self, other: &Self) -> Ordering {
        Hit::better_first(&other.0, &self.0)
    }
}

/// Keeps the `k` best hits seen (a min-heap of size k).
pub(crate) struct TopK {
    k: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)) }
    }

    /// The score a hit must beat to enter (−∞ until full).
    #[inline]
    pub(crate) fn floor(&self) -> f32 {
        if self.heap.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.heap.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0.score)
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, hit: Hit) {
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Reverse(Ranked(hit)));
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if Ranked(hit) > worst.0 {
                *worst = Reverse(Ranked(hit));
            }
        }
    }

    /// The hits, best first.
    pub(crate) fn into_sorted(self, out: &mut Vec<Hit>) {
        out.clear();
        out.extend(self.heap.into_iter().map(|r| r.0 .0));
        out.sort_by(Hit::better_first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_best_and_breaks_ties_by_id() {
        let mut t = TopK::new(2);
        for (id, score) in [(5, 0.1), (3, 0.9), (4, 0.5), (1, 0.5), (2, -1.0)] {
            t.push(Hit { id, score });
        }
        let mut out = Vec::new();
        t.into_sorted(&mut out);
        assert_eq!(out, [Hit { id: 3, score: 0.9 }, Hit { id: 1, score: 0.5 }]);
    }
}
