//! AVX2 + FMA kernels for the weight types the shipped models use (Q4_1 and Q8_0 for
//! SmolLM2; Q4_K and Q6_K for Qwen2.5) and those downloaded files hold beside them (Q4_0;
//! Q5_0 and Q5_1, in rows llama.cpp could not give a K-quant), chosen at run time. Each is the scalar kernel's
//! integer arithmetic 32 lanes at a time: nibbles are unpacked to bytes, multiplied with
//! the int8 activations by `maddubs` (u8 × i8 → i16 pairs), widened by `madd`, scaled and
//! accumulated in f32. Tested against the scalar kernels in `dot.rs`.
//!
//! Safety: every `unsafe fn` here needs AVX2, FMA and F16C on the running CPU
//! ([`available`]; the kernels enable them with `#[target_feature]`, and the
//! `#[inline(always)]` helpers, which have no target features of their own, are only
//! called from those kernels), plus the pointer and length conditions its `# Safety`
//! section names: the kernels read activations through raw pointers, unchecked. The safe
//! entry points (`dot_row`, `dot_4rows`, `dot_4tokens`) are only called after `available()`.

// Unsafe code: every kernel here is AVX2 / FMA / F16C intrinsics (`#[target_feature]`) on
// raw pointers into weight blocks and activations, called only after `available()` found
// the features at run time.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::act::QuantizedRow;
use super::dot::Batch;
use crate::gguf::GgmlType;
use crate::quant::scales_mins_k4;

/// The half-precision float at byte `i` of `b`, converted by the F16C instruction.
///
/// # Safety
/// The CPU must have F16C (see the module docs); `b[i]` and `b[i + 1]` are bounds-checked.
#[inline(always)]
unsafe fn f16_at(b: &[u8], i: usize) -> f32 {
    let h = u16::from_le_bytes([b[i], b[i + 1]]);
    // A broadcast, not an insert: an insert into a don't-care register made LLVM merge into
    // the loop's accumulator, chaining every block's conversion to the previous block.
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(h as i16)))
}

/// Whether these kernels run: the CPU has AVX2, FMA and F16C, and `DOCMEM_CPU` does not
/// cap the path at `portable` ([`super::isa`]).
pub fn available() -> bool {
    super::isa::allows(super::isa::Isa::Avx2)
}

/// The AVX2 kernel for `ty`, or `None` where only the scalar one exists.
#[inline]
pub fn dot_row(ty: GgmlType, row: &[u8], q: &QuantizedRow, batch: Batch) -> Option<f32> {
    debug_assert!(available());
    let len = row.len();
    // SAFETY: the features: the one caller, `dot::dot_row`, checks `available()` first
    // (debug-asserted above). The lengths: the kernels read only whole blocks of `row`, and
    // for each of them read `q`'s values (and, for the K-quants, block sums) unchecked;
    // each arm checks with `q8_covers` / `q8k_covers` that `q` holds at least that much
    // (`dot::dot_row` is public and passes whatever `q` it is given; a short one gets
    // `None` here, and the bounds-checked scalar kernel). The scales and sums the kernels
    // index per block (`q8_d`, `q8_s`, `q8k_d`) are bounds-checked.
    unsafe {
        match ty {
            GgmlType::Q4_1 if q8_covers(q, len, 20) => Some(q4_1(row, q)),
            GgmlType::Q4_0 if q8_covers(q, len, 18) => Some(q4_0(row, q)),
            GgmlType::Q5_0 if q8_covers(q, len, 22) => Some(q5_0(row, q)),
            GgmlType::Q5_1 if q8_covers(q, len, 24) => Some(q5_1(row, q)),
            GgmlType::Q8_0 if q8_covers(q, len, 34) => Some(q8_0(row, q)),
            GgmlType::Q4K if q8k_covers(q, len, 144) => Some(q4k(row, q)),
            GgmlType::Q6K if batch == Batch::Large && q8k_covers(q, len, 210) => Some(q6k_tiled(row, q)),
            GgmlType::Q6K if q8k_covers(q, len, 210) => Some(q6k(row, q)),
            _ => None,
        }
    }
}

/// Whether `q` holds at least the Q8 values the one-row kernels read unchecked for a row of
/// `len` bytes: 32 per whole `block_bytes` block. (`q8_fits`, for the multi-row kernels,
/// asks for exactly the row's activations, scales included.)
#[inline(always)]
fn q8_covers(q: &QuantizedRow, len: usize, block_bytes: usize) -> bool {
    q.q8.len() / 32 >= len / block_bytes
}

/// Whether `q` holds at least the Q8_K values and block sums the one-row kernels read
/// unchecked for a row of `len` bytes: 256 and 16 per whole `block_bytes` super-block.
#[inline(always)]
fn q8k_covers(q: &QuantizedRow, len: usize, block_bytes: usize) -> bool {
    let blocks = len / block_bytes;
    q.q8k.len() / 256 >= blocks && q.q8k_bsums.len() / 16 >= blocks
}

