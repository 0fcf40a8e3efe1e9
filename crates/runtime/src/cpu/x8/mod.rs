//! K-quant matrices re-laid eight rows at a time, so that SIMD lanes are rows.
//!
//! Why: in GGUF's layout a row is a run of super-blocks, so a SIMD dot product leaves one
//! row's partial sums spread over eight lanes, and llama.cpp's float orders (a float
//! accumulation per 64-value group for Q4_K batches, per super-block and per lane
//! elsewhere; see `avx2.rs`) then need a horizontal sum per row, token and group or
//! super-block. On a 1.5B model that was most of the prefill time. llama.cpp re-lays Q4_K
//! at load time for the same reason. Here eight rows' super-block `i` become one block in
//! which every 32 bytes hold four consecutive weights of each of the eight rows; a
//! `maddubs` against four broadcast activation bytes then gives each row its own pair of
//! 16-bit lanes, and sums come out one row per 32-bit lane.
//!
//! The integer sums are the same exact integers, and every float step is, lane by lane,
//! the one the row-wise kernel takes for that row, so results are bit-identical to them
//! (tested in each type's module and in `matmul`). Where AVX-512 is present, Q4_K is laid
//! in 8-byte pieces instead of 4 ([`q4k`]), read by AVX-512 kernels
//! (with `vpdpbusd` / `vpdpwssd` where AVX-512 VNNI is present: the same integers in fewer
//! instructions, which is what batched decoding is bound by on a CPU). Only the matmul reads this layout; it
//! is chosen at load time where the AVX2 kernels run ([`available`]), for Q4_K ([`q4k`])
//! and Q6_K ([`q6k`]) matrices whose row count is a multiple of eight.
//!
//! Safety: the kernels of [`q4k`] and [`q6k`] are `unsafe fn`s with one contract. The
//! running CPU must have the features each enables with `#[target_feature]` (AVX2, FMA and
//! F16C for all, found by [`available`]; AVX-512 F and BW, VL, VNNI for the wider ones,
//! found by `has_avx512`, `has_avx512_vl`, `has_vnni`). And with `n = data.len() / BLOCK`
//! whole re-laid blocks in `data`, every activation row passed must hold at least `256 · n`
//! values in `q8k`, `n` in `q8k_d` and `16 · n` in `q8k_bsums`, which the kernels read
//! through raw pointers and `get_unchecked`: an activation row quantized (Q8_K) from a row
//! of the matrix's width holds exactly that. A trailing partial block of `data` is ignored.

// Unsafe code: the re-laid K-quant kernels (this module's dispatch and `simd` helpers, and
// the `q4k` and `q6k` kernels, which this allow covers too) are AVX2 / AVX-512 intrinsics
// on raw pointers into the blocks, called only after run-time feature detection.
#![allow(unsafe_code)]

pub mod q4k;
pub mod q6k;

#[cfg(target_arch = "x86_64")]
use super::act::QuantizedRow;
#[cfg(target_arch = "x86_64")]
use super::dot::Batch;
use crate::gguf::GgmlType;

/// Rows re-laid together.
pub const ROWS: usize = 8;

/// Whether this CPU's kernels read the re-laid form (the AVX2 kernels are present).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::avx2::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX-512 kernels run here (AVX-512 F, BW and VL, unless `DOCMEM_CPU` caps
/// the path below `avx512`; see [`super::isa`]). They read Q4_K in 8-byte pieces: twice
/// the work per instruction.
fn has_avx512() -> bool {
    super::isa::allows(super::isa::Isa::Avx512)
}

/// Whether the AVX-512 kernels that need the VL extension (32 registers for 256-bit
/// vectors) run here: the AVX-512 path includes VL.
#[cfg(target_arch = "x86_64")]
fn has_avx512_vl() -> bool {
    has_avx512()
}

/// Whether the AVX-512 VNNI kernels run here (`vpdpbusd` / `vpdpwssd` on 512- and
/// 256-bit vectors). They form the same exact integer sums with fewer instructions, so
/// results stay bit-identical; `DOCMEM_CPU=avx512` turns them off, to compare.
#[cfg(target_arch = "x86_64")]
fn has_vnni() -> bool {
    super::isa::allows(super::isa::Isa::Vnni)
}

