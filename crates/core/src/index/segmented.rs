//! The index a library uses: a fresh flat segment, sealed segments, tombstones.
//!
//! Writes must be cheap (a document adds tens of vectors) and search must stay fast as a
//! library grows, so the shape is an LSM tree's: new vectors go to a flat *fresh* segment,
//! which is exact and needs no build; when it reaches [`SegmentParams::seal_threshold`] it is
//! sealed into an HNSW segment. A delete removes a
//! fresh vector at once and tombstones a sealed one; tombstones are skipped at query time
//! and dropped by [`SegmentedIndex::compact`], which rebuilds everything live into one
//! segment. Search fans out over the segments and merges their top-k.

use alloc::vec::Vec;

use hashbrown::{HashMap, HashSet};

use super::codec::{Reader, Writer};
use super::{prepare, FlatIndex, Hit, HnswParams, HnswSegment, Metric, TopK, VectorIndex};
use crate::Error;

/// Segment settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentParams {
    /// Seal the fresh segment when it holds this many vectors.
    pub seal_threshold: usize,
    /// Compact automatically when there are more sealed segments than this.
    pub max_sealed: usize,
    /// HNSW settings for sealed segments.
    pub hnsw: HnswParams,
}

impl Default for SegmentParams {
    fn default() -> Self {
        SegmentParams { seal_threshold: 4096, max_sealed: 8, hnsw: HnswParams::default() }
    }
}

#[derive(Debug)]
struct Segment {
    index: HnswSegment,
    dead: HashSet<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Fresh,
    Sealed(usize),
}

/// Fresh + sealed segments with tombstones (see the module docs).
#[derive(Debug)]
pub struct SegmentedIndex {
    dim: usize,
    metric: Metric,
    params: SegmentParams,
    fresh: FlatIndex,
    sealed: Vec<Segment>,
    live: HashMap<u32, Loc>,
}

const KIND: [u8; 4] = *b"SEGX";

impl SegmentedIndex {
    /// An empty index.
    pub fn new(dim: usize, metric: Metric, params: SegmentParams) -> Self {
        SegmentedIndex { dim, metric, params, fresh: FlatIndex::new(dim, metric), sealed: Vec::new(), live: HashMap::new() }
    }

    /// True when `id` is live.
    pub fn contains(&self, id: u32) -> bool {
        self.live.contains_key(&id)
    }

    /// Number of sealed segments.
    pub fn sealed_segments(&self) -> usize {
        self.sealed.len()
    }

    /// Number of tombstones not yet compacted away.
    pub fn tombstones(&self) -> usize {
        self.sealed.iter().map(|s| s.dead.len()).sum()
    }

    /// Add a vector under a new id. Nothing changes on error.
    pub fn add(&mut self, id: u32, v: &[f32]) -> Result<(), Error> {
        if self.live.contains_key(&id) {
            return Err(Error::DuplicateId { id });
        }
        self.fresh.add(id, v)?;
        self.live.insert(id, Loc::Fresh);
        if self.fresh.len() >= self.params.seal_threshold {
            self.seal();
        }
        Ok(())
    }

    /// Delete a vector; false when the id was not live.
    pub fn remove(&mut self, id: u32) -> bool {
        match self.live.remove(&id) {
            None => false,
            Some(Loc::Fresh) => self.fresh.remove(id),
            Some(Loc::Sealed(s)) => {
                self.sealed[s].dead.insert(id);
                true
            }
        }
    }

    fn build_sealed(&self, ids: Vec<u32>, rows: Vec<f32>) -> HnswSegment {
        HnswSegment::build(self.dim, self.metric, ids, &rows, self.params.hnsw).into_int8()
    }

    /// Seal the fresh segment now (no-op when empty).
    pub fn seal(&mut self) {
        if self.fresh.is_empty() {
            return;
        }
        let (ids, rows) = self.fresh.drain();
        let slot = self.sealed.len();
        for &id in &ids {
            self.live.insert(id, Loc::Sealed(slot));
        }
        let index = self.build_sealed(ids, rows);
        self.sealed.push(Segment { index, dead: HashSet::new() });
        if self.sealed.len() > self.params.max_sealed {
            self.compact();
        }
    }