/// `x` rounded to half precision (nearest, ties to even) and back, by F16C.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_round(x: f32) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))))
}

/// [`f16_round`] over a slice, eight at a time.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); the loads and stores stay
/// inside `v`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_round_all(v: &mut [f32]) {
    let mut chunks = v.chunks_exact_mut(8);
    for c in &mut chunks {
        let x = _mm256_loadu_ps(c.as_ptr());
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)));
    }
    for x in chunks.into_remainder() {
        *x = f16_round(*x);
    }
}

/// The sum of the eight lanes of `v`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// 16 bytes of packed nibbles → 32 bytes: low nibbles then high nibbles.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `p` must be valid for
/// reading 16 bytes (any alignment).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let x = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Σ u8 × i8 over 32 lanes, as 8 i32 lanes.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mul_sum_u8_i8(a: __m256i, b: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1))
}

/// One Q4_1 row against one activation row.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8` must hold at least 32
/// values per whole 20-byte block of `row` (read unchecked; `q.q8_d` and `q.q8_s` are
/// indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for (i, b) in row.chunks_exact(20).enumerate() {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let w = nibbles(b.as_ptr().add(4));
        let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
        let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(w, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * q.q8_d[i]), s, acc);
        mins += m * q.q8_s[i];
    }
    hsum(acc) + mins
}

/// Ask for the `bytes` at `p` (a few blocks ahead of a row stream) to be in L1: with four
/// row streams per kernel and two threads, the hardware prefetcher alone falls behind.
///
/// # Safety
/// Nothing beyond x86_64's baseline (SSE): a prefetch is a hint that never faults, so `p`
/// and the addresses after it (formed with `wrapping_add`) need not be valid.
#[inline(always)]
unsafe fn prefetch(p: *const u8, bytes: usize) {
    let mut off = 0;
    while off < bytes {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off) as *const i8);
        off += 64;
    }
}

/// The half-precision pair at byte `i` of `p` (a block's `d` and `m`), in one conversion.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `p` must be valid for
/// reading 4 bytes (any alignment).
#[inline(always)]
unsafe fn f16_pair(p: *const u8) -> (f32, f32) {
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(p as *const i32)));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// One Q4_1 block against one activation block, accumulated as [`q4_1`] does.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `y` must be valid for
/// reading 32 bytes (any alignment).
#[inline(always)]
unsafe fn q4_1_step(w: __m256i, dm: (f32, f32), y: *const i8, dy: f32, sy: f32, acc: &mut __m256, mins: &mut f32) {
    let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(w, _mm256_loadu_si256(y as *const __m256i)));
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(dm.0 * dy), s, *acc);
    *mins += dm.1 * sy;
}

/// Four Q4_1 rows against one activation row (decode): bit-identical to four [`q4_1`]
/// calls, with the activation block loaded once and four independent chains.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With
/// `n = rows[0].len() / 20` blocks, every `rows[k]` must hold at least `20 · n` bytes,
/// `q.q8` at least `32 · n` values and `q.q8_d`, `q.q8_s` at least `n` (all read
/// unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_4rows(rows: [&[u8]; 4], q: &QuantizedRow) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut mins = [0f32; 4];
    for i in 0..rows[0].len() / 20 {
        let y = q.q8.as_ptr().add(32 * i);
        let (dy, sy) = (*q.q8_d.get_unchecked(i), *q.q8_s.get_unchecked(i));
        for k in 0..4 {
            let b = rows[k].as_ptr().add(20 * i);
            if i % 4 == 0 {
                prefetch(b.wrapping_add(8 * 20), 80);
            }
            q4_1_step(nibbles(b.add(4)), f16_pair(b), y, dy, sy, &mut acc[k], &mut mins[k]);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]) + mins[k])
}

/// One Q4_1 row against four activation rows (prefill): the block is unpacked once.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With `n = row.len() / 20`
/// blocks, every `qs[k]` must hold at least `32 · n` values in `q8` and `n` in `q8_d` and
/// `q8_s` (read unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut mins = [0f32; 4];
    for i in 0..row.len() / 20 {
        let b = row.as_ptr().add(20 * i);
        let (w, dm) = (nibbles(b.add(4)), f16_pair(b));
        for k in 0..4 {
            let q = qs[k];
            let (dy, sy) = (*q.q8_d.get_unchecked(i), *q.q8_s.get_unchecked(i));
            q4_1_step(w, dm, q.q8.as_ptr().add(32 * i), dy, sy, &mut acc[k], &mut mins[k]);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]) + mins[k])
}