/// The piece size (bytes of one row side by side with the next row's) of `ty`'s layout on
/// this CPU: 8 for Q4_K where the AVX-512 kernels run, else 4.
fn piece(ty: GgmlType) -> usize {
    if ty == GgmlType::Q4K && has_avx512() {
        8
    } else {
        4
    }
}

/// Whether a `ty` matrix of `rows` rows is re-laid on this CPU.
pub fn relays(ty: GgmlType, rows: usize) -> bool {
    matches!(ty, GgmlType::Q4K | GgmlType::Q6K) && rows.is_multiple_of(ROWS) && available()
}

/// Bytes of one re-laid block (eight rows' super-block) of `ty`.
fn block_bytes(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q6K => q6k::BLOCK,
        _ => q4k::BLOCK,
    }
}

/// Bytes of `rows` (a multiple of [`ROWS`]) rows of `blocks` super-blocks, re-laid.
pub fn relaid_bytes(ty: GgmlType, rows: usize, blocks: usize) -> usize {
    rows / ROWS * blocks * block_bytes(ty)
}

/// Re-lay whole groups of eight GGUF rows of `ty` (`data`, `blocks` super-blocks per row)
/// into `out`, which holds [`relaid_bytes`] for them. A loader can stream a matrix through
/// this eight rows at a time, so it never holds two copies.
pub fn interleave_into(ty: GgmlType, data: &[u8], blocks: usize, out: &mut [u8]) {
    interleave_with(ty, piece(ty), data, blocks, out);
}

/// Row `r` back in GGUF's form (`blocks` super-blocks of `ty`), from re-laid `data`.
pub fn row(ty: GgmlType, data: &[u8], blocks: usize, r: usize, out: &mut Vec<u8>) {
    row_with(ty, piece(ty), data, blocks, r, out);
}

/// [`interleave_into`] with a given piece size.
fn interleave_with(ty: GgmlType, piece: usize, data: &[u8], blocks: usize, out: &mut [u8]) {
    let (src, dst) = (ty.block_bytes() as usize, block_bytes(ty));
    debug_assert!(data.len().is_multiple_of(ROWS * blocks * src));
    debug_assert_eq!(out.len(), data.len() / src / ROWS * dst);
    for (group, dst_group) in out.chunks_exact_mut(blocks * dst).enumerate() {
        for (i, dst) in dst_group.chunks_exact_mut(block_bytes(ty)).enumerate() {
            let rows: [&[u8]; ROWS] = std::array::from_fn(|r| &data[((group * ROWS + r) * blocks + i) * src..][..src]);
            match ty {
                GgmlType::Q6K => q6k::interleave_block(rows, dst),
                _ => q4k::interleave_block(rows, piece, dst),
            }
        }
    }
}

/// [`row`] with a given piece size.
fn row_with(ty: GgmlType, piece: usize, data: &[u8], blocks: usize, r: usize, out: &mut Vec<u8>) {
    out.clear();
    let (group, lane) = (r / ROWS, r % ROWS);
    for b in data[group * blocks * block_bytes(ty)..][..blocks * block_bytes(ty)].chunks_exact(block_bytes(ty)) {
        match ty {
            GgmlType::Q6K => q6k::block_row(b, lane, out),
            _ => q4k::block_row(b, piece, lane, out),
        }
    }
}

