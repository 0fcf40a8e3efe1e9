//! Whole-row K-quant kernels for wasm `simd128`: one Q4_K or Q6_K weight row against one to
//! four activation rows (decode, and prefill's tokens four at a time).
//!
//! Why: once the integer products of a super-block cost about eight instructions per 32
//! values (`isum`), the work around them was as large: the f16 scales, the packed 6-bit
//! scales and minimums, the nibble and 6-bit unpacking, and Q4_K's minimum correction
//! (`Σ m_j · bsums`), done per token in scalar code. Here a super-block's weights and scales
//! are unpacked once for all the tokens of a call, and the minimum correction is a vector
//! product. The 1.5B reader is mostly Q4_K and Q6_K, so this is where its wasm time goes.
//!
//! Results are bit-identical to [`super::dot::dot_row_scalar`]: the integer sums are the
//! same exact integers, and each token's float expression is the scalar kernel's, in its
//! order (the wasm LM test compares greedy tokens with llama.cpp's; `cpu::check_kernels`
//! compares these kernels with the scalar ones on seeded rows). Activations shorter than
//! the row panic on a slice bound, as the scalar kernels do; nothing is read out of bounds.

use core::arch::wasm32::*;

use super::act::QuantizedRow;
use super::isum::simd::{dot16_small_i16, dot32_nibbles_i16, hsum, load, load_i8, q6k_weights16};
use crate::gguf::GgmlType;
use crate::quant::{f16_at, scales_mins_k4};

/// `row · q_t` for each of the `T` activation rows, for the types with a kernel here.
#[inline]
pub fn dot_tokens<const T: usize>(ty: GgmlType, row: &[u8], qs: [&QuantizedRow; T]) -> Option<[f32; T]> {
    match ty {
        GgmlType::Q4K => Some(q4k(row, qs)),
        GgmlType::Q6K => Some(q6k(row, qs)),
        _ => None,
    }
}

/// 8 signed 16-bit values (Q8_K block sums).
#[inline(always)]
#[allow(unsafe_code)] // one unaligned 16-byte load, bounds checked first
fn load_i16(s: &[i16]) -> v128 {
    assert!(s.len() >= 8);
    // SAFETY: 16 bytes are in bounds (checked); wasm loads need no alignment.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

#[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
fn q4k<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    let m4 = u8x16_splat(0x0F);
    let mut sum = [0f32; T];
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, m) = scales_mins_k4(&b[4..16]);
        // Sub-block j's 32 nibbles as two vectors of 16: the low nibbles of bytes 32·(j/2)..
        // for even j, the high ones for odd j.
        let mut w = [[u8x16_splat(0); 2]; 8];
        for g in 0..4 {
            let (lo, hi) = (load(&b[16 + 32 * g..32 + 32 * g]), load(&b[32 + 32 * g..48 + 32 * g]));
            w[2 * g] = [v128_and(lo, m4), v128_and(hi, m4)];
            w[2 * g + 1] = [u8x16_shr(lo, 4), u8x16_shr(hi, 4)];
        }
        // Scales and minimums as i16 (6 bits), multiplied in while the products widen
        // (`i32x4_dot_i16x8`); each minimum twice, for the two block sums it weighs.
        let scale: [v128; 8] = core::array::from_fn(|j| i16x8_splat(i16::from(sc[j])));
        let m16 = |j: usize| i16::from(m[j]);
        let mins = [
            i16x8(m16(0), m16(0), m16(1), m16(1), m16(2), m16(2), m16(3), m16(3)),
            i16x8(m16(4), m16(4), m16(5), m16(5), m16(6), m16(6), m16(7), m16(7)),
        ];
        for (t, q) in qs.iter().enumerate() {
            let y = &q.q8k[256 * i..256 * i + 256];
            let mut acc = i32x4_splat(0);
            for j in 0..8 {
                let p = dot32_nibbles_i16(w[j][0], load_i8(&y[32 * j..32 * j + 16]), w[j][1], load_i8(&y[32 * j + 16..32 * j + 32]));
                acc = i32x4_add(acc, i32x4_dot_i16x8(p, scale[j]));
            }
            let sumi = hsum(acc);
            // Σ_j m_j · (bsums[2j] + bsums[2j+1]) over the 16 block sums (each at most
            // 16 · 128 in size).
            let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
            let summ = hsum(i32x4_add(i32x4_dot_i16x8(load_i16(&bsums[..8]), mins[0]), i32x4_dot_i16x8(load_i16(&bsums[8..]), mins[1])));
            sum[t] += q.q8k_d[i] * (d * sumi as f32 - dmin * summ as f32);
        }
    }
    sum
}

