//! Q4_K re-laid eight rows at a time (see the parent module for why).
//!
//! Block layout (eight rows `r`, one super-block), for a piece size `P` of 4 bytes (AVX2
//! kernels: a 32-byte vector is four weights of eight rows) or 8 bytes (AVX-512: a 64-byte
//! vector is eight weights of eight rows, and eight activation bytes broadcast by a plain
//! load):
//! - bytes 0..16: `d` of each row (f16); 16..32: `dmin` of each row (f16);
//! - 32..96: for sub-block `s` (0..8), 8 bytes: row `r`'s 6-bit scale at `r`;
//! - 96..160: for group `g` (0..4), 16 bytes: row `r`'s minimums of sub-blocks `2g` and
//!   `2g+1` at `2r` and `2r+1`;
//! - 160..1184: for group `g`, piece `p` (0..32/P), row `r`: the `P` packed bytes
//!   `qs[32g+Pp .. 32g+Pp+P]` of row `r` (low nibbles: sub-block `2g`, values
//!   `Pp..Pp+P`; high nibbles: sub-block `2g+1`, the same values).

// Unsafe code: the AVX2 / AVX-512 (VNNI) kernels over the re-laid blocks:
// `#[target_feature]` intrinsics on raw pointers into the blocks and the activations,
// called only after run-time feature detection (the parent module's `available`,
// `has_avx512`, `has_vnni`).
#![allow(unsafe_code)]

use super::ROWS;
use crate::quant::scales_mins_k4;

/// Bytes of one GGUF Q4_K super-block.
const SRC_BLOCK: usize = 144;
/// Bytes of one re-laid block (eight rows' super-block).
pub const BLOCK: usize = 1184;
const SCALES: usize = 32;
const MINS: usize = 96;
const QUANTS: usize = 160;

/// Where row `r`'s bytes `qs[32g + k]` (`k` in `0..32`) go, for piece size `piece`.
#[inline]
fn quant_at(piece: usize, g: usize, k: usize, r: usize) -> usize {
    QUANTS + 256 * g + 8 * piece * (k / piece) + piece * r + k % piece
}

/// Eight rows' super-blocks (GGUF form) into one re-laid block with `piece`-byte pieces.
pub(super) fn interleave_block(rows: [&[u8]; ROWS], piece: usize, dst: &mut [u8]) {
    for (r, src) in rows.iter().enumerate() {
        dst[2 * r..2 * r + 2].copy_from_slice(&src[0..2]);
        dst[16 + 2 * r..16 + 2 * r + 2].copy_from_slice(&src[2..4]);
        let (sc, m) = scales_mins_k4(&src[4..16]);
        for s in 0..8 {
            dst[SCALES + 8 * s + r] = sc[s];
        }
        for g in 0..4 {
            dst[MINS + 16 * g + 2 * r] = m[2 * g];
            dst[MINS + 16 * g + 2 * r + 1] = m[2 * g + 1];
        }
        for g in 0..4 {
            for k in (0..32).step_by(piece) {
                let at = quant_at(piece, g, k, r);
                dst[at..at + piece].copy_from_slice(&src[16 + 32 * g + k..][..piece]);
            }
        }
    }
}

