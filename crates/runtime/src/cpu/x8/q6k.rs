//! Q6_K re-laid eight rows at a time (see the parent module for why).
//!
//! llama.cpp runs Q6_K through two float orders (see `avx2.rs`): `vec_dot` below eight
//! tokens (eight lanes per row, lane `L` summing the four-value chunks `c` with
//! `c mod 8 = L` less its share of the −32 offset, one `fma` per super-block and lane, a
//! horizontal sum at the end), and the tiled matmul from eight tokens up (each
//! super-block summed exactly, `acc = fma(dx·Σ, dy, acc)`). With rows in lanes, the first
//! keeps eight accumulators, one per original lane, and folds them at the end in `hsum`'s
//! order; the second needs one.
//!
//! Block layout (eight rows `r`, one super-block of 256 six-bit values `0..64`):
//! - bytes 0..16: `d` of each row (f16);
//! - 16..272: for sub-block `j` (16 values, 0..16), 16 bytes: row `r`'s signed scale at
//!   `2r` and `2r+1`;
//! - 272..1808: for sub-block `j`, 96 bytes holding its four chunks (`4j..4j+4`, four
//!   values each) for the eight rows (row `r` at bytes `4r..4r+4` of each 32): low
//!   nibbles of chunks `4j` (low) and `4j+1` (high), the same for `4j+2` and `4j+3`, then
//!   the two high bits of the four chunks (bits 0–1, 2–3, 4–5, 6–7).

// Unsafe code: the AVX2 / AVX-512 (VNNI) kernels over the re-laid blocks:
// `#[target_feature]` intrinsics on raw pointers into the blocks and the activations,
// called only after run-time feature detection (the parent module's `available`,
// `has_avx512_vl`, `has_vnni`).
#![allow(unsafe_code)]

use super::ROWS;

/// Bytes of one GGUF Q6_K super-block.
const SRC_BLOCK: usize = 210;
/// Bytes of one re-laid block (eight rows' super-block).
pub const BLOCK: usize = 1808;
const SCALES: usize = 16;
const QUANTS: usize = 272;

