//! The element-wise and row-wise operations of a BERT-family encoder that a decoder LM
//! does not have: LayerNorm with a bias, exact (erf) GELU, and bidirectional attention
//! over one sequence.
//!
//! Why exact GELU: BERT checkpoints were trained with `0.5·x·(1 + erf(x/√2))`, and
//! sentence-transformers runs it so; the tanh approximation moves vectors by about 1e-4.
//! `erf` here is Abramowitz & Stegun 7.1.26 (absolute error below 1e-6 in f32) on a
//! branch-free `exp`, so a loop over a row vectorizes: libm's `erff` costs as much per
//! element as a whole matmul row at MiniLM's width.
//!
//! Every loop body is a plain `#[inline(always)]` function, compiled once portably and
//! once for AVX2 + FMA (chosen at run time, as the quantized kernels are); in wasm the
//! portable copy is vectorized for `simd128`.
//!
//! Safety: the `_fma` and `_avx2` functions are `unsafe` because they enable AVX2 and FMA
//! with `#[target_feature]`; they run only after `has_fma()` found both. The `_avx2` tiles
//! also read and write through raw pointers: their callers assert the slice sizes first.

// Unsafe code: the AVX2 + FMA copies of the loops and the explicit AVX2 attention tiles:
// `#[target_feature]` functions called only after run-time feature detection (`has_fma`),
// with raw-pointer vector loads and stores.
#![allow(unsafe_code)]

use super::madd;

/// LayerNorm of each `width`-wide row of `x`, in place: `(x − mean)/√(var + eps)·γ + β`
/// with the biased variance, as PyTorch computes it.
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `layer_norm_fma` enables.
        return unsafe { layer_norm_fma(x, gamma, beta, eps) };
    }
    layer_norm_body(x, gamma, beta, eps)
}

/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). The body is the safe portable code, compiled
/// with those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn layer_norm_fma(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    layer_norm_body(x, gamma, beta, eps)
}

#[inline(always)]
fn layer_norm_body(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    for row in x.chunks_exact_mut(width) {
        let mean = sum8(row) / width as f32;
        let mut sq = [0f32; 8];
        let mut chunks = row.chunks_exact(8);
        for c in &mut chunks {
            for i in 0..8 {
                let d = c[i] - mean;
                sq[i] += d * d;
            }
        }
        let tail: f32 = chunks.remainder().iter().map(|v| (v - mean) * (v - mean)).sum();
        let var = (sq.iter().sum::<f32>() + tail) / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// Sum with eight partial sums (vectorizable; the order differs from a serial sum only
/// in rounding).
#[inline(always)]
fn sum8(v: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// The largest value, with eight partial maxima (vectorizable, like [`sum8`]).
#[inline(always)]
fn max8(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    acc.iter().chain(chunks.remainder()).fold(f32::NEG_INFINITY, |m, &s| if s > m { s } else { m })
}

/// `x = gelu(x)` for every element (exact, erf form).
pub fn gelu(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `gelu_fma` enables.
        return unsafe { gelu_fma(x) };
    }
    x.iter_mut().for_each(|v| *v = gelu1(*v));
}

/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). The body is the safe portable code, compiled
/// with those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_fma(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = gelu1(*v));
}

/// One GELU: `0.5·x·(1 + erf(x/√2))`.
#[inline(always)]
pub fn gelu1(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * core::f32::consts::FRAC_1_SQRT_2))
}

/// `erf(x)` by Abramowitz & Stegun 7.1.26, branch-free.
///
/// Clamps are written as comparisons, not `f32::min`/`max`, and rounding as the
/// 1.5·2²³ trick, not `f32::round`: in wasm those std calls become calls to `fminf`,
/// `fmaxf` and `roundf` (their NaN and tie rules differ from wasm's instructions), which
/// stopped GELU and softmax from vectorizing and cost 7% of the wasm embedder's time.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let a = if a > 6.0 { 6.0 } else { a };
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp_nonpositive(-a * a);
    y.copysign(x)
}