    /// This index with automatic sealing and compaction turned off (see
    /// [`SegmentedIndex::seal_in_step`]).
    pub fn sealed_in_step(mut self) -> Self {
        self.params.seal_threshold = usize::MAX;
        self.params.max_sealed = usize::MAX;
        self
    }

    /// Vectors in the fresh segment.
    pub fn fresh_len(&self) -> usize {
        self.fresh.len()
    }

    /// Seal the fresh segment into a new sealed segment even when it is empty, its vectors
    /// not yet linked into a graph (searched exactly), and never compact: for an owner that keeps several indexes' segments in step (one slot per
    /// stored part; see [`crate::retrieve::MemoryIndex`]).
    pub fn seal_in_step(&mut self) {
        let (ids, rows) = self.fresh.drain();
        let slot = self.sealed.len();
        for &id in &ids {
            self.live.insert(id, Loc::Sealed(slot));
        }
        // Linked later, by a merge ([`SegmentedIndex::merge_sealed`]).
        let index = HnswSegment::unlinked_rows(self.dim, self.metric, ids, &rows, self.params.hnsw).into_int8();
        self.sealed.push(Segment { index, dead: HashSet::new() });
    }

    /// The graph of sealed segment `slot` (tombstones are the owner's to keep).
    pub fn sealed(&self, slot: usize) -> Option<&HnswSegment> {
        self.sealed.get(slot).map(|s| &s.index)
    }

    /// Append a sealed segment read back from storage. Refused, changing nothing, when its
    /// dimension differs or it holds an id already live.
    pub fn push_sealed(&mut self, index: HnswSegment) -> Result<(), Error> {
        if index.dim() != self.dim {
            return Err(Error::InvalidField { what: "segment dimension" });
        }
        let mut seen = HashSet::new();
        if index.ids().iter().any(|&id| self.live.contains_key(&id) || !seen.insert(id)) {
            return Err(Error::InvalidField { what: "segment id" });
        }
        let slot = self.sealed.len();
        for &id in index.ids() {
            self.live.insert(id, Loc::Sealed(slot));
        }
        self.sealed.push(Segment { index, dead: HashSet::new() });
        Ok(())
    }

    /// Rebuild the live vectors of the sealed segments `slots` into one, placed after the
    /// remaining segments (whose order is kept); tombstones in them are dropped. Slots out
    /// of range are ignored.
    pub fn merge_sealed(&mut self, slots: &[usize]) {
        let (ids, rows) = self.live_vectors(slots);
        let merged = self.build_sealed(ids, rows);
        self.replace_sealed(slots, merged);
    }

    /// The live vectors of the sealed segments `slots`, in order (what a merge of them
    /// builds its graph from, perhaps elsewhere; see [`SegmentedIndex::replace_sealed`]).
    pub fn live_vectors(&self, slots: &[usize]) -> (Vec<u32>, Vec<f32>) {
        let mut ids = Vec::new();
        let mut rows = Vec::new();
        for &slot in slots {
            let Some(seg) = self.sealed.get(slot) else { continue };
            for (i, &id) in seg.index.ids().iter().enumerate() {
                if !seg.dead.contains(&id) {
                    ids.push(id);
                    seg.index.append_row(i, &mut rows);
                }
            }
        }
        (ids, rows)
    }

    /// Put `merged`, built from [`SegmentedIndex::live_vectors`] of `slots`, in their
    /// place, after the remaining segments. A vector removed since it was taken is
    /// tombstoned in `merged`.
    pub fn replace_sealed(&mut self, slots: &[usize], merged: HnswSegment) {
        let mut kept = Vec::with_capacity(self.sealed.len());
        for (slot, seg) in core::mem::take(&mut self.sealed).into_iter().enumerate() {
            if !slots.contains(&slot) {
                kept.push(seg);
            }
        }
        self.sealed = kept;
        let dead: HashSet<u32> = merged.ids().iter().copied().filter(|id| !self.live.contains_key(id)).collect();
        self.sealed.push(Segment { index: merged, dead });
        for (slot, seg) in self.sealed.iter().enumerate() {
            for &id in seg.index.ids() {
                if !seg.dead.contains(&id) {
                    self.live.insert(id, Loc::Sealed(slot));
                }
            }
        }
    }

