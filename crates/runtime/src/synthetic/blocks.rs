//! Random tensor data in GGML's block formats: random bytes for the quantized values,
//! and each block's scales overwritten with finite positive f16 values chosen so the
//! weights' standard deviation is about the one asked for.

use crate::gguf::GgmlType;
use crate::quant::f32_to_f16;

/// SplitMix64: a tiny, fast generator (seeded, so a synthetic model is the same bytes
/// on every machine); gigabytes of weights take about a second.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

fn put_f16(out: &mut [u8], at: usize, v: f32) {
    out[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
}

/// A scale within ±25% of `base`, so blocks differ.
fn jitter(rng: &mut Rng, base: f32) -> f32 {
    base * (0.75 + 0.5 * rng.unit())
}

/// Fill `out` (whole blocks of `ty`) with weights of standard deviation about `std`.
pub(super) fn fill(ty: GgmlType, out: &mut [u8], std: f32, rng: &mut Rng) {
    match ty {
        // Uniform with the asked standard deviation (sqrt(12)/2 = 1.732).
        GgmlType::F32 => fill_f32_around(out, 0.0, std, rng),
        GgmlType::F16 => {
            for v in out.chunks_exact_mut(2) {
                let x = (rng.unit() * 2.0 - 1.0) * 1.732 * std;
                v.copy_from_slice(&f32_to_f16(x).to_le_bytes());
            }
        }
        _ => {
            rng.fill(out);
            let block = ty.block_bytes() as usize;
            for b in out.chunks_exact_mut(block) {
                scales(ty, b, std, rng);
            }
        }
    }
}

/// Fill `out` (f32 values) with `centre` plus noise of standard deviation `std`: norm
/// weights about 1, biases about 0.
pub(super) fn fill_f32_around(out: &mut [u8], centre: f32, std: f32, rng: &mut Rng) {
    for v in out.chunks_exact_mut(4) {
        let x = centre + (rng.unit() * 2.0 - 1.0) * 1.732 * std;
        v.copy_from_slice(&x.to_le_bytes());
    }
}

/// Overwrite one block's scales (and anything whose random bytes would be invalid).
fn scales(ty: GgmlType, b: &mut [u8], std: f32, rng: &mut Rng) {
    match ty {
        // d · q, q an i8: llama.cpp writes -127..=127, so -128 is moved to -127.
        // Uniform bytes have a standard deviation of about 73.
        GgmlType::Q8_0 => {
            put_f16(b, 0, jitter(rng, std / 73.0));
            for q in &mut b[2..] {
                if *q == 0x80 {
                    *q = 0x81;
                }
            }
        }
        // d · q + m, q in 0..16 (standard deviation 4.6, mean 7.5): m centres the block.
        GgmlType::Q4_1 => {
            let d = jitter(rng, std / 4.6);
            put_f16(b, 0, d);
            put_f16(b, 2, -7.5 * d);
        }
        GgmlType::Q4_0 => put_f16(b, 0, jitter(rng, std / 4.6)),
        // d · sc · q − dmin · m per 32 values, sc and m 6-bit (random bytes are valid):
        // sc averages 31.5, so d · 31.5 · 4.6 ≈ std; dmin = 7.5 · d centres on average.
        GgmlType::Q4K => {
            let d = jitter(rng, std / (31.5 * 4.6));
            put_f16(b, 0, d);
            put_f16(b, 2, 7.5 * d);
        }
        // As Q4_K with 5-bit q (standard deviation 9.2, mean 15.5).
        GgmlType::Q5K => {
            let d = jitter(rng, std / (31.5 * 9.2));
            put_f16(b, 0, d);
            put_f16(b, 2, 15.5 * d);
        }
        // d · sc · (q − 32), sc an i8 (|sc| averages 64), q 6-bit (standard deviation 18.5).
        GgmlType::Q6K => put_f16(b, 208, jitter(rng, std / (64.0 * 18.5))),
        // d · q with 5-bit q (Q5_0: standard deviation 9.2), d and m for Q5_1.
        GgmlType::Q5_0 => put_f16(b, 0, jitter(rng, std / 9.2)),
        GgmlType::Q5_1 => {
            let d = jitter(rng, std / 9.2);
            put_f16(b, 0, d);
            put_f16(b, 2, -15.5 * d);
        }
        // Float types are filled as values, not blocks (`fill`).
        _ => {}
    }
}
