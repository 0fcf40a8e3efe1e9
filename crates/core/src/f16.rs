//! IEEE 754 half precision (f16): vectors a library stores at half the bytes of f32, and
//! the runtime's f16 weights, scales and KV cache (ggml rounds to nearest even, as here).
//!
//! Why our own and not the `half` crate: `half` needs `zerocopy` with its derive macros,
//! which put `syn` and two proc-macro crates into this crate's no_std build (its step in
//! `npm test` went from 21 s to 70 s), for two functions of a few lines. They are checked
//! against `half` in the tests: every one of the 65,536 f16 values, and f32 values across
//! every exponent with the rounding cases (ties to even, subnormals, overflow).

/// The f16 nearest to `x` (ties to even), as its bits; beyond f16's range, ±infinity.
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        // Infinity stays infinity; a NaN stays a (quiet) NaN.
        return sign | 0x7c00 | if man != 0 { 0x0200 | (man >> 13) as u16 } else { 0 };
    }
    // The exponent in f16's bias.
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // A subnormal f16 (or zero): the full significand shifted into 10 bits.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let kept = m >> shift;
        let rest = m & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let up = rest > halfway || (rest == halfway && kept & 1 == 1);
        return sign | (kept + u32::from(up)) as u16;
    }
    let kept = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    // Rounding up may carry into the exponent: still the right value (or infinity).
    let up = rest > 0x1000 || (rest == 0x1000 && kept & 1 == 1);
    sign | (kept + u32::from(up)) as u16
}

/// The f32 value of f16 bits `h` (exact: every f16 is an f32).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let negative = h & 0x8000 != 0;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let magnitude = match exp {
        // Zero and subnormals: man × 2^-24, exact in f32.
        0 => man as f32 * (1.0 / 16_777_216.0),
        0x1f => f32::from_bits(0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(((exp + 112) << 23) | (man << 13)),
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// `x` rounded to the nearest f16 value.
#[inline]
pub fn f16_round(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_f16_value_reads_as_half_reads_it() {
        for h in 0..=u16::MAX {
            let ours = f16_to_f32(h);
            let theirs = half::f16::from_bits(h).to_f32();
            assert!(ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()), "{h:#06x}: {ours} against {theirs}");
        }
    }

    #[test]
    fn f32_values_round_as_half_rounds_them() {
        // Every exponent, with the low significand bits that decide rounding walked
        // through (and a spread of high bits), both signs.
        for exp in 0u32..=255 {
            for low in 0u32..0x4000 {
                for high in [0u32, 0x1, 0x155, 0x2aa, 0x3ff] {
                    let man = (high << 13) | low;
                    for sign in [0u32, 0x8000_0000] {
                        let x = f32::from_bits(sign | (exp << 23) | man);
                        if x.is_nan() {
                            assert!(f16_to_f32(f32_to_f16(x)).is_nan());
                            continue;
                        }
                        assert_eq!(f32_to_f16(x), half::f16::from_f32(x).to_bits(), "{x:e} ({:#010x})", x.to_bits());
                    }
                }
            }
        }
        assert_eq!(f16_round(1.0e6), f32::INFINITY);
        assert_eq!(f16_round(-0.5), -0.5);
        // Halfway between f16's largest finite value and the next power of two: to even.
        assert_eq!(f16_round(65520.0), f32::INFINITY);
    }
}
