//! The attention of one query over one key/value head, for one or more of the query heads
//! that share it: scores, softmax, `P·V`, in ggml's summation order
//! ([`super::ggml_order`]) so that half-precision roundings fall exactly as llama.cpp's.
//!
//! ggml's products are fused multiply-adds of half-precision values, which a plain
//! multiply and add reproduce exactly (`ggml_order::half_product_add`). The hot loops are
//! written once (an `#[inline(always)]` body taking its dot product and update) and
//! compiled three ways: with AVX2 + FMA + F16C, chosen at run time; with wasm SIMD
//! (`ggml_order::simd128`, fused by relaxed SIMD where the build has it); and portably.
//! RoPE's multiply-adds are not of half-precision values and stay fused
//! ([`super::fma`]).

// Indexed loops spell out ggml's lane layout; iterator chains would hide it.
#![allow(clippy::needless_range_loop)]
// Unsafe code: the AVX2 + FMA + F16C copy of the head's loops (`#[target_feature]`), called
// only after run-time feature detection (`has_fma`).
#![allow(unsafe_code)]

use super::fma::Fma;
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use super::ggml_order::{axpy_f16, dot_f16};
use super::ggml_order::{reduce16, Order, LANES};
use super::mathfn::exp_shifted;

/// Inputs for one query and one or more query heads that share a key/value head
/// (grouped-query attention).
pub struct Head<'a> {
    /// The query heads, `head_dim` values each, one after the other, already rounded to
    /// half precision.
    pub q: &'a [f32],
    /// Values per head.
    pub head_dim: usize,
    /// Cached keys, `len × kv_width`.
    pub keys: &'a [f32],
    /// Cached values, `len × kv_width`.
    pub values: &'a [f32],
    /// Row stride of the cache (`kv_width`).
    pub stride: usize,
    /// Offset of this head's KV group in a row.
    pub offset: usize,
    /// Positions attended (`first..n_ctx`; those before `first`, outside a sliding window,
    /// weigh nothing, as llama.cpp's mask makes them).
    pub n_ctx: usize,
    /// The first position attended (0 but in a sliding window).
    pub first: usize,
    /// ggml's order for this batch.
    pub order: Order,
    /// The scores' factor: `1/sqrt(head_dim)`, or 1 where the queries were scaled first.
    pub scale: f32,
}

/// Reusable buffers for one worker.
#[derive(Default)]
pub struct Scratch {
    /// Scores, then probabilities (before the 1/Σ scale): `n_ctx` per query head, head
    /// after head.
    pub probs: Vec<f32>,
    acc: Vec<f32>,
    inv: Vec<f32>,
}