/// Rows `r0..r1` (whole groups of eight) of a re-laid `ty` matrix (`data`, `cols` wide)
/// against every activation row in `qs`, in llama.cpp's orders for a batch of class
/// `batch` (or each row in the one-token order for [`Batch::Decode`]); `put(token, row,
/// value)` takes each result.
#[cfg(target_arch = "x86_64")]
pub(crate) fn matmul_rows(
    ty: GgmlType,
    data: &[u8],
    cols: usize,
    qs: &[QuantizedRow],
    (r0, r1): (usize, usize),
    (token_block, batch): (usize, Batch),
    put: impl Fn(usize, usize, f32),
) {
    debug_assert!(available());
    // The kernels read `cols / 256` blocks of every activation row unchecked, and
    // `Activations` has public fields, so its rows are checked here rather than trusted to
    // be quantized at this width: once per call and token, not per row.
    let blocks = cols / 256;
    assert!(
        qs.iter().all(|q| q.q8k.len() / 256 >= blocks && q.q8k_d.len() >= blocks && q.q8k_bsums.len() / 16 >= blocks),
        "activation rows shorter than the matrix's {cols} columns"
    );
    let group_bytes = cols / 256 * block_bytes(ty);
    let put8 = |t: usize, r: usize, v: [f32; 8]| v.iter().enumerate().for_each(|(i, &v)| put(t, r + i, v));
    // Results of tokens `t..` for rows `r..r + 8`; how many tokens they were.
    let emit = |t: usize, r: usize, v: &[[f32; 8]]| {
        v.iter().enumerate().for_each(|(k, &v)| put8(t + k, r, v));
        v.len()
    };
    for tb in (0..qs.len()).step_by(token_block) {
        let te = (tb + token_block).min(qs.len());
        for r in (r0..r1).step_by(ROWS) {
            let data = &data[r / ROWS * group_bytes..][..group_bytes];
            // SAFETY: the features: the matrix is re-laid only where `available()` holds
            // (debug-asserted above), the AVX-512 kernels run only under `has_avx512_vl()`,
            // `has_vnni()` or `piece(ty) == 8` (which is `has_avx512()`), and each of those
            // implies the features the kernel enables. The lengths: `data` is one row group,
            // `cols / 256` whole blocks (sliced with bounds checks), and every activation row
            // in `qs` holds at least what the kernels read for `cols / 256` blocks (asserted
            // above).
            unsafe {
                match (ty, batch) {
                    (GgmlType::Q6K, Batch::Small | Batch::Decode) => {
                        // Each token in the one-token order (which is also llama.cpp's for
                        // a small batch), each sub-block unpacked once for four (AVX-512VL),
                        // three (AVX-512VL) or two tokens.
                        let mut t = tb;
                        if has_vnni() {
                            while t < te {
                                t += match &qs[t..te] {
                                    [a] => emit(t, r, &q6k::gemv_vnni(data, [a])),
                                    [a, b] => emit(t, r, &q6k::gemv_vnni(data, [a, b])),
                                    [a, b, c] => emit(t, r, &q6k::gemv_vnni(data, [a, b, c])),
                                    [a, b, c, d, ..] => emit(t, r, &q6k::gemv_vnni(data, [a, b, c, d])),
                                    [] => break,
                                };
                            }
                        }
                        while has_avx512_vl() && t + 4 <= te {
                            let v = q6k::gemv4_512(data, [&qs[t], &qs[t + 1], &qs[t + 2], &qs[t + 3]]);
                            t += emit(t, r, &v);
                        }
                        if has_avx512_vl() && t + 3 == te {
                            let v = q6k::gemv3_512(data, [&qs[t], &qs[t + 1], &qs[t + 2]]);
                            v.into_iter().enumerate().for_each(|(k, v)| put8(t + k, r, v));
                            t += 3;
                        }
                        while t + 2 <= te {
                            let v = q6k::gemv2(data, [&qs[t], &qs[t + 1]]);
                            v.into_iter().enumerate().for_each(|(k, v)| put8(t + k, r, v));
                            t += 2;
                        }
                        (t..te).for_each(|t| put8(t, r, q6k::gemv(data, &qs[t])));
                    }
                    (GgmlType::Q6K, Batch::Large) => {
                        let mut t = tb;
                        while t + 4 <= te {
                            let v = q6k::gemm_tiled_4tok(data, [&qs[t], &qs[t + 1], &qs[t + 2], &qs[t + 3]]);
                            t += emit(t, r, &v);
                        }
                        (t..te).for_each(|t| put8(t, r, q6k::gemv_tiled(data, &qs[t])));
                    }
                    _ => {
                        // Q4_K: groups of four tokens, then the rest, as llama.cpp. The rest
                        // are in the one-token order (llama.cpp runs them one by one) but
                        // share one pass over the weights. `Decode`: four tokens at a time
                        // still, in the one-token order.
                        // Kernel families: AVX2 (4-byte pieces), AVX-512, AVX-512 VNNI.
                        let family = match (piece(ty) == 8, has_vnni()) {
                            (false, _) => 0,
                            (true, false) => 1,
                            (true, true) => 2,
                        };
                        let mut t = tb;
                        while t + 4 <= te {
                            let four = [&qs[t], &qs[t + 1], &qs[t + 2], &qs[t + 3]];
                            let v = match (family, batch == Batch::Decode) {
                                (0, false) => q4k::gemm_4tok(data, four),
                                (1, false) => q4k::gemm_4tok_512(data, four),
                                (_, false) => q4k::gemm_4tok_vnni(data, four),
                                (0, true) => q4k::gemm_gemv_order(data, four),
                                (1, true) => q4k::gemm_512_gemv_order(data, four),
                                (_, true) => q4k::gemm_vnni_gemv_order(data, four),
                            };
                            t += emit(t, r, &v);
                        }
                        match (family, &qs[t..te]) {
                            (_, []) => 0,
                            (0, [a]) => emit(t, r, &q4k::gemm_gemv_order(data, [a])),
                            (0, [a, b]) => emit(t, r, &q4k::gemm_gemv_order(data, [a, b])),
                            (0, [a, b, c, ..]) => emit(t, r, &q4k::gemm_gemv_order(data, [a, b, c])),
                            (1, [a]) => emit(t, r, &q4k::gemm_512_gemv_order(data, [a])),
                            (1, [a, b]) => emit(t, r, &q4k::gemm_512_gemv_order(data, [a, b])),
                            (1, [a, b, c, ..]) => emit(t, r, &q4k::gemm_512_gemv_order(data, [a, b, c])),
                            (_, [a]) => emit(t, r, &q4k::gemm_vnni_gemv_order(data, [a])),
                            (_, [a, b]) => emit(t, r, &q4k::gemm_vnni_gemv_order(data, [a, b])),
                            (_, [a, b, c, ..]) => emit(t, r, &q4k::gemm_vnni_gemv_order(data, [a, b, c])),
                        };
                    }
                }
            }
        }
    }
}

