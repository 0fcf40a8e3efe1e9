//! HNSW segments on instant-distance.
//!
//! instant-distance builds the graph in parallel (rayon) and fixes M = 32; `ef_search` is
//! chosen at build time. Distances are 1 − dot, so for unit vectors (cosine) the order is the
//! cosine order. The graph is serialized with postcard inside our checksummed container.

use alloc::vec::Vec;
use std::sync::Mutex;

use instant_distance::{Builder, HnswMap, Search};
use serde::{Deserialize, Serialize};

use super::codec::{DecodeError, Reader, Writer};
use super::{prepare, Hit, IndexError, Metric, TopK, VectorIndex};
use crate::vector::dot;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Point(Vec<f32>);

impl instant_distance::Point for Point {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(&self.0, &other.0)
    }
}

/// HNSW build settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HnswParams {
    /// Candidate list size while building (higher: better graph, slower build).
    pub ef_construction: usize,
    /// Candidate list size while searching (higher: better recall, slower queries).
    pub ef_search: usize,
    /// RNG seed for layer assignment (fixed, so builds are reproducible).
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams { ef_construction: 200, ef_search: 200, seed: 0x5eed }
    }
}

/// An immutable HNSW graph over a set of vectors.
pub struct HnswSegment {
    dim: usize,
    metric: Metric,
    params: HnswParams,
    map: HnswMap<Point, u32>,
    searches: Mutex<Vec<Search>>,
}

impl core::fmt::Debug for HnswSegment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HnswSegment").field("dim", &self.dim).field("len", &self.map.values.len()).field("params", &self.params).finish()
    }
}

const KIND: [u8; 4] = *b"HNSW";

impl HnswSegment {
    /// Build from ids and contiguous rows (already normalized for cosine).
    pub fn build(dim: usize, metric: Metric, ids: Vec<u32>, rows: &[f32], params: HnswParams) -> Self {
        let points: Vec<Point> = rows.chunks_exact(dim.max(1)).map(|r| Point(r.to_vec())).collect();
        let map = Builder::default()
            .ef_construction(params.ef_construction)
            .ef_search(params.ef_search)
            .seed(params.seed)
            .build(points, ids);
        HnswSegment { dim, metric, params, map, searches: Mutex::new(Vec::new()) }
    }

    /// Ids and rows of every vector, in graph order.
    pub fn vectors(&self) -> impl Iterator<Item = (u32, &[f32])> {
        self.map.iter().map(|(pid, p)| (self.map.values[pid.into_inner() as usize], p.0.as_slice()))
    }

    /// The build parameters.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Serialize.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.dim as u32);
        w.u8(self.metric.code());
        w.u64(self.params.ef_construction as u64);
        w.u64(self.params.ef_search as u64);
        w.u64(self.params.seed);
        // Serializing plain vectors and integers into a Vec cannot fail.
        let graph = postcard::to_allocvec(&self.map).unwrap_or_default();
        w.bytes(&graph);
        w.finish(KIND, 1)
    }

    /// Deserialize, checking the graph's shape.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let dim = r.u32()? as usize;
        let metric = Metric::from_code(r.u8()?)?;
        let ef_construction = r.usize()?;
        let ef_search = r.usize()?;
        let seed = r.u64()?;
        let graph = r.bytes()?;
        r.finish()?;
        check_graph(graph, dim)?;
        let map: HnswMap<Point, u32> = postcard::from_bytes(graph).map_err(|_| DecodeError::Invalid { what: "HNSW graph" })?;
        Ok(HnswSegment { dim, metric, params: HnswParams { ef_construction, ef_search, seed }, map, searches: Mutex::new(Vec::new()) })
    }
}

/// The serde shape of instant-distance's `HnswMap` (field for field), read only to check
/// the graph before the real type is trusted with it: instant-distance indexes its arrays
/// by the neighbour ids it stores, so an out-of-range id in a file whose checksum was forged
/// would otherwise panic at query time.
#[derive(Deserialize)]
struct MirrorMap {
    hnsw: MirrorHnsw,
    values: Vec<u32>,
}

#[derive(Deserialize)]
struct MirrorHnsw {
    #[allow(dead_code)]
    ef_search: usize,
    points: Vec<Point>,
    zero: Vec<MirrorZeroNode>,
    layers: Vec<Vec<[u32; 32]>>,
}

#[derive(Deserialize)]
struct MirrorZeroNode(#[serde(with = "serde_big_array::BigArray")] [u32; 64]);

const INVALID: u32 = u32::MAX;

fn check_graph(graph: &[u8], dim: usize) -> Result<(), DecodeError> {
    let bad = DecodeError::Invalid { what: "HNSW graph" };
    let m: MirrorMap = postcard::from_bytes(graph).map_err(|_| bad.clone())?;
    let n = m.hnsw.points.len();
    if dim == 0 || m.values.len() != n || m.hnsw.zero.len() != n || m.hnsw.points.iter().any(|p| p.0.len() != dim) {
        return Err(bad);
    }
    let in_range = |ids: &[u32], len: usize| ids.iter().all(|&id| id == INVALID || (id as usize) < len);
    if !m.hnsw.zero.iter().all(|z| in_range(&z.0, n)) {
        return Err(bad);
    }
    // Search enters at point 0 on the top layer and descends: every layer must hold point 0
    // and each layer must be no larger than the one below it.
    let mut below = n;
    for layer in m.hnsw.layers.iter() {
        if layer.is_empty() || layer.len() > below || !layer.iter().all(|node| in_range(node, layer.len())) {
            return Err(bad);
        }
        below = layer.len();
    }
    let _ = below;
    Ok(())
}

impl VectorIndex for HnswSegment {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.map.values.len()
    }

    fn search_into(&self, query: &[f32], k: usize, out: &mut Vec<Hit>) -> Result<(), IndexError> {
        let q = Point(prepare(self.dim, self.metric, u32::MAX, query)?);
        let mut search = self.searches.lock().ok().and_then(|mut s| s.pop()).unwrap_or_default();
        let mut top = TopK::new(k);
        for item in self.map.search(&q, &mut search).take(k) {
            top.push(Hit { id: *item.value, score: 1.0 - item.distance });
        }
        if let Ok(mut pool) = self.searches.lock() {
            pool.push(search);
        }
        top.into_sorted(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::FlatIndex;
    use rand::{Rng, SeedableRng};

    #[test]
    fn recall_and_round_trip() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let dim = 16;
        let mut flat = FlatIndex::new(dim, Metric::Cosine);
        for id in 0..3000 {
            let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            flat.add(id * 2, &v).unwrap();
        }
        let seg = HnswSegment::build(dim, Metric::Cosine, flat.ids().to_vec(), flat.rows(), HnswParams::default());
        let mut hit = 0;
        for _ in 0..100 {
            let q: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let a = flat.search(&q, 10).unwrap();
            let b = seg.search(&q, 10).unwrap();
            hit += b.iter().filter(|h| a.iter().any(|x| x.id == h.id)).count();
        }
        assert!(hit >= 950, "recall@10 {hit}/1000");
        let back = HnswSegment::from_bytes(&seg.to_bytes()).unwrap();
        let q = vec![0.5; dim];
        assert_eq!(back.search(&q, 5).unwrap(), seg.search(&q, 5).unwrap());
        assert_eq!(back.vectors().count(), 3000);
    }
}
