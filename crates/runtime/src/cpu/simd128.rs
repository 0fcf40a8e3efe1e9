//! Whole-row K-quant kernels for wasm `simd128`: one Q4_K or Q6_K weight row against one,
//! four or eight activation rows (decode, and prefill's tokens eight at a time).
//!
//! Why: once the integer products of a super-block cost about eight instructions per 32
//! values (`isum`), the work around them was as large: the f16 scales, the packed 6-bit
//! scales and minimums, the nibble and 6-bit unpacking, and Q4_K's minimum correction
//! (`Σ m_j · bsums`), done per token in scalar code. Here a super-block's weights and scales
//! are unpacked once for all the tokens of a call, and the minimum correction is a vector
//! product. With four tokens, what is left after the products (summing each token's lanes,
//! converting, scaling) runs once for the four, as vectors: token by token, it took about
//! an eighth of a wasm prefill. The 1.5B reader is mostly Q4_K and Q6_K, so this is where
//! its wasm time goes.
//!
//! Results are bit-identical to [`super::dot::dot_row_scalar`]: the integer sums are the
//! same exact integers, and each token's float expression is the scalar kernel's, in its
//! order (the wasm LM test compares greedy tokens with llama.cpp's; `cpu::check_kernels`
//! compares these kernels with the scalar ones on seeded rows). Activations shorter than
//! the row panic on a slice bound, as the scalar kernels do; nothing is read out of bounds.

// Token loops index `acc` and the activations together: the zipped iterators were not
// always inlined.
#![allow(clippy::needless_range_loop)]

use core::arch::wasm32::*;

use super::act::QuantizedRow;
use super::isum::simd::{dot16_small_i16, dot32_nibbles_i16, hsum, load, q6k_weights16_offset};
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

/// Super-block `i` (256 values) of a token's Q8_K activations. Panics, as the scalar
/// kernels do, when the activations are shorter than the weight row.
#[inline(always)]
fn super_block(q8k: &[i8], i: usize) -> &[i8; 256] {
    let Ok(values) = q8k[256 * i..256 * i + 256].try_into() else { unreachable!("a 256-value slice") };
    values
}

/// Values `64·g .. 64·g + 64` of a super-block as four vectors (`g` < 4).
#[inline(always)]
#[allow(unsafe_code)] // four unaligned 16-byte loads inside the 256-byte array
fn load64(y: &[i8; 256], g: usize) -> [v128; 4] {
    assert!(g < 4);
    // SAFETY: 64·g + 64 ≤ 256 bytes are in bounds (checked); wasm loads need no alignment.
    // Through one pointer, not four checked slices: the checks and address arithmetic
    // were a quarter of the instructions of the loops that call this.
    unsafe {
        let p = y.as_ptr().add(64 * g) as *const v128;
        [v128_load(p), v128_load(p.add(1)), v128_load(p.add(2)), v128_load(p.add(3))]
    }
}

/// Values `at .. at + 16` of a super-block as one vector.
#[inline(always)]
#[allow(unsafe_code)] // one unaligned 16-byte load inside the 256-byte array
fn load16(y: &[i8; 256], at: usize) -> v128 {
    assert!(at <= 240);
    // SAFETY: at + 16 ≤ 256 bytes are in bounds (checked); wasm loads need no alignment.
    unsafe { v128_load(y.as_ptr().add(at) as *const v128) }
}

/// Keeps V8 from issuing every token's activation loads before any of their products.
///
/// V8's optimizing compiler (V8 12, Node 22 and Chromium of 2026, read with
/// `--print-wasm-code`) keeps a function's memory accesses in order but places pure
/// arithmetic as late as it can: in a loop over tokens, all the tokens' loads came first,
/// their products after, and the sixteen vector registers of x86-64 could not hold what
/// was loaded, so it went to the stack and back (a token loop ran at two thirds of its
/// speed). [`LoadBarrier::pin`] stores a token's sum, once its products are done, to a
/// slot on this thread's stack: the engine keeps the next token's loads after that store,
/// so each token's products run before them. A volatile store, so that LLVM keeps it
/// (LLVM itself emits the loads in the source's order here); one per token and 64 weights
/// (Q4_K) or 32 (Q6_K). Measured on those engines, not promised by any rule: it only ever
/// costs the store. With one token there is nothing to order, and no store.
struct LoadBarrier<const T: usize>(v128);