/// `e^x` for `x` in [−36, 0] (so `2^n` stays a normal float): Cody–Waite reduction to
/// `n·ln 2 + b` and a degree-6 Taylor polynomial of `e^b` on |b| ≤ ln2/2 (relative error
/// below 2e-7), `2^n` put together from its bits. No branch, so loops vectorize.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    let x = if x < -87.0 { -87.0 } else { x };
    // Round to nearest (ties to even) by adding and taking away 1.5·2²³: exact for
    // |v| < 2²², and here |v| ≤ 126.
    // The integer `n` is read from the rounded value's low mantissa bits rather than by
    // `n as i32`: Rust's saturating float→int cast does not vectorize (it was a scalar
    // `cvttss2si` per element inside the softmax loop).
    const ROUND: f32 = 12_582_912.0;
    let shifted = x * core::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let n_int = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let b = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + b * (1.0 + b * (0.5 + b * (1.0 / 6.0 + b * (1.0 / 24.0 + b * (1.0 / 120.0 + b * (1.0 / 720.0))))));
    p * f32::from_bits(n_int.wrapping_add(127) << 23)
}

/// Bidirectional softmax attention of one head over one sequence: for each query row `i`,
/// `out_i = Σ_j softmax_j(q_i·k_j · scale) · v_j`. `q`, `k`, `v` and `out` are rows of
/// `head_dim` values found `stride` apart (the heads of a fused QKV buffer);
/// `scratch` is reused between calls.
#[allow(clippy::too_many_arguments)]
pub fn attend(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    stride: usize,
    (tokens, head_dim): (usize, usize),
    scale: f32,
    out: &mut [f32],
    out_stride: usize,
    scratch: &mut Vec<f32>,
) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `attend_fma` enables.
        return unsafe { attend_fma(q, k, v, stride, (tokens, head_dim), scale, out, out_stride, scratch) };
    }
    attend_body::<false>(q, k, v, stride, (tokens, head_dim), scale, out, out_stride, scratch)
}

/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). The body is the portable code compiled with
/// those features; with `FMA` set it calls the `_avx2` tiles, after asserting their sizes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn attend_fma(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    stride: usize,
    dims: (usize, usize),
    scale: f32,
    out: &mut [f32],
    out_stride: usize,
    scratch: &mut Vec<f32>,
) {
    attend_body::<true>(q, k, v, stride, dims, scale, out, out_stride, scratch)
}

/// Queries per block of the attention's two products.
const QB: usize = 4;
/// Keys per score block: 16 for the AVX2 blocks (four queries × two vectors), 32 where
/// one query goes at a time (wasm: eight `simd128` accumulators).
const KB: usize = if cfg!(target_arch = "x86_64") { 16 } else { 32 };
/// Dimensions per output block.
const DB: usize = 16;

