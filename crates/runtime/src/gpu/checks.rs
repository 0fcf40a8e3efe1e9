//! Every kernel against the CPU reference, on the adapter at hand: seeded inputs, the
//! GPU's result read back, the first element out of tolerance reported as
//! [`Error::WrongResult`] (the check, the index and both values).
//!
//! Why these are library code and not only tests: the same checks run natively in
//! `cargo test` (Vulkan on llvmpipe), in headless Chromium on SwiftShader when the app
//! starts on WebGPU (`tests/browser/app.test.mjs`), and can run on a user's adapter
//! before it is trusted with a model ([`run_all`]), since drivers do get shaders wrong.
//! They are async because a browser can only read a GPU buffer back through its event loop.
//!
//! Tolerances: the GPU sums in another order than the CPU (a 64-thread tree), and its `exp`
//! is not libm's, so results agree to rounding, not bit for bit: matrix products within
//! 1e-5 of the sum of the magnitudes of their terms (2e-3 on the f16 path, which rounds
//! activations and four-term products to f16), element-wise kernels within 2e-6
//! relative (plus 1e-7 absolute), RoPE within 1e-6, attention within 2e-5 relative plus
//! one f16 step of one probability (its probabilities are rounded to f16, and an `exp` a
//! few ulps off may round one the other way). 8-bit activation quantization must give the
//! CPU's values exactly. The encoder's kernels: LayerNorm within 1e-5 relative (plus 1e-5),
//! bias + GELU within 2e-6 relative (plus 2e-6), bidirectional attention within 2e-5
//! relative plus 1e-5 (a weighted mean of values about 1 in size).

use super::kernels::AttentionKernel;
use super::{f16_len, q8_len, reads_q8, AttentionShape, Gpu, GpuMatrix, GpuVector, Input, Kernels, Operand};
use crate::cpu::act::QuantizedRow;
use crate::cpu::matmul::QMatrix;
use crate::gguf::GgmlType;
use crate::testdata::{activations, weight_row};
use crate::Error;

/// The checks [`run`] knows, in the order [`run_all`] runs them.
pub const CHECKS: [&str; 12] = [
    "matvec",
    "matvec_k_quants",
    "quantize_q8",
    "split_matrix",
    "rms_norm",
    "rope",
    "elementwise",
    "attention",
    "argmax",
    "sample",
    "encoder",
    "fused",
];

/// The kernels `check` compares with the CPU on `gpu`: the registry's entries that name
/// it, on the device's path. A failed check puts these under suspicion.
pub fn kernels_held_by(gpu: &Gpu, check: &str) -> Vec<&'static str> {
    let k = gpu.kernels();
    super::registry::KERNELS.iter().filter(|e| e.check == check && k.runs(e)).map(|e| e.name).collect()
}

/// Run one check by name ([`CHECKS`]).
pub async fn run(gpu: &Gpu, name: &str) -> Result<(), Error> {
    run_with(gpu, &gpu.kernels(), name).await
}

/// Run every check (the pipelines compiled once); the number run.
pub async fn run_all(gpu: &Gpu) -> Result<usize, Error> {
    let k = gpu.kernels();
    for name in CHECKS {
        run_with(gpu, &k, name).await?;
    }
    Ok(CHECKS.len())
}

