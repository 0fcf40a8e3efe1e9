//! bfloat16 products for the encoder's GEMM: weights and activations rounded to bf16,
//! products summed in f32.
//!
//! Why: on CPUs with AVX-512 BF16 (AMD Zen 4 and later, Intel Cooper Lake and Sapphire
//! Rapids), `VDPBF16PS` multiplies sixteen *pairs* of bf16 values and adds both products to
//! sixteen f32 accumulators in one instruction: twice the multiply-adds of an f32 FMA of the
//! same width, on half the weight bytes. Rounding both sides to bf16 (8 significant bits)
//! keeps MiniLM within cosine 0.99995 of sentence-transformers in f32 (measured by
//! simulating it in PyTorch on the 223 golden texts; `tests/embed_parity.rs` checks ours),
//! where int8 activations cost far more (0.9979 at best, per-32 blocks).
//!
//! Layout: a panel of [`NR`] rows holds, for each pair of k-values `(2q, 2q+1)`, the pair of
//! each row side by side: `panel[q][lane][0..2]`. One 512-bit load is then the sixteen
//! rows' pairs for one `q`, and one broadcast of a token's pair `(x[2q], x[2q+1])` (32 bits)
//! feeds it: `VDPBF16PS acc, broadcast, panel`. An odd `cols` is padded with a zero k.
//!
//! Elsewhere (no AVX-512 BF16, and in wasm) the panels expand to f32 for the f32 kernel:
//! a bf16 value is the top half of an f32, so expanding is a shift.

// Unsafe code: the AVX-512 BF16 kernel: `#[target_feature]` intrinsics, called only after
// run-time feature detection (`has_avx512_bf16`), with raw-pointer vector loads.
#![allow(unsafe_code)]

use super::gemm::NR;

/// f32 → bf16 with round-to-nearest-even (as `VCVTNEPS2BF16` and PyTorch do); NaN stays
/// NaN. Branch-free, so conversion loops vectorize.
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    let rounded = (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16;
    let quiet_nan = ((bits >> 16) | 0x40) as u16;
    if x.is_nan() {
        quiet_nan
    } else {
        rounded
    }
}

/// bf16 → f32 (exact).
#[inline]
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// k-values rounded up to whole pairs.
pub fn padded_cols(cols: usize) -> usize {
    cols.div_ceil(2) * 2
}

/// Re-lay a k-major f32 panel buffer (`[panel][k][lane]`, `cols` k-values) into bf16 pairs
/// (`[panel][k / 2][lane][k % 2]` over [`padded_cols`]).
pub fn pairs_from_panels(f: &[f32], cols: usize) -> Vec<u16> {
    let cp = padded_cols(cols);
    let panels = f.len() / (NR * cols.max(1));
    let mut out = vec![0u16; panels * NR * cp];
    for p in 0..panels {
        for k in 0..cols {
            for lane in 0..NR {
                out[p * NR * cp + (k / 2) * 2 * NR + lane * 2 + k % 2] = to_bf16(f[p * NR * cols + k * NR + lane]);
            }
        }
    }
    out
}

/// One bf16-pair panel back to the f32 k-major layout the f32 kernel reads.
pub fn expand_panel(src: &[u16], cols: usize, out: &mut Vec<f32>) {
    out.clear();
    out.resize(cols * NR, 0.0);
    for k in 0..cols {
        for lane in 0..NR {
            out[k * NR + lane] = from_bf16(src[(k / 2) * 2 * NR + lane * 2 + k % 2]);
        }
    }
}

