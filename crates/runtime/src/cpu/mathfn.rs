//! `exp` and SiLU exactly as ggml's SIMD code computes them on x86 and ARM.
//!
//! Attention weights are rounded to half precision before `P·V` (llama.cpp's layout), so
//! a one-ulp difference in `exp` can flip a rounding and, through thirty layers, a token.
//! Using ggml's own polynomial (a Cody–Waite range reduction to `n · ln 2 + b`, then a
//! degree-5 polynomial for `e^b − 1`, from ARM's optimized-routines) makes our softmax and
//! SwiGLU bit-identical to llama.cpp's, not merely close. Every step is one IEEE operation
//! or fused multiply-add, so the scalar form here equals the vector form lane by lane.

// Unsafe code: AVX2 + FMA `exp` and SwiGLU: `#[target_feature]` functions called only after
// run-time feature detection (`has_fma`), with unaligned raw-pointer vector loads and
// stores.
#![allow(unsafe_code)]

use super::fma::Fma;

#[inline(always)]
fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// `e^x` as ggml's 512-bit `ggml_v_expf` (the build our golden files come from; its
/// 256-bit twin adds the final 1 in a different step, one rounding apart). Relative error
/// about 1.5 ulp; 0 far below -87, ∞ far above 88.
#[inline]
pub fn expf(x: f32) -> f32 {
    let r = c(0x4b40_0000); // 1.5 · 2^23: adding it rounds to an integer
    let z = x.fmadd(c(0x3fb8_aa3b), r); // x · log2(e) + r
    let n = z - r;
    // b = x − n · ln 2, with ln 2 split in two for accuracy.
    let b = (-n).fmadd(c(0x35bf_be8e), (-n).fmadd(c(0x3f31_7200), x));
    let u = b * b;
    let j =
        c(0x3c07_2010).fmadd(b, c(0x3d2b_9f17)).fmadd(u, c(0x3e2a_af33).fmadd(b, c(0x3eff_fedb))).fmadd(u, c(0x3f7f_fff6).fmadd(b, 1.0));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    scale_by_pow2(j, n as i32)
}

/// `j · 2^n`, rounded once, as `_mm512_scalef_ps` (|n| ≤ 192, j in [0.5, 2]).
#[inline]
fn scale_by_pow2(j: f32, n: i32) -> f32 {
    if (-126..=127).contains(&n) {
        return j * f32::from_bits(((n + 127) as u32) << 23);
    }
    if n > 127 {
        // Overflows to infinity whatever the split.
        return j * f32::from_bits(254 << 23) * f32::from_bits(((n - 127 + 127).min(254) as u32) << 23);
    }
    // Subnormal results: scale exactly by 2^-126 first, then by the rest (one rounding).
    let rest = n + 126; // in -66..0
    let m = j * f32::from_bits((((rest + 127).max(1)) as u32) << 23);
    m * f32::from_bits(1 << 23)
}

/// `x · sigmoid(x)` as ggml's `ggml_v_silu`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + expf(-x))
}

/// `v[i] = expf(v[i] − sub)` for every element (the softmax's exponentials).
pub fn exp_shifted(v: &mut [f32], sub: f32) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `avx2::exp_shifted` enables.
        return unsafe { avx2::exp_shifted(v, sub) };
    }
    v.iter_mut().for_each(|x| *x = expf(*x - sub));
}

/// `gate[i] = silu(gate[i]) · up[i]` (SwiGLU).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `avx2::swiglu` enables.
        return unsafe { avx2::swiglu(gate, up) };
    }
    gate.iter_mut().zip(up).for_each(|(g, u)| *g = silu(*g) * u);
}