async fn run_with(gpu: &Gpu, k: &Kernels, name: &str) -> Result<(), Error> {
    match name {
        "matvec" => {
            // Every format but the K-quants (which have their own check below).
            for ty in GgmlType::ALL.into_iter().filter(|t| t.block_elements() <= 32) {
                // Rows not a multiple of anything; several blocks per row; a batch of tokens.
                matvec_case(gpu, k, ty, 37, 256, 1, None).await?;
                matvec_case(gpu, k, ty, 70, 2048, 3, None).await?;
                // Past one tile of the matrix × vector kernel: the tiled kernel, one tile.
                matvec_case(gpu, k, ty, 19, 512, 11, None).await?;
                // Two tiles of rows and of tokens, each partial.
                matvec_case(gpu, k, ty, 70, 384, 40, None).await?;
            }
            // Rows so long that a workgroup holds the dot products of fewer tokens (6).
            matvec_case(gpu, k, GgmlType::Q8_0, 5, 16_384, 7, None).await
        }
        "matvec_k_quants" => {
            for ty in GgmlType::ALL.into_iter().filter(|t| t.block_elements() == 256) {
                matvec_case(gpu, k, ty, 37, 256, 1, None).await?;
                matvec_case(gpu, k, ty, 70, 1536, 3, None).await?;
                matvec_case(gpu, k, ty, 19, 512, 9, None).await?;
                // A prompt: the tiled kernel, two tiles of rows and of tokens, each partial.
                matvec_case(gpu, k, ty, 70, 1536, 40, None).await?;
            }
            Ok(())
        }
        "quantize_q8" => quantize_q8(gpu, k).await,
        "split_matrix" => {
            // Parts of 7 rows (Q8_0: 8 blocks of 36 bytes per 256-value row).
            matvec_case(gpu, k, GgmlType::Q8_0, 100, 256, 2, Some(7 * 8 * 36)).await?;
            matvec_case(gpu, k, GgmlType::Q4_1, 50, 512, 1, Some(3 * 16 * 20)).await?;
            // Q4_0 and Q5_0 blocks are re-laid (18 to 20 bytes, 22 to 24): a part starts on
            // a re-laid row, in both kernels.
            matvec_case(gpu, k, GgmlType::Q4_0, 50, 512, 1, Some(3 * 16 * 20)).await?;
            matvec_case(gpu, k, GgmlType::Q5_0, 50, 512, 12, Some(3 * 16 * 24)).await?;
            // Q6_K blocks are re-laid from 210 to 212 bytes; a prompt's product too (tiled).
            matvec_case(gpu, k, GgmlType::Q6K, 30, 512, 1, Some(4 * 2 * 212)).await?;
            matvec_case(gpu, k, GgmlType::Q4K, 30, 512, 12, Some(4 * 2 * 144)).await
        }
        "rms_norm" => rms_norm(gpu, k).await,
        "rope" => rope(gpu, k).await,
        "elementwise" => elementwise(gpu, k).await,
        "attention" => attention(gpu, k).await,
        "fused" => super::checks_fused::fused(gpu, k).await,
        "argmax" => argmax(gpu, k).await,
        "sample" => sample(gpu, k).await,
        "encoder" => encoder(gpu, k).await,
        _ => Err(Error::GpuShape { what: "check name (see gpu::checks::CHECKS)", expected: CHECKS.len(), got: 0 }),
    }
}

/// `Ok` when `got[i]` is within `tol(i)` of `want[i]` for every `i`.
pub(super) fn compare(check: &str, got: &[f32], want: &[f32], tol: impl Fn(usize) -> f32) -> Result<(), Error> {
    if got.len() != want.len() {
        return Err(Error::GpuShape { what: "check result", expected: want.len(), got: got.len() });
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // A NaN on either side fails too.
        let within = (g - w).abs() <= tol(i);
        if !within {
            return Err(Error::WrongResult { check: check.to_string(), index: i, gpu: g, cpu: w, tolerance: tol(i) });
        }
    }
    Ok(())
}

#[cfg(test)]
#[test]
fn a_difference_past_the_tolerance_or_a_nan_is_reported_with_its_index() {
    assert!(compare("c", &[1.0, 2.0], &[1.0, 2.05], |_| 0.1).is_ok());
    let e = compare("c", &[1.0, 2.0], &[1.0, 2.5], |_| 0.1).unwrap_err();
    assert_eq!(e.to_string(), "c: element 1: GPU 2 vs CPU 2.5 (tolerance 0.1)");
    assert!(matches!(compare("c", &[f32::NAN], &[1.0], |_| 1e9), Err(Error::WrongResult { index: 0, .. })));
}

