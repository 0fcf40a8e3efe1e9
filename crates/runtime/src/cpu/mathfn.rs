//! `exp` and SiLU exactly as ggml's SIMD code computes them on x86 and ARM.
//!
//! Attention weights are rounded to half precision before `P·V` (llama.cpp's layout), so
//! a one-ulp difference in `exp` can flip a rounding and, through thirty layers, a token.
//! Using ggml's own polynomial (a Cody–Waite range reduction to `n · ln 2 + b`, then a
//! degree-5 polynomial for `e^b − 1`, from ARM's optimized-routines) makes our softmax and
//! SwiGLU bit-identical to llama.cpp's, not merely close. Every step is one IEEE operation
//! or fused multiply-add, so the scalar form here equals the vector form lane by lane.

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
    let z = x.mul_add(c(0x3fb8_aa3b), r); // x · log2(e) + r
    let n = z - r;
    // b = x − n · ln 2, with ln 2 split in two for accuracy.
    let b = (-n).mul_add(c(0x35bf_be8e), (-n).mul_add(c(0x3f31_7200), x));
    let u = b * b;
    let j = c(0x3c07_2010)
        .mul_add(b, c(0x3d2b_9f17))
        .mul_add(u, c(0x3e2a_af33).mul_add(b, c(0x3eff_fedb)))
        .mul_add(u, c(0x3f7f_fff6).mul_add(b, 1.0));
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

#[cfg(test)]
mod tests {
    use super::*;

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