/// The attention of one head as two small matrix products in registers. Keys are first
/// copied transposed and pre-scaled (`kt[c][j] = k_j[c]·scale`) and values packed
/// (`vv[j][c]`). Queries go [`QB`] at a time: their scores [`KB`] keys at a time in
/// accumulators over the head's dimensions (per dimension, one load of the keys feeds
/// four broadcast query values), their outputs [`DB`] dimensions at a time over the keys
/// likewise (`score_block`, `output_block`: explicit AVX2 where the CPU has it, as the
/// vectorizer spills four queries' accumulators; one query at a time elsewhere).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_body<const FMA: bool>(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    stride: usize,
    (tokens, d): (usize, usize),
    scale: f32,
    out: &mut [f32],
    out_stride: usize,
    scratch: &mut Vec<f32>,
) {
    if tokens == 0 {
        return;
    }
    let padded = tokens.div_ceil(KB) * KB;
    // Grown, never cleared: every value read below is written first (padded key columns
    // give scores that are never read), so stale values from an earlier call are harmless.
    let need = d * padded + padded * d + QB * padded + QB * d;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (kt, rest) = scratch.split_at_mut(d * padded);
    let (vv, rest) = rest.split_at_mut(padded * d);
    let (scores, rest) = rest.split_at_mut(QB * padded);
    let qblock = &mut rest[..QB * d];
    pack_keys::<FMA>(k, stride, (tokens, d), scale, kt, padded);
    for j in 0..tokens {
        vv[j * d..(j + 1) * d].copy_from_slice(&v[j * stride..j * stride + d]);
    }
    for i0 in (0..tokens).step_by(QB) {
        // The block's queries side by side; a last, partial block repeats its last query
        // in the spare rows (computed, not written out).
        for (r, dst) in qblock.chunks_exact_mut(d).enumerate() {
            let i = (i0 + r).min(tokens - 1);
            dst.copy_from_slice(&q[i * stride..i * stride + d]);
        }
        for jb in 0..padded / KB {
            score_block::<FMA>(qblock, d, &kt[jb * KB..], padded, &mut scores[jb * KB..], padded);
        }
        let mut inv = [0f32; QB];
        for (r, row) in scores.chunks_exact_mut(padded).enumerate() {
            let live = &mut row[..tokens];
            let max = max8(live);
            // Exponentials first, then their sum: separate loops, so the first vectorizes.
            live.iter_mut().for_each(|s| *s = exp_nonpositive(*s - max));
            inv[r] = 1.0 / sum8(live);
        }
        let n = (tokens - i0).min(QB);
        if d.is_multiple_of(DB) {
            for c0 in (0..d).step_by(DB) {
                let mut acc = [[0f32; DB]; QB];
                output_block::<FMA>(scores, padded, tokens, &vv[c0..], d, &mut acc);
                for (r, a) in acc.iter().enumerate().take(n) {
                    let oi = &mut out[(i0 + r) * out_stride + c0..][..DB];
                    for l in 0..DB {
                        oi[l] = a[l] * inv[r];
                    }
                }
            }
        } else {
            for r in 0..n {
                let oi = &mut out[(i0 + r) * out_stride..(i0 + r) * out_stride + d];
                oi.fill(0.0);
                for (j, &p) in scores[r * padded..r * padded + tokens].iter().enumerate() {
                    for (o, &x) in oi.iter_mut().zip(&vv[j * d..(j + 1) * d]) {
                        *o = madd::<FMA>(p, x, *o);
                    }
                }
                oi.iter_mut().for_each(|o| *o *= inv[r]);
            }
        }
    }
}