/// `rows × cols` in `ty`, the GPU product against `tokens` activation rows, and the CPU
/// reference (the CPU's own kernel on the same 8-bit activations for the types that read
/// them so; dequantized weights and f64 sums for the rest) with each output's sum of |terms|.
async fn matvec_case(
    gpu: &Gpu,
    k: &Kernels,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    tokens: usize,
    part_bytes: Option<usize>,
) -> Result<(), Error> {
    let data: Vec<u8> = if ty == GgmlType::F32 {
        activations(rows * cols, 9).iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        (0..rows).flat_map(|r| weight_row(ty, cols, 100 + r as u64)).collect()
    };
    let dense = QMatrix::new(ty, rows, cols, data.clone())
        .ok_or(Error::GpuShape { what: "check matrix (bytes)", expected: rows * cols, got: data.len() })?
        .to_f32();
    let mut x = activations(tokens * cols, 3);
    // One activation far past f16's range of products (SmolLM2 grows one to about 22,000):
    // the f16 path must scale its block, not overflow. (Its 31 neighbours then scale to
    // about 2^-15, near f16's subnormals, and the tolerance, relative to a sum the outlier
    // dominates, does not see their precision: the other tokens' rows check that.)
    x[5] = 30_000.0;
    let w = match part_bytes {
        Some(bytes) => GpuMatrix::upload_in_parts(gpu, ty, rows, cols, &data, bytes)?,
        None => GpuMatrix::upload(gpu, ty, rows, cols, &data)?,
    };
    if part_bytes.is_some() && w.parts.len() < 2 {
        return Err(Error::GpuShape { what: "matrix parts", expected: 2, got: w.parts.len() });
    }
    let got = gpu_product(gpu, k, &w, &x, tokens).await?;
    let mut want = vec![0f32; tokens * rows];
    let mut scale = vec![0f32; tokens * rows];
    let row_bytes = data.len() / rows;
    for t in 0..tokens {
        let xt = &x[t * cols..(t + 1) * cols];
        let mut q = QuantizedRow::default();
        q.quantize_q8(xt);
        for r in 0..rows {
            let row = &dense[r * cols..(r + 1) * cols];
            want[t * rows + r] = if reads_q8(ty) {
                crate::cpu::dot::dot_row(ty, &data[r * row_bytes..(r + 1) * row_bytes], xt, &q, crate::cpu::dot::Batch::Small)
            } else {
                row.iter().zip(xt).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>() as f32
            };
            scale[t * rows + r] = row.iter().zip(xt).map(|(&a, &b)| (a * b).abs()).sum();
        }
    }
    // A token alone (the matrix × vector kernel) gives what it gives in a batch (tiles of
    // that kernel, or the tiled one past MATVEC_TILE tokens): the same sums in the same
    // order (product_io.wgsl), so the same bits.
    if tokens > 1 {
        for t in [0, tokens - 1] {
            let alone = gpu_product(gpu, k, &w, &x[t * cols..(t + 1) * cols], 1).await?;
            let batch = &got[t * rows..(t + 1) * rows];
            let what = format!("{ty:?} matvec {rows}×{cols}: token {t} alone against in a batch of {tokens}");
            compare(&what, &alone, batch, |_| 0.0)?;
        }
    }
    // The f16 path rounds each scaled activation to f16 and each four-term dot product in
    // f16 (2^-11 relative, a few roundings per term; on llvmpipe the largest difference is
    // 1.4e-4 of the sum of |terms|). The f32 path: 1e-5.
    let relative = if k.input(ty) == Input::F16 { F16_TOLERANCE } else { 1e-5 };
    compare(&format!("{ty:?} matvec {rows}×{cols}, {tokens} tokens"), &got, &want, |i| relative * scale[i] + 1e-6)
}

/// The f16 path's tolerance in [`matvec_case`], relative to an output's sum of |terms|.
const F16_TOLERANCE: f32 = 2e-3;

/// `w` times `tokens` rows of activations `x`, on the GPU (the activations first put in the
/// form `w`'s kernel reads: 8-bit, or packed f16 on the f16 path).
pub(super) async fn gpu_product(gpu: &Gpu, k: &Kernels, w: &GpuMatrix, x: &[f32], tokens: usize) -> Result<Vec<f32>, Error> {
    let (gx, gy) = (GpuVector::from_slice(gpu, x), GpuVector::zeros(gpu, tokens * w.rows));
    let (q8, f16) = (GpuVector::zeros(gpu, q8_len(x.len())), GpuVector::zeros(gpu, f16_len(x.len())));
    let operand = Operand { f32: &gx, q8: &q8, f16: &f16 };
    k.run(gpu, |enc| {
        k.prepare(gpu, enc, operand, &[w.ty])?;
        k.product(gpu, enc, w, operand, tokens, &gy)
    })?;
    gy.read(gpu).await
}

async fn quantize_q8(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let mut x = activations(32 * 40, 21);
    x[32..64].fill(0.0); // an all-zero block
    x[70] = 3.0; // 63.5 once scaled by 127 / 6: a rounding tie, or next to one
    x[71] = -6.0;
    let (gx, gq) = (GpuVector::from_slice(gpu, &x), GpuVector::zeros(gpu, q8_len(x.len())));
    k.run(gpu, |enc| k.quantize_q8(gpu, enc, &gx, &gq))?;
    let got = gq.read(gpu).await?;
    let mut q = QuantizedRow::default();
    q.quantize_q8(&x);
    let want: Vec<f32> = q.q8.iter().map(|&v| f32::from(v)).chain(q.q8_d.iter().zip(&q.q8_s).flat_map(|(&d, &s)| [d, s])).collect();
    compare("quantized activations", &got, &want, |_| 0.0)
}

