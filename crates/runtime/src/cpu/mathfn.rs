//! `exp` and SiLU exactly as ggml's SIMD code computes them on x86 and ARM.
//!
//! Attention weights are rounded to half precision before `P·V` (llama.cpp's layout), so
//! a one-ulp difference in `exp` can flip a rounding and, through thirty layers, a token.
//! Using ggml's own polynomial (a Cody–Waite range reduction to `n · ln 2 + b`, then a
//! degree-5 polynomial for `e^b − 1`, from ARM's optimized-routines) makes our softmax and
//! SwiGLU bit-identical to llama.cpp's, not merely close. Every step is one IEEE operation
//! or fused multiply-add, so the scalar form here equals the vector forms (AVX2, and
//! wasm `simd128`, which emulates the fused multiply-adds) lane by lane.

// Unsafe code: AVX2 + FMA `exp` and SwiGLU: `#[target_feature]` functions called only after
// run-time feature detection (`has_fma`), with unaligned raw-pointer vector loads and
// stores; in wasm, `simd128` vector loads and stores, bounds checked first.
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
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::exp_shifted(v, sub);
    #[allow(unreachable_code)]
    v.iter_mut().for_each(|x| *x = expf(*x - sub));
}

/// `gate[i] = silu(gate[i]) · up[i]` (SwiGLU).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `avx2::swiglu` enables.
        return unsafe { avx2::swiglu(gate, up) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::swiglu(gate, up);
    #[allow(unreachable_code)]
    gate.iter_mut().zip(up).for_each(|(g, u)| *g = silu(*g) * u);
}

/// GELU (tanh approximation) as ggml's CPU code computes it in a gated feed-forward: from
/// a table of half-precision results indexed by the input rounded to half precision, built
/// with `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` in f32 (the inner `1 + a·x·x` fused,
/// as GCC contracts it in the reference build); inputs at or below −10 give 0 and at or
/// above 10 give themselves. The table costs 256 KB and one pass of 65,536 `tanh`s, once.
///
/// `tanh` is taken in f64 and rounded to f32, not from the platform's `tanhf`: glibc's
/// (what llama.cpp calls) and the wasm build's differ from each other and from the
/// correctly rounded value by an ulp here and there, and f64 gives the correctly rounded
/// one everywhere. Against glibc 2.36's `tanhf` it differs at 9,856 of the inputs but at
/// none of the table's half-precision entries (checked over all 65,536).
pub fn gelu_tanh_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        const COEF_A: f32 = 0.044_715;
        (0..=u16::MAX)
            .map(|h| {
                let x = crate::quant::f16_to_f32(h);
                let inner = SQRT_2_OVER_PI * x * (COEF_A * x).fmadd(x, 1.0);
                let tanh = (f64::from(inner)).tanh() as f32;
                crate::quant::f16_round(0.5 * x * (1.0 + tanh))
            })
            .collect()
    })
}

/// `gate[i] = gelu(gate[i]) · up[i]` (GeGLU), with ggml's table ([`gelu_tanh_table`]).
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    let table = gelu_tanh_table();
    gate.iter_mut().zip(up).for_each(|(g, &u)| {
        *g = if *g <= -10.0 {
            0.0
        } else if *g >= 10.0 {
            *g * u
        } else {
            table[usize::from(crate::quant::f32_to_f16(*g))] * u
        };
    });
}