/// A GGUF Q6_K super-block's 256 values (`0..64`, before the −32 offset), in order.
fn values(b: &[u8]) -> [u8; 256] {
    let mut v = [0u8; 256];
    for half in 0..2 {
        let (ql, qh) = (&b[64 * half..64 * half + 64], &b[128 + 32 * half..128 + 32 * half + 32]);
        for l in 0..32 {
            let at = 128 * half + l;
            v[at] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
            v[at + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
            v[at + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            v[at + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    v
}

/// The inverse of [`values`]: the 192 packed bytes (`ql`, then `qh`).
fn pack_values(v: &[u8; 256]) -> [u8; 192] {
    let mut p = [0u8; 192];
    for half in 0..2 {
        for l in 0..32 {
            let at = 128 * half + l;
            p[64 * half + l] = (v[at] & 0xF) | ((v[at + 64] & 0xF) << 4);
            p[64 * half + l + 32] = (v[at + 32] & 0xF) | ((v[at + 96] & 0xF) << 4);
            p[128 + 32 * half + l] = (v[at] >> 4) | ((v[at + 32] >> 4) << 2) | ((v[at + 64] >> 4) << 4) | ((v[at + 96] >> 4) << 6);
        }
    }
    p
}

/// Eight rows' super-blocks (GGUF form) into one re-laid block.
pub(super) fn interleave_block(rows: [&[u8]; ROWS], dst: &mut [u8]) {
    for (r, src) in rows.iter().enumerate() {
        dst[2 * r..2 * r + 2].copy_from_slice(&src[208..210]);
        for j in 0..16 {
            dst[SCALES + 16 * j + 2 * r] = src[192 + j];
            dst[SCALES + 16 * j + 2 * r + 1] = src[192 + j];
        }
        let v = values(src);
        for j in 0..16 {
            let quad = QUANTS + 96 * j + 4 * r;
            for m in 0..4 {
                let [a, b, c, e] = [0, 4, 8, 12].map(|o| v[16 * j + o + m]);
                dst[quad + m] = (a & 0xF) | ((b & 0xF) << 4);
                dst[quad + 32 + m] = (c & 0xF) | ((e & 0xF) << 4);
                dst[quad + 64 + m] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
            }
        }
    }
}

/// Row `lane`'s super-block (GGUF form) out of re-laid block `b`, appended to `out`.
pub(super) fn block_row(b: &[u8], lane: usize, out: &mut Vec<u8>) {
    debug_assert_eq!(b.len(), BLOCK);
    let mut v = [0u8; 256];
    for j in 0..16 {
        let quad = QUANTS + 96 * j + 4 * lane;
        for m in 0..4 {
            let (lo, hi, h) = (b[quad + m], b[quad + 32 + m], b[quad + 64 + m]);
            v[16 * j + m] = (lo & 0xF) | ((h & 3) << 4);
            v[16 * j + 4 + m] = (lo >> 4) | (((h >> 2) & 3) << 4);
            v[16 * j + 8 + m] = (hi & 0xF) | (((h >> 4) & 3) << 4);
            v[16 * j + 12 + m] = (hi >> 4) | (((h >> 6) & 3) << 4);
        }
    }
    out.extend_from_slice(&pack_values(&v));
    out.extend((0..16).map(|j| b[SCALES + 16 * j + 2 * lane]));
    out.extend_from_slice(&b[2 * lane..2 * lane + 2]);
    debug_assert!(out.len().is_multiple_of(SRC_BLOCK));
}

#[cfg(target_arch = "x86_64")]
pub(crate) use kernels::{gemm_tiled_4tok, gemv, gemv2, gemv3_512, gemv4_512, gemv_tiled, gemv_vnni};

/// AVX2 kernels over the re-laid blocks.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // parallel per-token arrays read best indexed
mod kernels {
    use std::arch::x86_64::*;

    use super::super::super::act::QuantizedRow;
    use super::super::simd::{bcast4, halfs, widen_i8};
    use super::{BLOCK, QUANTS, SCALES};

    /// The two bits at the bottom of each byte of `x`, moved to bits 4–5.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[inline(always)]
    unsafe fn top(x: __m256i, m2: __m256i) -> __m256i {
        _mm256_slli_epi16(_mm256_and_si256(x, m2), 4)
    }

    /// Sub-block `j`'s four chunks for the eight rows, as unsigned bytes `0..64`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `b` must be valid for reading `QUANTS + 96 · (j + 1)` bytes
    /// (inside one re-laid block for `j < 16`).
    #[inline(always)]
    unsafe fn unpack(b: *const u8, j: usize) -> [__m256i; 4] {
        let (m4, m2) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x03));
        let p = b.add(QUANTS + 96 * j);
        let lo = _mm256_loadu_si256(p as *const __m256i);
        let hi = _mm256_loadu_si256(p.add(32) as *const __m256i);
        let h = _mm256_loadu_si256(p.add(64) as *const __m256i);
        [
            _mm256_or_si256(_mm256_and_si256(lo, m4), top(h, m2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), top(_mm256_srli_epi16(h, 2), m2)),
            _mm256_or_si256(_mm256_and_si256(hi, m4), top(_mm256_srli_epi16(h, 4), m2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), top(_mm256_srli_epi16(h, 6), m2)),
        ]
    }

    /// Lane `r`: row `r`'s offset term of original lane `L`, `32·(s[2L]·bs[2L] + s[2L+1]·bs[2L+1])`
    /// with `bs` the activation's 16-value sums of super-block `i`.
    ///
    /// # Safety
    /// As [`scale_pair`] and [`offset_with`].
    #[inline(always)]
    unsafe fn offset(b: *const u8, q: &QuantizedRow, i: usize, l: usize) -> __m256i {
        offset_with(scale_pair(b, l), q, i, l)
    }

    /// The scales [`offset`] pairs for original lane `l` (the same for every token).
    ///
    /// # Safety
    /// The CPU must have AVX2; `b` must be valid for reading `SCALES + 32 · (l + 1)` bytes
    /// (inside one re-laid block for `l < 8`).
    #[inline(always)]
    unsafe fn scale_pair(b: *const u8, l: usize) -> __m256i {
        _mm256_blend_epi16(widen_i8(b.add(SCALES + 32 * l)), widen_i8(b.add(SCALES + 32 * l + 16)), 0xAA)
    }

    /// [`offset`] from its [`scale_pair`].
    ///
    /// # Safety
    /// The CPU must have AVX2; `q.q8k_bsums` must hold at least `16 · i + 2 · l + 2` values
    /// (read unchecked).
    #[inline(always)]
    unsafe fn offset_with(pair: __m256i, q: &QuantizedRow, i: usize, l: usize) -> __m256i {
        let bs = _mm256_set1_epi32(std::ptr::read_unaligned(q.q8k_bsums.as_ptr().add(16 * i + 2 * l) as *const i32));
        _mm256_slli_epi32(_mm256_madd_epi16(pair, bs), 5)
    }

    /// Super-block `i`'s exact integer sum for each row, offset included (the tiled order's Σ).
    ///
    /// # Safety
    /// The CPU must have AVX2; `b` must be valid for reading one whole re-laid block
    /// (`BLOCK` bytes), `q.q8k` must hold at least `256 · (i + 1)` values and `q.q8k_bsums`
    /// at least `16 · (i + 1)` (read unchecked).
    #[inline(always)]
    unsafe fn total(b: *const u8, q: &QuantizedRow, i: usize) -> __m256i {
        let y = q.q8k.as_ptr().add(256 * i);
        let mut t = _mm256_setzero_si256();
        for j in 0..16 {
            let v = unpack(b, j);
            let s = widen_i8(b.add(SCALES + 16 * j));
            // Two chunks of one scale add in 16 bits first: |Σ| ≤ 2 · 2 · 63 · 128 < 2^15.
            let p01 =
                _mm256_add_epi16(_mm256_maddubs_epi16(v[0], bcast4(y.add(16 * j))), _mm256_maddubs_epi16(v[1], bcast4(y.add(16 * j + 4))));
            let p23 = _mm256_add_epi16(
                _mm256_maddubs_epi16(v[2], bcast4(y.add(16 * j + 8))),
                _mm256_maddubs_epi16(v[3], bcast4(y.add(16 * j + 12))),
            );
            t = _mm256_add_epi32(t, _mm256_add_epi32(_mm256_madd_epi16(p01, s), _mm256_madd_epi16(p23, s)));
        }
        for l in 0..8 {
            t = _mm256_sub_epi32(t, offset(b, q, i, l));
        }
        t
    }

    /// Eight rows against one token in `vec_dot`'s order (fewer than eight tokens).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemv(data: &[u8], q: &QuantizedRow) -> [f32; 8] {
        let mut f = [_mm256_setzero_ps(); 8];
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let y = q.q8k.as_ptr().add(256 * i);
            let mut a = [_mm256_setzero_si256(); 8];
            for j in 0..16 {
                let v = unpack(b, j);
                let s = widen_i8(b.add(SCALES + 16 * j));
                for (m, v) in v.into_iter().enumerate() {
                    let c = 4 * j + m;
                    a[c % 8] = _mm256_add_epi32(a[c % 8], _mm256_madd_epi16(_mm256_maddubs_epi16(v, bcast4(y.add(4 * c))), s));
                }
            }
            let d = _mm256_mul_ps(_mm256_set1_ps(*q.q8k_d.get_unchecked(i)), halfs(b));
            for l in 0..8 {
                f[l] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(a[l], offset(b, q, i, l))), f[l]);
            }
        }
        // `hsum`'s order over the eight original lanes, per row.
        let (s0, s1, s2, s3) = (_mm256_add_ps(f[0], f[4]), _mm256_add_ps(f[1], f[5]), _mm256_add_ps(f[2], f[6]), _mm256_add_ps(f[3], f[7]));
        let r = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), r);
        out
    }

    /// Eight rows against `N` tokens, each in [`gemv`]'s order bit for bit (batched
    /// decoding of independent sequences): every sub-block is unpacked once for the `N`.
    /// Sub-blocks of even `j` feed lanes 0–3 and odd ones lanes 4–7, so taking the even ones
    /// first keeps each lane's integer sums in `gemv`'s order while only half the
    /// accumulators are live at a time. `VNNI`: each chunk's scaled sum is added with one
    /// `vpdpwssd` instead of `vpmaddwd` and `vpaddd` (the same exact integers).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C, and with `VNNI` also AVX-512 F, VL and VNNI
    /// (it is inlined into the kernels below, which enable them); every activation row must
    /// hold the Q8_K values, scales and sums of `data.len() / BLOCK` super-blocks (the
    /// parent module's Safety section).
    #[inline(always)]
    unsafe fn gemv_n<const N: usize, const VNNI: bool>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        let mut f = [[_mm256_setzero_ps(); 8]; N];
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let mut y = [std::ptr::null::<i8>(); N];
            for k in 0..N {
                y[k] = qs[k].q8k.as_ptr().add(256 * i);
            }
            let mut a = [[_mm256_setzero_si256(); 8]; N];
            for parity in 0..2 {
                for jj in 0..8 {
                    let j = 2 * jj + parity;
                    let v = unpack(b, j);
                    let s = widen_i8(b.add(SCALES + 16 * j));
                    for k in 0..N {
                        for (m, v) in v.into_iter().enumerate() {
                            let c = 4 * j + m;
                            let p = _mm256_maddubs_epi16(v, bcast4(y[k].add(4 * c)));
                            a[k][c % 8] = if VNNI {
                                _mm256_dpwssd_epi32(a[k][c % 8], p, s)
                            } else {
                                _mm256_add_epi32(a[k][c % 8], _mm256_madd_epi16(p, s))
                            };
                        }
                    }
                }
            }
            let mut d = [_mm256_setzero_ps(); N];
            for k in 0..N {
                d[k] = _mm256_mul_ps(_mm256_set1_ps(*qs[k].q8k_d.get_unchecked(i)), halfs(b));
            }
            for l in 0..8 {
                let pair = scale_pair(b, l);
                for k in 0..N {
                    f[k][l] = _mm256_fmadd_ps(d[k], _mm256_cvtepi32_ps(_mm256_sub_epi32(a[k][l], offset_with(pair, qs[k], i, l))), f[k][l]);
                }
            }
        }
        let mut out = [[0f32; 8]; N];
        for k in 0..N {
            let f = &f[k];
            let (s0, s1, s2, s3) =
                (_mm256_add_ps(f[0], f[4]), _mm256_add_ps(f[1], f[5]), _mm256_add_ps(f[2], f[6]), _mm256_add_ps(f[3], f[7]));
            let r = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
            _mm256_storeu_ps(out[k].as_mut_ptr(), r);
        }
        out
    }

    /// [`gemv_n`] for two tokens (AVX2: sixteen registers hold their live accumulators).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemv2(data: &[u8], qs: [&QuantizedRow; 2]) -> [[f32; 8]; 2] {
        gemv_n::<2, false>(data, qs)
    }

    /// [`gemv_n`] for three tokens, where AVX-512VL gives 32 vector registers.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and VL, AVX2, FMA and F16C (`has_avx512_vl`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
    pub(crate) unsafe fn gemv3_512(data: &[u8], qs: [&QuantizedRow; 3]) -> [[f32; 8]; 3] {
        gemv_n::<3, false>(data, qs)
    }

    /// [`gemv_n`] for four tokens, where AVX-512VL gives 32 vector registers.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and VL, AVX2, FMA and F16C (`has_avx512_vl`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma,f16c")]
    pub(crate) unsafe fn gemv4_512(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        gemv_n::<4, false>(data, qs)
    }

    /// [`gemv_n`] for one to four tokens with AVX-512 VNNI (on 256-bit vectors).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, VL and VNNI, AVX2, FMA and F16C (`has_vnni`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) unsafe fn gemv_vnni<const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        gemv_n::<N, true>(data, qs)
    }

    /// Eight rows against one token in the tiled matmul's order (eight tokens or more).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemv_tiled(data: &[u8], q: &QuantizedRow) -> [f32; 8] {
        let mut acc = _mm256_setzero_ps();
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let dxs = _mm256_mul_ps(halfs(b), _mm256_cvtepi32_ps(total(b, q, i)));
            acc = _mm256_fmadd_ps(dxs, _mm256_set1_ps(*q.q8k_d.get_unchecked(i)), acc);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), acc);
        out
    }

    /// Eight rows against four tokens in the tiled matmul's order: each sub-block is
    /// unpacked once for the four.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_tiled_4tok(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        let mut acc = [_mm256_setzero_ps(); 4];
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let mut y = [std::ptr::null::<i8>(); 4];
            for k in 0..4 {
                y[k] = qs[k].q8k.as_ptr().add(256 * i);
            }
            let mut t = [_mm256_setzero_si256(); 4];
            for j in 0..16 {
                let v = unpack(b, j);
                let s = widen_i8(b.add(SCALES + 16 * j));
                for k in 0..4 {
                    let p01 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(v[0], bcast4(y[k].add(16 * j))),
                        _mm256_maddubs_epi16(v[1], bcast4(y[k].add(16 * j + 4))),
                    );
                    let p23 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(v[2], bcast4(y[k].add(16 * j + 8))),
                        _mm256_maddubs_epi16(v[3], bcast4(y[k].add(16 * j + 12))),
                    );
                    t[k] = _mm256_add_epi32(t[k], _mm256_add_epi32(_mm256_madd_epi16(p01, s), _mm256_madd_epi16(p23, s)));
                }
            }
            let dx = halfs(b);
            for k in 0..4 {
                let mut tk = t[k];
                for l in 0..8 {
                    tk = _mm256_sub_epi32(tk, offset(b, qs[k], i, l));
                }
                let dxs = _mm256_mul_ps(dx, _mm256_cvtepi32_ps(tk));
                acc[k] = _mm256_fmadd_ps(dxs, _mm256_set1_ps(*qs[k].q8k_d.get_unchecked(i)), acc[k]);
            }
        }
        let mut out = [[0f32; 8]; 4];
        for k in 0..4 {
            _mm256_storeu_ps(out[k].as_mut_ptr(), acc[k]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{q8k_rows, relaid};
    use super::*;
    use crate::cpu::dot::tests::weight_row;
    use crate::gguf::GgmlType;

    #[test]
    fn values_pack_back() {
        let b = weight_row(GgmlType::Q6K, 256, 3);
        assert_eq!(pack_values(&values(&b))[..], b[..192]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernels_equal_the_row_wise_ones_bit_for_bit() {
        use crate::cpu::dot::{dot_row, Batch};
        if !super::super::available() {
            return;
        }
        let (rows, cols) = (8, 1024);
        let (data, x) = relaid(GgmlType::Q6K, 4, rows, cols);
        let qs = q8k_rows(4, cols, 11);
        let row = |r: usize| &data[r * cols / 256 * SRC_BLOCK..][..cols / 256 * SRC_BLOCK];
        // SAFETY: `available` checked the CPU features; sizes match by construction.
        let (small, tiled) = unsafe { (gemv(&x, &qs[0]), gemv_tiled(&x, &qs[0])) };
        // SAFETY: as above.
        let four = unsafe { gemm_tiled_4tok(&x, [&qs[0], &qs[1], &qs[2], &qs[3]]) };
        // SAFETY: as above.
        let two = unsafe { gemv2(&x, [&qs[0], &qs[1]]) };
        for (k, got) in two.iter().enumerate() {
            for (r, got) in got.iter().enumerate() {
                let want = dot_row(GgmlType::Q6K, row(r), &[], &qs[k], Batch::Small);
                assert_eq!(got.to_bits(), want.to_bits(), "vec_dot order, two tokens, row {r} token {k}: {got} vs {want}");
            }
        }
        if super::super::has_avx512_vl() {
            // SAFETY: `has_avx512_vl` checked the CPU features.
            let (three, four) =
                unsafe { (gemv3_512(&x, [&qs[0], &qs[1], &qs[2]]).to_vec(), gemv4_512(&x, [&qs[0], &qs[1], &qs[2], &qs[3]]).to_vec()) };
            let mut all = vec![("three", three), ("four", four)];
            if super::super::has_vnni() {
                // SAFETY: `has_vnni` checked the CPU features.
                all.extend(unsafe {
                    [
                        ("VNNI one", gemv_vnni(&x, [&qs[0]]).to_vec()),
                        ("VNNI two", gemv_vnni(&x, [&qs[0], &qs[1]]).to_vec()),
                        ("VNNI three", gemv_vnni(&x, [&qs[0], &qs[1], &qs[2]]).to_vec()),
                        ("VNNI four", gemv_vnni(&x, [&qs[0], &qs[1], &qs[2], &qs[3]]).to_vec()),
                    ]
                });
            }
            for (name, got) in all {
                for (k, got) in got.iter().enumerate() {
                    for (r, got) in got.iter().enumerate() {
                        let want = dot_row(GgmlType::Q6K, row(r), &[], &qs[k], Batch::Small);
                        assert_eq!(got.to_bits(), want.to_bits(), "vec_dot order, {name} tokens, row {r} token {k}: {got} vs {want}");
                    }
                }
            }
        }
        for r in 0..rows {
            let want = dot_row(GgmlType::Q6K, row(r), &[], &qs[0], Batch::Small);
            assert_eq!(small[r].to_bits(), want.to_bits(), "vec_dot order, row {r}: {} vs {want}", small[r]);
            let want = dot_row(GgmlType::Q6K, row(r), &[], &qs[0], Batch::Large);
            assert_eq!(tiled[r].to_bits(), want.to_bits(), "tiled order, row {r}: {} vs {want}", tiled[r]);
            for k in 0..4 {
                let want = dot_row(GgmlType::Q6K, row(r), &[], &qs[k], Batch::Large);
                assert_eq!(four[k][r].to_bits(), want.to_bits(), "tiled, four tokens, row {r} token {k}: {} vs {want}", four[k][r]);
            }
        }
    }
}
