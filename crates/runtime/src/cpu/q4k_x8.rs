//! Q4_K matrices re-laid eight rows at a time, so that SIMD lanes are rows.
//!
//! Why: in GGUF's layout a Q4_K row is a run of 144-byte super-blocks, so a SIMD dot
//! product leaves one row's partial sums spread over eight lanes, and llama.cpp's batch
//! order (a float accumulation per 64-value group, see `avx2.rs`) then needs a horizontal
//! sum per row, token and group: on a 1.5B model that was most of the prefill time.
//! llama.cpp re-lays Q4_K at load time for the same reason. Here, eight rows' super-block
//! `i` become one 1,248-byte block in which every 32 bytes hold four consecutive weights of
//! each of the eight rows; a `maddubs` against four broadcast activation bytes then gives
//! each row its own pair of 16-bit lanes, and the sums come out one row per 32-bit lane.
//! The integer sums are the same exact integers, and the float steps are lane by lane
//! those of the row-wise kernels, so results are bit-identical to them (tested below).
//!
//! Only the matmul reads this layout; it is chosen at load time where the AVX2 kernels
//! run ([`worth_it`]) and for matrices whose row count is a multiple of eight.
//!
//! Block layout (eight rows `r`, one super-block):
//! - bytes 0..16: `d` of each row (f16); 16..32: `dmin` of each row (f16);
//! - 32..160: for sub-block `s` (0..8), 16 bytes: row `r`'s 6-bit scale at `2r` and `2r+1`
//!   (so, widened to i16, it multiplies both 16-bit lanes of row `r`);
//! - 160..224: for group `g` (0..4), 16 bytes: row `r`'s minimums of sub-blocks `2g` and
//!   `2g+1` at `2r` and `2r+1`;
//! - 224..1248: for group `g`, chunk `c` (0..8), row `r`: the four packed bytes
//!   `qs[32g+4c .. 32g+4c+4]` of row `r` (low nibbles: sub-block `2g`, values `4c..4c+4`;
//!   high nibbles: sub-block `2g+1`, the same values).

use crate::quant::scales_mins_k4;

/// Rows re-laid together.
pub const ROWS: usize = 8;
/// Bytes of one GGUF Q4_K super-block.
const SRC_BLOCK: usize = 144;
/// Bytes of one re-laid block (eight rows' super-block).
pub const BLOCK: usize = 1248;
const SCALES: usize = 32;
const MINS: usize = 160;
const QUANTS: usize = 224;

/// Whether matmuls here would use the re-laid form (the AVX2 kernels are present).
pub fn worth_it() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::avx2::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Re-lay `rows` (a multiple of [`ROWS`]) GGUF Q4_K rows of `blocks` super-blocks each.
pub fn interleave(data: &[u8], rows: usize, blocks: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows / ROWS * blocks * BLOCK];
    interleave_into(data, blocks, &mut out);
    out
}

/// Bytes of `rows` rows of `blocks` super-blocks, re-laid.
pub fn relaid_bytes(rows: usize, blocks: usize) -> usize {
    rows / ROWS * blocks * BLOCK
}

/// Re-lay whole groups of eight GGUF Q4_K rows (`data`, `blocks` super-blocks per row)
/// into `out`, which holds [`relaid_bytes`] for them (a loader can stream a matrix through
/// this a few rows at a time).
pub fn interleave_into(data: &[u8], blocks: usize, out: &mut [u8]) {
    debug_assert!(data.len().is_multiple_of(ROWS * blocks * SRC_BLOCK));
    debug_assert_eq!(out.len(), data.len() / SRC_BLOCK * BLOCK / ROWS);
    for (group, dst_group) in out.chunks_exact_mut(blocks * BLOCK).enumerate() {
        for (i, dst) in dst_group.chunks_exact_mut(BLOCK).enumerate() {
            for r in 0..ROWS {
                let src = &data[((group * ROWS + r) * blocks + i) * SRC_BLOCK..][..SRC_BLOCK];
                dst[2 * r..2 * r + 2].copy_from_slice(&src[0..2]);
                dst[16 + 2 * r..16 + 2 * r + 2].copy_from_slice(&src[2..4]);
                let (sc, m) = scales_mins_k4(&src[4..16]);
                for s in 0..8 {
                    dst[SCALES + 16 * s + 2 * r] = sc[s];
                    dst[SCALES + 16 * s + 2 * r + 1] = sc[s];
                }
                for g in 0..4 {
                    dst[MINS + 16 * g + 2 * r] = m[2 * g];
                    dst[MINS + 16 * g + 2 * r + 1] = m[2 * g + 1];
                }
                for g in 0..4 {
                    for c in 0..8 {
                        let at = QUANTS + 256 * g + 32 * c + 4 * r;
                        dst[at..at + 4].copy_from_slice(&src[16 + 32 * g + 4 * c..][..4]);
                    }
                }
            }
        }
    }
}

