//! An int8-quantized scan with f32 rescoring.
//!
//! Each row is scaled by its own max |x| into i8 (symmetric, per-row scale), the query
//! likewise; the scan ranks rows by the integer dot product times the two scales, which
//! reads a quarter of the bytes of an f32 scan. The best `max(k · rescore, 32)` candidates
//! are then rescored exactly in f32, so the returned scores are exact and recall is close
//! to 1 (quantization only has to keep true neighbours inside the candidate set).

use alloc::vec::Vec;

use super::codec::{Reader, Writer};
use super::{prepare, FlatIndex, Hit, Metric, TopK, VectorIndex};
use crate::vector::{dot, dot_i8};
use crate::Error;

/// Int8 scan + f32 rescoring (see the module docs).
#[derive(Clone, Debug)]
pub struct Int8Index {
    exact: FlatIndex,
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Candidates rescored per requested result.
    pub rescore: usize,
}

const KIND: [u8; 4] = *b"INT8";
const MIN_CANDIDATES: usize = 32;

/// Append `v` scaled by max |x| / 127 and rounded to `out`; returns the scale.
pub(crate) fn quantize(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    out.extend(v.iter().map(|x| libm::roundf(x / scale).clamp(-127.0, 127.0) as i8));
    scale
}

/// The `n` rows (positions, as ids) whose int8 codes score best against the quantized
/// query `qc`: the integer product times each row's scale, best first, into `out`.
pub(crate) fn int8_candidates(qc: &[i8], codes: &[i8], scales: &[f32], n: usize, out: &mut Vec<Hit>) {
    let mut top = TopK::new(n);
    for (i, (code, &scale)) in codes.chunks_exact(qc.len().max(1)).zip(scales).enumerate() {
        let approx = dot_i8(qc, code) as f32 * scale;
        if approx >= top.floor() {
            top.push(Hit { id: i as u32, score: approx });
        }
    }
    top.into_sorted(out);
}

impl Int8Index {
    /// An empty index.
    pub fn new(dim: usize, metric: Metric) -> Self {
        Int8Index { exact: FlatIndex::new(dim, metric), codes: Vec::new(), scales: Vec::new(), rescore: 4 }
    }

    /// Build from a flat index's rows.
    pub fn from_flat(flat: FlatIndex) -> Self {
        let mut codes = Vec::with_capacity(flat.rows().len());
        let scales =
            if flat.dim() == 0 { Vec::new() } else { flat.rows().chunks_exact(flat.dim()).map(|r| quantize(r, &mut codes)).collect() };
        Int8Index { exact: flat, codes, scales, rescore: 4 }
    }

    /// Add a vector.
    pub fn add(&mut self, id: u32, v: &[f32]) -> Result<(), Error> {
        self.exact.add(id, v)?;
        let dim = self.exact.dim();
        let row = &self.exact.rows()[self.exact.rows().len() - dim..];
        let scale = quantize(row, &mut self.codes);
        self.scales.push(scale);
        Ok(())
    }

    /// The exact rows behind the codes.
    pub fn as_flat(&self) -> &FlatIndex {
        &self.exact
    }

    /// Serialize: only the f32 rows are stored; codes are recomputed on load.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.bytes(&self.exact.to_bytes());
        w.u32(self.rescore as u32);
        w.finish(KIND, 1)
    }

    /// Deserialize.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let flat = FlatIndex::from_bytes(r.bytes()?)?;
        let rescore = r.u32()? as usize;
        r.finish()?;
        let mut idx = Int8Index::from_flat(flat);
        idx.rescore = rescore.clamp(1, 1024);
        Ok(idx)
    }
}

impl VectorIndex for Int8Index {
    fn dim(&self) -> usize {
        self.exact.dim()
    }

    fn len(&self) -> usize {
        self.exact.len()
    }

    fn search_into(&self, query: &[f32], k: usize, out: &mut Vec<Hit>) -> Result<(), Error> {
        let dim = self.dim();
        let q = prepare(dim, self.exact.metric(), u32::MAX, query)?;
        let mut qc = Vec::with_capacity(dim);
        // The query's own scale is a positive common factor: it cannot change the order.
        quantize(&q, &mut qc);
        let n = self.len();
        let mut cands = Vec::new();
        int8_candidates(&qc, &self.codes, &self.scales, k.saturating_mul(self.rescore).max(MIN_CANDIDATES).min(n), &mut cands);
        let mut exact = TopK::new(k.min(n));
        let (ids, rows) = (self.exact.ids(), self.exact.rows());
        for c in cands {
            let i = c.id as usize;
            exact.push(Hit { id: ids[i], score: dot(&q, &rows[i * dim..(i + 1) * dim]) });
        }
        exact.into_sorted(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn matches_exact_search_on_random_vectors() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let dim = 48;
        let mut flat = FlatIndex::new(dim, Metric::Cosine);
        for id in 0..2000 {
            let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            flat.add(id, &v).unwrap();
        }
        let q8 = Int8Index::from_flat(flat.clone());
        let mut agree = 0;
        for _ in 0..50 {
            let q: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let a = flat.search(&q, 10).unwrap();
            let b = q8.search(&q, 10).unwrap();
            agree += b.iter().filter(|h| a.iter().any(|x| x.id == h.id)).count();
            // Scores are exact f32 scores.
            assert!(b.iter().all(|h| a.iter().all(|x| x.id != h.id || x.score == h.score)));
        }
        assert!(agree as f32 / 500.0 >= 0.98, "recall {agree}/500");
        let back = Int8Index::from_bytes(&q8.to_bytes()).unwrap();
        assert_eq!(back.as_flat(), q8.as_flat());
    }
}
