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
//!
//! ggml fuses the products' multiply-adds, but both factors are half-precision values (the
//! query and the cached keys and values are rounded to half precision, and so is each
//! attention weight), and the product of two of them is exact in f32 ([`half_product_add`]).
//! So a plain multiply and add gives the fused result bit for bit: the portable loops need
//! no emulated fusion where there is no fused multiply-add instruction, and the wasm SIMD
//! loops ([`simd128`]) may fuse or not, as relaxed SIMD lets an engine choose.

// Unsafe code: the AVX2 + FMA copies of the dot product and the `P·V` update
// (`#[target_feature]` functions called only after run-time feature detection, with
// raw-pointer vector loads and stores), and the wasm copies' vector loads and stores.
#![allow(unsafe_code)]

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

/// `x · y + acc` where `x` and `y` are half-precision values (values that
/// `quant::f16_round` leaves unchanged): rounded once, as a fused multiply-add rounds it.
/// Each factor has at most 11 significant bits, so the product has at most 22 and, between
/// 2^-48 and 65504², lies inside f32's normal range: it is exact, and the only rounding is
/// the sum's. (A zero, infinity or NaN factor gives what the fused form gives.)
#[inline(always)]
pub fn half_product_add(x: f32, y: f32, acc: f32) -> f32 {
    x * y + acc
}

/// `x · y` for half-rounded vectors in ggml's `order` (lengths a multiple of 16; for
/// [`Order::VecDot`] a tail past a multiple of 64 is added in f64, as ggml does; `y` at
/// least as long as `x`). The multiply-adds are [`half_product_add`]: ggml's fused ones,
/// bit for bit, for such inputs.
#[inline(always)]
pub fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
    let hd = x.len();
    let y = &y[..hd];
    match order {
        Order::Tiled => {
            let mut acc = [0f32; LANES];
            for (xc, yc) in x.chunks_exact(LANES).zip(y.chunks_exact(LANES)) {
                for l in 0..LANES {
                    acc[l] = half_product_add(xc[l], yc[l], acc[l]);
                }
            }
            reduce16(&acc)
        }
        Order::VecDot => {
            let mut acc = [[0f32; LANES]; 4];
            let np = hd - hd % (4 * LANES);
            for (xs, ys) in x[..np].chunks_exact(4 * LANES).zip(y[..np].chunks_exact(4 * LANES)) {
                for (j, a) in acc.iter_mut().enumerate() {
                    for l in 0..LANES {
                        a[l] = half_product_add(xs[j * LANES + l], ys[j * LANES + l], a[l]);
                    }
                }
            }
            fold_vec_dot(acc, &x[np..], &y[np..])
        }
    }
}

/// The end of [`Order::VecDot`]: the four 16-lane accumulators added pairwise, folded by
/// the tree, and the products of the tail past a multiple of 64 (`x`, `y`) added in f64.
#[inline(always)]
fn fold_vec_dot([a0, a1, a2, a3]: [[f32; LANES]; 4], x: &[f32], y: &[f32]) -> f32 {
    let folded: [f32; LANES] = std::array::from_fn(|l| (a0[l] + a2[l]) + (a1[l] + a3[l]));
    let mut sum = f64::from(reduce16(&folded));
    for (x, y) in x.iter().zip(y) {
        sum += f64::from(x * y);
    }
    sum as f32
}

