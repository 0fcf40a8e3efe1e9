//! `a·b + c` rounded once (a fused multiply-add), inlined on every target; and `madd4`, the
//! four-lane multiply-add of wasm SIMD, which relaxed SIMD lets the engine fuse or not.
//!
//! Why: llama.cpp's kernels fuse their multiply-adds, and parity with it needs the same
//! single rounding. wasm has no fused multiply-add instruction, so `f32::mul_add` there is
//! a call into a software `fmaf`: in the attention's and the activations' loops those calls
//! were about a tenth of a wasm prefill. [`Fma::fmadd`] runs the same algorithm as that
//! `fmaf` (musl's, which the `libm` crate follows), inlined: the product of two f32 is exact
//! in f64, the sum is rounded once to f64, and a sum that lands exactly halfway between two
//! f32 values after an inexact rounding is moved one f64 step towards the exact value, so
//! that rounding to f32 goes the way a single rounding would. Natively it is `mul_add`
//! (one instruction where the CPU has FMA).

/// A fused multiply-add on `f32` (see the module docs).
pub(crate) trait Fma {
    /// `self · b + c`, rounded once.
    fn fmadd(self, b: f32, c: f32) -> f32;
}

impl Fma for f32 {
    #[inline(always)]
    fn fmadd(self, b: f32, c: f32) -> f32 {
        #[cfg(target_arch = "wasm32")]
        {
            fma_by_f64(self, b, c)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.mul_add(b, c)
        }
    }
}

/// `x · y + z` rounded once, through f64 (see the module docs).
#[inline(always)]
#[cfg_attr(not(any(target_arch = "wasm32", test)), allow(dead_code))]
pub(crate) fn fma_by_f64(x: f32, y: f32, z: f32) -> f32 {
    let (xy, z) = (f64::from(x) * f64::from(y), f64::from(z));
    let result = xy + z;
    let bits = result.to_bits();
    // The 29 bits f64 keeps beyond f32's precision: halfway is 1 followed by zeros.
    let halfway = bits & 0x1fff_ffff == 0x1000_0000;
    let nan_or_infinite = (bits >> 52) & 0x7ff == 0x7ff;
    if !halfway || nan_or_infinite || (result - xy == z && result - z == xy) {
        return result as f32;
    }
    // The sum's rounding error, exactly (the larger addend first), and a step towards it.
    let negative = bits >> 63 != 0;
    let err = if negative == (z > xy) { xy - result + z } else { z - result + xy };
    let bits = if negative == (err < 0.0) { bits + 1 } else { bits - 1 };
    f64::from_bits(bits) as f32
}

/// `a·b + c` in four lanes. With relaxed SIMD, `f32x4.relaxed_madd`: one fused
/// multiply-add where the engine's CPU has FMA (V8 on x86-64 with FMA3, arm64), which
/// halves the arithmetic of the loops that use it; rounded once or twice, as the engine
/// chooses (relaxed). Where the product is exact (two half-precision factors, as in the
/// attention's sums: `ggml_order`), both roundings give the same bits. Where it is not (the
/// encoder's f32 GEMM), the wasm results differ from the plain build's in the last bits,
/// as the native FMA kernel's do from the plain one's, and `gemm` pads a partial tile to
/// a full one so that every token goes through the same kernel. Without relaxed SIMD, a
/// multiply and an add.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[cfg_attr(not(feature = "relaxed-simd"), inline(always))]
#[cfg_attr(feature = "relaxed-simd", inline, target_feature(enable = "relaxed-simd"))]
pub(crate) fn madd4(a: core::arch::wasm32::v128, b: core::arch::wasm32::v128, c: core::arch::wasm32::v128) -> core::arch::wasm32::v128 {
    use core::arch::wasm32::*;
    #[cfg(feature = "relaxed-simd")]
    {
        f32x4_relaxed_madd(a, b, c)
    }
    #[cfg(not(feature = "relaxed-simd"))]
    {
        f32x4_add(c, f32x4_mul(a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the hardware's (or the platform library's) fused multiply-add: random
    /// normal values over a wide range of scales, products that nearly cancel the addend,
    /// and sums built to land halfway between two f32 values.
    #[test]
    fn rounds_once_as_mul_add_does() {
        let mut next = crate::cpu::isum::xorshift(0x9E37_79B9_7F4A_7C15);
        let mut random = |scale: i32| {
            let mantissa = (next() >> 41) as f32 / (1u64 << 23) as f32 + 1.0;
            let sign = if next() & 1 == 0 { 1.0 } else { -1.0 };
            sign * mantissa * 2f32.powi(scale)
        };
        let mut halfway_cases = 0;
        for i in 0..400_000 {
            let (x, y) = (random((i % 40) - 20), random((i % 17) - 8));
            let z = match i % 4 {
                0 => random((i % 60) - 30),
                // Nearly the negated product: heavy cancellation.
                1 => -(x * y) * (1.0 + random(-20)),
                // The product's f32 rounding error's neighbourhood.
                2 => -(x * y) + random(((x * y).abs().log2() as i32) - 24),
                _ => random(((x * y).abs().log2() as i32) - 12),
            };
            let bits = (f64::from(x) * f64::from(y) + f64::from(z)).to_bits();
            if bits & 0x1fff_ffff == 0x1000_0000 {
                halfway_cases += 1;
            }
            let (got, want) = (fma_by_f64(x, y, z), x.mul_add(y, z));
            assert_eq!(got.to_bits(), want.to_bits(), "fma({x:e}, {y:e}, {z:e}): {got:e} against {want:e}");
        }
        // Inputs made to be halfway: x·y exactly halfway between two f32, plus a tiny z.
        for i in 0..20_000 {
            let a = random(0);
            let b = 1.0 + (((i % 4096) + 1) as f32) * f32::EPSILON;
            let xy = f64::from(a) * f64::from(b);
            let halfway = f64::from_bits((xy.to_bits() & !0x1fff_ffff) | 0x1000_0000);
            // z makes the f64 sum round onto the halfway point from either side.
            for z in [(halfway - xy) as f32, ((halfway - xy) as f32) * (1.0 + f32::EPSILON), ((halfway - xy) as f32) * (1.0 - f32::EPSILON)]
            {
                if !z.is_normal() {
                    continue;
                }
                if (xy + f64::from(z)).to_bits() & 0x1fff_ffff == 0x1000_0000 {
                    halfway_cases += 1;
                }
                assert_eq!(fma_by_f64(a, b, z).to_bits(), a.mul_add(b, z).to_bits(), "fma({a:e}, {b:e}, {z:e})");
            }
        }
        assert!(halfway_cases > 1000, "only {halfway_cases} halfway cases were tried");
        assert!(fma_by_f64(f32::NAN, 1.0, 1.0).is_nan());
        assert_eq!(fma_by_f64(f32::INFINITY, 2.0, 1.0), f32::INFINITY);
        assert_eq!(fma_by_f64(f32::MAX, 2.0, 0.0), f32::INFINITY);
    }
}