async fn rms_norm(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    // A model's rows; then narrow rows past one dispatch dimension's 65,535 workgroups (a
    // prompt's per-head norms: tokens × heads rows), which go on in the second.
    for (n, rows) in [(576, 5), (8, 65_600)] {
        let (x, weight) = (activations(n * rows, 1), activations(n, 2));
        let mut want = vec![0f32; n * rows];
        crate::cpu::transformer::rms_norm(&x, &weight, 1e-5, &mut want);
        let (gx, gw, gy) = (GpuVector::from_slice(gpu, &x), GpuVector::from_slice(gpu, &weight), GpuVector::zeros(gpu, n * rows));
        k.run(gpu, |enc| k.rms_norm(gpu, enc, &gx, &gw, 1e-5, &gy))?;
        compare(&format!("rms_norm ({rows} rows of {n})"), &gy.read(gpu).await?, &want, |i| 2e-6 * want[i].abs() + 1e-7)?;
    }
    Ok(())
}

async fn rope(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let (heads, head_dim) = (3, 64);
    let positions = [0usize, 1, 17, 900];
    // Llama 3's per-pair divisors: 1 for the fast pairs, up to 32 for the slow ones.
    let llama3: Vec<f32> = (0..32).map(|i| 1.0 + (i as f32 / 31.0).powi(2) * 31.0).collect();
    for (neox, rope_dims, divisors) in [(false, 64, None), (true, 64, None), (false, 32, None), (false, 64, Some(llama3))] {
        let pairs = rope_dims / 2;
        let freqs = crate::cpu::attention::RopeFrequencies::new(10_000.0, rope_dims, divisors);
        let x = activations(positions.len() * heads * head_dim, 7);
        let mut want = x.clone();
        let mut angles = Vec::new();
        for (t, &pos) in positions.iter().enumerate() {
            crate::cpu::attention::rope(
                &mut want[t * heads * head_dim..(t + 1) * heads * head_dim],
                head_dim,
                rope_dims,
                neox,
                pos,
                &freqs,
            );
            let mut cs = vec![(0f32, 0f32); pairs];
            freqs.angles(pos, &mut cs);
            angles.extend(cs.iter().flat_map(|&(c, s)| [c, s]));
        }
        let (gx, ga) = (GpuVector::from_slice(gpu, &x), GpuVector::from_slice(gpu, &angles));
        k.run(gpu, |enc| k.rope(gpu, enc, &gx, &ga, (positions.len(), heads, head_dim, pairs), neox))?;
        let scaled = if freqs.divisors.is_some() { ", scaled" } else { "" };
        compare(&format!("rope (neox {neox}, {rope_dims} dims{scaled})"), &gx.read(gpu).await?, &want, |_| 1e-6)?;
    }
    Ok(())
}

async fn elementwise(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let n = 3000;
    let (a, b) = (activations(n, 4), activations(n, 5));
    let mut want = a.clone();
    crate::cpu::mathfn::swiglu(&mut want, &b);
    let (ga, gb) = (GpuVector::from_slice(gpu, &a), GpuVector::from_slice(gpu, &b));
    k.run(gpu, |enc| k.swiglu(gpu, enc, &ga, &gb))?;
    compare("swiglu", &ga.read(gpu).await?, &want, |i| 2e-6 * want[i].abs() + 1e-7)?;

    // GeGLU reads the CPU's table: the same bits, gates past ±10 included.
    let wide: Vec<f32> = a.iter().map(|v| v * 8.0).collect();
    let mut want = wide.clone();
    crate::cpu::mathfn::geglu(&mut want, &b);
    let (ga, table) = (GpuVector::from_slice(gpu, &wide), GpuVector::from_slice(gpu, crate::cpu::mathfn::gelu_tanh_table()));
    k.run(gpu, |enc| k.geglu(gpu, enc, &ga, &gb, &table))?;
    compare("geglu", &ga.read(gpu).await?, &want, |_| 0.0)?;

    let ga = GpuVector::from_slice(gpu, &a);
    k.run(gpu, |enc| k.add(gpu, enc, &ga, &gb))?;
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    compare("add", &ga.read(gpu).await?, &want, |_| 0.0)?;

    // A bias repeated over rows (Qwen's q/k/v biases, one row per token).
    let bias = activations(750, 6);
    let ga = GpuVector::from_slice(gpu, &a);
    k.run(gpu, |enc| k.add(gpu, enc, &ga, &GpuVector::from_slice(gpu, &bias)))?;
    let want: Vec<f32> = a.iter().enumerate().map(|(i, x)| x + bias[i % 750]).collect();
    compare("add a repeated bias", &ga.read(gpu).await?, &want, |_| 0.0)?;

    let (rows, width, scale) = (4, 750, 0.125f32);
    let ga = GpuVector::from_slice(gpu, &a);
    k.run(gpu, |enc| k.softmax(gpu, enc, &ga, width, scale))?;
    let mut want = Vec::new();
    for row in a.chunks_exact(width).take(rows) {
        let top = row.iter().map(|&v| f64::from(v * scale)).fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (f64::from(v * scale) - top).exp()).collect();
        let sum: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| (v / sum) as f32));
    }
    compare("softmax", &ga.read(gpu).await?, &want, |i| 2e-6 * want[i].abs() + 1e-7)
}

