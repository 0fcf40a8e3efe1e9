//! Dequantization: GGML blocks to f32, the plain reference path.
//!
//! One function per block layout, written to read like ggml's reference C (`dequantize_row_*`)
//! so it can be checked line by line, and checked against llama.cpp's `gguf` Python package
//! through golden files (`scripts/golden/dequant.py`). The fast kernels, which take dot
//! products in the quantized format without dequantizing whole matrices, are tested against
//! this path.

use crate::gguf::GgmlType;
use crate::Error;

// IEEE half conversions (exact to f32; to f16 rounding to nearest even, as F16C's
// `vcvtps2ph` and ggml do) live in the core, which stores vectors as f16 too.
pub use docmem_core::f16::{f16_round, f16_to_f32, f32_to_f16};

/// The half float at byte `i` of `b`, through a 65,536-entry table (ggml's approach on
/// CPUs without a conversion instruction: the portable kernels convert two scales per
/// 32 values, and the bit manipulation of [`f16_to_f32`] cost more than the table load).
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| (0..=u16::MAX).map(f16_to_f32).collect());
    table[usize::from(u16::from_le_bytes([b[i], b[i + 1]]))]
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K/Q5_K super-block.
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    let (d, m) =
        if j < 4 { (q[j] & 63, q[j + 4] & 63) } else { ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)) };
    (d, m)
}

/// The eight 6-bit scales and the eight minimums of a Q4_K super-block (its 12 packed
/// bytes), unpacked four at a time in 32-bit words as llama.cpp does.
#[inline(always)]
pub(crate) fn scales_mins_k4(q: &[u8]) -> ([u8; 8], [u8; 8]) {
    const K1: u32 = 0x3f3f_3f3f;
    const K2: u32 = 0x0f0f_0f0f;
    const K3: u32 = 0x0303_0303;
    let word = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (u0, u1, u2) = (word(0), word(1), word(2));
    let scales = [u0 & K1, (u2 & K2) | (((u0 >> 6) & K3) << 4)];
    let mins = [u1 & K1, ((u2 >> 4) & K2) | (((u1 >> 6) & K3) << 4)];
    let bytes = |w: [u32; 2]| {
        let (a, b) = (w[0].to_le_bytes(), w[1].to_le_bytes());
        [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
    };
    (bytes(scales), bytes(mins))
}

/// Scales and minimums of the two 32-element halves of 64-element group `g` of a Q4_K or
/// Q5_K super-block.
fn pair_scales(g: usize, d: f32, dmin: f32, scales: &[u8]) -> (f32, f32, f32, f32) {
    let (sc1, m1) = scale_min_k4(2 * g, scales);
    let (sc2, m2) = scale_min_k4(2 * g + 1, scales);
    (d * f32::from(sc1), dmin * f32::from(m1), d * f32::from(sc2), dmin * f32::from(m2))
}

fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = f32::from((qs[j] & 0x0F) as i8 - 8) * d;
        y[j + 16] = f32::from((qs[j] >> 4) as i8 - 8) * d;
    }
}

fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = f32::from(qs[j] & 0x0F) * d + m;
        y[j + 16] = f32::from(qs[j] >> 4) * d + m;
    }
}

fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        y[j] = f32::from(((qs[j] & 0x0F) | xh0) as i8 - 16) * d;
        y[j + 16] = f32::from(((qs[j] >> 4) | xh1) as i8 - 16) * d;
    }
}

fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        y[j] = f32::from((qs[j] & 0x0F) | xh0) * d + m;
        y[j + 16] = f32::from((qs[j] >> 4) | xh1) * d + m;
    }
}

fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, &q) in b[2..34].iter().enumerate() {
        y[j] = f32::from(q as i8) * d;
    }
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (g, (q, out)) in qs.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (d1, min1, d2, min2) = pair_scales(g, d, dmin, scales);
        for l in 0..32 {
            out[l] = d1 * f32::from(q[l] & 0xF) - min1;
            out[l + 32] = d2 * f32::from(q[l] >> 4) - min2;
        }
    }
}

fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let ql = &b[48..176];
    for (g, (q, out)) in ql.chunks_exact(32).zip(y.chunks_exact_mut(64)).enumerate() {
        let (d1, min1, d2, min2) = pair_scales(g, d, dmin, scales);
        let (u1, u2) = (1u8 << (2 * g), 2u8 << (2 * g));
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            out[l] = d1 * f32::from((q[l] & 0xF) + h1) - min1;
            out[l + 32] = d2 * f32::from((q[l] >> 4) + h2) - min2;
        }
    }
}

fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 208);
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let out = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            out[l] = d * f32::from(sc[is] as i8) * f32::from(q1);
            out[l + 32] = d * f32::from(sc[is + 2] as i8) * f32::from(q2);
            out[l + 64] = d * f32::from(sc[is + 4] as i8) * f32::from(q3);
            out[l + 96] = d * f32::from(sc[is + 6] as i8) * f32::from(q4);
        }
    }
}