/// Q6_K with the relaxed-SIMD dot product, which needs weights in 0..=127: the stored
/// 6-bit values (0..=63) are multiplied as they are, and the `-32` of each weight comes back
/// as `32 · Σ_v scale_v · Σ y_v`, from the activations' sums per 16 values (Q8_K keeps
/// them). Same exact integers as [`q6k`].
#[cfg(feature = "relaxed-simd")]
#[target_feature(enable = "relaxed-simd")]
fn q6k_relaxed<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    use super::isum::simd::q6k_weights16_offset;
    let zero = i32x4_splat(0);
    let mut sum = [0f32; T];
    for (i, b) in row.chunks_exact(210).enumerate() {
        let d = f16_at(b, 208);
        // Vector (half, g, k) holds values 128·half + 16·g + 32·k + 0..16; their scale, and
        // which of the 16 activation sums covers them.
        let mut w = [u8x16_splat(0); 16];
        let mut scale = [i16x8_splat(0); 16];
        let mut sc16 = [0i32; 16];
        for half in 0..2 {
            let (ql, qh, sc) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..160 + 32 * half], &b[192 + 8 * half..200 + 8 * half]);
            for g in 0..2 {
                for (k, qv) in q6k_weights16_offset(ql, qh, 16 * g, 0).into_iter().enumerate() {
                    let s = i32::from(sc[g + 2 * k] as i8);
                    w[8 * half + 4 * g + k] = qv;
                    scale[8 * half + 4 * g + k] = i16x8_splat(s as i16);
                    sc16[8 * half + g + 2 * k] = s;
                }
            }
        }
        for (t, q) in qs.iter().enumerate() {
            let y = &q.q8k[256 * i..256 * i + 256];
            let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
            let mut acc = zero;
            for half in 0..2 {
                for g in 0..2 {
                    for k in 0..4 {
                        let v = 8 * half + 4 * g + k;
                        let at = 128 * half + 16 * g + 32 * k;
                        // Weights in 0..=63: pairs of products within an i16, exactly.
                        let p = i16x8_relaxed_dot_i8x16_i7x16(load_i8(&y[at..at + 16]), w[v]);
                        acc = i32x4_add(acc, i32x4_dot_i16x8(p, scale[v]));
                    }
                }
            }
            let offset: i32 = sc16.iter().zip(bsums).map(|(&s, &b)| s * i32::from(b)).sum();
            sum[t] += q.q8k_d[i] * d * (hsum(acc) - 32 * offset) as f32;
        }
    }
    sum
}

fn q6k<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    #[cfg(feature = "relaxed-simd")]
    return q6k_relaxed(row, qs);
    #[cfg(not(feature = "relaxed-simd"))]
    q6k_extmul(row, qs)
}

#[cfg_attr(feature = "relaxed-simd", allow(dead_code))]
fn q6k_extmul<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    let mut sum = [0f32; T];
    for (i, b) in row.chunks_exact(210).enumerate() {
        let d = f16_at(b, 208);
        // 16 vectors of 16 six-bit weights (minus 32) with their scales; vector (half,
        // g, k) holds values 128·half + 16·g + 32·k + 0..16.
        let mut w = [u8x16_splat(0); 16];
        let mut scale = [i16x8_splat(0); 16];
        for half in 0..2 {
            let (ql, qh, sc) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..160 + 32 * half], &b[192 + 8 * half..200 + 8 * half]);
            for g in 0..2 {
                for (k, qv) in q6k_weights16(ql, qh, 16 * g).into_iter().enumerate() {
                    w[8 * half + 4 * g + k] = qv;
                    scale[8 * half + 4 * g + k] = i16x8_splat(i16::from(sc[g + 2 * k] as i8));
                }
            }
        }
        for (t, q) in qs.iter().enumerate() {
            let y = &q.q8k[256 * i..256 * i + 256];
            let mut acc = i32x4_splat(0);
            for half in 0..2 {
                for g in 0..2 {
                    for k in 0..4 {
                        let v = 8 * half + 4 * g + k;
                        let at = 128 * half + 16 * g + 32 * k;
                        acc = i32x4_add(acc, i32x4_dot_i16x8(dot16_small_i16(w[v], load_i8(&y[at..at + 16])), scale[v]));
                    }
                }
            }
            sum[t] += q.q8k_d[i] * d * hsum(acc) as f32;
        }
    }
    sum
}

/// These kernels against the scalar ones, bit for bit, on seeded rows of three
/// super-blocks (sane f16 scales, every other byte random) and activations, one token and
/// four: the number of comparisons, or an error naming the type, the token and both values.
pub fn check() -> Result<usize, String> {
    let mut next = super::isum::xorshift(0x2545_F491_4F6C_DD1D);
    let mut compared = 0;
    for round in 0..8 {
        let acts: Vec<QuantizedRow> = (0..4)
            .map(|_| {
                let x: Vec<f32> = (0..768).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
                let mut q = QuantizedRow::default();
                q.quantize_q8k(&x);
                q
            })
            .collect();
        for (ty, bytes, f16_fields) in [(GgmlType::Q4K, 144, &[0usize, 2][..]), (GgmlType::Q6K, 210, &[208][..])] {
            let mut row: Vec<u8> = (0..3 * bytes).map(|_| next() as u8).collect();
            for block in row.chunks_exact_mut(bytes) {
                for &at in f16_fields {
                    // A scale between 2^-10 and 2^-7 with a random mantissa (never NaN or infinite).
                    let half = 0x1400u16 + (next() % 0x0C00) as u16 + if round % 2 == 0 { 0 } else { 0x8000 };
                    block[at..at + 2].copy_from_slice(&half.to_le_bytes());
                }
            }
            let one = dot_tokens(ty, &row, [&acts[0]]).map(|v| v[0]);
            let four = dot_tokens(ty, &row, [&acts[0], &acts[1], &acts[2], &acts[3]]);
            for t in 0..4 {
                let want = super::dot::dot_row_scalar(ty, &row, &[], &acts[t]);
                let got = if t == 0 { vec![one, four.map(|v| v[0])] } else { vec![four.map(|v| v[t])] };
                for g in got {
                    if g.map(f32::to_bits) != Some(want.to_bits()) {
                        return Err(format!("simd128 {ty} row kernel, token {t}: {g:?}, the scalar kernel gives {want}"));
                    }
                    compared += 1;
                }
            }
        }
    }
    Ok(compared)
}
