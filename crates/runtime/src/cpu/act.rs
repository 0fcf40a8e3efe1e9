//! Activations quantized to 8 bits, so weight × activation dot products run on integers.
//!
//! llama.cpp quantizes the f32 input of every quantized matmul first; we do the same, in
//! the same two formats and with the same rounding, so our logits follow its numerics:
//! - **Q8 (32-element blocks)** for the 32-block weight types: scale `d = amax / 127`
//!   stored as a half, values `round_even(x · 127 / amax)`, and the block's `d · Σq` (as a
//!   half), which Q4_1/Q5_1's minimum term needs.
//! - **Q8_K (256-element blocks)** for the K-quants: an f32 scale from the signed value of
//!   largest magnitude (`d = max / -127`), values `nearest(x / d)` capped at 127, and the
//!   sum of every 16 values.

use crate::quant::f16_round;

/// One activation row in both 8-bit formats (each filled only when a weight needs it).
#[derive(Clone, Debug, Default)]
pub struct QuantizedRow {
    /// Number of f32 values quantized.
    pub len: usize,
    /// Q8 values (32-blocks).
    pub q8: Vec<i8>,
    /// Q8 block scales (half-rounded).
    pub q8_d: Vec<f32>,
    /// Q8 block `d · Σq` (half-rounded).
    pub q8_s: Vec<f32>,
    /// Q8_K values.
    pub q8k: Vec<i8>,
    /// Q8_K super-block scales.
    pub q8k_d: Vec<f32>,
    /// Q8_K sums of each 16 values.
    pub q8k_bsums: Vec<i16>,
}

/// Which 8-bit format a weight type's dot product takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActFormat {
    /// 32-element blocks.
    Q8,
    /// 256-element super-blocks.
    Q8K,
    /// Plain f32 (float weights).
    F32,
}

impl QuantizedRow {
    /// Quantize `x` into the 32-block format (`x.len()` a multiple of 32).
    pub fn quantize_q8(&mut self, x: &[f32]) {
        debug_assert!(x.len().is_multiple_of(32));
        self.len = x.len();
        let nb = x.len() / 32;
        self.q8.resize(x.len(), 0);
        self.q8_d.resize(nb, 0.0);
        self.q8_s.resize(nb, 0.0);
        for (b, (xs, qs)) in x.chunks_exact(32).zip(self.q8.chunks_exact_mut(32)).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qs.iter_mut().zip(xs) {
                // The clamp matters only when `amax` is so small that `id` is infinite
                // (activations below about 4e-37: a fuzz finding); otherwise |v·id| ≤ 127.
                let r = nearest_int(v * id).clamp(-127, 127);
                *q = r as i8;
                sum += r;
            }
            self.q8_d[b] = f16_round(d);
            self.q8_s[b] = f16_round(d * sum as f32);
        }
    }

    /// Quantize `x` into the 256-block format (`x.len()` a multiple of 256).
    pub fn quantize_q8k(&mut self, x: &[f32]) {
        debug_assert!(x.len().is_multiple_of(256));
        self.len = x.len();
        let nb = x.len() / 256;
        self.q8k.resize(x.len(), 0);
        self.q8k_d.resize(nb, 0.0);
        self.q8k_bsums.resize(nb * 16, 0);
        for (b, (xs, qs)) in x.chunks_exact(256).zip(self.q8k.chunks_exact_mut(256)).enumerate() {
            let (mut amax, mut max) = (0f32, 0f32);
            for &v in xs {
                if v.abs() > amax {
                    amax = v.abs();
                    max = v;
                }
            }
            if amax == 0.0 {
                qs.fill(0);
                self.q8k_d[b] = 0.0;
                self.q8k_bsums[b * 16..b * 16 + 16].fill(0);
                continue;
            }
            let iscale = -127.0 / max;
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = nearest_int(iscale * v).min(127) as i8;
            }
            for (j, s) in self.q8k_bsums[b * 16..b * 16 + 16].iter_mut().enumerate() {
                *s = qs[j * 16..j * 16 + 16].iter().map(|&q| i16::from(q)).sum();
            }
            self.q8k_d[b] = 1.0 / iscale;
        }
    }
}

/// Round to nearest, ties to even, as ggml's `nearest_int`: adding 1.5·2^23 leaves the
/// integer in the low mantissa bits (exact for |v| < 2^22; activations here are ≤ 127).
/// Two float additions, where `round_ties_even` is a library call on baseline x86_64.
#[inline]
fn nearest_int(v: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    ((v + MAGIC) - MAGIC) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_reconstructs_within_half_a_step() {
        let x: Vec<f32> = (0..64).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.173).collect();
        let mut q = QuantizedRow::default();
        q.quantize_q8(&x);
        for (i, &v) in x.iter().enumerate() {
            let d = q.q8_d[i / 32];
            assert!((f32::from(q.q8[i]) * d - v).abs() <= d * 0.51 + 1e-3, "{i}");
        }
        let s0: i32 = q.q8[..32].iter().map(|&v| i32::from(v)).sum();
        assert!((q.q8_s[0] - q.q8_d[0] * s0 as f32).abs() < 1e-2);
    }

    #[test]
    fn q8k_uses_the_signed_extreme_and_block_sums() {
        let mut x = vec![0.5f32; 256];
        x[7] = -2.0;
        let mut q = QuantizedRow::default();
        q.quantize_q8k(&x);
        // The extreme is negative, so the scale is positive and it maps to -127.
        assert_eq!(q.q8k[7], -127);
        assert!(q.q8k_d[0] > 0.0);
        assert!((f32::from(q.q8k[0]) * q.q8k_d[0] - 0.5).abs() < 0.01);
        let s: i16 = q.q8k[..16].iter().map(|&v| i16::from(v)).sum();
        assert_eq!(q.q8k_bsums[0], s);
        let zeros = vec![0f32; 256];
        q.quantize_q8k(&zeros);
        assert_eq!(q.q8k_d[0], 0.0);
    }
}