/// Dequantize whole blocks of `ggml_type` from `bytes`, appending the values to `out`.
pub fn dequantize(ggml_type: GgmlType, bytes: &[u8], out: &mut Vec<f32>) -> Result<(), Error> {
    let block = ggml_type.block_bytes() as usize;
    if !bytes.len().is_multiple_of(block) {
        return Err(Error::PartialBlock { ggml_type, bytes: bytes.len() });
    }
    let n = bytes.len() / block * ggml_type.block_elements() as usize;
    let start = out.len();
    out.resize(start + n, 0.0);
    let y = &mut out[start..];
    let per = ggml_type.block_elements() as usize;
    let f: fn(&[u8], &mut [f32]) = match ggml_type {
        GgmlType::F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => |b, y| y[0] = f16_at(b, 0),
        GgmlType::BF16 => |b, y| y[0] = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16),
        GgmlType::Q4_0 => q4_0,
        GgmlType::Q4_1 => q4_1,
        GgmlType::Q5_0 => q5_0,
        GgmlType::Q5_1 => q5_1,
        GgmlType::Q8_0 => q8_0,
        GgmlType::Q4K => q4_k,
        GgmlType::Q5K => q5_k,
        GgmlType::Q6K => q6_k,
    };
    for (b, y) in bytes.chunks_exact(block).zip(y.chunks_exact_mut(per)) {
        f(b, y);
    }
    Ok(())
}

/// Quantize `x` (a multiple of 32 long) to Q8_0 blocks, as ggml's reference
/// `quantize_row_q8_0_ref`: per block `d = amax / 127`, `q = round(x / d)`.
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    for block in x.chunks_exact(32) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend(block.iter().map(|&v| (v * id).round() as i8 as u8));
    }
}

/// Quantize `x` (a multiple of 32 long) to Q4_0 blocks, as ggml's reference
/// `quantize_row_q4_0_ref`: the value of largest magnitude maps to −8.
pub fn quantize_q4_0(x: &[f32], out: &mut Vec<u8>) {
    for block in x.chunks_exact(32) {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in block {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        let q = |v: f32| ((v * id + 8.5) as i8).clamp(0, 15) as u8;
        out.extend((0..16).map(|j| q(block[j]) | (q(block[j + 16]) << 4)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantizers_round_trip_within_their_step() {
        let x: Vec<f32> = (0..256).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        for (ty, quantize, step) in
            // Q8_0 rounds to half a step; Q4_0's positive side stops at +7 steps when the
            // block's largest magnitude is negative, so its error reaches a full step there.
            [(GgmlType::Q8_0, quantize_q8_0 as fn(&[f32], &mut Vec<u8>), 0.5 / 127.0), (GgmlType::Q4_0, quantize_q4_0, 1.0 / 8.0)]
        {
            let mut q = Vec::new();
            quantize(&x, &mut q);
            assert_eq!(q.len(), 256 / 32 * ty.block_bytes() as usize);
            let mut back = Vec::new();
            dequantize(ty, &q, &mut back).unwrap();
            for (block, got) in x.chunks(32).zip(back.chunks(32)) {
                let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (a, b) in block.iter().zip(got) {
                    assert!((a - b).abs() <= amax * step * 1.02 + 1e-3, "{ty}: {a} vs {b}");
                }
            }
        }
        // Ties round away from zero (C's roundf) in Q8_0; zero blocks stay zero.
        let mut q = Vec::new();
        quantize_q8_0(&[0.0; 32], &mut q);
        assert!(q.iter().all(|&b| b == 0));
    }

    #[test]
    fn half_floats() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8); // smallest subnormal
        assert_eq!(f16_to_f32(0x7BFF), 65504.0);
        assert!(f16_to_f32(0x7C00).is_infinite());
        assert!(f16_to_f32(0x7E00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
        // Positive finite halves in bit order map to strictly increasing floats (a wrong
        // exponent bias or subnormal shift breaks this), and subnormals step by 2^-24.
        for h in 1..0x7C00u16 {
            assert!(f16_to_f32(h) > f16_to_f32(h - 1), "{h:#06x}");
            if h < 0x400 {
                assert_eq!(f16_to_f32(h), f32::from(h) * 2f32.powi(-24));
            }
        }
    }

    #[test]
    fn half_rounding_round_trips_and_rounds_to_even() {
        for h in 0..=0xFFFFu16 {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x)).is_nan());
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x}");
            }
        }
        // 1 + 2^-11 is halfway between 1 and the next half: ties go to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3C00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3C02);
        assert_eq!(f32_to_f16(1e6), 0x7C00);
        assert_eq!(f32_to_f16(1e-9), 0);
    }

    #[test]
    fn partial_blocks_are_errors() {
        let mut out = Vec::new();
        assert!(matches!(
            dequantize(GgmlType::Q4_0, &[0; 19], &mut out),
            Err(Error::PartialBlock { ggml_type: GgmlType::Q4_0, bytes: 19 })
        ));
        assert!(out.is_empty());
    }
}