/// The embedder's kernels against the CPU encoder's: LayerNorm, the feed-forward's bias and
/// GELU, and bidirectional attention over two sequences packed end to end (each must see
/// only its own tokens).
async fn encoder(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    use crate::cpu::encoder_ops::{attend, gelu1, layer_norm};
    let (n, rows) = (384, 5);
    // Rows far from zero: the variance must be taken about the mean.
    let x: Vec<f32> = activations(n * rows, 21).iter().map(|v| v + 40.0).collect();
    let (gamma, beta) = (activations(n, 22), activations(n, 23));
    let mut want = x.clone();
    layer_norm(&mut want, &gamma, &beta, 1e-12);
    let (gx, gg, gb) = (GpuVector::from_slice(gpu, &x), GpuVector::from_slice(gpu, &gamma), GpuVector::from_slice(gpu, &beta));
    k.run(gpu, |enc| k.layer_norm(gpu, enc, &gx, (&gg, &gb), 1e-12))?;
    compare("layer_norm", &gx.read(gpu).await?, &want, |i| 1e-5 * want[i].abs() + 1e-5)?;

    let (a, bias) = (activations(1536 * 3, 24).iter().map(|v| v * 4.0).collect::<Vec<_>>(), activations(1536, 25));
    let want: Vec<f32> = a.iter().enumerate().map(|(i, v)| gelu1(v + bias[i % 1536])).collect();
    let ga = GpuVector::from_slice(gpu, &a);
    k.run(gpu, |enc| k.bias_gelu(gpu, enc, &ga, &GpuVector::from_slice(gpu, &bias)))?;
    compare("bias_gelu", &ga.read(gpu).await?, &want, |i| 2e-6 * want[i].abs() + 2e-6)?;

    let (heads, head_dim) = (3, 32);
    let h = heads * head_dim;
    let lens = [7usize, 70];
    let total: usize = lens.iter().sum();
    let qkv = activations(total * 3 * h, 26);
    let mut want = vec![0f32; total * h];
    let (mut start, mut scratch) = (0, Vec::new());
    for &len in &lens {
        for head in 0..heads {
            let base = start * 3 * h + head * head_dim;
            let mut out = vec![0f32; len * head_dim];
            let scale = 1.0 / (head_dim as f32).sqrt();
            attend(&qkv[base..], &qkv[base + h..], &qkv[base + 2 * h..], 3 * h, (len, head_dim), scale, &mut out, head_dim, &mut scratch);
            for (i, o) in out.chunks_exact(head_dim).enumerate() {
                want[(start + i) * h + head * head_dim..][..head_dim].copy_from_slice(o);
            }
        }
        start += len;
    }
    let (gq, gc) = (GpuVector::from_slice(gpu, &qkv), GpuVector::zeros(gpu, total * h));
    k.run(gpu, |enc| {
        k.encoder_attention(gpu, enc, &gq, &gc, (0, lens[0]), (heads, head_dim))?;
        k.encoder_attention(gpu, enc, &gq, &gc, (lens[0], lens[1]), (heads, head_dim))
    })?;
    // Each output is a weighted mean of values of magnitude about 1 (the weights sum to one),
    // so the rounding is measured against that, not against the mean, which may cancel.
    compare("encoder_attention", &gc.read(gpu).await?, &want, |i| 2e-5 * want[i].abs() + 1e-5)
}

/// Attention against a plain f64 reference on the same f16-rounded query, keys and values:
/// grouped heads, a prefix already cached and several new tokens (each seeing only the
/// positions up to its own).
/// Both kernels, and heads of 64 (SmolLM2) and 128 (Qwen2.5) dimensions, and a sliding
/// window (Gemma 3's layers) that leaves whole chunks of split attention unseen.
async fn attention(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    // 62 cached and 3 new: the first new row's attention ends before the second chunk of
    // 64 positions, which split attention leaves empty for it.
    attention_case(gpu, k, 64, 62, 0).await?;
    attention_case(gpu, k, 128, 300, 0).await?;
    attention_case(gpu, k, 64, 300, 100).await
}