/// Attend; writes `head_dim` values per query head to `out` and returns the first head's
/// `1/Σ` (its probabilities are `scratch.probs[p] · inv`).
pub fn attend(h: &Head<'_>, scratch: &mut Scratch, out: &mut [f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` (`avx2::available`) found AVX2, FMA and F16C, the features
        // `attend_fma` enables.
        return unsafe { attend_fma(h, scratch, out) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return attend_simd128(h, scratch, out);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    attend_portable(h, scratch, out)
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C (`has_fma`, which is `avx2::available`). The body
/// is the safe portable code compiled with those features, plus the ggml-order AVX2
/// kernels, which check their slice lengths.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_fma(h: &Head<'_>, scratch: &mut Scratch, out: &mut [f32]) -> f32 {
    use super::ggml_order::avx2;
    let ops = Ops {
        // SAFETY: this function runs only where AVX2, FMA and F16C are present (its own
        // contract); `dot_f16` checks its lengths itself.
        dot: |x: &[f32], y: &[f32], o| unsafe { avx2::dot_f16(x, y, o) },
        // SAFETY: as for `dot`; `axpy` checks its lengths itself.
        axpy: |a, x: &[f32], y: &mut [f32]| unsafe { avx2::axpy(a, x, y) },
        // SAFETY: as for `dot` (F16C is among the features).
        f16_round: |x| unsafe { super::avx2::f16_round(x) },
    };
    attend_body(h, scratch, out, ops)
}

/// The body with wasm SIMD's dot product and update (`ggml_order::simd128`), compiled
/// with relaxed SIMD where the build has it, so that they inline here.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
fn attend_simd128(h: &Head<'_>, scratch: &mut Scratch, out: &mut [f32]) -> f32 {
    use super::ggml_order::simd128;
    // Closures (which take this function's features): `#[target_feature]` functions are
    // not `Fn` values themselves.
    let ops = Ops {
        dot: |x: &[f32], y: &[f32], o| simd128::dot_f16(x, y, o),
        axpy: |a, x: &[f32], y: &mut [f32]| simd128::axpy(a, x, y),
        f16_round: crate::quant::f16_round,
    };
    attend_body(h, scratch, out, ops)
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
#[inline(always)]
fn attend_portable(h: &Head<'_>, scratch: &mut Scratch, out: &mut [f32]) -> f32 {
    attend_body(h, scratch, out, Ops { dot: dot_f16, axpy: axpy_f16, f16_round: crate::quant::f16_round })
}

/// The attention's inner loops, passed in so that one body serves the SIMD and portable
/// builds: `dot(q, k, order)`, `axpy(a, x, y)` (`y += a·x`, fused, element by element)
/// and rounding to half precision.
struct Ops<D, A, R> {
    dot: D,
    axpy: A,
    f16_round: R,
}

/// The attention of one or more query heads over one key/value head.
///
/// Each key and value row is read once for all the query heads: they share it (six query
/// heads to a key/value head in Qwen2.5-1.5B), and a prompt's attention reads the whole
/// cache for every token, so reading it once per head kept the loops waiting on the cache.
/// Each head still has its own scores, softmax and accumulators, updated in the same order
/// as alone, so every head's result is the same bits whatever the group.
#[inline(always)]
fn attend_body<D, A, R>(h: &Head<'_>, scratch: &mut Scratch, out: &mut [f32], ops: Ops<D, A, R>) -> f32
where
    D: Fn(&[f32], &[f32], Order) -> f32,
    A: Fn(f32, &[f32], &mut [f32]),
    R: Fn(f32) -> f32,
{
    let Ops { dot, axpy, f16_round } = ops;
    let (hd, n) = (h.head_dim, h.n_ctx);
    if hd == 0 || n == 0 {
        // Nothing attended: no probabilities, and zeros for the heads' values.
        scratch.probs.clear();
        out.fill(0.0);
        return 0.0;
    }
    assert!(h.q.len().is_multiple_of(hd) && out.len() >= h.q.len(), "attention: the query heads and the output disagree");
    let heads = h.q.len() / hd;
    let row = |m: &'_ [f32], p: usize| -> std::ops::Range<usize> { p * h.stride + h.offset..p * h.stride + h.offset + hd.min(m.len()) };
    scratch.probs.clear();
    scratch.probs.resize(heads * n, 0.0);
    let first = h.first.min(n - 1);
    for p in first..n {
        let k = &h.keys[row(h.keys, p)];
        for (j, q) in h.q.chunks_exact(hd).enumerate() {
            scratch.probs[j * n + p] = dot(q, k, h.order) * h.scale;
        }
    }
    scratch.inv.clear();
    for probs in scratch.probs.chunks_exact_mut(n) {
        // Positions outside the window are masked (weight 0, summed as zeros in their
        // lanes, as ggml sums its masked cells).
        let max = probs[first..].iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut sum = 0f64;
        exp_shifted(&mut probs[first..], max);
        for chunk in probs.chunks(LANES) {
            let mut lanes = [0f32; LANES];
            lanes[..chunk.len()].copy_from_slice(chunk);
            sum += f64::from(reduce16(&lanes));
        }
        scratch.inv.push((1.0 / sum) as f32);
    }
    // P·V with one accumulator slot per lane of ggml's order, each a vector over dims.
    let slots = match h.order {
        Order::VecDot => 4 * LANES,
        Order::Tiled => LANES,
    };
    let per_head = (slots + 2) * hd; // two spare rows for the fold below
    scratch.acc.clear();
    scratch.acc.resize(heads * per_head, 0.0);
    for p in first..n {
        let v = &h.values[row(h.values, p)];
        for (j, acc) in scratch.acc.chunks_exact_mut(per_head).enumerate() {
            let pw = f16_round(scratch.probs[j * n + p] * scratch.inv[j]);
            axpy(pw, v, &mut acc[(p % slots) * hd..(p % slots + 1) * hd]);
        }
    }
    for (acc, out) in scratch.acc.chunks_exact_mut(per_head).zip(out.chunks_exact_mut(hd)) {
        fold_slots(acc, hd, h.order, out);
    }
    scratch.inv.first().copied().unwrap_or(0.0)
}

/// Fold a head's accumulator slots to one value per dimension, as ggml folds its lanes
/// (`reduce16`), whole rows at a time so the adds vectorize over dimensions.
#[inline(always)]
fn fold_slots(acc: &mut [f32], hd: usize, order: Order, out: &mut [f32]) {
    let add_rows = |acc: &mut [f32], dst: usize, a: usize, b: usize| {
        let (a, b) = (a * hd, b * hd);
        for (d, i) in (dst * hd..(dst + 1) * hd).enumerate() {
            acc[i] = acc[a + d] + acc[b + d];
        }
    };
    if order == Order::VecDot {
        // Four 16-lane accumulators: (a0 + a2) + (a1 + a3), lane by lane.
        for l in 0..LANES {
            add_rows(acc, 64, l, 2 * LANES + l);
            add_rows(acc, 65, LANES + l, 3 * LANES + l);
            add_rows(acc, l, 64, 65);
        }
    }
    for i in 0..8 {
        add_rows(acc, i, 8 + i, i);
    }
    for i in 0..4 {
        add_rows(acc, i, 4 + i, i);
    }
    add_rows(acc, 4, 0, 2);
    add_rows(acc, 5, 1, 3);
    add_rows(acc, 0, 4, 5);
    out[..hd].copy_from_slice(&acc[..hd]);
}

/// RoPE's frequencies: pair `i` of a head turns by `pos · base^(-2i/rope_dims)`, divided by
/// `divisors[i]` where the model scales its RoPE for long contexts (Llama 3 writes these
/// per-pair divisors into its GGUF as `rope_freqs.weight`; llama.cpp calls them frequency
/// factors), times `freq_scale` where the scaling is linear (Gemma 3's global layers). The
/// CPU rotates by them and the GPU backend uploads the angles they give.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeFrequencies {
    /// `base^(-2/rope_dims)`: the factor from one pair's frequency to the next, applied by
    /// repeated multiplication in f32, as llama.cpp computes it.
    pub theta_scale: f32,
    /// Per-pair divisors of the angle, `rope_dims / 2` of them; `None` for a plain RoPE.
    pub divisors: Option<Vec<f32>>,
    /// Every angle's factor after its divisor (linear scaling; 1 for none).
    pub freq_scale: f32,
    /// The factor of every cos and sin (LongRoPE's attention factor; 1 for none), as
    /// llama.cpp's `mscale`.
    pub attn_factor: f32,
}

impl RopeFrequencies {
    /// Frequencies from base `base` over `rope_dims` dimensions, scaled by `divisors`.
    pub fn new(base: f32, rope_dims: usize, divisors: Option<Vec<f32>>) -> Self {
        RopeFrequencies { theta_scale: base.powf(-2.0 / rope_dims as f32), divisors, freq_scale: 1.0, attn_factor: 1.0 }
    }

    /// The frequencies of each kind of layer of `cfg`: `[global, windowed]` (the same but
    /// where the model has sliding-window layers, which turn by a base of their own,
    /// unscaled, as llama.cpp's `rope_freq_base_train_swa`).
    pub fn of_model(cfg: &crate::model::ModelConfig, divisors: Option<Vec<f32>>) -> [RopeFrequencies; 2] {
        let attn_factor = cfg.rope_attn_factor;
        let global = RopeFrequencies { freq_scale: cfg.rope_freq_scale, attn_factor, ..Self::new(cfg.rope_base, cfg.rope_dims, divisors) };
        let windowed = match &cfg.sliding_window {
            Some(w) => RopeFrequencies { attn_factor, ..Self::new(w.rope_base, cfg.rope_dims, None) },
            None => global.clone(),
        };
        [global, windowed]
    }

    /// RoPE's (cos, sin) for position `pos`, one per pair: the angle starts at `pos` and is
    /// multiplied by `theta_scale` from pair to pair, then divided by the pair's divisor,
    /// as llama.cpp computes it. The GPU backend uploads these rather than computing them
    /// in a shader, whose `sin`/`cos` on angles in the thousands are not specified
    /// precisely enough.
    pub fn angles(&self, pos: usize, out: &mut [(f32, f32)]) {
        let mut theta = pos as f32;
        for (i, c) in out.iter_mut().enumerate() {
            let angle = match &self.divisors {
                Some(d) => theta / d.get(i).copied().unwrap_or(1.0),
                None => theta,
            } * self.freq_scale;
            *c = if self.attn_factor == 1.0 {
                (angle.cos(), angle.sin())
            } else {
                (angle.cos() * self.attn_factor, angle.sin() * self.attn_factor)
            };
            theta *= self.theta_scale;
        }
    }
}

/// Rotate each head of `x` for position `pos` (adjacent pairs, or halves for NeoX) by the
/// angles of `freqs`, fused as llama.cpp's compiled code is.
pub fn rope(x: &mut [f32], head_dim: usize, rope_dims: usize, neox: bool, pos: usize, freqs: &RopeFrequencies) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2 and FMA, the features `rope_fma` enables.
        return unsafe { rope_fma(x, head_dim, rope_dims, neox, pos, freqs) };
    }
    rope_body(x, head_dim, rope_dims, neox, pos, freqs);
}

