//! Sums in the order ggml's SIMD kernels add them, for the attention path.
//!
//! Attention weights are rounded to half precision before `P·V`, and a weight that sits
//! near a rounding tie flips with the last bit of its score. So our attention adds in
//! ggml's order, not just to its precision (512-bit vectors, the build our golden files
//! come from). ggml has two orders for half-precision products:
//! - one token (decode): `ggml_vec_dot_f16` keeps 4 × 16 lanes, adds the four
//!   accumulators pairwise, then folds the 16 lanes as a tree ([`Order::VecDot`]);
//! - a batch (prefill): llamafile's tiled GEMM keeps one 16-lane accumulator per output,
//!   a fused multiply-add chain, folded by the same tree ([`Order::Tiled`]).
//!
//! The softmax sums each 16 exponentials by the tree into an f64. Every step is one
//! rounding, so any machine reproduces it exactly.

// Unsafe code: the AVX2 + FMA copies of the dot product and the `P·V` update
// (`#[target_feature]` functions called only after run-time feature detection, with
// raw-pointer vector loads and stores).
#![allow(unsafe_code)]

use super::fma::Fma;

/// Lanes per vector and vectors per step of ggml's 512-bit half-precision dot product.
pub const LANES: usize = 16;

/// Fold 16 lanes as `_mm512_reduce_add_ps` does: halves, then quarters, then pairs.
#[inline]
pub fn reduce16(a: &[f32; LANES]) -> f32 {
    let mut t3 = [0f32; 8];
    for i in 0..8 {
        t3[i] = a[8 + i] + a[i];
    }
    let mut t6 = [0f32; 4];
    for i in 0..4 {
        t6[i] = t3[4 + i] + t3[i];
    }
    (t6[0] + t6[2]) + (t6[1] + t6[3])
}

/// Which of ggml's summation orders to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `ggml_vec_dot_f16`: four 16-lane accumulators (one-token matmuls).
    VecDot,
    /// llamafile's tiled GEMM: one 16-lane accumulator (matmuls over two or more tokens).
    Tiled,
}

impl Order {
    /// The order ggml uses for a matmul over `tokens` query rows.
    pub fn for_tokens(tokens: usize) -> Self {
        if tokens >= 2 {
            Order::Tiled
        } else {
            Order::VecDot
        }
    }
}

/// `x · y` for half-rounded vectors in ggml's `order` (lengths a multiple of 16; for
/// [`Order::VecDot`] a tail past a multiple of 64 is added in f64, as ggml does). Inlined
/// into its callers so it compiles with their FMA target features.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // the indices spell out ggml's lane layout
pub fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
    let hd = x.len();
    match order {
        Order::Tiled => {
            let mut acc = [0f32; LANES];
            for c in 0..hd / LANES {
                for l in 0..LANES {
                    acc[l] = x[c * LANES + l].fmadd(y[c * LANES + l], acc[l]);
                }
            }
            reduce16(&acc)
        }
        Order::VecDot => {
            let mut acc = [[0f32; LANES]; 4];
            let np = hd - hd % (4 * LANES);
            for s in (0..np).step_by(4 * LANES) {
                for (j, a) in acc.iter_mut().enumerate() {
                    for l in 0..LANES {
                        let i = s + j * LANES + l;
                        a[l] = x[i].fmadd(y[i], a[l]);
                    }
                }
            }
            let [a0, a1, a2, a3] = acc;
            let folded: [f32; LANES] = std::array::from_fn(|l| (a0[l] + a2[l]) + (a1[l] + a3[l]));
            let mut sum = f64::from(reduce16(&folded));
            for i in np..hd {
                sum += f64::from(x[i] * y[i]);
            }
            sum as f32
        }
    }
}

/// [`dot_f16`] and the `P·V` update in AVX2 + FMA: each 16-lane accumulator is two 8-lane
/// registers doing the same per-lane fused multiply-adds, so the results are bit-identical.
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use super::{reduce16, Order, LANES};
    use std::arch::x86_64::*;

    /// Two 8-lane halves of a 16-lane vector to an array.
    ///
    /// # Safety
    /// The CPU must have AVX (the stores go to a local array).
    #[inline(always)]
    unsafe fn lanes(lo: __m256, hi: __m256) -> [f32; LANES] {
        let mut a = [0f32; LANES];
        _mm256_storeu_ps(a.as_mut_ptr(), lo);
        _mm256_storeu_ps(a.as_mut_ptr().add(8), hi);
        a
    }

    /// [`super::dot_f16`], vectorized.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (`has_fma`). The lengths are not a safety condition:
    /// a `y` shorter than `x` panics.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
        let hd = x.len();
        assert!(y.len() >= hd, "dot_f16 lengths");
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let fma8 = |i: usize, acc: __m256| _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(i)), _mm256_loadu_ps(yp.add(i)), acc);
        match order {
            Order::Tiled => {
                let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for c in 0..hd / LANES {
                    lo = fma8(c * LANES, lo);
                    hi = fma8(c * LANES + 8, hi);
                }
                reduce16(&lanes(lo, hi))
            }
            Order::VecDot => {
                let mut acc = [_mm256_setzero_ps(); 8];
                let np = hd - hd % (4 * LANES);
                for s in (0..np).step_by(4 * LANES) {
                    for (k, a) in acc.iter_mut().enumerate() {
                        *a = fma8(s + 8 * k, *a);
                    }
                }
                let fold = |k: usize| _mm256_add_ps(_mm256_add_ps(acc[k], acc[k + 4]), _mm256_add_ps(acc[k + 2], acc[k + 6]));
                let mut sum = f64::from(reduce16(&lanes(fold(0), fold(1))));
                for i in np..hd {
                    sum += f64::from(x[i] * y[i]);
                }
                sum as f32
            }
        }
    }

    /// `y[i] = a·x[i] + y[i]`, fused, for every `i < y.len()`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (`has_fma`). The lengths are not a safety condition:
    /// an `x` shorter than `y` panics.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        let n = y.len();
        assert!(x.len() >= n, "axpy lengths");
        let av = _mm256_set1_ps(a);
        let mut i = 0;
        while i + 8 <= n {
            let r = _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr().add(i)), _mm256_loadu_ps(y.as_ptr().add(i)));
            _mm256_storeu_ps(y.as_mut_ptr().add(i), r);
            i += 8;
        }
        for i in i..n {
            y[i] = a.mul_add(x[i], y[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_plain_sums_closely() {
        let x: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
        let y: Vec<f32> = (0..128).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        for order in [Order::VecDot, Order::Tiled] {
            assert!((f64::from(dot_f16(&x, &y, order)) - plain).abs() < 1e-5);
        }
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_fma() {
            for n in [64, 80, 128] {
                let (x, y) = (&x[..n], &y[..n]);
                for order in [Order::VecDot, Order::Tiled] {
                    // SAFETY: `has_fma()` (checked above) found AVX2 and FMA.
                    let fast = unsafe { avx2::dot_f16(x, y, order) };
                    assert_eq!(fast.to_bits(), dot_f16(x, y, order).to_bits(), "n={n} {order:?}");
                }
                let mut a: Vec<f32> = y.to_vec();
                let mut b = a.clone();
                // SAFETY: as above: AVX2 and FMA are present.
                unsafe { avx2::axpy(0.3, x, &mut a) };
                b.iter_mut().zip(x).for_each(|(b, x)| *b = 0.3f32.mul_add(*x, *b));
                assert_eq!(a, b);
            }
        }
        let mut lanes = [0f32; 16];
        lanes.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
        assert_eq!(reduce16(&lanes), 120.0);
    }
}