/// `y[i] = a·x[i] + y[i]` for every `i < y.len()`, for half-precision `a` and `x`
/// ([`half_product_add`]: the fused result, bit for bit).
#[inline(always)]
pub fn axpy_f16(a: f32, x: &[f32], y: &mut [f32]) {
    let x = &x[..y.len()];
    for (y, &x) in y.iter_mut().zip(x) {
        *y = half_product_add(a, x, *y);
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

/// [`dot_f16`] and the `P·V` update in wasm SIMD: each 16-lane accumulator is four
/// 4-lane vectors doing the same per-lane multiply-adds, so the results are bit-identical.
/// The multiply-add is `fma::madd4`: fused in the relaxed-SIMD build where the engine
/// fuses, which for half-precision factors is the same bits ([`half_product_add`]). Written
/// out because the portable loops, vectorized by the compiler, multiplied and added apart
/// even where relaxed SIMD offers the fused instruction.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod simd128 {
    use super::{reduce16, Order, LANES};
    use crate::cpu::fma::madd4;
    use core::arch::wasm32::*;

    /// Four vectors to a 16-lane array.
    #[inline(always)]
    fn lanes(v: [v128; 4]) -> [f32; LANES] {
        let mut a = [0f32; LANES];
        for (k, v) in v.into_iter().enumerate() {
            a[4 * k] = f32x4_extract_lane::<0>(v);
            a[4 * k + 1] = f32x4_extract_lane::<1>(v);
            a[4 * k + 2] = f32x4_extract_lane::<2>(v);
            a[4 * k + 3] = f32x4_extract_lane::<3>(v);
        }
        a
    }

    /// Four f32 at `s[i..i + 4]`.
    #[inline(always)]
    fn load4(s: &[f32], i: usize) -> v128 {
        assert!(i + 4 <= s.len());
        // SAFETY: 16 bytes are in bounds (checked); wasm loads need no alignment.
        unsafe { v128_load(s.as_ptr().add(i) as *const v128) }
    }

    /// [`super::dot_f16`], vectorized. A `y` shorter than `x` panics.
    #[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
    pub fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
        let hd = x.len();
        let y = &y[..hd];
        match order {
            Order::Tiled => {
                let mut acc = [f32x4_splat(0.0); 4];
                for c in 0..hd / LANES {
                    for (k, a) in acc.iter_mut().enumerate() {
                        let i = c * LANES + 4 * k;
                        *a = madd4(load4(x, i), load4(y, i), *a);
                    }
                }
                reduce16(&lanes(acc))
            }
            Order::VecDot => {
                let mut acc = [[f32x4_splat(0.0); 4]; 4];
                let np = hd - hd % (4 * LANES);
                for s in (0..np).step_by(4 * LANES) {
                    for (j, a) in acc.iter_mut().enumerate() {
                        for (k, a) in a.iter_mut().enumerate() {
                            let i = s + j * LANES + 4 * k;
                            *a = madd4(load4(x, i), load4(y, i), *a);
                        }
                    }
                }
                let fold: [v128; 4] = core::array::from_fn(|k| f32x4_add(f32x4_add(acc[0][k], acc[2][k]), f32x4_add(acc[1][k], acc[3][k])));
                let mut sum = f64::from(reduce16(&lanes(fold)));
                for i in np..hd {
                    sum += f64::from(x[i] * y[i]);
                }
                sum as f32
            }
        }
    }

    /// `y[i] = a·x[i] + y[i]` for every `i < y.len()`, for half-precision `a` and `x`. An
    /// `x` shorter than `y` panics.
    #[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
    pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        let n = y.len();
        let x = &x[..n];
        let av = f32x4_splat(a);
        let mut i = 0;
        while i + 4 <= n {
            let r = madd4(av, load4(x, i), load4(y, i));
            // SAFETY: i + 4 ≤ n = y.len() (the loop condition).
            unsafe { v128_store(y.as_mut_ptr().add(i) as *mut v128, r) };
            i += 4;
        }
        for i in i..n {
            y[i] = super::half_product_add(a, x[i], y[i]);
        }
    }

    /// [`dot_f16`] (both orders) and [`axpy`] against the portable loops, bit for bit, on
    /// seeded half-precision vectors of lengths with and without a tail past a multiple of
    /// 64 (`VecDot`'s): the number of
    /// comparisons, or an error naming the kernel, the length and both values.
    pub fn check() -> Result<usize, String> {
        let mut next = crate::cpu::isum::xorshift(0x6A09_E667_F3BC_C908);
        let mut half = move || crate::quant::f16_round((next() % 20_001) as f32 / 1000.0 - 10.0);
        let mut compared = 0;
        for n in [16, 64, 80, 128, 144, 208] {
            let (x, y): (Vec<f32>, Vec<f32>) = ((0..n).map(|_| half()).collect(), (0..n).map(|_| half()).collect());
            for order in [Order::Tiled, Order::VecDot] {
                // Tiled takes whole 16-lane steps only.
                let m = if order == Order::Tiled { n - n % LANES } else { n };
                let (got, want) = (dot_f16(&x[..m], &y, order), super::dot_f16(&x[..m], &y, order));
                if got.to_bits() != want.to_bits() {
                    return Err(format!("wasm dot_f16 {order:?}, length {m}: {got:e}, the portable loop gives {want:e}"));
                }
                compared += 1;
            }
            let a = half();
            let (mut got, mut want) = (y.clone(), y.clone());
            axpy(a, &x, &mut got);
            super::axpy_f16(a, &x, &mut want);
            if let Some(i) = (0..n).find(|&i| got[i].to_bits() != want[i].to_bits()) {
                return Err(format!("wasm axpy, length {n}, value {i}: {:e}, the portable loop gives {:e}", got[i], want[i]));
            }
            compared += n;
        }
        Ok(compared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16_round;

    /// Half-rounded test vectors: what the attention passes (its query, keys, values and
    /// weights are all rounded to half precision).
    fn halves(n: usize, f: impl Fn(f32) -> f32) -> Vec<f32> {
        (0..n).map(|i| f16_round(f(i as f32))).collect()
    }

    /// The fused reference: `dot_f16` written with `mul_add` (ggml's fused multiply-adds).
    fn dot_fused(x: &[f32], y: &[f32], order: Order) -> f32 {
        let hd = x.len();
        match order {
            Order::Tiled => {
                let mut acc = [0f32; LANES];
                for i in 0..hd / LANES * LANES {
                    acc[i % LANES] = x[i].mul_add(y[i], acc[i % LANES]);
                }
                reduce16(&acc)
            }
            Order::VecDot => {
                let mut acc = [[0f32; LANES]; 4];
                let np = hd - hd % (4 * LANES);
                for i in 0..np {
                    let a = &mut acc[(i % (4 * LANES)) / LANES][i % LANES];
                    *a = x[i].mul_add(y[i], *a);
                }
                fold_vec_dot(acc, &x[np..], &y[np..])
            }
        }
    }

    #[test]
    fn a_half_precision_product_added_rounds_as_the_fused_one() {
        let mut next = crate::cpu::isum::xorshift(0x2545_F491_4F6C_DD1D);
        // Every finite half value is reachable: random bit patterns, NaNs and infinities
        // skipped; the addend any f32 of a comparable or far smaller or larger size.
        let mut half = || loop {
            let v = crate::quant::f16_to_f32(next() as u16);
            if v.is_finite() {
                return v;
            }
        };
        let mut tried = 0;
        for _ in 0..200_000 {
            let (x, y) = (half(), half());
            for acc in [0.0, x * y * -1.000_001, f16_round(x) * 3.5e-3, 1e30, -7.25e-41] {
                assert_eq!(half_product_add(x, y, acc).to_bits(), x.mul_add(y, acc).to_bits(), "{x:e}·{y:e} + {acc:e}");
                tried += 1;
            }
        }
        assert_eq!(tried, 1_000_000);
    }

    #[test]
    fn dot_and_axpy_equal_their_fused_forms() {
        let x = halves(208, |i| (i * 0.37).sin() * 9.0);
        let y = halves(208, |i| (i * 0.11).cos() / 3.0);
        for n in [64, 80, 128, 208] {
            let (x, y) = (&x[..n], &y[..n]);
            for order in [Order::VecDot, Order::Tiled] {
                let plain: f64 = x.iter().zip(y).take(n / LANES * LANES).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                let dot = dot_f16(x, y, order);
                if order == Order::VecDot {
                    assert!((f64::from(dot) - plain).abs() < 1e-4, "n={n}");
                }
                assert_eq!(dot.to_bits(), dot_fused(x, y, order).to_bits(), "n={n} {order:?}");
                #[cfg(target_arch = "x86_64")]
                if crate::cpu::has_fma() {
                    // SAFETY: `has_fma()` (checked above) found AVX2 and FMA.
                    let fast = unsafe { avx2::dot_f16(x, y, order) };
                    assert_eq!(fast.to_bits(), dot.to_bits(), "n={n} {order:?}");
                }
            }
            let a = f16_round(0.3);
            let mut portable = y.to_vec();
            axpy_f16(a, x, &mut portable);
            let fused: Vec<f32> = y.iter().zip(x).map(|(y, x)| a.mul_add(*x, *y)).collect();
            assert_eq!(portable, fused);
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::has_fma() {
                let mut fast = y.to_vec();
                // SAFETY: as above: AVX2 and FMA are present.
                unsafe { avx2::axpy(a, x, &mut fast) };
                assert_eq!(fast, fused);
            }
        }
        let mut lanes = [0f32; 16];
        lanes.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
        assert_eq!(reduce16(&lanes), 120.0);
    }
}