    /// Rebuild every live vector into one sealed segment, dropping tombstones.
    pub fn compact(&mut self) {
        let mut ids = Vec::with_capacity(self.live.len());
        let mut rows = Vec::with_capacity(self.live.len() * self.dim);
        for seg in &self.sealed {
            for (i, &id) in seg.index.ids().iter().enumerate() {
                if !seg.dead.contains(&id) {
                    ids.push(id);
                    seg.index.append_row(i, &mut rows);
                }
            }
        }
        let (fids, frows) = self.fresh.drain();
        ids.extend(fids);
        rows.extend(frows);
        self.sealed.clear();
        self.live.clear();
        if ids.is_empty() {
            return;
        }
        for &id in &ids {
            self.live.insert(id, Loc::Sealed(0));
        }
        let index = self.build_sealed(ids, rows);
        self.sealed.push(Segment { index, dead: HashSet::new() });
    }

    /// Serialize all segments and tombstones.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.dim as u32);
        w.u8(self.metric.code());
        // Clamped so that a 32-bit reader can hold them ("never" is u32::MAX there too).
        w.u64(self.params.seal_threshold.min(u32::MAX as usize) as u64);
        w.u64(self.params.max_sealed.min(u32::MAX as usize) as u64);
        w.bytes(&self.fresh.to_bytes());
        w.u64(self.sealed.len() as u64);
        for seg in &self.sealed {
            w.bytes(&seg.index.to_bytes());
            let mut dead: Vec<u32> = seg.dead.iter().copied().collect();
            dead.sort_unstable();
            w.u32s(&dead);
        }
        w.finish(KIND, 1)
    }

    /// Deserialize, checking that segments agree with each other.
    pub fn from_bytes(bytes: &[u8], params: SegmentParams) -> Result<Self, Error> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let dim = r.dim()?;
        let metric = Metric::from_code(r.u8()?)?;
        let seal_threshold = r.usize()?;
        let max_sealed = r.usize()?;
        let fresh = FlatIndex::from_bytes(r.bytes()?)?;
        let n = r.count(16)?;
        let mut params = params;
        params.seal_threshold = seal_threshold;
        params.max_sealed = max_sealed;
        let mut idx = SegmentedIndex::new(dim, metric, params);
        let invalid = Error::InvalidField { what: "segment" };
        if fresh.dim() != dim || fresh.metric() != metric {
            return Err(invalid);
        }
        for &id in fresh.ids() {
            if idx.live.insert(id, Loc::Fresh).is_some() {
                return Err(invalid);
            }
        }
        idx.fresh = fresh;
        for slot in 0..n {
            let index = HnswSegment::from_bytes(r.bytes()?)?;
            if index.dim() != dim {
                return Err(invalid);
            }
            let dead: HashSet<u32> = r.u32s()?.into_iter().collect();
            for &id in index.ids() {
                if !dead.contains(&id) && idx.live.insert(id, Loc::Sealed(slot)).is_some() {
                    return Err(invalid);
                }
            }
            idx.sealed.push(Segment { index, dead });
        }
        r.finish()?;
        Ok(idx)
    }
}

