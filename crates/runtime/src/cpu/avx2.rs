//! AVX2 + FMA kernels for the weight types the shipped models use (Q4_1 and Q8_0 for
//! SmolLM2; Q4_K and Q6_K for Qwen2.5), chosen at run time. Each is the scalar kernel's
//! integer arithmetic 32 lanes at a time: nibbles are unpacked to bytes, multiplied with
//! the int8 activations by `maddubs` (u8 × i8 → i16 pairs), widened by `madd`, scaled and
//! accumulated in f32. Tested against the scalar kernels in `dot.rs`.

#![allow(unsafe_code)]

use std::arch::x86_64::*;
use std::sync::OnceLock;

use super::act::QuantizedRow;
use crate::gguf::GgmlType;
use crate::quant::scale_min_k4;

/// The half-precision float at byte `i` of `b`, converted by the F16C instruction.
#[inline(always)]
unsafe fn f16_at(b: &[u8], i: usize) -> f32 {
    let h = u16::from_le_bytes([b[i], b[i + 1]]);
    // A broadcast, not an insert: an insert into a don't-care register made LLVM merge into
    // the loop's accumulator, chaining every block's conversion to the previous block.
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(h as i16)))
}

/// Whether this CPU has AVX2, FMA and F16C (checked once; `DOCMEM_NO_SIMD` turns the SIMD
/// kernels off, to compare with the portable ones).
pub fn available() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
            && std::env::var_os("DOCMEM_NO_SIMD").is_none()
    })
}

/// The AVX2 kernel for `ty`, or `None` where only the scalar one exists.
#[inline]
pub fn dot_row(ty: GgmlType, row: &[u8], q: &QuantizedRow) -> Option<f32> {
    debug_assert!(available());
    // SAFETY: callers check `available()` first, so the target features are present; the
    // kernels read only within `row` and `q`, whose lengths match (one weight row, one
    // activation row of the same width).
    unsafe {
        match ty {
            GgmlType::Q4_1 => Some(q4_1(row, q)),
            GgmlType::Q4_0 => Some(q4_0(row, q)),
            GgmlType::Q8_0 => Some(q8_0(row, q)),
            GgmlType::Q4K => Some(q4k(row, q)),
            GgmlType::Q6K => Some(q6k(row, q)),
            _ => None,
        }
    }
}

/// `x` rounded to half precision (nearest, ties to even) and back, by F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_round(x: f32) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))))
}

/// [`f16_round`] over a slice, eight at a time.
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
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let x = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Σ u8 × i8 over 32 lanes, as 8 i32 lanes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mul_sum_u8_i8(a: __m256i, b: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1))
}

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

/// Four (row, activation) pairs at once: the same arithmetic as [`q4_1`] per pair (so the
/// same bits), with four independent dependency chains instead of one.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_x4(rows: [&[u8]; 4], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut mins = [0f32; 4];
    let nb = rows[0].len() / 20;
    for i in 0..nb {
        for k in 0..4 {
            let b = rows[k].as_ptr().add(20 * i);
            let q = qs[k];
            let bs = std::slice::from_raw_parts(b, 4);
            let (d, m) = (f16_at(bs, 0), f16_at(bs, 2));
            let w = nibbles(b.add(4));
            let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
            let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(w, y));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * *q.q8_d.get_unchecked(i)), s, acc[k]);
            mins[k] += m * *q.q8_s.get_unchecked(i);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]) + mins[k])
}

/// Four (row, activation) pairs at once for Q8_0 (bit-identical to [`q8_0`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_x4(rows: [&[u8]; 4], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let nb = rows[0].len() / 34;
    for i in 0..nb {
        for k in 0..4 {
            let b = rows[k].as_ptr().add(34 * i);
            let q = qs[k];
            let w = _mm256_loadu_si256(b.add(2) as *const __m256i);
            let y = _mm256_loadu_si256(q.q8.as_ptr().add(32 * i) as *const __m256i);
            let s = _mm256_cvtepi32_ps(mul_sum_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w)));
            let d = f16_at(std::slice::from_raw_parts(b, 2), 0);
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * *q.q8_d.get_unchecked(i)), s, acc[k]);
        }
    }
    std::array::from_fn(|k| hsum(acc[k]))
}

