//! Dot products of one quantized weight row with one quantized activation row.
//!
//! [`dot_row`] picks the kernel for the weight type: AVX2 when the CPU has it (checked
//! once, at run time), otherwise the portable scalar kernel here, which is also the
//! reference the SIMD kernels are tested against. Integer sums run per block exactly as
//! llama.cpp's kernels do; only the order of the final f32 additions differs.

use super::act::{ActFormat, QuantizedRow};
use super::isum;
use crate::gguf::GgmlType;
use crate::quant::{f16_at, scale_min_k4, scales_mins_k4};

/// The activation format a weight type's dot product needs.
pub fn act_format(ty: GgmlType) -> ActFormat {
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => ActFormat::F32,
        GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => ActFormat::Q8K,
        _ => ActFormat::Q8,
    }
}

/// The size class of a matmul's batch, where llama.cpp picks a different kernel (and so a
/// different float summation order) by it: `Large` is eight tokens or more, which ggml
/// sends through its tiled K-quant matmul.
///
/// `Decode` is ours: the rows are the next tokens of independent sequences (multi-path
/// decoding), and each is summed in the one-token order whatever the batch's size, so a
/// sequence's logits are bit-identical to decoding it alone. The weights are still read
/// once for the whole batch, which is where batching's speed comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    /// Fewer than eight tokens (decode, short prompts).
    Small,
    /// Eight tokens or more.
    Large,
    /// Any number of rows, each in the one-token order.
    Decode,
}

impl Batch {
    /// The class of a batch of `tokens`.
    pub fn of(tokens: usize) -> Self {
        if tokens >= 8 {
            Batch::Large
        } else {
            Batch::Small
        }
    }
}

/// `row · x` for one weight row in `ty`'s block format; `q` holds `x` quantized in
/// [`act_format`]`(ty)`; `batch` is the size class of the matmul it belongs to.
///
/// Panics (the portable kernel's bounds checks) when `x` or `q` holds fewer activations
/// than `row` has weights; the SIMD kernels run only where `q` is long enough, so a short
/// `q` is never read past its end.
#[inline]
pub fn dot_row(ty: GgmlType, row: &[u8], x: &[f32], q: &QuantizedRow, batch: Batch) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::avx2::available() {
        if let Some(v) = super::avx2::dot_row(ty, row, q, batch) {
            return v;
        }
    }
    let _ = batch;
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if let Some([v]) = super::simd128::dot_tokens(ty, row, [q]) {
        return v;
    }
    dot_row_scalar(ty, row, x, q)
}

/// Four weight rows against one activation row (decode), bit-identical to four
/// [`dot_row`] calls, where the CPU and the type have such a kernel; `None` otherwise.
#[inline]
pub fn dot_4rows(ty: GgmlType, rows: [&[u8]; 4], q: &QuantizedRow) -> Option<[f32; 4]> {
    #[cfg(target_arch = "x86_64")]
    if super::avx2::available() {
        return super::avx2::dot_4rows(ty, rows, q);
    }
    let _ = (ty, rows, q);
    None
}

/// One weight row against four activation rows (prefill), bit-identical to four
/// [`dot_row`] calls, where the CPU and the type have such a kernel; `None` otherwise.
#[inline]
pub fn dot_4tokens(ty: GgmlType, row: &[u8], qs: [&QuantizedRow; 4], batch: Batch) -> Option<[f32; 4]> {
    #[cfg(target_arch = "x86_64")]
    if super::avx2::available() {
        return super::avx2::dot_4tokens(ty, row, qs, batch);
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        let _ = batch;
        super::simd128::dot_tokens(ty, row, qs)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let _ = (ty, row, qs, batch);
        None
    }
}

/// One weight row against eight activation rows (prefill on wasm: what a kernel does once
/// per super-block for all its tokens, the scales and minimums, the sums' last steps, is
/// shared by twice as many), bit-identical to eight [`dot_row`] calls, where the CPU and
/// the type have such a kernel; `None` otherwise.
#[inline]
pub fn dot_8tokens(ty: GgmlType, row: &[u8], qs: [&QuantizedRow; 8]) -> Option<[f32; 8]> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        super::simd128::dot_tokens(ty, row, qs)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let _ = (ty, row, qs);
        None
    }
}