impl VectorIndex for SegmentedIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.live.len()
    }

    fn search_into(&self, query: &[f32], k: usize, out: &mut Vec<Hit>) -> Result<(), Error> {
        let q = prepare(self.dim, self.metric, u32::MAX, query)?;
        let mut top = TopK::new(k);
        self.fresh.search_prepared(&q, &mut top);
        let mut hits = Vec::new();
        for seg in &self.sealed {
            // Ask for enough extra to survive the tombstones in this segment (never more
            // than it holds: `k` comes from the caller and may be huge).
            let want = k.saturating_add(seg.dead.len()).min(seg.index.len());
            seg.index.with_scratch(|s| seg.index.search_with(&q, want, seg.index.params().ef_search.max(want), s, &mut hits));
            for h in hits.iter().filter(|h| !seg.dead.contains(&h.id)) {
                top.push(*h);
            }
        }
        top.into_sorted(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(rng: &mut impl Rng, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect()
    }

    #[test]
    fn a_huge_k_neither_overflows_nor_allocates_it() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let params = SegmentParams { seal_threshold: 20, max_sealed: 3, ..SegmentParams::default() };
        let mut idx = SegmentedIndex::new(6, Metric::Cosine, params);
        for id in 0..50u32 {
            idx.add(id, &random(&mut rng, 6)).unwrap();
        }
        assert!(idx.remove(3), "a tombstone in a sealed segment");
        for k in [usize::MAX, usize::MAX - 1, 1 << 40] {
            let hits = idx.search(&random(&mut rng, 6), k).unwrap();
            assert_eq!(hits.len(), 49, "k = {k}");
            assert!(hits.iter().all(|h| h.id != 3));
        }
    }

    #[test]
    fn seal_delete_compact_and_round_trip() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let dim = 12;
        let params = SegmentParams { seal_threshold: 100, max_sealed: 3, ..SegmentParams::default() };
        let mut idx = SegmentedIndex::new(dim, Metric::Cosine, params.clone());
        let mut exact = FlatIndex::new(dim, Metric::Cosine);
        for id in 0..350u32 {
            let v = random(&mut rng, dim);
            idx.add(id, &v).unwrap();
            exact.add(id, &v).unwrap();
        }
        assert_eq!(idx.sealed_segments(), 3);
        assert_eq!(idx.add(5, &random(&mut rng, dim)), Err(Error::DuplicateId { id: 5 }));
        // Delete a sealed and a fresh vector.
        for id in [5, 340] {
            assert!(idx.remove(id));
            exact.remove(id);
        }
        assert!(!idx.remove(5));
        assert_eq!(idx.tombstones(), 1);
        fn check(idx: &SegmentedIndex, exact: &FlatIndex, rng: &mut rand::rngs::SmallRng, dim: usize, deleted: &[u32]) {
            let mut agree = 0;
            for _ in 0..40 {
                let q = random(rng, dim);
                let a = exact.search(&q, 5).unwrap();
                let b = idx.search(&q, 5).unwrap();
                assert!(b.iter().all(|h| !deleted.contains(&h.id)));
                agree += b.iter().filter(|h| a.iter().any(|x| x.id == h.id)).count();
            }
            assert!(agree >= 190, "{agree}/200");
        }
        check(&idx, &exact, &mut rng, dim, &[5, 340]);
        let back = SegmentedIndex::from_bytes(&idx.to_bytes(), params.clone()).unwrap();
        assert_eq!(back.len(), idx.len());
        check(&back, &exact, &mut rng, dim, &[5, 340]);
        // A deleted id can come back with a new vector.
        let v = random(&mut rng, dim);
        idx.add(5, &v).unwrap();
        exact.add(5, &v).unwrap();
        assert_eq!(idx.search(&v, 1).unwrap()[0].id, 5);
        idx.compact();
        assert_eq!(idx.sealed_segments(), 1);
        assert_eq!(idx.tombstones(), 0);
        assert_eq!(idx.len(), 349);
        check(&idx, &exact, &mut rng, dim, &[340]);
    }

    #[test]
    fn corrupted_bytes_are_errors() {
        let mut idx = SegmentedIndex::new(4, Metric::Dot, SegmentParams { seal_threshold: 3, ..SegmentParams::default() });
        for id in 0..5 {
            idx.add(id, &[id as f32, 1.0, 0.0, 0.5]).unwrap();
        }
        let bytes = idx.to_bytes();
        for cut in 0..bytes.len() {
            assert!(SegmentedIndex::from_bytes(&bytes[..cut], SegmentParams::default()).is_err());
        }
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(SegmentedIndex::from_bytes(&b, SegmentParams::default()).is_err());
        }
    }
}