/// `kt[c][j] = k_j[c] · scale` for the `tokens` key rows of `k` (`stride` apart), `kt`
/// rows `kt_stride` apart. Natively 8×8 tiles are transposed in AVX2 registers: the
/// scalar strided stores were a tenth of the attention's time.
#[inline(always)]
fn pack_keys<const FMA: bool>(k: &[f32], stride: usize, (tokens, d): (usize, usize), scale: f32, kt: &mut [f32], kt_stride: usize) {
    #[cfg(target_arch = "x86_64")]
    let done = if FMA && d.is_multiple_of(8) && tokens >= 8 {
        let done = tokens / 8 * 8;
        assert!(k.len() >= (done - 1) * stride + d && kt.len() >= (d - 1) * kt_stride + done);
        // SAFETY: `FMA` is set only inside `attend_fma`, which runs only where AVX2 and FMA
        // are present; `done` and `d` are multiples of 8 and the sizes are asserted above.
        unsafe { pack_keys_avx2(k, stride, (done, d), scale, kt, kt_stride) };
        done
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for j in done..tokens {
        for c in 0..d {
            kt[c * kt_stride + j] = k[j * stride + c] * scale;
        }
    }
}

/// [`pack_keys`] for a multiple of eight tokens and of eight dimensions.
///
/// # Safety
/// The CPU must have AVX2 and FMA. `tokens` and `d` must be multiples of 8, `k` must hold
/// at least `(tokens − 1) · stride + d` values and `kt` at least
/// `(d − 1) · kt_stride + tokens` (read and written unchecked; [`pack_keys`] asserts this).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_keys_avx2(k: &[f32], stride: usize, (tokens, d): (usize, usize), scale: f32, kt: &mut [f32], kt_stride: usize) {
    use std::arch::x86_64::*;
    let (kp, tp) = (k.as_ptr(), kt.as_mut_ptr());
    let s = _mm256_set1_ps(scale);
    for j0 in (0..tokens).step_by(8) {
        for c0 in (0..d).step_by(8) {
            // SAFETY: AVX2 is enabled here; j0 + 8 ≤ tokens and c0 + 8 ≤ d (both multiples
            // of 8), so the caller's sizes put rows j0..j0+8, columns c0..c0+8 of the keys
            // and rows c0..c0+8, columns j0..j0+8 of `kt` inside the slices.
            unsafe {
                let r: [__m256; 8] = core::array::from_fn(|i| _mm256_mul_ps(_mm256_loadu_ps(kp.add((j0 + i) * stride + c0)), s));
                // The usual 8×8 transpose: interleave pairs, then quads, then halves.
                let t0 = _mm256_unpacklo_ps(r[0], r[1]);
                let t1 = _mm256_unpackhi_ps(r[0], r[1]);
                let t2 = _mm256_unpacklo_ps(r[2], r[3]);
                let t3 = _mm256_unpackhi_ps(r[2], r[3]);
                let t4 = _mm256_unpacklo_ps(r[4], r[5]);
                let t5 = _mm256_unpackhi_ps(r[4], r[5]);
                let t6 = _mm256_unpacklo_ps(r[6], r[7]);
                let t7 = _mm256_unpackhi_ps(r[6], r[7]);
                let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let cols = [
                    _mm256_permute2f128_ps::<0x20>(u0, u4),
                    _mm256_permute2f128_ps::<0x20>(u1, u5),
                    _mm256_permute2f128_ps::<0x20>(u2, u6),
                    _mm256_permute2f128_ps::<0x20>(u3, u7),
                    _mm256_permute2f128_ps::<0x31>(u0, u4),
                    _mm256_permute2f128_ps::<0x31>(u1, u5),
                    _mm256_permute2f128_ps::<0x31>(u2, u6),
                    _mm256_permute2f128_ps::<0x31>(u3, u7),
                ];
                for (i, col) in cols.iter().enumerate() {
                    _mm256_storeu_ps(tp.add((c0 + i) * kt_stride + j0), *col);
                }
            }
        }
    }
}

/// `scores[r][l] = Σ_c qblock[r][c] · kt[c][l]` for the [`QB`] queries of `qblock` (rows of
/// `d`) and [`KB`] keys (`kt` rows `kt_stride` apart, `scores` rows `s_stride` apart).
#[inline(always)]
fn score_block<const FMA: bool>(qblock: &[f32], d: usize, kt: &[f32], kt_stride: usize, scores: &mut [f32], s_stride: usize) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        assert!(qblock.len() >= QB * d && kt.len() >= (d - 1) * kt_stride + KB && scores.len() >= (QB - 1) * s_stride + KB);
        // SAFETY: `FMA` is set only inside `attend_fma`, which runs only where AVX2 and FMA
        // are present; the sizes are asserted above.
        return unsafe { score_block_avx2(qblock, d, kt, kt_stride, scores, s_stride) };
    }
    for r in 0..QB {
        let mut acc = [0f32; KB];
        for (c, &a) in qblock[r * d..(r + 1) * d].iter().enumerate() {
            let keys: &[f32; KB] = kt[c * kt_stride..][..KB].try_into().unwrap_or(&[0.0; KB]);
            for l in 0..KB {
                acc[l] = madd::<FMA>(a, keys[l], acc[l]);
            }
        }
        scores[r * s_stride..][..KB].copy_from_slice(&acc);
    }
}