/// One Q8_0 block against one activation block: `|w| · (y with w's sign)`, the u8 × i8
/// product `maddubs` takes.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `y` must be valid for
/// reading 32 bytes (any alignment).
#[inline(always)]
unsafe fn q8_0_step(w: __m256i, absw: __m256i, d: f32, y: *const i8, dy: f32, acc: &mut __m256) {
    let y = _mm256_loadu_si256(y as *const __m256i);
    let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(absw, _mm256_sign_epi8(y, w)));
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(d * dy), s, *acc);
}

/// Four Q8_0 rows against one activation row (bit-identical to four [`q8_0`] calls).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With
/// `n = rows[0].len() / 34` blocks, every `rows[k]` must hold at least `34 · n` bytes,
/// `q.q8` at least `32 · n` values and `q.q8_d` at least `n` (all read unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_4rows(rows: [&[u8]; 4], q: &QuantizedRow) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    for i in 0..rows[0].len() / 34 {
        let y = q.q8.as_ptr().add(32 * i);
        let dy = *q.q8_d.get_unchecked(i);
        for k in 0..4 {
            let b = rows[k].as_ptr().add(34 * i);
            if i % 2 == 0 {
                prefetch(b.wrapping_add(8 * 34), 68);
            }
            let w = _mm256_loadu_si256(b.add(2) as *const __m256i);
            q8_0_step(w, _mm256_sign_epi8(w, w), f16_at(std::slice::from_raw_parts(b, 2), 0), y, dy, &mut acc[k]);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]))
}

/// One Q8_0 row against four activation rows.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With `n = row.len() / 34`
/// blocks, every `qs[k]` must hold at least `32 · n` values in `q8` and `n` in `q8_d` (read
/// unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    for i in 0..row.len() / 34 {
        let b = row.as_ptr().add(34 * i);
        let w = _mm256_loadu_si256(b.add(2) as *const __m256i);
        let (absw, d) = (_mm256_sign_epi8(w, w), f16_at(std::slice::from_raw_parts(b, 2), 0));
        for k in 0..4 {
            let q = qs[k];
            q8_0_step(w, absw, d, q.q8.as_ptr().add(32 * i), *q.q8_d.get_unchecked(i), &mut acc[k]);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]))
}

/// Whether `q` holds Q8 activations for weight rows of `len` bytes in `block_bytes` blocks.
fn q8_fits(q: &QuantizedRow, len: usize, block_bytes: usize) -> bool {
    q.q8.len() == len / block_bytes * 32 && q.q8_d.len() * block_bytes == len && q.q8_s.len() * block_bytes == len
}

/// Whether `q` holds Q8_K activations for weight rows of `len` bytes in `block_bytes` blocks.
fn q8k_fits(q: &QuantizedRow, len: usize, block_bytes: usize) -> bool {
    q.q8k.len() == len / block_bytes * 256 && q.q8k_d.len() * block_bytes == len && q.q8k_bsums.len() * block_bytes == len * 16
}

/// Four weight rows against one activation row, where a 4-row kernel exists (`None`
/// otherwise); bit-identical to four [`dot_row`] calls.
#[inline]
pub fn dot_4rows(ty: GgmlType, rows: [&[u8]; 4], q: &QuantizedRow) -> Option<[f32; 4]> {
    debug_assert!(available());
    let len = rows[0].len();
    if rows.iter().any(|r| r.len() != len) {
        return None;
    }
    // SAFETY: the features: the one caller, `dot::dot_4rows`, checks `available()` first
    // (debug-asserted above). The lengths: every row has `len` bytes (checked above) and
    // `q8_fits` / `q8k_fits` check that `q` holds exactly the values, scales and sums of a
    // row of `len` bytes in whole blocks, which is what the chosen kernel reads.
    unsafe {
        match ty {
            GgmlType::Q4_1 if q8_fits(q, len, 20) => Some(q4_1_4rows(rows, q)),
            GgmlType::Q8_0 if q8_fits(q, len, 34) => Some(q8_0_4rows(rows, q)),
            GgmlType::Q4K if q8k_fits(q, len, 144) => Some(q4k_4rows(rows, q)),
            _ => None,
        }
    }
}

/// One weight row against four activation rows, where a 4-token kernel exists (`None`
/// otherwise); bit-identical to four [`dot_row`] calls except for Q4_K, which follows
/// llama.cpp's four-token order (see [`q4k_4tok`]).
#[inline]
pub fn dot_4tokens(ty: GgmlType, row: &[u8], qs: [&QuantizedRow; 4], batch: Batch) -> Option<[f32; 4]> {
    debug_assert!(available());
    let len = row.len();
    // SAFETY: the features: the one caller, `dot::dot_4tokens`, checks `available()` first
    // (debug-asserted above). The lengths: each arm checks with `q8_fits` / `q8k_fits` that
    // all four activation rows hold exactly what the kernel reads for a row of `len` bytes.
    unsafe {
        match ty {
            GgmlType::Q4_1 if qs.iter().all(|q| q8_fits(q, len, 20)) => Some(q4_1_4tok(row, qs)),
            GgmlType::Q8_0 if qs.iter().all(|q| q8_fits(q, len, 34)) => Some(q8_0_4tok(row, qs)),
            // Its four-token order is not the one-token order `Decode` asks for.
            GgmlType::Q4K if batch != Batch::Decode && qs.iter().all(|q| q8k_fits(q, len, 144)) => Some(q4k_4tok(row, qs)),
            GgmlType::Q6K if qs.iter().all(|q| q8k_fits(q, len, 210)) => {
                Some(if batch == Batch::Large { q6k_tiled_4tok(row, qs) } else { q6k_4tok(row, qs) })
            }
            _ => None,
        }
    }
}