/// Four dot products at once where a 4-wide kernel exists (`None` otherwise). All rows
/// have one length and every activation row matches it.
#[inline]
pub fn dot_x4(ty: GgmlType, rows: [&[u8]; 4], qs: [&QuantizedRow; 4]) -> Option<[f32; 4]> {
    debug_assert!(available());
    let len = rows[0].len();
    if rows.iter().any(|r| r.len() != len) {
        return None;
    }
    // SAFETY: features checked by the caller; every row has `len` bytes (whole blocks) and
    // every activation row has the matching number of values and scales.
    unsafe {
        match ty {
            GgmlType::Q4_1 if qs.iter().all(|q| q.q8.len() == len / 20 * 32 && q.q8_d.len() * 20 == len) => Some(q4_1_x4(rows, qs)),
            GgmlType::Q8_0 if qs.iter().all(|q| q.q8.len() == len / 34 * 32 && q.q8_d.len() * 34 == len) => Some(q8_0_x4(rows, qs)),
            GgmlType::Q4K
                if rows.iter().all(|r| std::ptr::eq(r.as_ptr(), rows[0].as_ptr()))
                    && qs.iter().all(|q| q.q8k.len() == len / 144 * 256 && q.q8k_d.len() * 144 == len && q.q8k_bsums.len() * 9 == len) =>
            {
                Some(q4k_x4tok(rows[0], qs))
            }
            _ => None,
        }
    }
}

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

/// The eight 6-bit scales and minimums of a Q4_K super-block, widened for the kernels.
#[inline(always)]
fn scales_mins_k4(q: &[u8]) -> ([i16; 8], [i32; 8]) {
    let pairs: [(u8, u8); 8] = std::array::from_fn(|j| scale_min_k4(j, q));
    (pairs.map(|(sc, _)| i16::from(sc)), pairs.map(|(_, m)| i32::from(m)))
}

/// One super-block of Q4_K against one Q8_K block: the integer sum of scaled products
/// (8 lanes) and the integer minimum term.
#[inline(always)]
unsafe fn q4k_block(b: *const u8, sc: &[i16; 8], m: &[i32; 8], y: *const i8, bsums: &[i16]) -> (__m256i, i32) {
    let mask = _mm256_set1_epi8(0x0F);
    let mut sumi = _mm256_setzero_si256();
    let mut summ = 0i32;
    for g in 0..4 {
        summ += m[2 * g] * (i32::from(bsums[4 * g]) + i32::from(bsums[4 * g + 1]));
        summ += m[2 * g + 1] * (i32::from(bsums[4 * g + 2]) + i32::from(bsums[4 * g + 3]));
        let w = _mm256_loadu_si256(b.add(16 + 32 * g) as *const __m256i);
        let lo = _mm256_and_si256(w, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
        let y1 = _mm256_loadu_si256(y.add(64 * g) as *const __m256i);
        let y2 = _mm256_loadu_si256(y.add(64 * g + 32) as *const __m256i);
        let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y1), _mm256_set1_epi16(sc[2 * g]));
        let p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y2), _mm256_set1_epi16(sc[2 * g + 1]));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p1, p2));
    }
    (sumi, summ)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let d8 = q.q8k_d[i];
        let (sc, m) = scales_mins_k4(&b[4..16]);
        let (sumi, summ) = q4k_block(b.as_ptr(), &sc, &m, q.q8k.as_ptr().add(256 * i), &q.q8k_bsums[16 * i..16 * i + 16]);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * d8), _mm256_cvtepi32_ps(sumi), acc);
        mins += dmin * d8 * summ as f32;
    }
    hsum(acc) - mins
}