impl<const T: usize> LoadBarrier<T> {
    #[inline(always)]
    fn new() -> Self {
        LoadBarrier(i32x4_splat(0))
    }

    #[inline(always)]
    #[allow(unsafe_code)] // a volatile store to a field of `self`
    fn pin(&mut self, v: v128) {
        if T > 1 {
            // SAFETY: `self.0` is a valid, aligned, exclusively borrowed v128.
            unsafe { core::ptr::write_volatile(&mut self.0, v) }
        }
    }
}

/// Four vectors' lane sums as one vector (`[Σa, Σb, Σc, Σd]`): a transpose by unpacking,
/// nine instructions where four separate sums take twenty-eight. Integer sums, so the order
/// of the adds does not matter.
#[inline(always)]
fn hsum4([a, b, c, d]: [v128; 4]) -> v128 {
    let ab = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(a, b), i32x4_shuffle::<2, 6, 3, 7>(a, b));
    let cd = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(c, d), i32x4_shuffle::<2, 6, 3, 7>(c, d));
    i32x4_add(i32x4_shuffle::<0, 1, 4, 5>(ab, cd), i32x4_shuffle::<2, 3, 6, 7>(ab, cd))
}

/// The activation scales of super-block `i` for four tokens, as one vector.
#[inline(always)]
fn scales4(qs: &[&QuantizedRow], i: usize) -> v128 {
    f32x4(qs[0].q8k_d[i], qs[1].q8k_d[i], qs[2].q8k_d[i], qs[3].q8k_d[i])
}

/// Per-token float sums, kept as vectors of four tokens when `T` is a multiple of four (the
/// last step of each super-block then runs once for four tokens), else one by one.
struct Sums<const T: usize> {
    lanes: [f32; T],
    vectors: [v128; T],
}

impl<const T: usize> Sums<T> {
    #[inline(always)]
    fn new() -> Self {
        Sums { lanes: [0.0; T], vectors: [f32x4_splat(0.0); T] }
    }

    /// The sums as an array: each token's value, in the same order of operations either way.
    #[inline(always)]
    fn finish(self) -> [f32; T] {
        if !T.is_multiple_of(4) {
            return self.lanes;
        }
        let mut out = [0f32; T];
        for (g, v) in self.vectors.iter().take(T / 4).enumerate() {
            out[4 * g] = f32x4_extract_lane::<0>(*v);
            out[4 * g + 1] = f32x4_extract_lane::<1>(*v);
            out[4 * g + 2] = f32x4_extract_lane::<2>(*v);
            out[4 * g + 3] = f32x4_extract_lane::<3>(*v);
        }
        out
    }
}