/// One Q4_0 row against one activation row.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8` must hold at least 32
/// values per whole 18-byte block of `row` (read unchecked; `q.q8_d` is indexed with bounds
/// checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (i, b) in row.chunks_exact(18).enumerate() {
        let w = _mm256_sub_epi8(nibbles(b.as_ptr().add(2)), _mm256_set1_epi8(8));
        let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
        let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(b, 0) * q.q8_d[i]), s, acc);
    }
    hsum(acc)
}

/// 32 bits (a Q5 block's high bits, bit `j` for value `j`) as 32 bytes, 0xFF where the
/// bit is set: each byte takes the byte of `bits` holding its bit, then is tested against
/// that bit alone.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bit_bytes(bits: u32) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit)
}

/// A Q5 block's 32 values from its high bits (`qh`, 4 bytes) and nibbles (`qs`, 16
/// bytes): `signed` (Q5_0) less 16, as i8 in -16..16; otherwise (Q5_1) as they are, 0..32.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `qh` must be valid for
/// reading 4 bytes and `qs` 16.
#[inline(always)]
unsafe fn q5_values(qh: *const u8, qs: *const u8, signed: bool) -> __m256i {
    let high = bit_bytes(u32::from_le_bytes(std::ptr::read_unaligned(qh as *const [u8; 4])));
    if signed {
        // Where the high bit is clear, q − 16 is the nibble with its top four bits set.
        _mm256_or_si256(nibbles(qs), _mm256_andnot_si256(high, _mm256_set1_epi8(0xF0u8 as i8)))
    } else {
        _mm256_or_si256(nibbles(qs), _mm256_and_si256(high, _mm256_set1_epi8(0x10)))
    }
}

/// One Q5_0 row against one activation row, in ggml's float order (as [`q4_0`]: eight
/// lanes of four-product integer sums, each block's d·dy fused in, folded at the end).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8` must hold at least 32
/// values per whole 22-byte block of `row` (read unchecked; `q.q8_d` is indexed with bounds
/// checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (i, b) in row.chunks_exact(22).enumerate() {
        let w = q5_values(b.as_ptr().add(2), b.as_ptr().add(6), true);
        let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
        let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(b, 0) * q.q8_d[i]), s, acc);
    }
    hsum(acc)
}

/// One Q5_1 row against one activation row, in ggml's float order (as [`q4_1`]: the
/// minimum terms summed apart and added after the lanes are folded).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8` must hold at least 32
/// values per whole 24-byte block of `row` (read unchecked; `q.q8_d` and `q.q8_s` are
/// indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for (i, b) in row.chunks_exact(24).enumerate() {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let w = q5_values(b.as_ptr().add(4), b.as_ptr().add(8), false);
        let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
        let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(w, y));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * q.q8_d[i]), s, acc);
        mins += m * q.q8_s[i];
    }
    hsum(acc) + mins
}

/// One Q8_0 row against one activation row.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8` must hold at least 32
/// values per whole 34-byte block of `row` (read unchecked; `q.q8_d` is indexed with bounds
/// checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (i, b) in row.chunks_exact(34).enumerate() {
        let w = _mm256_loadu_si256(b.as_ptr().add(2) as *const __m256i);
        let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
        // |w| × (y with w's sign): the u8 × i8 product maddubs takes.
        let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(b, 0) * q.q8_d[i]), s, acc);
    }
    hsum(acc)
}

/// The minimum terms of a super-block's four 64-value groups (lane g: Σ over sub-blocks
/// 2g, 2g + 1 of minimum × the sub-block's activation sum), from the block sums.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `bsums` must be valid for
/// reading 16 `i16` (any alignment).
#[inline(always)]
unsafe fn q4k_group_mins(mins: &[u8; 8], bsums: *const i16) -> __m128i {
    let b = _mm256_loadu_si256(bsums as *const __m256i);
    // Sums of 16-value halves → sums of 32-value sub-blocks (8 × i16).
    let sub = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    let m = _mm_cvtepu8_epi16(_mm_loadl_epi64(mins.as_ptr() as *const __m128i));
    _mm_madd_epi16(sub, m)
}