/// # Safety
/// The CPU must have AVX2 and FMA. `qblock` must hold at least `QB · d` values, `kt` at
/// least `(d − 1) · kt_stride + KB` and `scores` at least `(QB − 1) · s_stride + KB` (read
/// and written unchecked; [`score_block`] asserts this). On x86_64 `KB` is 16, the two
/// vectors read per key row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn score_block_avx2(qblock: &[f32], d: usize, kt: &[f32], kt_stride: usize, scores: &mut [f32], s_stride: usize) {
    use std::arch::x86_64::*;
    let (qp, kp, sp) = (qblock.as_ptr(), kt.as_ptr(), scores.as_mut_ptr());
    let mut acc = [[_mm256_setzero_ps(); 2]; QB];
    for c in 0..d {
        // SAFETY: AVX2 and FMA are enabled here; c < d, so by the caller's sizes key row c
        // (16 = KB values) and query values r · d + c (r < QB) are inside the slices.
        unsafe {
            let k0 = _mm256_loadu_ps(kp.add(c * kt_stride));
            let k1 = _mm256_loadu_ps(kp.add(c * kt_stride + 8));
            for (r, a) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*qp.add(r * d + c));
                a[0] = _mm256_fmadd_ps(x, k0, a[0]);
                a[1] = _mm256_fmadd_ps(x, k1, a[1]);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        // SAFETY: r < QB, so by the caller's sizes the 16 = KB scores at r · s_stride are
        // inside `scores`.
        unsafe {
            _mm256_storeu_ps(sp.add(r * s_stride), a[0]);
            _mm256_storeu_ps(sp.add(r * s_stride + 8), a[1]);
        }
    }
}

/// `acc[r][l] = Σ_j scores[r][j] · vv[j][l]` over `tokens` keys for [`QB`] score rows
/// (`s_stride` apart) and [`DB`] dimensions of the values (`vv` rows `d` apart).
#[inline(always)]
fn output_block<const FMA: bool>(scores: &[f32], s_stride: usize, tokens: usize, vv: &[f32], d: usize, acc: &mut [[f32; DB]; QB]) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        assert!(scores.len() >= (QB - 1) * s_stride + tokens && vv.len() >= (tokens - 1) * d + DB);
        // SAFETY: `FMA` is set only inside `attend_fma`, which runs only where AVX2 and FMA
        // are present; the sizes are asserted above.
        return unsafe { output_block_avx2(scores, s_stride, tokens, vv, d, acc) };
    }
    for (r, a) in acc.iter_mut().enumerate() {
        for (j, &p) in scores[r * s_stride..r * s_stride + tokens].iter().enumerate() {
            let vj: &[f32; DB] = vv[j * d..][..DB].try_into().unwrap_or(&[0.0; DB]);
            for l in 0..DB {
                a[l] = madd::<FMA>(p, vj[l], a[l]);
            }
        }
    }
}