/// The vector forms of [`exp_shifted`] and [`swiglu`] (AVX2, or wasm `simd128`) against
/// the scalar ones, bit for bit: the number of values compared, or the first that differs.
/// Run by the native tests and, in wasm, by [`super::check_kernels`] (the page's check of
/// a build before it uses it).
///
/// The inputs reach both fallbacks: exponents far below −87 and above 88 (`2^n` outside
/// its normal range), and gates whose `−g` does too; the lengths are not a multiple of the
/// vectors', and SwiGLU's `up` is shorter than its gate (the values past it stay as they
/// were).
pub fn check_vector_forms() -> Result<usize, String> {
    let xs: Vec<f32> = (0..21_003).map(|i| -110.0 + i as f32 * 0.01 + (i as f32 * 0.37).sin() * 1e-3).collect();
    let mut v = xs.clone();
    exp_shifted(&mut v, 3.25);
    for (x, got) in xs.iter().zip(&v) {
        let want = expf(x - 3.25);
        if got.to_bits() != want.to_bits() {
            return Err(format!("exp({x} - 3.25): vector {got:e}, scalar {want:e}"));
        }
    }
    let mut g: Vec<f32> = xs.iter().map(|x| x * 1.2 + 0.3).collect();
    let up: Vec<f32> = xs[..xs.len() - 3].iter().map(|x| (x * 0.1).cos()).collect();
    let mut want = g.clone();
    want.iter_mut().zip(&up).for_each(|(g, u)| *g = silu(*g) * u);
    swiglu(&mut g, &up);
    for (i, (a, b)) in g.iter().zip(&want).enumerate() {
        if a.to_bits() != b.to_bits() {
            return Err(format!("swiglu at {i} (gate {}): vector {a:e}, scalar {b:e}", xs[i] * 1.2 + 0.3));
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let fused = simd128::check_fmadd4()?;
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    let fused = 0;
    Ok(xs.len() + want.len() + fused)
}

/// [`expf`] four lanes at a time in wasm `simd128`, the same bits: wasm has no fused
/// multiply-add, so each of the polynomial's is done as [`super::fma::fma_by_f64`] does it,
/// two lanes per f64 vector (the product is exact in f64, the sum rounds once). The rare
/// vector where that needs its correction step (a sum exactly halfway between two f32
/// values) or where a lane falls outside the normal range of `2^n` takes the scalar path.
/// About a twentieth of a wasm prefill was the scalar `expf` of SwiGLU and the softmax.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use core::arch::wasm32::*;

    use super::super::fma::fma_by_f64;
    use super::{c, expf, silu};

    /// Whether any f64 lane of `sum` lies exactly halfway between two f32 values (the
    /// case `fma_by_f64` corrects).
    #[inline(always)]
    fn halfway(sum: v128) -> bool {
        let low = v128_and(sum, i64x2_splat(0x1fff_ffff));
        v128_any_true(i64x2_eq(low, i64x2_splat(0x1000_0000)))
    }

    /// `a·b + c` per lane, rounded once, or `None` where a lane needs the correction step.
    #[inline(always)]
    fn fmadd4(a: v128, b: v128, c: v128) -> Option<v128> {
        let high = |v: v128| f64x2_promote_low_f32x4(i32x4_shuffle::<2, 3, 0, 1>(v, v));
        let lo = f64x2_add(f64x2_mul(f64x2_promote_low_f32x4(a), f64x2_promote_low_f32x4(b)), f64x2_promote_low_f32x4(c));
        let hi = f64x2_add(f64x2_mul(high(a), high(b)), high(c));
        if halfway(lo) || halfway(hi) {
            return None;
        }
        Some(i32x4_shuffle::<0, 1, 4, 5>(f32x4_demote_f64x2_zero(lo), f32x4_demote_f64x2_zero(hi)))
    }

    /// [`fmadd4`] against [`fma_by_f64`] lane by lane on seeded triples, and refusing a sum
    /// that lands exactly halfway between two f32 values (`(1 + 2^-12)² − 2^-11` is
    /// `1 + 2^-24`, exact in f64): the number of cases.
    pub(super) fn check_fmadd4() -> Result<usize, String> {
        let (h, c) = (f32::from_bits(0x3f80_0800), f32::from_bits(0xba00_0000)); // 1 + 2^-12, −2^-11
        if fmadd4(f32x4_splat(h), f32x4_splat(h), f32x4_splat(c)).is_some() {
            return Err("fmadd4 kept a sum exactly halfway between two f32 values".into());
        }
        let mut seed = 0x9e37_79b9u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let scale = f32::from_bits((117 + (seed >> 28)) << 23); // 2^-10 .. 2^5
            (((seed >> 8) as f32 / (1u32 << 24) as f32) - 0.5) * scale
        };
        let mut cases = 1;
        for _ in 0..4096 {
            let (a, b, c): ([f32; 4], [f32; 4], [f32; 4]) =
                (core::array::from_fn(|_| next()), core::array::from_fn(|_| next()), core::array::from_fn(|_| next()));
            let Some(got) = fmadd4(lanes(a), lanes(b), lanes(c)) else { continue };
            let got: [f32; 4] =
                [f32x4_extract_lane::<0>(got), f32x4_extract_lane::<1>(got), f32x4_extract_lane::<2>(got), f32x4_extract_lane::<3>(got)];
            for k in 0..4 {
                let want = fma_by_f64(a[k], b[k], c[k]);
                if got[k].to_bits() != want.to_bits() {
                    return Err(format!("fmadd4({}, {}, {}): {:e}, fma_by_f64 {want:e}", a[k], b[k], c[k], got[k]));
                }
            }
            cases += 4;
        }
        Ok(cases)
    }

    #[inline(always)]
    fn lanes(v: [f32; 4]) -> v128 {
        f32x4(v[0], v[1], v[2], v[3])
    }

    /// [`expf`] of each lane, or `None` where a lane needs the scalar path.
    #[inline(always)]
    fn expf4(x: v128) -> Option<v128> {
        let set = |bits: u32| f32x4_splat(c(bits));
        let r = set(0x4b40_0000);
        let z = fmadd4(x, set(0x3fb8_aa3b), r)?;
        let n = f32x4_sub(z, r);
        let neg_n = f32x4_neg(n);
        let b = fmadd4(neg_n, set(0x35bf_be8e), fmadd4(neg_n, set(0x3f31_7200), x)?)?;
        let u = f32x4_mul(b, b);
        let a = fmadd4(set(0x3c07_2010), b, set(0x3d2b_9f17))?;
        let j = fmadd4(fmadd4(a, u, fmadd4(set(0x3e2a_af33), b, set(0x3eff_fedb))?)?, u, fmadd4(set(0x3f7f_fff6), b, f32x4_splat(1.0))?)?;
        // 2^n by its bits, for n in −126..=127 (n is an integer-valued float).
        if !i32x4_all_true(v128_and(f32x4_ge(n, f32x4_splat(-126.0)), f32x4_le(n, f32x4_splat(127.0)))) {
            return None;
        }
        let pow2 = i32x4_shl(i32x4_add(i32x4_trunc_sat_f32x4(n), i32x4_splat(127)), 23);
        Some(f32x4_mul(j, pow2))
    }

    #[inline(always)]
    fn load(s: &[f32]) -> v128 {
        assert!(s.len() >= 4);
        // SAFETY: 16 bytes are in bounds (checked); wasm loads need no alignment.
        unsafe { v128_load(s.as_ptr() as *const v128) }
    }

    #[inline(always)]
    fn store(s: &mut [f32], v: v128) {
        assert!(s.len() >= 4);
        // SAFETY: as in `load`.
        unsafe { v128_store(s.as_mut_ptr() as *mut v128, v) }
    }

    pub(super) fn exp_shifted(v: &mut [f32], sub: f32) {
        let s = f32x4_splat(sub);
        let mut chunks = v.chunks_exact_mut(4);
        for ch in &mut chunks {
            match expf4(f32x4_sub(load(ch), s)) {
                Some(e) => store(ch, e),
                None => ch.iter_mut().for_each(|x| *x = expf(*x - sub)),
            }
        }
        chunks.into_remainder().iter_mut().for_each(|x| *x = expf(*x - sub));
    }

    pub(super) fn swiglu(gate: &mut [f32], up: &[f32]) {
        let n = gate.len().min(up.len());
        let (gate, up) = (&mut gate[..n], &up[..n]);
        let mut chunks = gate.chunks_exact_mut(4).zip(up.chunks_exact(4));
        for (g, u) in &mut chunks {
            let gv = load(g);
            match expf4(f32x4_neg(gv)) {
                Some(e) => store(g, f32x4_mul(f32x4_div(gv, f32x4_add(f32x4_splat(1.0), e)), load(u))),
                None => g.iter_mut().zip(u).for_each(|(g, u)| *g = silu(*g) * u),
            }
        }
        let done = n - n % 4;
        gate[done..].iter_mut().zip(&up[done..]).for_each(|(g, u)| *g = silu(*g) * u);
    }
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
        assert!(check_vector_forms().unwrap() > 40_000);
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

    /// The table is GELU within one half-precision step of the exact tanh form; its ends
    /// and saturation as ggml's.
    #[test]
    fn geglu_reads_gelu_from_a_half_precision_table() {
        assert_eq!(0.797_884_6f32, (2.0 / std::f64::consts::PI).sqrt() as f32, "ggml's √(2/π), rounded to f32");
        let gelu = |x: f64| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * x * (1.0 + 0.044_715 * x * x)).tanh());
        let table = gelu_tanh_table();
        for x in [-9.5f32, -3.0, -1.0, -0.25, 0.0, 0.1, 0.5, 1.0, 2.5, 9.9] {
            let got = table[usize::from(crate::quant::f32_to_f16(x))];
            let want = gelu(f64::from(crate::quant::f16_round(x)));
            assert!((f64::from(got) - want).abs() <= want.abs() * 1e-3 + 1e-6, "gelu({x}): {got} vs {want}");
        }
        let mut gate = [-12.0f32, -10.0, 10.0, 11.0, 1.0];
        geglu(&mut gate, &[2.0; 5]);
        assert_eq!(gate[..4], [0.0, 0.0, 20.0, 22.0]);
        assert_eq!(gate[4], table[usize::from(crate::quant::f32_to_f16(1.0))] * 2.0);
    }

    /// The table built with f64's `tanh` equals one built with the C library's `tanhf`,
    /// what llama.cpp's table calls (glibc, where this runs on Linux): every entry.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn the_gelu_table_equals_one_built_with_the_c_librarys_tanhf() {
        let table = gelu_tanh_table();
        for h in 0..=u16::MAX {
            let x = crate::quant::f16_to_f32(h);
            let inner = 0.797_884_6f32 * x * (0.044_715f32 * x).fmadd(x, 1.0);
            let want = crate::quant::f16_round(0.5 * x * (1.0 + inner.tanh()));
            assert!(table[usize::from(h)].to_bits() == want.to_bits() || (want.is_nan() && table[usize::from(h)].is_nan()), "gelu({x})");
        }
    }
}