// Q4_K follows llama.cpp's repacked kernels (`ggml_gemv_q4_K_8x8_q8_K` for one token,
// `ggml_gemm_q4_K_8x8_q8_K` for groups of four tokens), which x86 llama.cpp uses for
// every Q4_K matrix: integer sums are exact, so only where the float accumulation
// happens matters. Per output, with `dy` the activation block's scale:
// - one token: per super-block, `acc = fma(Σ, d·dy, acc)` and `mins = fma(Σm, dmin·dy, mins)`;
// - four tokens: the same per 64-value group (four per super-block);
// and the result is `acc − mins`. We need no repacking for this: four rows (or four
// tokens) are reduced to one 4-lane vector, lane by lane the same arithmetic.

/// Group `g` of a Q4_K super-block unpacked: its low nibbles (sub-block 2g) and high
/// nibbles (sub-block 2g + 1), 32 bytes each.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `b` must be valid for
/// reading `16 + 32 · (g + 1)` bytes (all of a 144-byte Q4_K block for `g < 4`).
#[inline(always)]
unsafe fn q4k_unpack_group(b: *const u8, g: usize) -> (__m256i, __m256i) {
    let mask = _mm256_set1_epi8(0x0F);
    let w = _mm256_loadu_si256(b.add(16 + 32 * g) as *const __m256i);
    (_mm256_and_si256(w, mask), _mm256_and_si256(_mm256_srli_epi16(w, 4), mask))
}

/// Σ over one unpacked 64-value group (scales `s_lo`, `s_hi` applied) against the 64
/// activations at `y`, as 8 i32 lanes whose sum is the group's integer dot product.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `y` must be valid for
/// reading 64 bytes (any alignment).
#[inline(always)]
unsafe fn q4k_group_dot((lo, hi): (__m256i, __m256i), s_lo: u8, s_hi: u8, y: *const i8) -> __m256i {
    let y1 = _mm256_loadu_si256(y as *const __m256i);
    let y2 = _mm256_loadu_si256(y.add(32) as *const __m256i);
    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y1), _mm256_set1_epi16(i16::from(s_lo)));
    let p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y2), _mm256_set1_epi16(i16::from(s_hi)));
    _mm256_add_epi32(p1, p2)
}

/// One Q4_K super-block against one activation block: the integer sum (8 lanes) and the
/// four groups' minimum terms.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `b` must hold a whole
/// 144-byte Q4_K super-block (bytes 16.. are read unchecked), `q.q8k` at least
/// `256 · (i + 1)` values and `q.q8k_bsums` at least `16 · (i + 1)`.
#[inline(always)]
unsafe fn q4k_block(b: &[u8], q: &QuantizedRow, i: usize) -> (__m256i, __m128i) {
    let (sc, m) = scales_mins_k4(&b[4..16]);
    let y = q.q8k.as_ptr().add(256 * i);
    let mut sumi = _mm256_setzero_si256();
    for g in 0..4 {
        sumi = _mm256_add_epi32(sumi, q4k_group_dot(q4k_unpack_group(b.as_ptr(), g), sc[2 * g], sc[2 * g + 1], y.add(64 * g)));
    }
    (sumi, q4k_group_mins(&m, q.q8k_bsums.as_ptr().add(16 * i)))
}

/// Lane k = the sum of the eight lanes of `v[k]`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[inline(always)]
unsafe fn hsum4_i32(v: [__m256i; 4]) -> __m128i {
    let a = _mm256_hadd_epi32(v[0], v[1]);
    let b = _mm256_hadd_epi32(v[2], v[3]);
    let c = _mm256_hadd_epi32(a, b);
    _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1))
}

/// Lanes 0..4 of an i32 vector summed.
///
/// # Safety
/// Nothing beyond x86_64's baseline SSE2 (it uses no other instructions); `unsafe` like the
/// kernels it is inlined into.
#[inline(always)]
unsafe fn hsum_i32x4(v: __m128i) -> i32 {
    let s = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
}

/// One Q4_K row against one token (llama.cpp's one-token order).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8k` must hold at least
/// 256 values and `q.q8k_bsums` 16 per whole 144-byte block of `row` (read unchecked;
/// `q.q8k_d` is indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k(row: &[u8], q: &QuantizedRow) -> f32 {
    let (mut acc, mut mins) = (0f32, 0f32);
    for (i, b) in row.chunks_exact(144).enumerate() {
        let ((d, dmin), dy) = (f16_pair(b.as_ptr()), q.q8k_d[i]);
        let (sumi, summ) = q4k_block(b, q, i);
        acc = (hsum_i32(sumi) as f32).mul_add(d * dy, acc);
        mins = (hsum_i32x4(summ) as f32).mul_add(dmin * dy, mins);
    }
    acc - mins
}