/// Row `lane`'s super-block (GGUF form) out of re-laid block `b`, appended to `out`.
pub(super) fn block_row(b: &[u8], piece: usize, lane: usize, out: &mut Vec<u8>) {
    debug_assert_eq!(b.len(), BLOCK);
    out.extend_from_slice(&b[2 * lane..2 * lane + 2]);
    out.extend_from_slice(&b[16 + 2 * lane..16 + 2 * lane + 2]);
    let sc: [u8; 8] = std::array::from_fn(|s| b[SCALES + 8 * s + lane]);
    let m: [u8; 8] = std::array::from_fn(|s| b[MINS + 16 * (s / 2) + 2 * lane + s % 2]);
    out.extend_from_slice(&pack_scales_mins_k4(&sc, &m));
    for g in 0..4 {
        for k in (0..32).step_by(piece) {
            out.extend_from_slice(&b[quant_at(piece, g, k, lane)..][..piece]);
        }
    }
    debug_assert!(out.len().is_multiple_of(SRC_BLOCK));
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
pub(crate) use kernels::{gemm_4tok, gemm_4tok_512, gemm_4tok_vnni, gemm_512_gemv_order, gemm_gemv_order, gemm_vnni_gemv_order};

/// Kernels over the re-laid blocks: AVX2 for 4-byte pieces, AVX-512 for 8-byte pieces.
/// The float steps are the same in both, lane by lane; only how the integer sums are
/// formed differs.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // parallel per-token arrays read best indexed
mod kernels {
    use std::arch::x86_64::*;

    use super::super::super::act::QuantizedRow;
    use super::super::simd::{bcast4, halfs, widen_u8};
    use super::{BLOCK, MINS, QUANTS, SCALES};

    /// Token `q`'s 32-value sub-block sums of super-block `i` as eight i16 (pairs per
    /// group: dword `g` holds sub-blocks `2g`, `2g+1`).
    ///
    /// # Safety
    /// The CPU must have AVX2; `q.q8k_bsums` must hold at least `16 · (i + 1)` values (read
    /// unchecked).
    #[inline(always)]
    unsafe fn sub_sums(q: &QuantizedRow, i: usize) -> __m128i {
        let b = _mm256_loadu_si256(q.q8k_bsums.as_ptr().add(16 * i) as *const __m256i);
        _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1))
    }

    /// Dword `g` of `v` in every lane.
    ///
    /// # Safety
    /// The CPU must have AVX2.
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

    /// Group `g`'s minimum term for each row (lane `r`): `m[2g]·Σ[2g] + m[2g+1]·Σ[2g+1]`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `b` must be valid for reading `MINS + 16 · (g + 1)` bytes
    /// (inside one re-laid block for `g < 4`).
    #[inline(always)]
    unsafe fn group_mins(b: *const u8, sub: __m128i, g: usize) -> __m256i {
        _mm256_madd_epi16(widen_u8(b.add(MINS + 16 * g)), dword(sub, g))
    }

    /// Sub-block `s`'s scales as sixteen i16, row `r`'s at lanes `2r` and `2r+1` (the
    /// 16-bit lanes a 4-byte piece of row `r` gives after `maddubs`).
    ///
    /// # Safety
    /// The CPU must have AVX2; `b` must be valid for reading `SCALES + 8 · (s + 1)` bytes
    /// (inside one re-laid block for `s < 8`).
    #[inline(always)]
    unsafe fn scale_pairs(b: *const u8, s: usize) -> __m256i {
        let x = _mm_loadl_epi64(b.add(SCALES + 8 * s) as *const __m128i);
        _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x, x))
    }

    /// Per super-block state of `N` tokens: activation pointers, `d·dy` and `dmin·dy`,
    /// and sub-block sums.
    struct Tokens<const N: usize> {
        y: [*const i8; N],
        dd: [__m256; N],
        dm: [__m256; N],
        sub: [__m128i; N],
    }

    /// [`Tokens`] for super-block `i` (re-laid block `b`).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C. `b` must be valid for reading 32 bytes, and
    /// every `qs[k]` must hold at least `256 · (i + 1)` values in `q8k`, `i + 1` in `q8k_d`
    /// and `16 · (i + 1)` in `q8k_bsums` (read unchecked).
    #[inline(always)]
    unsafe fn tokens<const N: usize>(b: *const u8, qs: &[&QuantizedRow; N], i: usize) -> Tokens<N> {
        let (d, dmin) = (halfs(b), halfs(b.add(16)));
        // Plain loops, not closures: a closure would not inherit the target features.
        let mut t = Tokens { y: [std::ptr::null(); N], dd: [d; N], dm: [dmin; N], sub: [_mm_setzero_si128(); N] };
        for k in 0..N {
            t.y[k] = qs[k].q8k.as_ptr().add(256 * i);
            let dy = _mm256_set1_ps(*qs[k].q8k_d.get_unchecked(i));
            (t.dd[k], t.dm[k]) = (_mm256_mul_ps(d, dy), _mm256_mul_ps(dmin, dy));
            t.sub[k] = sub_sums(qs[k], i);
        }
        t
    }

    /// The tokens' results, `acc − mins`.
    ///
    /// # Safety
    /// The CPU must have AVX.
    #[inline(always)]
    unsafe fn finish<const N: usize>(acc: [__m256; N], mins: [__m256; N]) -> [[f32; 8]; N] {
        let mut out = [[0f32; 8]; N];
        for k in 0..N {
            _mm256_storeu_ps(out[k].as_mut_ptr(), _mm256_sub_ps(acc[k], mins[k]));
        }
        out
    }

    /// Eight rows (4-byte pieces) against four tokens, in llama.cpp's four-token order
    /// (floats accumulated per 64-value group); `out[k]` lane `r` is token `k`, row `r`.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_4tok(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        gemm_body::<false, 4>(data, qs)
    }

    /// Eight rows (4-byte pieces) against `N` tokens (1 to 4), each token in llama.cpp's
    /// one-token order (per super-block: integer sums of the four groups first, then one
    /// float step, `acc = fma(Σ, d·dy, acc)`, minimums likewise): bit-identical to `N`
    /// one-token calls, with the weights read once
    /// (batched decoding of independent sequences, and the odd tokens after a batch's
    /// fours).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_gemv_order<const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        gemm_body::<true, N>(data, qs)
    }

    /// The batched kernels' integer sums for one group into the float accumulators: per
    /// group (llama.cpp's four-token order) or, with `ONE`, summed in integers over the
    /// super-block's four groups and added once (the one-token order).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `b` must be valid for reading
    /// `MINS + 16 · (g + 1)` bytes (inside one re-laid block for `g < 4`).
    #[inline(always)]
    unsafe fn add_group<const ONE: bool, const N: usize>(
        b: *const u8,
        t: &Tokens<N>,
        g: usize,
        sumi: [__m256i; N],
        held: &mut ([__m256i; N], [__m256i; N]),
        acc: &mut [__m256; N],
        mins: &mut [__m256; N],
    ) {
        if !ONE {
            for k in 0..N {
                acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[k]), t.dd[k], acc[k]);
                mins[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_mins(b, t.sub[k], g)), t.dm[k], mins[k]);
            }
            return;
        }
        for k in 0..N {
            held.0[k] = _mm256_add_epi32(held.0[k], sumi[k]);
            held.1[k] = _mm256_add_epi32(held.1[k], group_mins(b, t.sub[k], g));
        }
        if g == 3 {
            for k in 0..N {
                acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(held.0[k]), t.dd[k], acc[k]);
                mins[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(held.1[k]), t.dm[k], mins[k]);
            }
        }
    }

    /// # Safety
    /// The CPU must have AVX2, FMA and F16C (it is inlined into [`gemm_4tok`] and
    /// [`gemm_gemv_order`], which enable them); every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[inline(always)]
    unsafe fn gemm_body<const ONE: bool, const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        let mask = _mm256_set1_epi8(0x0F);
        let (mut acc, mut mins) = ([_mm256_setzero_ps(); N], [_mm256_setzero_ps(); N]);
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let t = tokens(b, &qs, i);
            let mut held = ([_mm256_setzero_si256(); N], [_mm256_setzero_si256(); N]);
            for g in 0..4 {
                let mut plo = [_mm256_setzero_si256(); N];
                let mut phi = [_mm256_setzero_si256(); N];
                for c in 0..8 {
                    let w = _mm256_loadu_si256(b.add(QUANTS + 256 * g + 32 * c) as *const __m256i);
                    let lo = _mm256_and_si256(w, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
                    for k in 0..N {
                        plo[k] = _mm256_add_epi16(plo[k], _mm256_maddubs_epi16(lo, bcast4(t.y[k].add(64 * g + 4 * c))));
                        phi[k] = _mm256_add_epi16(phi[k], _mm256_maddubs_epi16(hi, bcast4(t.y[k].add(64 * g + 32 + 4 * c))));
                    }
                }
                let (s_lo, s_hi) = (scale_pairs(b, 2 * g), scale_pairs(b, 2 * g + 1));
                let mut sumi = [_mm256_setzero_si256(); N];
                for k in 0..N {
                    sumi[k] = _mm256_add_epi32(_mm256_madd_epi16(plo[k], s_lo), _mm256_madd_epi16(phi[k], s_hi));
                }
                add_group::<ONE, N>(b, &t, g, sumi, &mut held, &mut acc, &mut mins);
            }
        }
        finish(acc, mins)
    }

    /// Sub-blocks `2g` and `2g+1`'s scales as 32 i16 each, row `r`'s at lanes `4r..4r+4`
    /// (the 16-bit lanes an 8-byte piece of row `r` gives after `maddubs`).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW and AVX2; `b` must be valid for reading
    /// `SCALES + 16 · (g + 1)` bytes (inside one re-laid block for `g < 4`).
    #[inline(always)]
    unsafe fn scale_quads(b: *const u8, g: usize) -> (__m512i, __m512i) {
        let both = _mm512_castsi256_si512(widen_u8(b.add(SCALES + 16 * g)));
        let lo = _mm512_set_epi16(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        let hi = _mm512_add_epi16(lo, _mm512_set1_epi16(8));
        (_mm512_permutexvar_epi16(lo, both), _mm512_permutexvar_epi16(hi, both))
    }

    /// Row `r`'s two 32-bit lanes (`2r`, `2r+1`) added, as eight lanes.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    #[inline(always)]
    unsafe fn fold_pairs(v: __m512i) -> __m256i {
        _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64(v, 32)))
    }

    /// The eight activation bytes at `p` in every 64-bit lane.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F; `p` must be valid for reading 8 bytes (any alignment).
    #[inline(always)]
    unsafe fn bcast8(p: *const i8) -> __m512i {
        _mm512_set1_epi64(std::ptr::read_unaligned(p as *const i64))
    }

    /// [`gemm_4tok`] for 8-byte pieces, with AVX-512.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW, AVX2, FMA and F16C (`has_avx512`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_4tok_512(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        gemm_512_body::<false, 4>(data, qs)
    }

    /// [`gemm_gemv_order`] for 8-byte pieces, with AVX-512.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW, AVX2, FMA and F16C (`has_avx512`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_512_gemv_order<const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        gemm_512_body::<true, N>(data, qs)
    }

    /// [`gemm_4tok`] for 8-byte pieces, with AVX-512 VNNI ([`gemm_vnni_body`]).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C (`has_vnni`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_4tok_vnni(data: &[u8], qs: [&QuantizedRow; 4]) -> [[f32; 8]; 4] {
        gemm_vnni_body::<false, 4>(data, qs)
    }

    /// [`gemm_gemv_order`] for 8-byte pieces, with AVX-512 VNNI ([`gemm_vnni_body`]).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C (`has_vnni`); every
    /// activation row must hold the Q8_K values, scales and sums of `data.len() / BLOCK`
    /// super-blocks (the parent module's Safety section).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) unsafe fn gemm_vnni_gemv_order<const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        gemm_vnni_body::<true, N>(data, qs)
    }

    /// # Safety
    /// The CPU must have AVX-512 F and BW, AVX2, FMA and F16C (it is inlined into the
    /// `_512` kernels, which enable them); every activation row must hold the Q8_K values,
    /// scales and sums of `data.len() / BLOCK` super-blocks (the parent module's Safety
    /// section).
    #[inline(always)]
    unsafe fn gemm_512_body<const ONE: bool, const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        let mask = _mm512_set1_epi8(0x0F);
        let (mut acc, mut mins) = ([_mm256_setzero_ps(); N], [_mm256_setzero_ps(); N]);
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let t = tokens(b, &qs, i);
            let mut held = ([_mm256_setzero_si256(); N], [_mm256_setzero_si256(); N]);
            for g in 0..4 {
                let mut plo = [_mm512_setzero_si512(); N];
                let mut phi = [_mm512_setzero_si512(); N];
                for p in 0..4 {
                    let w = _mm512_loadu_si512(b.add(QUANTS + 256 * g + 64 * p) as *const _);
                    let lo = _mm512_and_si512(w, mask);
                    let hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), mask);
                    for k in 0..N {
                        plo[k] = _mm512_add_epi16(plo[k], _mm512_maddubs_epi16(lo, bcast8(t.y[k].add(64 * g + 8 * p))));
                        phi[k] = _mm512_add_epi16(phi[k], _mm512_maddubs_epi16(hi, bcast8(t.y[k].add(64 * g + 32 + 8 * p))));
                    }
                }
                let (s_lo, s_hi) = scale_quads(b, g);
                let mut sumi = [_mm256_setzero_si256(); N];
                for k in 0..N {
                    sumi[k] = fold_pairs(_mm512_add_epi32(_mm512_madd_epi16(plo[k], s_lo), _mm512_madd_epi16(phi[k], s_hi)));
                }
                add_group::<ONE, N>(b, &t, g, sumi, &mut held, &mut acc, &mut mins);
            }
        }
        finish(acc, mins)
    }

    /// Sub-block `s`'s scale of row `r` in 32-bit lanes `2r` and `2r+1`, as the low 16
    /// bits of each (the high 16 bits zero), for `vpdpwssd` against sums held in 32 bits.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F; `b` must be valid for reading `SCALES + 8 · (s + 1)`
    /// bytes (inside one re-laid block for `s < 8`).
    #[inline(always)]
    unsafe fn scale_dwords(b: *const u8, s: usize) -> __m512i {
        let q = _mm512_cvtepu8_epi64(_mm_loadl_epi64(b.add(SCALES + 8 * s) as *const __m128i));
        _mm512_or_si512(q, _mm512_slli_epi64(q, 32))
    }

    /// [`gemm_512_body`] with AVX-512 VNNI: `vpdpbusd` sums four weight × activation
    /// products straight into 32-bit lanes (two per row and 8-byte piece), and `vpdpwssd`
    /// multiplies those sums by the sub-block scales and adds them up. A lane's sum over a
    /// 32-value sub-block's half is at most 16 · 15 · 127 < 2^15, so it is exact in the low
    /// 16 bits `vpdpwssd` reads (the high 16 bits meet a zero scale). The integers are the
    /// same as [`gemm_512_body`]'s, so every float step and result is too. With `ONE`, the
    /// pairs of lanes are folded once per super-block instead of once per group.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW, VL and VNNI, AVX2, FMA and F16C (it is inlined into
    /// the `_vnni` kernels, which enable them); every activation row must hold the Q8_K
    /// values, scales and sums of `data.len() / BLOCK` super-blocks (the parent module's
    /// Safety section).
    #[inline(always)]
    unsafe fn gemm_vnni_body<const ONE: bool, const N: usize>(data: &[u8], qs: [&QuantizedRow; N]) -> [[f32; 8]; N] {
        let mask = _mm512_set1_epi8(0x0F);
        let (mut acc, mut mins) = ([_mm256_setzero_ps(); N], [_mm256_setzero_ps(); N]);
        for (i, b) in data.chunks_exact(BLOCK).enumerate() {
            let b = b.as_ptr();
            let t = tokens(b, &qs, i);
            let mut wide = [_mm512_setzero_si512(); N];
            let mut held = ([_mm256_setzero_si256(); N], [_mm256_setzero_si256(); N]);
            for g in 0..4 {
                let mut plo = [_mm512_setzero_si512(); N];
                let mut phi = [_mm512_setzero_si512(); N];
                for p in 0..4 {
                    let w = _mm512_loadu_si512(b.add(QUANTS + 256 * g + 64 * p) as *const _);
                    let lo = _mm512_and_si512(w, mask);
                    let hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), mask);
                    for k in 0..N {
                        plo[k] = _mm512_dpbusd_epi32(plo[k], lo, bcast8(t.y[k].add(64 * g + 8 * p)));
                        phi[k] = _mm512_dpbusd_epi32(phi[k], hi, bcast8(t.y[k].add(64 * g + 32 + 8 * p)));
                    }
                }
                let (s_lo, s_hi) = (scale_dwords(b, 2 * g), scale_dwords(b, 2 * g + 1));
                if ONE {
                    for k in 0..N {
                        wide[k] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(wide[k], plo[k], s_lo), phi[k], s_hi);
                        held.1[k] = _mm256_add_epi32(held.1[k], group_mins(b, t.sub[k], g));
                    }
                    if g == 3 {
                        for k in 0..N {
                            acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold_pairs(wide[k])), t.dd[k], acc[k]);
                            mins[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(held.1[k]), t.dm[k], mins[k]);
                        }
                    }
                } else {
                    let mut sumi = [_mm256_setzero_si256(); N];
                    for k in 0..N {
                        sumi[k] = fold_pairs(_mm512_dpwssd_epi32(_mm512_madd_epi16(plo[k], s_lo), phi[k], s_hi));
                    }
                    add_group::<false, N>(b, &t, g, sumi, &mut held, &mut acc, &mut mins);
                }
            }
        }
        finish(acc, mins)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{q8k_rows, relaid};
    use super::*;
    use crate::gguf::GgmlType;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn kernels_equal_the_row_wise_ones_bit_for_bit() {
        use crate::cpu::dot::{dot_4tokens, dot_row, Batch};
        if !super::super::available() {
            return;
        }
        let (rows, cols) = (8, 1024);
        let ((data, x4), (_, x8)) = (relaid(GgmlType::Q4K, 4, rows, cols), relaid(GgmlType::Q4K, 8, rows, cols));
        let qs = q8k_rows(4, cols, 11);
        let four_qs = [&qs[0], &qs[1], &qs[2], &qs[3]];
        let row = |r: usize| &data[r * cols / 256 * SRC_BLOCK..][..cols / 256 * SRC_BLOCK];
        // One to four tokens through a decode kernel, flattened per token.
        macro_rules! one_to_four {
            ($kernel:ident, $x:expr) => {
                [
                    $kernel($x, [&qs[0]]).to_vec(),
                    $kernel($x, [&qs[0], &qs[1]]).to_vec(),
                    $kernel($x, [&qs[0], &qs[1], &qs[2]]).to_vec(),
                    $kernel($x, four_qs).to_vec(),
                ]
                .concat()
            };
        }
        // SAFETY: `available` checked the CPU features; sizes match by construction.
        let mut results = vec![("AVX2", unsafe { (gemm_gemv_order(&x4, [&qs[0]])[0], gemm_4tok(&x4, four_qs)) })];
        // SAFETY: as above.
        let mut decode = vec![("AVX2", unsafe { one_to_four!(gemm_gemv_order, &x4) })];
        if super::super::has_avx512() {
            // SAFETY: `has_avx512` checked the CPU features.
            results.push(("AVX-512", unsafe { (gemm_512_gemv_order(&x8, [&qs[0]])[0], gemm_4tok_512(&x8, four_qs)) }));
            // SAFETY: as above.
            decode.push(("AVX-512", unsafe { one_to_four!(gemm_512_gemv_order, &x8) }));
        }
        if super::super::has_vnni() {
            // SAFETY: `has_vnni` checked the CPU features.
            results.push(("AVX-512 VNNI", unsafe { (gemm_vnni_gemv_order(&x8, [&qs[0]])[0], gemm_4tok_vnni(&x8, four_qs)) }));
            // SAFETY: as above.
            decode.push(("AVX-512 VNNI", unsafe { one_to_four!(gemm_vnni_gemv_order, &x8) }));
        }
        // The decode kernels are one-token ones, bit for bit. Flattened entry `i` is
        // token `TOKEN[i]` of its call.
        const TOKEN: [usize; 10] = [0, 0, 1, 0, 1, 2, 0, 1, 2, 3];
        for (name, tokens) in decode {
            assert_eq!(tokens.len(), TOKEN.len());
            for (&k, got) in TOKEN.iter().zip(&tokens) {
                for (r, got) in got.iter().enumerate() {
                    let want = dot_row(GgmlType::Q4K, row(r), &[], &qs[k], Batch::Small);
                    assert_eq!(got.to_bits(), want.to_bits(), "{name} decode row {r} token {k}: {got} vs {want}");
                }
            }
        }
        for (name, (one, four)) in results {
            for r in 0..rows {
                let want = dot_row(GgmlType::Q4K, row(r), &[], &qs[0], Batch::Small);
                assert_eq!(one[r].to_bits(), want.to_bits(), "{name} gemv row {r}: {} vs {want}", one[r]);
                let want4 = dot_4tokens(GgmlType::Q4K, row(r), four_qs, Batch::Large).unwrap();
                for k in 0..4 {
                    assert_eq!(four[k][r].to_bits(), want4[k].to_bits(), "{name} gemm row {r} token {k}: {} vs {}", four[k][r], want4[k]);
                }
            }
        }
    }
}