/// One Q4_K row against four activation rows (bit-identical to four [`q4k`] calls): the
/// block's scales are decoded once for the four.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4k_x4tok(row: &[u8], qs: [&QuantizedRow; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut mins = [0f32; 4];
    for (i, b) in row.chunks_exact(144).enumerate() {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        let (sc, m) = scales_mins_k4(&b[4..16]);
        for k in 0..4 {
            let q = qs[k];
            let d8 = *q.q8k_d.get_unchecked(i);
            let (sumi, summ) = q4k_block(b.as_ptr(), &sc, &m, q.q8k.as_ptr().add(256 * i), q.q8k_bsums.get_unchecked(16 * i..16 * i + 16));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d * d8), _mm256_cvtepi32_ps(sumi), acc[k]);
            mins[k] += dmin * d8 * summ as f32;
        }
    }
    std::array::from_fn(|k| hsum(acc[k]) - mins[k])
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6k(row: &[u8], q: &QuantizedRow) -> f32 {
    let mut total = 0f32;
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    for (i, b) in row.chunks_exact(210).enumerate() {
        let d = f16_at(b, 208);
        let y = q.q8k.as_ptr().add(256 * i);
        let bsums = &q.q8k_bsums[16 * i..16 * i + 16];
        let sc: [i8; 16] = std::array::from_fn(|k| b[192 + k] as i8);
        // The −32 offset, by the block sums: Σ sc · 32 · Σy.
        let offset: i32 = (0..16).map(|k| i32::from(sc[k]) * i32::from(bsums[k])).sum::<i32>() * 32;
        let mut sumi = _mm256_setzero_si256();
        for half in 0..2 {
            let ql0 = _mm256_loadu_si256(b.as_ptr().add(64 * half) as *const __m256i);
            let ql1 = _mm256_loadu_si256(b.as_ptr().add(64 * half + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(b.as_ptr().add(128 + 32 * half) as *const __m256i);
            let hbits = |shift: i32| -> __m256i {
                let h = match shift {
                    0 => qh,
                    2 => _mm256_srli_epi16(qh, 2),
                    4 => _mm256_srli_epi16(qh, 4),
                    _ => _mm256_srli_epi16(qh, 6),
                };
                _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)
            };
            let q1 = _mm256_or_si256(_mm256_and_si256(ql0, m4), hbits(0));
            let q2 = _mm256_or_si256(_mm256_and_si256(ql1, m4), hbits(2));
            let q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), hbits(4));
            let q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), hbits(6));
            let s = &sc[8 * half..8 * half + 8];
            let scale = |a: i8, b: i8| _mm256_set_m128i(_mm_set1_epi16(i16::from(b)), _mm_set1_epi16(i16::from(a)));
            let base = y.add(128 * half);
            for (k, qv) in [q1, q2, q3, q4].into_iter().enumerate() {
                let yv = _mm256_loadu_si256(base.add(32 * k) as *const __m256i);
                let p = _mm256_maddubs_epi16(qv, yv);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale(s[2 * k], s[2 * k + 1])));
            }
        }
        total += d * q.q8k_d[i] * (hsum_i32(sumi) - offset) as f32;
    }
    total
}

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

    #[test]
    fn f16c_rounding_matches_the_software_rounding() {
        if !available() {
            return;
        }
        let mut v: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.731).sin() * 10f32.powi(i % 12 - 6)).collect();
        v.extend([0.0, -0.0, 65504.0, 65520.0, 1e-8, f32::INFINITY, 6.1e-5, 1.0 + 1.0 / 2048.0]);
        let want: Vec<u32> = v.iter().map(|&x| crate::quant::f16_round(x).to_bits()).collect();
        // SAFETY: the features are present.
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
                let Some(got) = dot_row(ty, &row, &q) else { continue };
                let want = dot_row_scalar(ty, &row, &x, &q);
                assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "{ty} n={n}: {got} vs {want}");
                if let Some(four) = dot_x4(ty, [&row; 4], [&q; 4]) {
                    assert!(four.iter().all(|v| v.to_bits() == got.to_bits()), "{ty}: 4-wide kernel differs");
                }
            }
        }
    }
}