/// SIMD helpers shared by the re-laid kernels.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// The 16 bytes at `p` (unsigned) widened to sixteen i16 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX2; `p` must be valid for reading 16 bytes (any alignment).
    #[inline(always)]
    pub unsafe fn widen_u8(p: *const u8) -> __m256i {
        _mm256_cvtepu8_epi16(_mm_loadu_si128(p as *const __m128i))
    }

    /// The 16 bytes at `p` (signed) widened to sixteen i16 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX2; `p` must be valid for reading 16 bytes (any alignment).
    #[inline(always)]
    pub unsafe fn widen_i8(p: *const u8) -> __m256i {
        _mm256_cvtepi8_epi16(_mm_loadu_si128(p as *const __m128i))
    }

    /// The four activation bytes at `p` in every 32-bit lane.
    ///
    /// # Safety
    /// The CPU must have AVX; `p` must be valid for reading 4 bytes (any alignment).
    #[inline(always)]
    pub unsafe fn bcast4(p: *const i8) -> __m256i {
        _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32))
    }

    /// The eight half floats at `p` (one per row) as f32 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX and F16C; `p` must be valid for reading 16 bytes (any
    /// alignment).
    #[inline(always)]
    pub unsafe fn halfs(p: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cpu::act::QuantizedRow;
    use crate::cpu::dot::tests::{activations, weight_row};

    /// `n` activation rows of width `cols`, quantized for the K-quant kernels.
    pub fn q8k_rows(n: usize, cols: usize, seed: u64) -> Vec<QuantizedRow> {
        (0..n as u64)
            .map(|t| {
                let mut q = QuantizedRow::default();
                q.quantize_q8k(&activations(cols, seed + t));
                q
            })
            .collect()
    }

    /// `rows` random GGUF rows of `ty` and the same re-laid with `piece`-byte pieces.
    pub fn relaid(ty: GgmlType, piece: usize, rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
        let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(ty, cols, 7 + r as u64)).collect();
        let mut x = vec![0u8; relaid_bytes(ty, rows, cols / 256)];
        interleave_with(ty, piece, &data, cols / 256, &mut x);
        (data, x)
    }

    #[test]
    fn rows_come_back_as_they_went_in() {
        let (rows, cols) = (16, 512);
        for (ty, piece) in [(GgmlType::Q4K, 4), (GgmlType::Q4K, 8), (GgmlType::Q6K, 4)] {
            let (data, x) = relaid(ty, piece, rows, cols);
            let row_bytes = cols / 256 * ty.block_bytes() as usize;
            let mut back = Vec::new();
            for r in 0..rows {
                row_with(ty, piece, &x, cols / 256, r, &mut back);
                assert_eq!(back, data[r * row_bytes..(r + 1) * row_bytes], "{ty:?}, {piece}-byte pieces, row {r}");
            }
        }
    }
}
