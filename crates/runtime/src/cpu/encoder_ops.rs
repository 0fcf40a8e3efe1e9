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

use super::madd;

/// LayerNorm of each `width`-wide row of `x`, in place: `(x − mean)/√(var + eps)·γ + β`
/// with the biased variance, as PyTorch computes it.
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` checks AVX2 and FMA.
        return unsafe { layer_norm_fma(x, gamma, beta, eps) };
    }
    layer_norm_body(x, gamma, beta, eps)
}

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

/// `x = gelu(x)` for every element (exact, erf form).
pub fn gelu(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` checks AVX2 and FMA.
        return unsafe { gelu_fma(x) };
    }
    x.iter_mut().for_each(|v| *v = gelu1(*v));
}

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
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs().min(6.0);
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
    let x = x.max(-87.0);
    let n = (x * core::f32::consts::LOG2_E).round();
    let b = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0 + b * (1.0 + b * (0.5 + b * (1.0 / 6.0 + b * (1.0 / 24.0 + b * (1.0 / 120.0 + b * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
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
        // SAFETY: `has_fma` checks AVX2 and FMA.
        return unsafe { attend_fma(q, k, v, stride, (tokens, head_dim), scale, out, out_stride, scratch) };
    }
    attend_body::<false>(q, k, v, stride, (tokens, head_dim), scale, out, out_stride, scratch)
}

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

/// The attention of one head as two small matrix products in registers. Keys are first
/// copied transposed and pre-scaled (`kt[c][j] = k_j[c]·scale`) and values packed
/// (`vv[j][c]`), so that each query's scores are 32 keys at a time in accumulators over
/// the head's dimensions, and its output 16 dimensions at a time over the keys: every
/// inner loop is a contiguous, vectorizable multiply-add.
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
    const KB: usize = 32; // keys per score block
    const DB: usize = 16; // dimensions per output block
    let padded = tokens.div_ceil(KB) * KB;
    scratch.clear();
    scratch.resize(d * padded + padded * d + padded, 0.0);
    let (kt, rest) = scratch.split_at_mut(d * padded);
    let (vv, scores) = rest.split_at_mut(padded * d);
    for j in 0..tokens {
        for c in 0..d {
            kt[c * padded + j] = k[j * stride + c] * scale;
            vv[j * d + c] = v[j * stride + c];
        }
    }
    for i in 0..tokens {
        let qi = &q[i * stride..i * stride + d];
        for (jb, block) in scores.chunks_exact_mut(KB).enumerate() {
            let mut acc = [0f32; KB];
            for (c, &a) in qi.iter().enumerate() {
                let row: &[f32; KB] = kt[c * padded + jb * KB..][..KB].try_into().unwrap_or(&[0.0; KB]);
                for l in 0..KB {
                    acc[l] = madd::<FMA>(a, row[l], acc[l]);
                }
            }
            *<&mut [f32; KB]>::try_from(block).unwrap_or(&mut [0.0; KB]) = acc;
        }
        let live = &mut scores[..tokens];
        let max = live.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        // Exponentials first, then their sum: separate loops, so the first vectorizes.
        live.iter_mut().for_each(|s| *s = exp_nonpositive(*s - max));
        let inv = 1.0 / sum8(live);
        let oi = &mut out[i * out_stride..i * out_stride + d];
        if d.is_multiple_of(DB) {
            for c0 in (0..d).step_by(DB) {
                let mut acc = [0f32; DB];
                for (j, &p) in live.iter().enumerate() {
                    let vj: &[f32; DB] = vv[j * d + c0..][..DB].try_into().unwrap_or(&[0.0; DB]);
                    for l in 0..DB {
                        acc[l] = madd::<FMA>(p, vj[l], acc[l]);
                    }
                }
                for l in 0..DB {
                    oi[c0 + l] = acc[l] * inv;
                }
            }
        } else {
            oi.fill(0.0);
            for (j, &p) in live.iter().enumerate() {
                for (o, &x) in oi.iter_mut().zip(&vv[j * d..(j + 1) * d]) {
                    *o = madd::<FMA>(p, x, *o);
                }
            }
            oi.iter_mut().for_each(|o| *o *= inv);
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
        let (tokens, d, stride) = (5, 12, 40);
        let buf: Vec<f32> = (0..tokens * stride * 3).map(|i| ((i * 13) % 17) as f32 / 9.0 - 0.9).collect();
        let (q, k, v) = (&buf[0..], &buf[tokens * stride..], &buf[2 * tokens * stride..]);
        let mut out = vec![0f32; tokens * d];
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
                assert!((f64::from(out[i * d + c]) - want).abs() < 1e-5);
            }
        }
    }
}