#[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
fn q4k<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    let m4 = u8x16_splat(0x0F);
    let zero = i32x4_splat(0);
    let mut sums = Sums::<T>::new();
    let mut barrier = LoadBarrier::<T>::new();
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, m) = scales_mins_k4(&b[4..16]);
        let ys: [&[i8; 256]; T] = core::array::from_fn(|t| super_block(&qs[t].q8k, i));
        // Sub-block by sub-block, every token: one sub-block's weights and scale and the
        // tokens' sums fit the sixteen vector registers of x86-64, where holding the whole
        // super-block unpacked for the tokens spilled most of it to the stack.
        let mut acc = [zero; T];
        // The packed weights are loaded first: decoding, they come from memory, and loads
        // spread through the arithmetic made one token's dot product much slower.
        let packed: [v128; 8] = core::array::from_fn(|k| load(&b[16 + 16 * k..32 + 16 * k]));
        for g in 0..4 {
            // Sub-block 2g's 32 nibbles are the low ones of bytes 32·g.., 2g+1's the high
            // ones; the scales as i16 (6 bits), multiplied in while the products widen
            // (`i32x4_dot_i16x8`). Written out for the two sub-blocks: iterating over them
            // kept them in memory. The high nibbles by a 16-bit shift and the mask:
            // `u8x16_shr` has no x86 instruction, and V8 builds its own mask at every use.
            let (lo, hi) = (packed[2 * g], packed[2 * g + 1]);
            let (w0, w1) = ([v128_and(lo, m4), v128_and(hi, m4)], [v128_and(u16x8_shr(lo, 4), m4), v128_and(u16x8_shr(hi, 4), m4)]);
            let (s0, s1) = (i16x8_splat(i16::from(sc[2 * g])), i16x8_splat(i16::from(sc[2 * g + 1])));
            for t in 0..T {
                let [y0, y1, y2, y3] = load64(ys[t], g);
                let p0 = dot32_nibbles_i16(w0[0], y0, w0[1], y1);
                let p1 = dot32_nibbles_i16(w1[0], y2, w1[1], y3);
                acc[t] = i32x4_add(acc[t], i32x4_add(i32x4_dot_i16x8(p0, s0), i32x4_dot_i16x8(p1, s1)));
                barrier.pin(acc[t]);
            }
        }
        // Each token's Σ_j m_j · (bsums[2j] + bsums[2j+1]) over its 16 block sums (each at
        // most 16 · 128 in size), as a vector whose lanes add up to it: each minimum twice,
        // for the two block sums it weighs.
        let m16 = |j: usize| i16::from(m[j]);
        let mins = [
            i16x8(m16(0), m16(0), m16(1), m16(1), m16(2), m16(2), m16(3), m16(3)),
            i16x8(m16(4), m16(4), m16(5), m16(5), m16(6), m16(6), m16(7), m16(7)),
        ];
        let min_sum = |q: &QuantizedRow| {
            let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
            i32x4_add(i32x4_dot_i16x8(load_i16(&bsums[..8]), mins[0]), i32x4_dot_i16x8(load_i16(&bsums[8..]), mins[1]))
        };
        if T.is_multiple_of(4) {
            let (dv, dminv) = (f32x4_splat(d), f32x4_splat(dmin));
            for (g, (four, acc)) in qs.chunks_exact(4).zip(acc.chunks_exact(4)).enumerate() {
                let sumi = f32x4_convert_i32x4(hsum4([acc[0], acc[1], acc[2], acc[3]]));
                let summ = f32x4_convert_i32x4(hsum4([min_sum(four[0]), min_sum(four[1]), min_sum(four[2]), min_sum(four[3])]));
                // The scalar expression below, lane by lane.
                let v = f32x4_mul(scales4(four, i), f32x4_sub(f32x4_mul(dv, sumi), f32x4_mul(dminv, summ)));
                sums.vectors[g] = f32x4_add(sums.vectors[g], v);
            }
        } else {
            for (t, q) in qs.iter().enumerate() {
                let (sumi, summ) = (hsum(acc[t]), hsum(min_sum(q)));
                sums.lanes[t] += q.q8k_d[i] * (d * sumi as f32 - dmin * summ as f32);
            }
        }
    }
    sums.finish()
}

/// Q6_K with the relaxed-SIMD dot product, which needs weights in 0..=127: the stored
/// 6-bit values (0..=63) are multiplied as they are, and the `-32` of each weight comes back
/// as `32 · Σ_v scale_v · Σ y_v`, from the activations' sums per 16 values (Q8_K keeps
/// them). Same exact integers as [`q6k_extmul`].
#[cfg(feature = "relaxed-simd")]
#[target_feature(enable = "relaxed-simd")]
fn q6k_relaxed<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    q6k_body(row, qs, 0, |w, y| i16x8_relaxed_dot_i8x16_i7x16(y, w))
}

/// Q6_K with `simd128` alone: the weights minus 32 (in -32..=31), multiplied by widening.
#[cfg_attr(feature = "relaxed-simd", allow(dead_code))]
fn q6k_extmul<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    q6k_body(row, qs, 32, dot16_small_i16)
}

fn q6k<const T: usize>(row: &[u8], qs: [&QuantizedRow; T]) -> [f32; T] {
    #[cfg(feature = "relaxed-simd")]
    return q6k_relaxed(row, qs);
    #[cfg(not(feature = "relaxed-simd"))]
    q6k_extmul(row, qs)
}