/// [`expf`] eight lanes at a time: the same operations, so the same bits. Vectors with a
/// lane outside the normal range of `2^n` take the scalar path.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{c, expf, silu};

    /// `expf` of each lane, or `None` where a lane needs [`super::scale_by_pow2`]'s
    /// special cases (results outside the normal range).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA (it is inlined into the `#[target_feature]` functions
    /// below, which enable them).
    #[inline(always)]
    unsafe fn expf8(x: __m256) -> Option<__m256> {
        let set = |bits: u32| _mm256_set1_ps(c(bits));
        let r = set(0x4b40_0000);
        let z = _mm256_fmadd_ps(x, set(0x3fb8_aa3b), r);
        let n = _mm256_sub_ps(z, r);
        let neg_n = _mm256_sub_ps(_mm256_setzero_ps(), n);
        let b = _mm256_fmadd_ps(neg_n, set(0x35bf_be8e), _mm256_fmadd_ps(neg_n, set(0x3f31_7200), x));
        let u = _mm256_mul_ps(b, b);
        let a = _mm256_fmadd_ps(set(0x3c07_2010), b, set(0x3d2b_9f17));
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(a, u, _mm256_fmadd_ps(set(0x3e2a_af33), b, set(0x3eff_fedb))),
            u,
            _mm256_fmadd_ps(set(0x3f7f_fff6), b, _mm256_set1_ps(1.0)),
        );
        // 2^n by its bits, for n in −126..=127 (n is an integer-valued float).
        let inside =
            _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(-126.0), _CMP_GE_OQ), _mm256_cmp_ps(n, _mm256_set1_ps(127.0), _CMP_LE_OQ));
        if _mm256_movemask_ps(inside) != 0xFF {
            return None;
        }
        let pow2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
        Some(_mm256_mul_ps(j, pow2))
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`has_fma`); the loads and stores stay inside `v`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_shifted(v: &mut [f32], sub: f32) {
        let s = _mm256_set1_ps(sub);
        let mut chunks = v.chunks_exact_mut(8);
        for ch in &mut chunks {
            let x = _mm256_sub_ps(_mm256_loadu_ps(ch.as_ptr()), s);
            match expf8(x) {
                Some(e) => _mm256_storeu_ps(ch.as_mut_ptr(), e),
                None => ch.iter_mut().for_each(|x| *x = expf(*x - sub)),
            }
        }
        chunks.into_remainder().iter_mut().for_each(|x| *x = expf(*x - sub));
    }

    /// # Safety
    /// The CPU must have AVX2 and FMA (`has_fma`); the loads and stores stay inside the
    /// first `min(gate.len(), up.len())` values of each slice.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn swiglu(gate: &mut [f32], up: &[f32]) {
        let n = gate.len().min(up.len());
        let mut i = 0;
        while i + 8 <= n {
            let g = _mm256_loadu_ps(gate.as_ptr().add(i));
            let e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
            match e {
                Some(e) => {
                    let silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0), e));
                    _mm256_storeu_ps(gate.as_mut_ptr().add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(up.as_ptr().add(i))));
                }
                None => (i..i + 8).for_each(|k| gate[k] = silu(gate[k]) * up[k]),
            }
            i += 8;
        }
        (i..n).for_each(|k| gate[k] = silu(gate[k]) * up[k]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_forms_equal_the_scalar_ones_bit_for_bit() {
        let xs: Vec<f32> = (0..20_000).map(|i| -110.0 + i as f32 * 0.01 + (i as f32 * 0.37).sin() * 1e-3).collect();
        let mut v = xs.clone();
        exp_shifted(&mut v, 3.25);
        for (x, got) in xs.iter().zip(&v) {
            assert_eq!(got.to_bits(), expf(x - 3.25).to_bits(), "exp({x} - 3.25)");
        }
        let up: Vec<f32> = xs.iter().map(|x| (x * 0.1).cos()).collect();
        let mut g: Vec<f32> = xs.iter().map(|x| x * 0.5 + 7.0).collect();
        let want: Vec<f32> = g.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
        swiglu(&mut g, &up);
        for (i, (a, b)) in g.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "swiglu at {i}");
        }
    }

    #[test]
    fn close_to_libm_everywhere() {
        let mut x = -103.0f32;
        while x < 88.0 {
            let (got, want) = (expf(x), x.exp());
            // Subnormal results keep fewer bits: compare those absolutely.
            assert!((got - want).abs() <= (want * 4e-7).max(1e-44), "{x}: {got} vs {want}");
            x += 0.0137;
        }
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(-200.0), 0.0);
        assert!(expf(100.0).is_infinite());
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
    }
}