/// The portable reference kernels.
pub fn dot_row_scalar(ty: GgmlType, row: &[u8], x: &[f32], q: &QuantizedRow) -> f32 {
    match ty {
        GgmlType::F32 => row.chunks_exact(4).zip(x).map(|(b, &v)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * v).sum(),
        GgmlType::F16 => row.chunks_exact(2).enumerate().map(|(i, _)| f16_at(row, 2 * i) * x[i]).sum(),
        GgmlType::BF16 => {
            row.chunks_exact(2).zip(x).map(|(b, &v)| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16) * v).sum()
        }
        GgmlType::Q4_0 => blocks32(row, 18, q, |b, y| (f16_at(b, 0), isum::nibble_block(&b[2..18], y, 8), 0.0)),
        #[cfg(target_arch = "x86_64")]
        GgmlType::Q4_1 => {
            ggml_lane_order(row, 20, q, |b, j| i32::from(if j < 16 { b[4 + j] & 0xF } else { b[4 + j - 16] >> 4 }), |b| f16_at(b, 2))
        }
        #[cfg(target_arch = "x86_64")]
        GgmlType::Q5_0 => ggml_lane_order(row, 22, q, |b, j| q5_value(b, 2, j) - 16, |_| 0.0),
        #[cfg(target_arch = "x86_64")]
        GgmlType::Q5_1 => ggml_lane_order(row, 24, q, |b, j| q5_value(b, 4, j), |b| f16_at(b, 2)),
        #[cfg(not(target_arch = "x86_64"))]
        GgmlType::Q4_1 => blocks32(row, 20, q, |b, y| (f16_at(b, 0), isum::nibble_block(&b[4..20], y, 0), f16_at(b, 2))),
        #[cfg(not(target_arch = "x86_64"))]
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (bytes, off, bias) = if ty == GgmlType::Q5_0 { (22, 2, 16) } else { (24, 4, 0) };
            blocks32(row, bytes, q, move |b, y| {
                let s: i32 = (0..32).map(|j| (q5_value(b, off, j) - bias) * i32::from(y[j])).sum();
                (f16_at(b, 0), s, if bias == 0 { f16_at(b, 2) } else { 0.0 })
            })
        }
        GgmlType::Q8_0 => blocks32(row, 34, q, |b, y| (f16_at(b, 0), isum::q8_block(&b[2..34], y), 0.0)),
        GgmlType::Q4K => q4k_scalar(row, q),
        GgmlType::Q5K => q5k_scalar(row, q),
        GgmlType::Q6K => q6k_scalar(row, q),
    }
}

/// A 32-value block format · Q8 in the float order of ggml's x86 kernels (the ones
/// `avx2::q4_1`, `avx2::q5_0` and `avx2::q5_1` follow): eight lanes, lane `l` the integer
/// sum of elements `4l..4l+4`, each block's scale times it fused into the lane, the lanes
/// folded as `hsum` folds them, and the minimum terms (`min`, 0 for Q5_0) summed apart.
/// `value(block, j)` is element `j`'s integer. On a CPU without AVX2 this keeps the
/// portable path on the same bits as the others: in a small model one rounding apart in a
/// matmul flips a half-precision attention weight somewhere, and greedy output then
/// diverges within a few tokens. (Without hardware FMA, `mul_add` is a software fused
/// multiply-add: exact, slower.)
#[cfg(target_arch = "x86_64")]
fn ggml_lane_order(
    row: &[u8],
    block_bytes: usize,
    q: &QuantizedRow,
    value: impl Fn(&[u8], usize) -> i32,
    min: impl Fn(&[u8]) -> f32,
) -> f32 {
    let mut acc = [0f32; 8];
    let mut mins = 0f32;
    for (i, b) in row.chunks_exact(block_bytes).enumerate() {
        let y = &q.q8[32 * i..32 * i + 32];
        let dd = f16_at(b, 0) * q.q8_d[i];
        for (l, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * l..4 * l + 4).map(|j| value(b, j) * i32::from(y[j])).sum();
            *lane = dd.mul_add(s as f32, *lane);
        }
        mins += min(b) * q.q8_s[i];
    }
    let s4 = [acc[0] + acc[4], acc[1] + acc[5], acc[2] + acc[6], acc[3] + acc[7]];
    ((s4[0] + s4[2]) + (s4[1] + s4[3])) + mins
}