/// # Safety
/// The CPU must have AVX2 and FMA. `scores` must hold at least
/// `(QB − 1) · s_stride + tokens` values and `vv` at least `(tokens − 1) · d + DB` (read
/// unchecked; [`output_block`] asserts this).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn output_block_avx2(scores: &[f32], s_stride: usize, tokens: usize, vv: &[f32], d: usize, acc: &mut [[f32; DB]; QB]) {
    use std::arch::x86_64::*;
    let (sp, vp) = (scores.as_ptr(), vv.as_ptr());
    let mut c = [[_mm256_setzero_ps(); 2]; QB];
    for j in 0..tokens {
        // SAFETY: AVX2 and FMA are enabled here; j < tokens, so by the caller's sizes the
        // DB = 16 values of row j of `vv` and score r · s_stride + j (r < QB) are inside the
        // slices.
        unsafe {
            let v0 = _mm256_loadu_ps(vp.add(j * d));
            let v1 = _mm256_loadu_ps(vp.add(j * d + 8));
            for (r, cr) in c.iter_mut().enumerate() {
                let p = _mm256_broadcast_ss(&*sp.add(r * s_stride + j));
                cr[0] = _mm256_fmadd_ps(p, v0, cr[0]);
                cr[1] = _mm256_fmadd_ps(p, v1, cr[1]);
            }
        }
    }
    for (a, cr) in acc.iter_mut().zip(&c) {
        // SAFETY: each row of `acc` holds DB = 16 floats.
        unsafe {
            _mm256_storeu_ps(a.as_mut_ptr(), cr[0]);
            _mm256_storeu_ps(a.as_mut_ptr().add(8), cr[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_are_close_to_libm() {
        let mut worst: f32 = 0.0;
        for i in -80_000..=80_000 {
            let x = i as f32 / 10_000.0;
            worst = worst.max((erf(x) - libm::erf(f64::from(x)) as f32).abs());
            let exact = 0.5 * x * (1.0 + libm::erf(f64::from(x) / 2f64.sqrt()) as f32);
            assert!((gelu1(x) - exact).abs() <= 1e-6 * x.abs().max(1.0), "gelu({x})");
        }
        assert!(worst < 1e-6, "worst erf error {worst}");
        let mut v: Vec<f32> = (-300..300).map(|i| i as f32 / 37.0).collect();
        let want: Vec<f32> = v.iter().map(|&x| gelu1(x)).collect();
        gelu(&mut v);
        for (a, b) in v.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0));
        }
    }

    #[test]
    fn exp_is_accurate_where_used() {
        for i in 0..=36_000 {
            let x = -(i as f32) / 1000.0;
            let (got, want) = (exp_nonpositive(x), x.exp());
            assert!((got - want).abs() <= 4e-7 * want, "exp({x}) = {got}, want {want}");
        }
        assert!(exp_nonpositive(-1000.0) < 1e-37);
    }

    #[test]
    fn layer_norm_matches_the_definition() {
        let width = 19;
        let mut x: Vec<f32> = (0..width * 3).map(|i| ((i * 7) % 11) as f32 - 4.0).collect();
        let gamma: Vec<f32> = (0..width).map(|i| 1.0 + i as f32 / 10.0).collect();
        let beta: Vec<f32> = (0..width).map(|i| i as f32 / 100.0).collect();
        let want: Vec<f32> = x
            .chunks(width)
            .flat_map(|r| {
                let m = r.iter().map(|&v| f64::from(v)).sum::<f64>() / width as f64;
                let var = r.iter().map(|&v| (f64::from(v) - m).powi(2)).sum::<f64>() / width as f64;
                r.iter()
                    .enumerate()
                    .map(move |(i, &v)| ((f64::from(v) - m) / (var + 1e-12).sqrt()) as f32 * (1.0 + i as f32 / 10.0) + i as f32 / 100.0)
                    .collect::<Vec<_>>()
            })
            .collect();
        layer_norm(&mut x, &gamma, &beta, 1e-12);
        for (a, b) in x.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn attention_matches_a_plain_softmax() {
        // Query counts around the block of four, key counts around the block of 32, head
        // widths that are and are not whole blocks of 16 dimensions.
        for (tokens, d, stride) in [(5, 12, 40), (1, 16, 16), (4, 32, 96), (37, 32, 100), (66, 48, 48), (17, 24, 77), (8, 8, 8)] {
            let buf: Vec<f32> = (0..tokens * stride * 3).map(|i| ((i * 13) % 17) as f32 / 9.0 - 0.9).collect();
            let (q, k, v) = (&buf[0..], &buf[tokens * stride..], &buf[2 * tokens * stride..]);
            let mut out = vec![f32::NAN; tokens * d];
            attend(q, k, v, stride, (tokens, d), 0.3, &mut out, d, &mut Vec::new());
            for i in 0..tokens {
                let s: Vec<f64> = (0..tokens)
                    .map(|j| (0..d).map(|c| f64::from(q[i * stride + c]) * f64::from(k[j * stride + c])).sum::<f64>() * 0.3)
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let want: f64 = (0..tokens).map(|j| e[j] / z * f64::from(v[j * stride + c])).sum();
                    let got = out[i * d + c];
                    assert!((f64::from(got) - want).abs() < 1e-5, "{tokens} tokens, d {d}: query {i} dim {c}: {got} vs {want}");
                }
            }
        }
    }
}