async fn attention_case(gpu: &Gpu, k: &Kernels, head_dim: usize, n_past: usize, window: usize) -> Result<(), Error> {
    let (heads, kv_heads, tokens) = (6, 2, 3);
    let kvw = kv_heads * head_dim;
    let total = n_past + tokens;
    let (keys, values) = (activations(total * kvw, 11), activations(total * kvw, 12));
    let q = activations(tokens * heads * head_dim, 13);
    // The caches hold f16 pairs, a word per two values.
    let (gk, gv) = (GpuVector::zeros(gpu, (total + 5) * kvw / 2), GpuVector::zeros(gpu, (total + 5) * kvw / 2));
    // The prefix in one write, the new tokens' rows in another.
    let (kp, vp) = (GpuVector::from_slice(gpu, &keys[..n_past * kvw]), GpuVector::from_slice(gpu, &values[..n_past * kvw]));
    let (kn, vn) = (GpuVector::from_slice(gpu, &keys[n_past * kvw..]), GpuVector::from_slice(gpu, &values[n_past * kvw..]));
    let shape = AttentionShape { head_dim, heads, kv_heads, tokens, n_past, first_row: 0, window };
    let (gq, scores) = (GpuVector::from_slice(gpu, &q), GpuVector::zeros(gpu, super::kernels::attention_scratch(shape)));
    // Every kernel, whichever this adapter's models run.
    let (out, out_split) = (GpuVector::zeros(gpu, q.len()), GpuVector::zeros(gpu, q.len()));
    k.run(gpu, |enc| {
        k.kv_store(gpu, enc, &kp, &gk, kvw, n_past, 0)?;
        k.kv_store(gpu, enc, &vp, &gv, kvw, n_past, 0)?;
        k.kv_store(gpu, enc, &kn, &gk, kvw, tokens, n_past)?;
        k.kv_store(gpu, enc, &vn, &gv, kvw, tokens, n_past)?;
        k.attention_as(AttentionKernel::Narrow, gpu, enc, &gq, (&gk, &gv), &scores, (&out, None), shape)?;
        k.attention_as(AttentionKernel::Split, gpu, enc, &gq, (&gk, &gv), &scores, (&out_split, None), shape)
    })?;
    let round = |v: &[f32]| {
        let mut v = v.to_vec();
        crate::cpu::f16_round_all(&mut v);
        v
    };
    let (keys, values, q) = (round(&keys), round(&values), round(&q));
    // The cache holds the rounded rows.
    let halves: Vec<f32> = gk.read(gpu).await?[..total * kvw / 2]
        .iter()
        .flat_map(|w| {
            let bits = w.to_bits();
            [crate::quant::f16_to_f32(bits as u16), crate::quant::f16_to_f32((bits >> 16) as u16)]
        })
        .collect();
    compare("key cache", &halves, &keys, |_| 0.0)?;
    let mut want = vec![0f32; q.len()];
    // Split attention weighs the values by unrounded probabilities (attention_split.wgsl
    // says why): against an exact softmax.
    let mut exact = vec![0f32; q.len()];
    // A probability that lies next to an f16 rounding boundary may round either way, as
    // `exp` is allowed a few ulps (SwiftShader's differs from llvmpipe's): each output may
    // differ by one f16 step of one probability times its value.
    let mut flip = vec![0f32; q.len()];
    let scale = 1.0 / (head_dim as f64).sqrt();
    for t in 0..tokens {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let qh = &q[(t * heads + h) * head_dim..][..head_dim];
            let n = n_past + t + 1;
            // Positions before the window weigh nothing.
            let lo = if window > 0 { n.saturating_sub(window) } else { 0 };
            let s: Vec<f64> = (0..n)
                .map(|j| {
                    if j < lo {
                        return f64::NEG_INFINITY;
                    }
                    qh.iter().zip(&keys[j * kvw + kvh * head_dim..][..head_dim]).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>()
                        * scale
                })
                .collect();
            let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..head_dim {
                let acc: f64 = (0..n).map(|j| e[j] / sum * f64::from(values[j * kvw + kvh * head_dim + d])).sum();
                exact[(t * heads + h) * head_dim + d] = acc as f32;
            }
            // Probabilities rounded to f16, as the CPU backend (and llama.cpp) rounds them.
            let mut probs: Vec<f32> = e.iter().map(|x| (x / sum) as f32).collect();
            crate::cpu::f16_round_all(&mut probs);
            for d in 0..head_dim {
                let value = |j: usize| values[j * kvw + kvh * head_dim + d];
                let acc: f64 = (0..n).map(|j| f64::from(probs[j]) * f64::from(value(j))).sum();
                want[(t * heads + h) * head_dim + d] = acc as f32;
                flip[(t * heads + h) * head_dim + d] = (0..n).map(|j| f16_ulp(probs[j]) * value(j).abs()).fold(0.0, f32::max);
            }
        }
    }
    let tol = |i: usize| 2e-5 * want[i].abs() + 2e-6 + flip[i];
    compare(&format!("attention (head_dim {head_dim}, window {window})"), &out.read(gpu).await?, &want, tol)?;
    // Each output sums a hundred or more weighted values of magnitude up to 3 through
    // partial sums rescaled by the adapter's `exp` (a few ulps): a few millionths apart at
    // most, where a position weighed wrongly (one in or out of the window) moves it by a
    // hundredth.
    compare(&format!("attention_split (head_dim {head_dim}, {n_past} cached, window {window})"), &out_split.read(gpu).await?, &exact, |i| {
        2e-5 * exact[i].abs() + 4e-6
    })
}