/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). The body is the safe portable code, compiled
/// with those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rope_fma(x: &mut [f32], head_dim: usize, rope_dims: usize, neox: bool, pos: usize, freqs: &RopeFrequencies) {
    rope_body(x, head_dim, rope_dims, neox, pos, freqs);
}

#[inline(always)]
fn rope_body(x: &mut [f32], head_dim: usize, nd: usize, neox: bool, pos: usize, freqs: &RopeFrequencies) {
    // The angles are the same for every head: compute them once.
    let mut cs = [(0f32, 0f32); 256];
    let pairs = (nd / 2).min(cs.len());
    freqs.angles(pos, &mut cs[..pairs]);
    for head in x.chunks_exact_mut(head_dim) {
        for (i, &(c, s)) in cs.iter().enumerate().take(pairs) {
            let (a, b) = if neox { (i, i + nd / 2) } else { (2 * i, 2 * i + 1) };
            let (x0, x1) = (head[a], head[b]);
            // Fused as GCC contracts llama.cpp's `x0*c - x1*s` (-ffp-contract=fast).
            head[a] = x0.fmadd(c, -(x1 * s));
            head[b] = x0.fmadd(s, x1 * c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16_round;

    /// Each pair's angle is the plain one (position × base^(-2i/dims), advanced by
    /// multiplication) divided by its divisor, as llama.cpp's `theta / freq_factor`.
    #[test]
    fn rope_angles_divide_each_pairs_angle_by_its_divisor() {
        let divisors = [1.0f32, 2.0, 4.0, 32.0];
        let plain = RopeFrequencies::new(10_000.0, 8, None);
        let scaled = RopeFrequencies::new(10_000.0, 8, Some(divisors.to_vec()));
        let (mut a, mut b) = ([(0f32, 0f32); 4], [(0f32, 0f32); 4]);
        plain.angles(700, &mut a);
        scaled.angles(700, &mut b);
        let mut theta = 700f32;
        for (i, d) in divisors.into_iter().enumerate() {
            assert_eq!(a[i], (theta.cos(), theta.sin()), "pair {i}, plain");
            assert_eq!(b[i], ((theta / d).cos(), (theta / d).sin()), "pair {i}, divided by {d}");
            theta *= plain.theta_scale;
        }
        assert_eq!(a[0], b[0]);
        assert_ne!(a[3], b[3]);
    }

    /// The query heads of a key/value head attended together give each head the bits it
    /// gets alone, in both of ggml's orders and on every kernel path of this build.
    #[test]
    fn a_group_of_heads_gives_each_head_its_bits_alone() {
        let (hd, group, kv_heads) = (64, 6, 2);
        let stride = hd * kv_heads;
        let mut next = super::super::isum::xorshift(0xBB67_AE85_84CA_A73B);
        let mut half = move || f16_round((next() % 4001) as f32 / 1000.0 - 2.0);
        for n_ctx in [1, 17, 70] {
            let keys: Vec<f32> = (0..n_ctx * stride).map(|_| half()).collect();
            let values: Vec<f32> = (0..n_ctx * stride).map(|_| half()).collect();
            let q: Vec<f32> = (0..group * hd).map(|_| half()).collect();
            for order in [Order::Tiled, Order::VecDot] {
                let head =
                    |q| Head { q, head_dim: hd, keys: &keys, values: &values, stride, offset: hd, n_ctx, first: 0, order, scale: 0.125 };
                let mut together = vec![0f32; group * hd];
                attend(&head(&q), &mut Scratch::default(), &mut together);
                for (j, got) in together.chunks_exact(hd).enumerate() {
                    let mut alone = vec![0f32; hd];
                    attend(&head(&q[j * hd..(j + 1) * hd]), &mut Scratch::default(), &mut alone);
                    let same = got.iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{order:?}, {n_ctx} positions, head {j}: {got:?} alone {alone:?}");
                }
            }
        }
    }
}