/// Four Q4_K rows against one token (decode); bit-identical to four [`q4k`] calls.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With
/// `n = rows[0].len() / 144` blocks, every `rows[k]` must hold at least `144 · n` bytes,
/// and `q` at least `256 · n` values in `q8k`, `n` in `q8k_d` and `16 · n` in `q8k_bsums`
/// (all read unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_4rows(rows: [&[u8]; 4], q: &QuantizedRow) -> [f32; 4] {
    let (mut acc, mut mins) = (_mm_setzero_ps(), _mm_setzero_ps());
    for i in 0..rows[0].len() / 144 {
        let dy = _mm_set1_ps(*q.q8k_d.get_unchecked(i));
        let mut sumi = [_mm256_setzero_si256(); 4];
        let mut summ = [_mm_setzero_si128(); 4];
        let (mut d, mut dmin) = ([0f32; 4], [0f32; 4]);
        for k in 0..4 {
            let b = rows[k].get_unchecked(144 * i..144 * i + 144);
            prefetch(b.as_ptr().wrapping_add(12 * 144), 144);
            (d[k], dmin[k]) = f16_pair(b.as_ptr());
            (sumi[k], summ[k]) = q4k_block(b, q, i);
        }
        let dd = _mm_mul_ps(_mm_loadu_ps(d.as_ptr()), dy);
        let dm = _mm_mul_ps(_mm_loadu_ps(dmin.as_ptr()), dy);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hsum4_i32(sumi)), dd, acc);
        // Lane k: the sum of row k's four group minimums.
        let m01 = _mm_hadd_epi32(summ[0], summ[1]);
        let m23 = _mm_hadd_epi32(summ[2], summ[3]);
        mins = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_hadd_epi32(m01, m23)), dm, mins);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), _mm_sub_ps(acc, mins));
    out
}

/// One Q4_K row against four tokens (prefill), in llama.cpp's four-token order (floats
/// accumulated per 64-value group): not bit-identical to [`q4k`], as in llama.cpp.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With `n = row.len() / 144`
/// blocks, every `qs[k]` must hold at least `256 · n` values in `q8k` and `16 · n` in
/// `q8k_bsums` (read unchecked; `q8k_d` is indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let (mut acc, mut mins) = (_mm_setzero_ps(), _mm_setzero_ps());
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = f16_pair(b.as_ptr());
        let (sc, m) = scales_mins_k4(&b[4..16]);
        let dy = _mm_setr_ps(qs[0].q8k_d[i], qs[1].q8k_d[i], qs[2].q8k_d[i], qs[3].q8k_d[i]);
        let (dd, dm) = (_mm_mul_ps(_mm_set1_ps(d), dy), _mm_mul_ps(_mm_set1_ps(dmin), dy));
        // Row k of the transpose: token k's four group minimums; column g: group g's.
        let mut gm: [__m128i; 4] = std::array::from_fn(|k| q4k_group_mins(&m, qs[k].q8k_bsums.as_ptr().add(16 * i)));
        transpose4(&mut gm);
        for g in 0..4 {
            let w = q4k_unpack_group(b.as_ptr(), g);
            let sumi: [__m256i; 4] =
                std::array::from_fn(|k| q4k_group_dot(w, sc[2 * g], sc[2 * g + 1], qs[k].q8k.as_ptr().add(256 * i + 64 * g)));
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(hsum4_i32(sumi)), dd, acc);
            mins = _mm_fmadd_ps(_mm_cvtepi32_ps(gm[g]), dm, mins);
        }
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), _mm_sub_ps(acc, mins));
    out
}

/// Transpose a 4 × 4 matrix of i32 held as four rows.
///
/// # Safety
/// Nothing beyond x86_64's baseline SSE2 (it uses no other instructions); `unsafe` like the
/// kernels it is inlined into.
#[inline(always)]
unsafe fn transpose4(r: &mut [__m128i; 4]) {
    let t0 = _mm_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm_unpacklo_epi32(r[2], r[3]);
    let t2 = _mm_unpackhi_epi32(r[0], r[1]);
    let t3 = _mm_unpackhi_epi32(r[2], r[3]);
    *r = [_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)];
}

/// A Q6_K super-block's 256 six-bit values as unsigned bytes (0..64; the −32 offset is
/// applied through the activation block sums), in activation order: 8 × 32 lanes.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs); `b` must be valid for
/// reading 192 bytes (a Q6_K block's `ql` and `qh`).
#[inline(always)]
unsafe fn q6k_unpack(b: *const u8) -> [__m256i; 8] {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let mut out = [_mm256_setzero_si256(); 8];
    for half in 0..2 {
        let ql0 = _mm256_loadu_si256(b.add(64 * half) as *const __m256i);
        let ql1 = _mm256_loadu_si256(b.add(64 * half + 32) as *const __m256i);
        let qh = _mm256_loadu_si256(b.add(128 + 32 * half) as *const __m256i);
        let hbits = |h: __m256i| _mm256_slli_epi16(_mm256_and_si256(h, m2), 4);
        out[4 * half] = _mm256_or_si256(_mm256_and_si256(ql0, m4), hbits(qh));
        out[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), hbits(_mm256_srli_epi16(qh, 2)));
        out[4 * half + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), hbits(_mm256_srli_epi16(qh, 4)));
        out[4 * half + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), hbits(_mm256_srli_epi16(qh, 6)));
    }
    out
}