/// Rows with their largest value anywhere, a tie (the first must win), and a row of one
/// repeated value.
async fn argmax(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let width = 1000;
    let mut x = activations(4 * width, 31);
    x[width + 777] = 9.0;
    x[width + 5] = 9.0;
    x[2 * width..3 * width].fill(-1.5);
    let (gx, out) = (GpuVector::from_slice(gpu, &x), GpuVector::zeros(gpu, 4));
    k.run(gpu, |enc| k.argmax(gpu, enc, &gx, width, &out))?;
    let got: Vec<f32> = out.read(gpu).await?.iter().map(|v| v.to_bits() as f32).collect();
    let want: Vec<f32> = x
        .chunks_exact(width)
        .map(|row| row.iter().enumerate().fold(0, |best, (i, &v)| if v > row[best] { i } else { best }) as f32)
        .collect();
    compare("argmax", &got, &want, |_| 0.0)
}

/// Logits of `n` tokens spread over ±3.2 × `scale`, nearly all distinct.
fn logits(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    activations(n, seed).iter().zip(activations(n, seed + 1)).map(|(a, b)| (a + b / 300.0) * scale).collect()
}

/// `x` with forty tokens raised far above the rest (a language model's few likely tokens
/// over a long tail).
fn spiked(mut x: Vec<f32>) -> Vec<f32> {
    let n = x.len();
    for i in 0..40 {
        x[(i * 3797) % n] += 10.0 + i as f32 * 0.1;
    }
    x
}

