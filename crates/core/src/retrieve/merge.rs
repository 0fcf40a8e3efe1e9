//! Merging an index's parts, in three steps so that the slow one can run elsewhere.
//!
//! A merge links the parts' vectors into one HNSW graph per layer: seconds of work for
//! tens of thousands of vectors, which an add or a search must not wait for. So a merge
//! is planned from the index ([`MemoryIndex::merge_job`]: a copy of the live vectors),
//! built anywhere, on another thread or when the page is idle ([`MergeJob::run`], which
//! needs nothing but itself), and applied ([`MemoryIndex::apply_merge`]): the graphs take
//! the parts' place, the BM25 indexes are merged, and whatever was removed meanwhile is
//! tombstoned in the new part.

use alloc::vec::Vec;

use super::MemoryIndex;
use crate::index::{Bm25Index, HnswBuilder, HnswParams, HnswSegment, Metric, VectorIndex};

/// A planned merge: the live vectors of some parts, per layer.
#[derive(Debug)]
pub struct MergeJob {
    parts: Vec<u64>,
    into: u64,
    dim: usize,
    params: HnswParams,
    /// Per layer not yet begun, last layer first: ids and their rows.
    layers: Vec<(Vec<u32>, Vec<f32>)>,
    /// The layer being linked.
    building: Option<HnswBuilder>,
    /// The layers linked, in order.
    graphs: Vec<HnswSegment>,
}

/// A built merge, to apply to the index it was planned from.
#[derive(Debug)]
pub struct MergedPart {
    parts: Vec<u64>,
    into: u64,
    graphs: Vec<HnswSegment>,
}

impl MergeJob {
    /// The parts it merges.
    pub fn parts(&self) -> &[u64] {
        &self.parts
    }

    /// The merged part's name.
    pub fn into_part(&self) -> u64 {
        self.into
    }

    /// Vectors it has still to link, over every layer.
    pub fn vectors(&self) -> usize {
        self.layers.iter().map(|(ids, _)| ids.len()).sum::<usize>() + self.building.as_ref().map_or(0, HnswBuilder::remaining)
    }

    /// Link up to `n` more vectors (a slice of the work, for an owner that must stay
    /// responsive); true when the graphs are built and [`MergeJob::run`] returns at once.
    pub fn step(&mut self, n: usize) -> bool {
        let mut budget = n;
        loop {
            if self.building.is_none() {
                let Some((ids, rows)) = self.layers.pop() else { return true };
                self.building = Some(HnswSegment::builder(self.dim, Metric::Cosine, ids, rows, self.params));
            }
            let Some(b) = self.building.as_mut() else { return true };
            let before = b.remaining();
            let done = b.link(budget);
            budget = budget.saturating_sub(before - b.remaining());
            if !done {
                return false;
            }
            if let Some(b) = self.building.take() {
                // Built on f32 rows, kept as int8 codes, as every sealed part is.
                self.graphs.push(b.finish().into_int8());
            }
            if budget == 0 {
                return self.layers.is_empty();
            }
        }
    }

    /// Build the graphs (the slow step; touches nothing but the job), or what is left of
    /// them after [`MergeJob::step`].
    pub fn run(mut self) -> MergedPart {
        self.step(usize::MAX);
        MergedPart { parts: self.parts, into: self.into, graphs: self.graphs }
    }
}

impl MergedPart {
    /// The merged part's name.
    pub fn into_part(&self) -> u64 {
        self.into
    }

    /// The parts it replaces.
    pub fn parts(&self) -> &[u64] {
        &self.parts
    }
}

impl MemoryIndex {
    /// Plan merging the sealed parts `parts` into one named `into` (which may reuse one of
    /// their names). `None` when a part is unknown or `into` names another part.
    pub fn merge_job(&self, parts: &[u64], into: u64) -> Option<MergeJob> {
        let slots = self.merge_slots(parts, into)?;
        let mut layers: Vec<(Vec<u32>, Vec<f32>)> = self.layers.iter().map(|l| l.vectors.live_vectors(&slots)).collect();
        layers.reverse();
        Some(MergeJob { parts: parts.to_vec(), into, dim: self.dim, params: self.hnsw, layers, building: None, graphs: Vec::new() })
    }

    fn merge_slots(&self, parts: &[u64], into: u64) -> Option<Vec<usize>> {
        let slots: Vec<usize> = parts.iter().filter_map(|p| self.parts.iter().position(|x| x == p)).collect();
        let distinct = parts.iter().enumerate().all(|(i, p)| !parts[..i].contains(p));
        if slots.len() != parts.len() || !distinct || (self.parts.contains(&into) && !parts.contains(&into)) {
            return None;
        }
        Some(slots)
    }

    /// Put a built merge in place of its parts: they are searched as one part, after the
    /// others. False, changing nothing, when its parts are no longer all here (merged
    /// meanwhile) or it was built for another index.
    pub fn apply_merge(&mut self, merged: MergedPart) -> bool {
        let Some(slots) = self.merge_slots(&merged.parts, merged.into) else { return false };
        if merged.graphs.len() != self.layers.len() || merged.graphs.iter().any(|g| g.dim() != self.dim) {
            return false;
        }
        for (l, graph) in self.layers.iter_mut().zip(merged.graphs) {
            l.vectors.replace_sealed(&slots, graph);
            let merged_lexical = {
                let chosen: Vec<&Bm25Index> = slots.iter().map(|&s| &l.lexical[s + 1]).collect();
                Bm25Index::merged(&chosen)
            };
            let mut kept = Vec::with_capacity(l.lexical.len());
            for (i, b) in core::mem::take(&mut l.lexical).into_iter().enumerate() {
                if i == 0 || !slots.contains(&(i - 1)) {
                    kept.push(b);
                }
            }
            kept.push(merged_lexical);
            l.lexical = kept;
        }
        let parts = merged.parts;
        self.parts.retain(|p| !parts.contains(p));
        self.parts.push(merged.into);
        for d in self.docs.values_mut() {
            if d.part.is_some_and(|p| parts.contains(&p)) {
                d.part = Some(merged.into);
            }
        }
        true
    }
}