/// One unpacked Q6_K super-block (scales `sc`) against activation block `i`, as
/// llama.cpp's `ggml_vec_dot_q6_K_q8_K` keeps it: eight i32 lanes, each less its share of
/// the −32 offset (lane L: 32 · Σ over scales 2L, 2L + 1 of scale · block sum).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `sc` must hold at least 16
/// bytes, `q.q8k` at least `256 · (i + 1)` values and `q.q8k_bsums` at least `16 · (i + 1)`
/// (all read unchecked).
#[inline(always)]
unsafe fn q6k_block(qv: &[__m256i; 8], sc: &[u8], q: &QuantizedRow, i: usize) -> __m256i {
    let y = q.q8k.as_ptr().add(256 * i);
    let bsums = _mm256_loadu_si256(q.q8k_bsums.as_ptr().add(16 * i) as *const __m256i);
    let scales = _mm_loadu_si128(sc.as_ptr() as *const __m128i);
    let offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(scales)), 5);
    let sc = sc.as_ptr() as *const i8;
    let mut sumi = _mm256_setzero_si256();
    for (k, qv) in qv.iter().enumerate() {
        // Lanes 0..16 take scale 2k, lanes 16..32 scale 2k + 1 (16 values per scale).
        let scale = _mm256_set_m128i(_mm_set1_epi16(i16::from(*sc.add(2 * k + 1))), _mm_set1_epi16(i16::from(*sc.add(2 * k))));
        let p = _mm256_maddubs_epi16(*qv, _mm256_loadu_si256(y.add(32 * k) as *const __m256i));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
    }
    _mm256_sub_epi32(sumi, offset)
}

/// One Q6_K row against one token (llama.cpp's `vec_dot` order).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8k` must hold at least
/// 256 values and `q.q8k_bsums` 16 per whole 210-byte block of `row` (read unchecked;
/// `q.q8k_d` is indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (i, b) in row.chunks_exact(210).enumerate() {
        prefetch(b.as_ptr().wrapping_add(4 * 210), 210);
        let d = q.q8k_d[i] * f16_at(b, 208);
        let sumi = q6k_block(&q6k_unpack(b.as_ptr()), &b[192..208], q, i);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc)
}

/// One Q6_K row against four activation rows: each super-block unpacked once;
/// bit-identical to four [`q6k`] calls.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With `n = row.len() / 210`
/// blocks, every `qs[k]` must hold at least `256 · n` values in `q8k`, `n` in `q8k_d` and
/// `16 · n` in `q8k_bsums` (all read unchecked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k_4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    for (i, b) in row.chunks_exact(210).enumerate() {
        let (qv, dx) = (q6k_unpack(b.as_ptr()), f16_at(b, 208));
        for k in 0..4 {
            let d = *qs[k].q8k_d.get_unchecked(i) * dx;
            let sumi = q6k_block(&qv, &b[192..208], qs[k], i);
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[k]);
        }
    }
    acc.map(|a| hsum(a))
}

// For eight tokens or more, llama.cpp runs Q6_K through its tiled K-quant matmul
// (`ggml-cpu/tiled`), which sums each super-block in integers and accumulates per output
// `acc = fma(dx · Σ, dy, acc)`.

/// One Q6_K row against one token in the tiled matmul's order.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). `q.q8k` must hold at least
/// 256 values and `q.q8k_bsums` 16 per whole 210-byte block of `row` (read unchecked;
/// `q.q8k_d` is indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k_tiled(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = 0f32;
    for (i, b) in row.chunks_exact(210).enumerate() {
        let sumi = hsum_i32(q6k_block(&q6k_unpack(b.as_ptr()), &b[192..208], q, i));
        acc = (f16_at(b, 208) * sumi as f32).mul_add(q.q8k_d[i], acc);
    }
    acc
}