/// Element `j` of a Q5 block whose high bits start at byte `off` (the nibbles 4 bytes on).
fn q5_value(b: &[u8], off: usize, j: usize) -> i32 {
    let qh = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
    let nibble = if j < 16 { b[off + 4 + j] & 0xF } else { b[off + 4 + j - 16] >> 4 };
    i32::from(nibble) | (((qh >> j) & 1) as i32) << 4
}

/// Sum over 32-element blocks of `d_w · d_a · Σ w·a + m_w · s_a` (the minimum term only
/// for Q4_1/Q5_1, where `s_a = d_a · Σ a`).
#[inline]
fn blocks32(row: &[u8], block_bytes: usize, q: &QuantizedRow, f: impl Fn(&[u8], &[i8]) -> (f32, i32, f32)) -> f32 {
    let mut sum = 0f32;
    for (i, b) in row.chunks_exact(block_bytes).enumerate() {
        let (d, s, m) = f(b, &q.q8[32 * i..32 * i + 32]);
        sum += d * q.q8_d[i] * s as f32 + m * q.q8_s[i];
    }
    sum
}

fn q4k_scalar(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut sum = 0f32;
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, m) = scales_mins_k4(&b[4..16]);
        let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
        let sumi = isum::q4k_block(&b[16..144], &sc, &q.q8k[256 * i..256 * i + 256]);
        let summ: i32 = (0..8).map(|j| i32::from(m[j]) * (i32::from(bsums[2 * j]) + i32::from(bsums[2 * j + 1]))).sum();
        sum += q.q8k_d[i] * (d * sumi as f32 - dmin * summ as f32);
    }
    sum
}

fn q5k_scalar(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut sum = 0f32;
    for (i, b) in row.chunks_exact(176).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let scales = &b[4..16];
        let qh = &b[16..48];
        let y = &q.q8k[256 * i..256 * i + 256];
        let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
        let (mut sumi, mut summ) = (0i32, 0i32);
        for g in 0..4 {
            let ql = &b[48 + 32 * g..80 + 32 * g];
            for half in 0..2 {
                let j = 2 * g + half;
                let (sc, m) = scale_min_k4(j, scales);
                let bit = 1u8 << j;
                let yy = &y[32 * j..32 * j + 32];
                let s: i32 = (0..32)
                    .map(|l| {
                        let lo = if half == 0 { ql[l] & 0xF } else { ql[l] >> 4 };
                        let v = i32::from(lo) + if qh[l] & bit != 0 { 16 } else { 0 };
                        v * i32::from(yy[l])
                    })
                    .sum();
                sumi += i32::from(sc) * s;
                summ += i32::from(m) * (i32::from(bsums[2 * j]) + i32::from(bsums[2 * j + 1]));
            }
        }
        sum += q.q8k_d[i] * (d * sumi as f32 - dmin * summ as f32);
    }
    sum
}