/// Activations as bf16 pairs, one row of `padded_cols(cols) / 2` u32 per token, rows
/// padded with zero tokens up to a multiple of `tile` (so the kernel always runs whole
/// tiles).
pub fn activation_pairs(x: &[f32], cols: usize, tile: usize) -> Vec<u32> {
    let tokens = x.len() / cols.max(1);
    let kp = padded_cols(cols) / 2;
    let mut out = vec![0u32; tokens.div_ceil(tile) * tile * kp];
    for (row, dst) in x.chunks_exact(cols).zip(out.chunks_exact_mut(kp)) {
        // Little-endian pairs: the row's bf16 values in order, two to a u32.
        let (whole, odd) = row.split_at(cols / 2 * 2);
        for (d, pair) in dst.iter_mut().zip(whole.chunks_exact(2)) {
            *d = u32::from(to_bf16(pair[0])) | (u32::from(to_bf16(pair[1])) << 16);
        }
        if let (Some(&last), Some(d)) = (odd.first(), dst.last_mut()) {
            *d = u32::from(to_bf16(last));
        }
    }
    out
}

/// Tokens per AVX-512 BF16 tile.
pub const MR_BF16: usize = 8;

/// Whether the CPU has AVX-512 F and BF16 and the AVX-512 path runs (`DOCMEM_CPU=avx2`
/// turns it off, to compare with the f32 path; see [`super::isa`]).
pub fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| super::isa::allows(super::isa::Isa::Avx512) && is_x86_feature_detected!("avx512bf16"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `acc[i][P·16 + j] = Σ_q x[i][q] · panels[P][q][j]` over bf16 pairs, for [`MR_BF16`]
/// tokens of `kp` pairs each (row stride `kp`) against `P` consecutive panels of
/// `kp · 2 · NR` bf16 values each. Two panels per call let each broadcast token pair feed
/// two multiply-adds, so loads stay below the BF16 unit's rate.
///
/// # Safety
/// The CPU must have AVX-512 F and BF16 ([`has_avx512_bf16`]); `x` must hold
/// `MR_BF16 · kp` values and `panels` `P · kp · 2 · NR`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub unsafe fn kernel<const P: usize>(x: &[u32], kp: usize, panels: &[u16], acc: &mut [[[f32; NR]; P]; MR_BF16]) {
    use std::arch::x86_64::*;
    debug_assert!(x.len() >= MR_BF16 * kp && panels.len() >= P * kp * 2 * NR);
    let (xp, wp) = (x.as_ptr(), panels.as_ptr());
    let per = kp * 2 * NR;
    let mut c = [[_mm512_setzero_ps(); P]; MR_BF16];
    for q in 0..kp {
        // SAFETY: q < kp, so the 32 bf16 at q · 2 · NR of each panel and each token's
        // pair q are inside the slices (sizes checked by the caller).
        unsafe {
            let w: [__m512bh; P] = core::array::from_fn(|p| core::mem::transmute(_mm512_loadu_si512(wp.add(p * per + q * 2 * NR).cast())));
            for (i, ci) in c.iter_mut().enumerate() {
                let xi: __m512bh = core::mem::transmute(_mm512_set1_epi32(*xp.add(i * kp + q) as i32));
                for p in 0..P {
                    ci[p] = _mm512_dpbf16_ps(ci[p], xi, w[p]);
                }
            }
        }
    }
    for (out, ci) in acc.iter_mut().zip(&c) {
        for p in 0..P {
            // SAFETY: each panel row of `acc` holds NR = 16 floats.
            unsafe { _mm512_storeu_ps(out[p].as_mut_ptr(), ci[p]) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even() {
        // 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), to_bf16(1.0));
        // 1 + 3·2^-8 lies halfway too: up to the even 1 + 2^-6.
        assert_eq!(from_bf16(to_bf16(1.0 + 3.0 / 256.0)), 1.0 + 4.0 / 256.0);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
    }

    #[test]
    fn pairs_round_trip_through_the_panel_layout() {
        let cols = 5;
        let f: Vec<f32> = (0..2 * NR * cols).map(|i| i as f32).collect();
        let pairs = pairs_from_panels(&f, cols);
        assert_eq!(pairs.len(), 2 * NR * padded_cols(cols));
        for p in 0..2 {
            let mut out = Vec::new();
            expand_panel(&pairs[p * NR * padded_cols(cols)..], cols, &mut out);
            assert_eq!(out, f[p * NR * cols..(p + 1) * NR * cols], "panel {p}");
        }
    }
}