/// One Q6_K row against four tokens in the tiled matmul's order (bit-identical to four
/// [`q6k_tiled`] calls). Only each super-block's total is needed here, so the unpacked
/// weights and the scale vectors are shared by the four tokens and one horizontal sum
/// serves all four.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs). With `n = row.len() / 210`
/// blocks, every `qs[k]` must hold at least `256 · n` values in `q8k` and `16 · n` in
/// `q8k_bsums` (read unchecked; `q8k_d` is indexed with bounds checks).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k_tiled_4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = _mm_setzero_ps();
    for (i, b) in row.chunks_exact(210).enumerate() {
        let qv = q6k_unpack(b.as_ptr());
        let sc = b.as_ptr().add(192) as *const i8;
        // Plain loops: closures would not inherit the target features.
        let mut scale = [_mm256_setzero_si256(); 8];
        for (k, s) in scale.iter_mut().enumerate() {
            *s = _mm256_set_m128i(_mm_set1_epi16(i16::from(*sc.add(2 * k + 1))), _mm_set1_epi16(i16::from(*sc.add(2 * k))));
        }
        let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc as *const __m128i));
        let mut sums = [_mm256_setzero_si256(); 4];
        for (t, sum) in sums.iter_mut().enumerate() {
            let y = qs[t].q8k.as_ptr().add(256 * i);
            let mut sumi = _mm256_setzero_si256();
            for k in 0..8 {
                let p = _mm256_maddubs_epi16(qv[k], _mm256_loadu_si256(y.add(32 * k) as *const __m256i));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale[k]));
            }
            let bsums = _mm256_loadu_si256(qs[t].q8k_bsums.as_ptr().add(16 * i) as *const __m256i);
            *sum = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
        }
        let dy = _mm_setr_ps(qs[0].q8k_d[i], qs[1].q8k_d[i], qs[2].q8k_d[i], qs[3].q8k_d[i]);
        let dxs = _mm_mul_ps(_mm_set1_ps(f16_at(b, 208)), _mm_cvtepi32_ps(hsum4_i32(sums)));
        acc = _mm_fmadd_ps(dxs, dy, acc);
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), acc);
    out
}

/// The sum of the eight i32 lanes of `v`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    _mm_cvtsi128_si32(s)
}

#[cfg(test)]
mod tests {
    use super::super::dot::dot_row_scalar;
    use super::super::dot::tests::{activations, quantized, weight_row, TYPES};
    use super::*;
    use crate::quant::scale_min_k4;

    #[test]
    fn q4k_scales_unpack_as_the_reference() {
        for seed in 0..64u8 {
            let packed: [u8; 12] =
                std::array::from_fn(|i| seed.wrapping_mul(37).wrapping_add((i as u8).wrapping_mul(91)) ^ (i as u8).rotate_left(3));
            let (sc, m) = scales_mins_k4(&packed);
            for j in 0..8 {
                assert_eq!((sc[j], m[j]), scale_min_k4(j, &packed), "seed {seed}, sub-block {j}");
            }
        }
    }

    #[test]
    fn f16c_rounding_matches_the_software_rounding() {
        if !available() {
            return;
        }
        let mut v: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.731).sin() * 10f32.powi(i % 12 - 6)).collect();
        v.extend([0.0, -0.0, 65504.0, 65520.0, 1e-8, f32::INFINITY, 6.1e-5, 1.0 + 1.0 / 2048.0]);
        let want: Vec<u32> = v.iter().map(|&x| crate::quant::f16_round(x).to_bits()).collect();
        // SAFETY: `available()` (checked above) found AVX2, FMA and F16C.
        unsafe { f16_round_all(&mut v) };
        assert_eq!(v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
    }

    #[test]
    fn avx2_kernels_match_scalar() {
        if !available() {
            return;
        }
        for ty in TYPES {
            for (n, seed) in [(256usize, 1u64), (1536, 2), (8960 / 256 * 256, 3)] {
                let row = weight_row(ty, n, seed);
                let x = activations(n, seed + 100);
                let q = quantized(&x, ty);
                let Some(got) = dot_row(ty, &row, &q, Batch::Small) else { continue };
                let want = dot_row_scalar(ty, &row, &x, &q);
                assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{ty} n={n}: {got} vs {want}");
                if let Some(v) = dot_4rows(ty, [&row; 4], &q) {
                    assert!(v.iter().all(|v| v.to_bits() == got.to_bits()), "{ty}: 4-row kernel differs");
                }
                if let Some(big) = dot_row(ty, &row, &q, Batch::Large) {
                    assert!((big - want).abs() <= 1e-4 * want.abs().max(1.0), "{ty} large batch: {big} vs {want}");
                    // (Q4_K's four-token order is its own; checked below.)
                    if let Some(v) = dot_4tokens(ty, &row, [&q; 4], Batch::Large).filter(|_| ty != GgmlType::Q4K) {
                        assert!(v.iter().all(|v| v.to_bits() == big.to_bits()), "{ty}: large-batch 4-token kernel differs");
                    }
                }
                if let Some(v) = dot_4tokens(ty, &row, [&q; 4], Batch::Small) {
                    // Q4_K's four-token order is llama.cpp's, not its one-token order.
                    let exact = ty != GgmlType::Q4K;
                    assert!(
                        v.iter().all(|v| if exact { v.to_bits() == got.to_bits() } else { (v - got).abs() <= 1e-5 * got.abs().max(1.0) }),
                        "{ty}: 4-token kernel differs"
                    );
                }
            }
        }
    }
}