/// Row `r` back in GGUF's Q4_K form (`blocks` super-blocks), from re-laid `data`.
pub fn row(data: &[u8], blocks: usize, r: usize, out: &mut Vec<u8>) {
    out.clear();
    let (group, lane) = (r / ROWS, r % ROWS);
    for i in 0..blocks {
        let b = &data[(group * blocks + i) * BLOCK..][..BLOCK];
        out.extend_from_slice(&b[2 * lane..2 * lane + 2]);
        out.extend_from_slice(&b[16 + 2 * lane..16 + 2 * lane + 2]);
        let sc: [u8; 8] = std::array::from_fn(|s| b[SCALES + 16 * s + 2 * lane]);
        let m: [u8; 8] = std::array::from_fn(|s| b[MINS + 16 * (s / 2) + 2 * lane + s % 2]);
        out.extend_from_slice(&pack_scales_mins_k4(&sc, &m));
        for g in 0..4 {
            for c in 0..8 {
                out.extend_from_slice(&b[QUANTS + 256 * g + 32 * c + 4 * lane..][..4]);
            }
        }
    }
}

/// The inverse of [`scales_mins_k4`]: eight 6-bit scales and minimums in Q4_K's 12 bytes.
fn pack_scales_mins_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 15) | ((m[j + 4] & 15) << 4);
    }
    q
}

#[cfg(target_arch = "x86_64")]
pub(crate) use kernels::{gemm_4tok, gemv};