/// The Q6_K kernel with each 16 weights minus `offset` (32, their true values, or 0, the
/// stored 6 bits) and `dot16(w, y)`, the 8 i16 lanes of pairs of products of 16 weights and
/// 16 activations. With offset 0 the missing `-32 · Σ scale · Σ y` is taken from Q8_K's
/// block sums, so both give the same exact integers.
#[inline(always)]
fn q6k_body<const T: usize>(row: &[u8], qs: [&QuantizedRow; T], offset: i8, dot16: impl Fn(v128, v128) -> v128) -> [f32; T] {
    let zero = i32x4_splat(0);
    let mut sums = Sums::<T>::new();
    let mut barrier = LoadBarrier::<T>::new();
    for (i, b) in row.chunks_exact(210).enumerate() {
        let d = f16_at(b, 208);
        let ys: [&[i8; 256]; T] = core::array::from_fn(|t| super_block(&qs[t].q8k, i));
        // As in `q4k`, sixteen weights at a time against every token, so that the weights,
        // their scale and the tokens' sums stay in registers. Vector (half, g, k) holds
        // values 128·half + 16·g + 32·k + 0..16, with the scale of value block
        // n = 8·half + g + 2·k (16 values each), which weighs that block's sum too.
        let mut acc = [zero; T];
        let mut block_scales = [0i16; 16];
        for half in 0..2 {
            let (ql, qh, sc) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..160 + 32 * half], &b[192 + 8 * half..200 + 8 * half]);
            for g in 0..2 {
                // Two of the four vectors at a time, written out (iterating over them kept
                // them in memory).
                let w = q6k_weights16_offset(ql, qh, 16 * g, offset);
                for k in (0..4).step_by(2) {
                    let (s0, s1) = (i16::from(sc[g + 2 * k] as i8), i16::from(sc[g + 2 * k + 2] as i8));
                    block_scales[8 * half + g + 2 * k] = s0;
                    block_scales[8 * half + g + 2 * k + 2] = s1;
                    let (scale0, scale1, at) = (i16x8_splat(s0), i16x8_splat(s1), 128 * half + 16 * g + 32 * k);
                    for t in 0..T {
                        let p0 = i32x4_dot_i16x8(dot16(w[k], load16(ys[t], at)), scale0);
                        let p1 = i32x4_dot_i16x8(dot16(w[k + 1], load16(ys[t], at + 32)), scale1);
                        acc[t] = i32x4_add(acc[t], i32x4_add(p0, p1));
                        barrier.pin(acc[t]);
                    }
                }
            }
        }
        // Each token's integer sum, as a vector whose lanes add up to it.
        let scales16 = [load_i16(&block_scales[..8]), load_i16(&block_scales[8..])];
        let token_sum = |t: usize| {
            if offset != 0 {
                return acc[t];
            }
            let bsums = &qs[t].q8k_bsums[16 * i..16 * i + 16];
            let offsets =
                i32x4_add(i32x4_dot_i16x8(load_i16(&bsums[..8]), scales16[0]), i32x4_dot_i16x8(load_i16(&bsums[8..]), scales16[1]));
            i32x4_sub(acc[t], i32x4_shl(offsets, 5))
        };
        if T.is_multiple_of(4) {
            let dv = f32x4_splat(d);
            for (g, four) in qs.chunks_exact(4).enumerate() {
                let s = f32x4_convert_i32x4(hsum4([token_sum(4 * g), token_sum(4 * g + 1), token_sum(4 * g + 2), token_sum(4 * g + 3)]));
                // The scalar expression below, lane by lane.
                sums.vectors[g] = f32x4_add(sums.vectors[g], f32x4_mul(f32x4_mul(scales4(four, i), dv), s));
            }
        } else {
            for (t, q) in qs.iter().enumerate() {
                sums.lanes[t] += q.q8k_d[i] * d * hsum(token_sum(t)) as f32;
            }
        }
    }
    sums.finish()
}

/// These kernels against the scalar ones, bit for bit, on seeded rows of three
/// super-blocks (sane f16 scales, every other byte random) and activations, one token,
/// four and eight: the number of comparisons, or an error naming the type, the token and both values.
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
            // Eight tokens: the four, then the same four in the other order.
            let eight = dot_tokens(ty, &row, core::array::from_fn::<_, 8, _>(|k| &acts[if k < 4 { k } else { 7 - k }]));
            for t in 0..4 {
                let want = super::dot::dot_row_scalar(ty, &row, &[], &acts[t]);
                let mut got = vec![four.map(|v| v[t]), eight.map(|v| v[t]), eight.map(|v| v[7 - t])];
                if t == 0 {
                    got.push(one);
                }
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
