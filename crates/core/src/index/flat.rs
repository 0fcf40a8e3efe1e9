//! Exact search over contiguous f32 rows.

use alloc::vec::Vec;

use super::codec::{Reader, Writer};
use super::{prepare, Hit, Metric, TopK, VectorIndex};
use crate::vector::dot;
use crate::Error;

/// Exact (brute-force) nearest-neighbour search. Rows are stored contiguously, so a query
/// is one linear pass that the compiler vectorizes.
#[derive(Clone, Debug, PartialEq)]
pub struct FlatIndex {
    dim: usize,
    metric: Metric,
    ids: Vec<u32>,
    rows: Vec<f32>,
}

const KIND: [u8; 4] = *b"FLAT";

impl FlatIndex {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize, metric: Metric) -> Self {
        FlatIndex { dim, metric, ids: Vec::new(), rows: Vec::new() }
    }

    /// The metric.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Add a vector. The caller guarantees the id is new (the segmented index checks it).
    pub fn add(&mut self, id: u32, v: &[f32]) -> Result<(), Error> {
        let v = prepare(self.dim, self.metric, id, v)?;
        self.ids.push(id);
        self.rows.extend_from_slice(&v);
        Ok(())
    }

    /// Remove a vector by id; true when it was there.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(pos) = self.ids.iter().position(|&x| x == id) else { return false };
        let last = self.ids.len() - 1;
        self.ids.swap_remove(pos);
        if pos != last {
            let (head, tail) = self.rows.split_at_mut(last * self.dim);
            head[pos * self.dim..(pos + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
        }
        self.rows.truncate(last * self.dim);
        true
    }

    /// The ids, in storage order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The rows, contiguous, in storage order (already normalized for cosine).
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }

    /// Take ids and rows out, leaving the index empty.
    pub fn drain(&mut self) -> (Vec<u32>, Vec<f32>) {
        (core::mem::take(&mut self.ids), core::mem::take(&mut self.rows))
    }

    /// Serialize (see [`super::codec`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u32(self.dim as u32);
        w.u8(self.metric.code());
        w.u32s(&self.ids);
        w.f32s(&self.rows);
        w.finish(KIND, 1)
    }

    /// Deserialize, checking every length.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let dim = r.dim()?;
        let metric = Metric::from_code(r.u8()?)?;
        let ids = r.u32s()?;
        let rows = r.f32s()?;
        r.finish()?;
        if dim == 0 || rows.len() != ids.len().saturating_mul(dim) {
            return Err(Error::InvalidField { what: "flat index shape" });
        }
        Ok(FlatIndex { dim, metric, ids, rows })
    }

    pub(crate) fn search_prepared(&self, q: &[f32], top: &mut TopK) {
        for (row, &id) in self.rows.chunks_exact(self.dim).zip(&self.ids) {
            let score = dot(q, row);
            if score >= top.floor() {
                top.push(Hit { id, score });
            }
        }
    }
}

impl VectorIndex for FlatIndex {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn search_into(&self, query: &[f32], k: usize, out: &mut Vec<Hit>) -> Result<(), Error> {
        let q = prepare(self.dim, self.metric, u32::MAX, query)?;
        let mut top = TopK::new(k.min(self.ids.len()));
        self.search_prepared(&q, &mut top);
        top.into_sorted(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_search_remove_and_round_trip() {
        let mut f = FlatIndex::new(2, Metric::Cosine);
        f.add(10, &[1.0, 0.0]).unwrap();
        f.add(11, &[0.0, 2.0]).unwrap();
        f.add(12, &[1.0, 1.0]).unwrap();
        let hits = f.search(&[1.0, 0.1], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [10, 12]);
        assert_eq!(f.search(&[1.0], 2).err(), Some(Error::DimensionMismatch { expected: 2, got: 1 }));
        assert_eq!(f.add(1, &[f32::NAN, 0.0]).err(), Some(Error::NonFinite { id: 1 }));
        let back = FlatIndex::from_bytes(&f.to_bytes()).unwrap();
        assert_eq!(back, f);
        assert!(f.remove(10));
        assert!(!f.remove(10));
        assert_eq!(f.search(&[1.0, 0.0], 5).unwrap()[0].id, 12);
        assert_eq!(f.len(), 2);
    }
}