/// AVX2 kernels over the re-laid blocks.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod kernels {
    use std::arch::x86_64::*;

    use super::super::act::QuantizedRow;
    use super::{BLOCK, MINS, QUANTS, SCALES};

    /// The 16-byte scale pattern at `p` widened to sixteen i16 lanes.
    #[inline(always)]
    unsafe fn widen(p: *const u8) -> __m256i {
        _mm256_cvtepu8_epi16(_mm_loadu_si128(p as *const __m128i))
    }

    /// The four activation bytes at `p` in every 32-bit lane.
    #[inline(always)]
    unsafe fn bcast4(p: *const i8) -> __m256i {
        _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32))
    }

    /// Token `q`'s 32-value sub-block sums of super-block `i` as eight i16 (pairs per
    /// group: dword `g` holds sub-blocks `2g`, `2g+1`).
    #[inline(always)]
    unsafe fn sub_sums(q: &QuantizedRow, i: usize) -> __m128i {
        let b = _mm256_loadu_si256(q.q8k_bsums.as_ptr().add(16 * i) as *const __m256i);
        _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1))
    }

    /// Dword `g` of `v` in every lane.
    #[inline(always)]
    unsafe fn dword(v: __m128i, g: usize) -> __m256i {
        let s = match g {
            0 => _mm_shuffle_epi32(v, 0x00),
            1 => _mm_shuffle_epi32(v, 0x55),
            2 => _mm_shuffle_epi32(v, 0xAA),
            _ => _mm_shuffle_epi32(v, 0xFF),
        };
        _mm256_broadcastsi128_si256(s)
    }

    /// Eight rows (re-laid `data`, one row group) against one token, in llama.cpp's
    /// one-token order: per super-block, `acc = fma(Σ, d·dy, acc)`, minimums likewise;
    /// lane `r` of the result is row `r`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemv(data: &[u8], q: &QuantizedRow) -> [f32; 8] {
        let mask = _mm256_set1_epi8(0x0F);
        let (mut acc, mut mins) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let y = q.q8k.as_ptr().add(256 * i);
            let sub = sub_sums(q, i);
            let mut sumi = _mm256_setzero_si256();
            let mut summ = _mm256_setzero_si256();
            for g in 0..4 {
                let (mut plo, mut phi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for c in 0..8 {
                    let w = _mm256_loadu_si256(b.add(QUANTS + 256 * g + 32 * c) as *const __m256i);
                    let lo = _mm256_and_si256(w, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
                    plo = _mm256_add_epi16(plo, _mm256_maddubs_epi16(lo, bcast4(y.add(64 * g + 4 * c))));
                    phi = _mm256_add_epi16(phi, _mm256_maddubs_epi16(hi, bcast4(y.add(64 * g + 32 + 4 * c))));
                }
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, widen(b.add(SCALES + 32 * g))));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, widen(b.add(SCALES + 32 * g + 16))));
                summ = _mm256_add_epi32(summ, _mm256_madd_epi16(widen(b.add(MINS + 16 * g)), dword(sub, g)));
            }
            let dy = _mm256_set1_ps(*q.q8k_d.get_unchecked(i));
            let d = _mm256_cvtph_ps(_mm_loadu_si128(b as *const __m128i));
            let dmin = _mm256_cvtph_ps(_mm_loadu_si128(b.add(16) as *const __m128i));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(d, dy), acc);
            mins = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(dmin, dy), mins);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, mins));
        out
    }

    /// Eight rows against four tokens, in llama.cpp's four-token order (floats accumulated
    /// per 64-value group); `out[k]` lane `r` is token `k`, row `r`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_4tok(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        let mask = _mm256_set1_epi8(0x0F);
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut mins = [_mm256_setzero_ps(); 4];
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let y: [*const i8; 4] = std::array::from_fn(|k| qs[k].q8k.as_ptr().add(256 * i));
            let d = _mm256_cvtph_ps(_mm_loadu_si128(b as *const __m128i));
            let dmin = _mm256_cvtph_ps(_mm_loadu_si128(b.add(16) as *const __m128i));
            let dd: [__m256; 4] = std::array::from_fn(|k| _mm256_mul_ps(d, _mm256_set1_ps(*qs[k].q8k_d.get_unchecked(i))));
            let dm: [__m256; 4] = std::array::from_fn(|k| _mm256_mul_ps(dmin, _mm256_set1_ps(*qs[k].q8k_d.get_unchecked(i))));
            for g in 0..4 {
                let mut plo = [_mm256_setzero_si256(); 4];
                let mut phi = [_mm256_setzero_si256(); 4];
                for c in 0..8 {
                    let w = _mm256_loadu_si256(b.add(QUANTS + 256 * g + 32 * c) as *const __m256i);
                    let lo = _mm256_and_si256(w, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
                    for k in 0..4 {
                        plo[k] = _mm256_add_epi16(plo[k], _mm256_maddubs_epi16(lo, bcast4(y[k].add(64 * g + 4 * c))));
                        phi[k] = _mm256_add_epi16(phi[k], _mm256_maddubs_epi16(hi, bcast4(y[k].add(64 * g + 32 + 4 * c))));
                    }
                }
                let s_lo = widen(b.add(SCALES + 32 * g));
                let s_hi = widen(b.add(SCALES + 32 * g + 16));
                let m = widen(b.add(MINS + 16 * g));
                for k in 0..4 {
                    let sumi = _mm256_add_epi32(_mm256_madd_epi16(plo[k], s_lo), _mm256_madd_epi16(phi[k], s_hi));
                    acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), dd[k], acc[k]);
                    let summ = _mm256_madd_epi16(m, dword(sub_sums(qs[k], i), g));
                    mins[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), dm[k], mins[k]);
                }
            }
        }
        let mut out = [[0f32; 8]; 4];
        for k in 0..4 {
            _mm256_storeu_ps(out[k].as_mut_ptr(), _mm256_sub_ps(acc[k], mins[k]));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::dot::tests::{activations, weight_row};
    use crate::gguf::GgmlType;

    #[test]
    fn rows_come_back_as_they_went_in() {
        let (rows, cols) = (16, 512);
        let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(GgmlType::Q4K, cols, r as u64)).collect();
        let x = interleave(&data, rows, cols / 256);
        assert_eq!(x.len(), rows / ROWS * 2 * BLOCK);
        let mut back = Vec::new();
        for r in 0..rows {
            row(&x, cols / 256, r, &mut back);
            assert_eq!(back, data[r * 288..(r + 1) * 288], "row {r}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernels_equal_the_row_wise_ones_bit_for_bit() {
        use crate::cpu::act::QuantizedRow;
        use crate::cpu::dot::{dot_4tokens, dot_row, Batch};
        if !worth_it() {
            return;
        }
        let (rows, cols) = (8, 1024);
        let blocks = cols / 256;
        let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(GgmlType::Q4K, cols, 7 + r as u64)).collect();
        let x = interleave(&data, rows, blocks);
        let qs: Vec<QuantizedRow> = (0..4)
            .map(|t| {
                let mut q = QuantizedRow::default();
                q.quantize_q8k(&activations(cols, 11 + t));
                q
            })
            .collect();
        let row = |r: usize| &data[r * blocks * 144..(r + 1) * blocks * 144];
        // SAFETY: `worth_it` checked the CPU features; sizes match by construction.
        let one = unsafe { gemv(&x, &qs[0]) };
        let four = unsafe { gemm_4tok(&x, [&qs[0], &qs[1], &qs[2], &qs[3]]) };
        for r in 0..rows {
            let want = dot_row(GgmlType::Q4K, row(r), &[], &qs[0], Batch::Small);
            assert_eq!(one[r].to_bits(), want.to_bits(), "gemv row {r}: {} vs {want}", one[r]);
            let want4 = dot_4tokens(GgmlType::Q4K, row(r), [&qs[0], &qs[1], &qs[2], &qs[3]], Batch::Large).unwrap();
            for k in 0..4 {
                assert_eq!(four[k][r].to_bits(), want4[k].to_bits(), "gemm row {r} token {k}: {} vs {}", four[k][r], want4[k]);
            }
        }
    }
}