fn q6k_scalar(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut sum = 0f32;
    for (i, b) in row.chunks_exact(210).enumerate() {
        let d = f16_at(b, 208);
        let y = &q.q8k[256 * i..256 * i + 256];
        let mut sumi = 0i32;
        for half in 0..2 {
            let (ql, qh) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..160 + 32 * half]);
            sumi += isum::q6k_half(ql, qh, &b[192 + 8 * half..200 + 8 * half], &y[128 * half..128 * half + 128]);
        }
        sum += q.q8k_d[i] * d * sumi as f32;
    }
    sum
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::quant::dequantize;

    pub(crate) use crate::testdata::{activations, weight_row};

    pub(crate) const TYPES: [GgmlType; 11] = GgmlType::ALL;

    pub(crate) fn quantized(x: &[f32], ty: GgmlType) -> QuantizedRow {
        let mut q = QuantizedRow::default();
        match act_format(ty) {
            ActFormat::Q8 => q.quantize_q8(x),
            ActFormat::Q8K => q.quantize_q8k(x),
            ActFormat::F32 => {}
        }
        q
    }

    /// Each scalar kernel agrees with dequantize-then-f32-dot (up to activation rounding).
    #[test]
    fn scalar_kernels_match_dequantized_dot() {
        let n = 512;
        for ty in TYPES {
            let row = weight_row(ty, n, 7);
            let x = activations(n, 11);
            let q = quantized(&x, ty);
            let mut w = Vec::new();
            dequantize(ty, &row, &mut w).unwrap();
            let exact: f32 = w.iter().zip(&x).map(|(a, b)| a * b).sum();
            let norm: f32 = w.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
            let got = dot_row_scalar(ty, &row, &x, &q);
            assert!((got - exact).abs() <= 0.02 * norm + 1e-4, "{ty}: {got} vs {exact} (norm {norm})");
        }
    }

    /// The portable kernels and the SIMD ones this CPU takes agree to float rounding (the
    /// same integer sums; only the order of float adds may differ).
    #[test]
    fn portable_and_simd_kernels_agree_to_rounding() {
        let n = 1024;
        for ty in TYPES {
            for seed in 0..4 {
                let row = weight_row(ty, n, 20 + seed);
                let x = activations(n, 40 + seed);
                let q = quantized(&x, ty);
                let norm: f32 = {
                    let mut w = Vec::new();
                    dequantize(ty, &row, &mut w).unwrap();
                    w.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum()
                };
                let portable = dot_row_scalar(ty, &row, &x, &q);
                for batch in [Batch::Small, Batch::Large, Batch::Decode] {
                    let simd = dot_row(ty, &row, &x, &q, batch);
                    assert!(
                        (simd - portable).abs() <= 1e-5 * norm,
                        "{ty} {batch:?} seed {seed}: portable {portable}, simd {simd} (norm {norm})"
                    );
                }
            }
        }
    }

    /// On x86 the portable Q4_1, Q5_0 and Q5_1 kernels give the SIMD kernels' bits (the same
    /// float order).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn portable_q4_1_q5_0_q5_1_are_bit_identical_to_the_simd_kernels() {
        let n = 576;
        for ty in [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1] {
            for seed in 0..8 {
                let row = weight_row(ty, n, 60 + seed);
                let x = activations(n, 70 + seed);
                let q = quantized(&x, ty);
                let portable = dot_row_scalar(ty, &row, &x, &q);
                for batch in [Batch::Small, Batch::Large, Batch::Decode] {
                    assert_eq!(portable.to_bits(), dot_row(ty, &row, &x, &q, batch).to_bits(), "{ty} seed {seed} {batch:?}");
                }
            }
        }
    }

    /// `dot_row` is safe and public, and the SIMD kernels read the activations
    /// unchecked, so a `QuantizedRow` holding fewer activations than the weight row has
    /// weights (an empty one, or one quantized from a row a block narrower) must never reach
    /// them. It panics on the portable kernel's bounds checks instead, for every type and
    /// batch class, where before it read past the end of `q` on AVX2 machines.
    #[test]
    fn a_short_quantized_row_is_never_read_past_its_end() {
        let n = 512;
        for ty in TYPES {
            let per = match act_format(ty) {
                ActFormat::Q8 => 32,
                ActFormat::Q8K => 256,
                ActFormat::F32 => continue,
            };
            let row = weight_row(ty, n, 3);
            let x = activations(n, 5);
            for q in [QuantizedRow::default(), quantized(&x[..n - per], ty)] {
                for batch in [Batch::Small, Batch::Large, Batch::Decode] {
                    let read = std::panic::catch_unwind(|| dot_row(ty, &row, &x, &q, batch));
                    assert!(read.is_err(), "{ty} {batch:?}: {} activations read for a row of {n}", q.len);
                }
            }
            // A row long enough still runs, with the same value as the exact-width one.
            let (q, wider) = (quantized(&x, ty), quantized(&[&x[..], &x[..per]].concat(), ty));
            for batch in [Batch::Small, Batch::Large, Batch::Decode] {
                let (a, b) = (dot_row(ty, &row, &x, &q, batch), dot_row(ty, &row, &x, &wider, batch));
                assert_eq!(a.to_bits(), b.to_bits(), "{ty} {batch:?}");
            }
        }
    }
}