/// The draw on the GPU against the CPU sampler's on the same logits and uniform numbers:
/// each uniform number sits mid-way in one candidate's interval of the CPU's walk (so f32
/// against f64 rounding cannot move it), for the first candidates, one in the middle and
/// the last kept. Cases: top-k with top-p, top-p alone over a large vocabulary, ties at the
/// top-k edge (lower index first), a row narrower than the workgroup, infinities and NaN
/// (never drawn), the repetition penalty applied on the GPU first, and temperature alone
/// (walked in index order by both). Top-k above the GPU's
/// head of 256 and a nucleus its head does not fill must hand the draw back
/// ([`SAMPLE_FALLBACK`]).
async fn sample(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    use super::SAMPLE_FALLBACK;
    use crate::lm::sampler::{draw_with, kept};
    use crate::lm::DeviceDraw;
    use crate::lm::SamplingParams;
    let params = |temperature: f32, top_k: usize, top_p: f32| SamplingParams { temperature, top_k, top_p, ..SamplingParams::default() };
    let mut ties = logits(1000, 41, 2.0);
    let tenth = {
        let mut sorted = ties.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        sorted[9]
    };
    for i in [3, 200, 517, 998] {
        ties[i] = tenth;
    }
    let mut odd = spiked(logits(5000, 43, 3.0));
    odd[17] = f32::INFINITY;
    odd[18] = f32::NAN;
    odd[19] = f32::NEG_INFINITY;
    // (logits, settings, penalized tokens, whether the GPU hands the draw back)
    let cases: Vec<(Vec<f32>, SamplingParams, Vec<u32>, bool)> = vec![
        (logits(5000, 51, 3.0), params(0.7, 40, 0.8), vec![], false),
        // A large vocabulary with a long tail, as a language model's.
        (spiked(logits(151_936, 53, 1.0)), params(0.7, 0, 0.8), vec![], false),
        (ties, params(0.8, 10, 1.0), vec![], false),
        (logits(70, 55, 1.0), params(0.5, 0, 0.95), vec![], false),
        (odd, params(1.0, 0, 0.9), vec![], false),
        (logits(5000, 57, 3.0), params(0.7, 50, 0.9), vec![1, 2, 3, 4000, 4999], false),
        (logits(3000, 59, 1.0), params(1.3, 0, 1.0), vec![], false),
        (logits(5000, 61, 3.0), params(0.7, 300, 0.9), vec![], true),
        (logits(5000, 63, 0.01), params(1.0, 0, 0.95), vec![], true),
    ];
    for (case, (x, mut p, penalized, fallback)) in cases.into_iter().enumerate() {
        let penalty = if penalized.is_empty() { 1.0 } else { 1.3 };
        p.repetition_penalty = penalty;
        let mut cpu_x = x.clone();
        crate::lm::sampler::penalize_tokens(&mut cpu_x, &penalized, penalty);
        // The candidates the CPU walks, in its order (temperature alone: index order) and
        // their probabilities.
        let pure = p.top_k == 0 && p.top_p >= 1.0;
        let (order, probs) = kept(&p, &cpu_x).unwrap_or_default();
        // The GPU's head is 256 candidates: a nucleus longer than that goes back.
        let finite = cpu_x.iter().filter(|v| v.is_finite()).count();
        let beyond_head = (p.top_k > 256 && p.top_k < finite) || (p.top_k == 0 && p.top_p < 1.0 && probs.len() > 256);
        if beyond_head != fallback {
            return Err(Error::GpuShape {
                what: "sample check case (whether it is beyond the GPU's head)",
                expected: usize::from(fallback),
                got: case,
            });
        }
        let total: f64 = probs.iter().sum();
        let mut cum = vec![0.0];
        for &q in &probs {
            cum.push(cum[cum.len() - 1] + q);
        }
        // Candidates whose interval is wide enough to aim at: the top three, the heaviest
        // in the middle of the order, the last kept.
        let n = probs.len();
        let mut ranks = vec![0, 1.min(n - 1), 2.min(n - 1), n - 1];
        if pure {
            ranks.push((0..n).max_by(|&a, &b| probs[a].total_cmp(&probs[b])).unwrap_or(0));
        } else {
            ranks.push(n / 2);
        }
        ranks.retain(|&r| probs[r] / total > 1e-4);
        if ranks.is_empty() {
            return Err(Error::GpuShape { what: "sample check case (candidates wide enough to aim at)", expected: 1, got: case });
        }
        let gx = GpuVector::from_slice(gpu, &x);
        let ids: Vec<f32> = penalized.iter().map(|&t| f32::from_bits(t)).collect();
        let gids = GpuVector::from_slice(gpu, &ids);
        for r in ranks {
            let u = (cum[r] + cum[r + 1]) / 2.0 / total;
            let want = draw_with(&p, &cpu_x, u);
            if want != order[r] {
                return Err(Error::WrongResult {
                    check: format!("sample (case {case}): the CPU reference's walk"),
                    index: r,
                    gpu: want as f32,
                    cpu: order[r] as f32,
                    tolerance: 0.0,
                });
            }
            // The penalty goes through `penalize` below, as the model applies it.
            let draw = DeviceDraw {
                temperature: p.temperature,
                top_k: p.top_k,
                top_p: p.top_p,
                repetition_penalty: 1.0,
                penalized: Vec::new(),
                uniform: u,
            };
            let (row, out) = (GpuVector::from_slice(gpu, &x), GpuVector::zeros(gpu, 1));
            k.run(gpu, |enc| {
                enc.encoder().copy_buffer_to_buffer(&gx.buffer, 0, &row.buffer, 0, (x.len() * 4) as u64);
                k.penalize(gpu, enc, &row, &gids, penalty)?;
                k.sample(gpu, enc, &row, &draw, &out)
            })?;
            let got = out.read(gpu).await?[0].to_bits();
            let want = if fallback { SAMPLE_FALLBACK } else { want };
            if got != want {
                return Err(Error::WrongResult {
                    check: format!("sample (case {case}, u {u:.6})"),
                    index: r,
                    gpu: got as f32,
                    cpu: want as f32,
                    tolerance: 0.0,
                });
            }
        }
    }
    Ok(())
}

/// The gap between `x` and the next f16 (subnormals included).
fn f16_ulp(x: f32) -> f32 {
    2f32.powf(x.abs().log2().floor().max(-14.0) - 10.0)
}
