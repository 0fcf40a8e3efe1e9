//! Each kernel against the CPU reference, with seeded pseudo-random inputs, on whatever
//! adapter wgpu finds (here Vulkan on llvmpipe, from Debian's `mesa-vulkan-drivers`, which
//! `scripts/setup.sh` installs). A failure names the element and both values.
//!
//! Matrix products with Q4_1 and Q8_0 weights read activations quantized to 8 bits, as the
//! CPU's kernels do; the quantization itself must give the CPU's values exactly.
//!
//! Tolerances: the GPU sums in another order than the CPU (a 64-thread tree), and its `exp`
//! is not libm's, so results agree to rounding, not bit for bit: matrix products within
//! 1e-5 of the sum of the magnitudes of their terms, element-wise kernels within 2e-6
//! relative (plus 1e-7 absolute), RoPE within 1e-6.

use super::*;
use crate::cpu::dot::tests::{activations, weight_row};
use crate::cpu::matmul::QMatrix;
use crate::gguf::GgmlType;

fn gpu() -> Gpu {
    match Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() }) {
        Ok(g) => g,
        Err(e) => panic!("{e}: the GPU tests need a Vulkan driver (Debian's mesa-vulkan-drivers; scripts/setup.sh installs it)"),
    }
}

/// Assert `got[i]` is within `tol(i)` of `want[i]` for every `i`.
fn assert_close(what: &str, got: &[f32], want: &[f32], tol: impl Fn(usize) -> f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol(i), "{what}: element {i}: GPU {g} vs CPU {w} (tolerance {})", tol(i));
    }
}

/// `rows × cols` in `ty`, the GPU product against `tokens` activation rows, and the CPU
/// reference (dequantized weights, f64 sums) with each output's sum of |terms|.
fn matvec_case(gpu: &Gpu, k: &Kernels, ty: GgmlType, rows: usize, cols: usize, tokens: usize, part_bytes: Option<usize>) {
    let data: Vec<u8> = if ty == GgmlType::F32 {
        activations(rows * cols, 9).iter().flat_map(|v| v.to_le_bytes()).collect()
    } else {
        (0..rows).flat_map(|r| weight_row(ty, cols, 100 + r as u64)).collect()
    };
    let dense = QMatrix::new(ty, rows, cols, data.clone()).expect("sizes").to_f32();
    let x = activations(tokens * cols, 3);
    let w = match part_bytes {
        Some(bytes) => GpuMatrix::upload_in_parts(gpu, ty, rows, cols, &data, bytes).unwrap(),
        None => GpuMatrix::upload(gpu, ty, rows, cols, &data).unwrap(),
    };
    if let Some(bytes) = part_bytes {
        assert!(w.parts.len() > 1, "{bytes}-byte parts should split {rows} rows");
    }
    let (gx, gq, gy) = (GpuVector::from_slice(gpu, &x), GpuVector::zeros(gpu, q8_len(x.len())), GpuVector::zeros(gpu, tokens * rows));
    k.run(gpu, |enc| {
        k.quantize_q8(gpu, enc, &gx, &gq)?;
        k.matvec(gpu, enc, &w, if reads_q8(ty) { &gq } else { &gx }, tokens, &gy)
    })
    .unwrap();
    let got = gy.read_blocking(gpu).unwrap();
    let mut want = vec![0f32; tokens * rows];
    let mut scale = vec![0f32; tokens * rows];
    for t in 0..tokens {
        let xt = &x[t * cols..(t + 1) * cols];
        // The CPU's own kernel, on the activations quantized as it quantizes them.
        let mut q = crate::cpu::act::QuantizedRow::default();
        q.quantize_q8(xt);
        for r in 0..rows {
            let row = &dense[r * cols..(r + 1) * cols];
            want[t * rows + r] = if reads_q8(ty) {
                crate::cpu::dot::dot_row(
                    ty,
                    &data[r * data.len() / rows..(r + 1) * data.len() / rows],
                    xt,
                    &q,
                    crate::cpu::dot::Batch::Small,
                )
            } else {
                row.iter().zip(xt).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>() as f32
            };
            scale[t * rows + r] = row.iter().zip(xt).map(|(&a, &b)| (a * b).abs()).sum();
        }
    }
    assert_close(&format!("{ty:?} matvec {rows}×{cols}, {tokens} tokens"), &got, &want, |i| 1e-5 * scale[i] + 1e-6);
}

#[test]
fn matvec_kernels_match_the_cpu_reference() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    for ty in [GgmlType::F32, GgmlType::Q4_1, GgmlType::Q8_0] {
        // Rows not a multiple of anything; several blocks per row; a batch of tokens.
        matvec_case(&gpu, &k, ty, 37, 256, 1, None);
        matvec_case(&gpu, &k, ty, 70, 2048, 3, None);
    }
}

#[test]
fn activations_quantize_exactly_as_on_the_cpu() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let mut x = activations(32 * 40, 21);
    x[32..64].fill(0.0); // an all-zero block
    x[70] = 3.0; // 63.5 once scaled by 127 / 6: a rounding tie, or next to one
    x[71] = -6.0;
    let (gx, gq) = (GpuVector::from_slice(&gpu, &x), GpuVector::zeros(&gpu, q8_len(x.len())));
    k.run(&gpu, |enc| k.quantize_q8(&gpu, enc, &gx, &gq)).unwrap();
    let got = gq.read_blocking(&gpu).unwrap();
    let mut q = crate::cpu::act::QuantizedRow::default();
    q.quantize_q8(&x);
    let want: Vec<f32> = q.q8.iter().map(|&v| f32::from(v)).chain(q.q8_d.iter().zip(&q.q8_s).flat_map(|(&d, &s)| [d, s])).collect();
    assert_close("quantized activations", &got, &want, |_| 0.0);
}

#[test]
fn a_matrix_larger_than_a_binding_is_split_by_rows() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    // Parts of 7 rows (Q8_0: 8 blocks of 36 bytes per 256-value row).
    matvec_case(&gpu, &k, GgmlType::Q8_0, 100, 256, 2, Some(7 * 8 * 36));
    matvec_case(&gpu, &k, GgmlType::Q4_1, 50, 512, 1, Some(3 * 16 * 20));
}

#[test]
fn rms_norm_matches_the_cpu_reference() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let (n, rows) = (576, 5);
    let (x, weight) = (activations(n * rows, 1), activations(n, 2));
    let mut want = vec![0f32; n * rows];
    crate::cpu::transformer::rms_norm(&x, &weight, 1e-5, &mut want);
    let (gx, gw, gy) = (GpuVector::from_slice(&gpu, &x), GpuVector::from_slice(&gpu, &weight), GpuVector::zeros(&gpu, n * rows));
    k.run(&gpu, |enc| k.rms_norm(&gpu, enc, &gx, &gw, 1e-5, &gy)).unwrap();
    assert_close("rms_norm", &gy.read_blocking(&gpu).unwrap(), &want, |i| 2e-6 * want[i].abs() + 1e-7);
}

#[test]
fn rope_matches_the_cpu_reference() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let (heads, head_dim) = (3, 64);
    let positions = [0usize, 1, 17, 900];
    let theta_scale = 10_000f32.powf(-2.0 / 64.0);
    for (neox, rope_dims) in [(false, 64), (true, 64), (false, 32)] {
        let pairs = rope_dims / 2;
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
                theta_scale,
            );
            let mut cs = vec![(0f32, 0f32); pairs];
            crate::cpu::attention::rope_angles(pos, theta_scale, &mut cs);
            angles.extend(cs.iter().flat_map(|&(c, s)| [c, s]));
        }
        let (gx, ga) = (GpuVector::from_slice(&gpu, &x), GpuVector::from_slice(&gpu, &angles));
        k.run(&gpu, |enc| k.rope(&gpu, enc, &gx, &ga, (positions.len(), heads, head_dim, pairs), neox)).unwrap();
        assert_close(&format!("rope (neox {neox}, {rope_dims} dims)"), &gx.read_blocking(&gpu).unwrap(), &want, |_| 1e-6);
    }
}

#[test]
fn elementwise_kernels_match_the_cpu_reference() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let n = 3000;
    let (a, b) = (activations(n, 4), activations(n, 5));
    let mut want = a.clone();
    crate::cpu::mathfn::swiglu(&mut want, &b);
    let (ga, gb) = (GpuVector::from_slice(&gpu, &a), GpuVector::from_slice(&gpu, &b));
    k.run(&gpu, |enc| k.swiglu(&gpu, enc, &ga, &gb)).unwrap();
    assert_close("swiglu", &ga.read_blocking(&gpu).unwrap(), &want, |i| 2e-6 * want[i].abs() + 1e-7);

    let ga = GpuVector::from_slice(&gpu, &a);
    k.run(&gpu, |enc| k.add(&gpu, enc, &ga, &gb)).unwrap();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_close("add", &ga.read_blocking(&gpu).unwrap(), &want, |_| 0.0);

    // A bias repeated over rows (Qwen's q/k/v biases, one row per token).
    let bias = activations(750, 6);
    let ga = GpuVector::from_slice(&gpu, &a);
    k.run(&gpu, |enc| k.add(&gpu, enc, &ga, &GpuVector::from_slice(&gpu, &bias))).unwrap();
    let want: Vec<f32> = a.iter().enumerate().map(|(i, x)| x + bias[i % 750]).collect();
    assert_close("add a repeated bias", &ga.read_blocking(&gpu).unwrap(), &want, |_| 0.0);

    let (rows, width, scale) = (4, 750, 0.125f32);
    let ga = GpuVector::from_slice(&gpu, &a);
    k.run(&gpu, |enc| k.softmax(&gpu, enc, &ga, width, scale)).unwrap();
    let mut want = Vec::new();
    for row in a.chunks_exact(width).take(rows) {
        let top = row.iter().map(|&v| f64::from(v * scale)).fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (f64::from(v * scale) - top).exp()).collect();
        let sum: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| (v / sum) as f32));
    }
    assert_close("softmax", &ga.read_blocking(&gpu).unwrap(), &want, |i| 2e-6 * want[i].abs() + 1e-7);
}

#[test]
fn shapes_and_types_are_checked() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let data = weight_row(GgmlType::Q4K, 256, 1);
    assert!(matches!(GpuMatrix::upload(&gpu, GgmlType::Q4K, 1, 256, &data), Err(GpuError::UnsupportedType { .. })));
    let data = weight_row(GgmlType::Q8_0, 64, 1);
    assert!(matches!(GpuMatrix::upload(&gpu, GgmlType::Q8_0, 2, 64, &data), Err(GpuError::Shape { what: "matrix data (bytes)", .. })));
    let w = GpuMatrix::upload(&gpu, GgmlType::Q8_0, 1, 64, &data).unwrap();
    let (x, y) = (GpuVector::zeros(&gpu, 63), GpuVector::zeros(&gpu, 1));
    let err = k.run(&gpu, |enc| k.matvec(&gpu, enc, &w, &x, 1, &y)).unwrap_err();
    // Q8_0 reads the 64 values quantized: 64 q values and 2 (d, s) pairs.
    assert_eq!(err, GpuError::Shape { what: "matvec input", expected: 68, got: 63 });
    assert!(err.to_string().contains("63 elements where 68 are needed"), "{err}");
}

/// Attention against a plain f64 reference on the same f16-rounded query, keys and values:
/// grouped heads, a prefix already cached and several new tokens (each seeing only the
/// positions up to its own).
#[test]
fn attention_over_the_cache_matches_a_plain_reference() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    let (head_dim, heads, kv_heads, n_past, tokens) = (64, 6, 2, 37, 3);
    let kvw = kv_heads * head_dim;
    let total = n_past + tokens;
    let (keys, values) = (activations(total * kvw, 11), activations(total * kvw, 12));
    let q = activations(tokens * heads * head_dim, 13);
    let (gk, gv) = (GpuVector::zeros(&gpu, (total + 5) * kvw), GpuVector::zeros(&gpu, (total + 5) * kvw));
    // The prefix in one write, the new tokens' rows in another.
    let (kp, vp) = (GpuVector::from_slice(&gpu, &keys[..n_past * kvw]), GpuVector::from_slice(&gpu, &values[..n_past * kvw]));
    let (kn, vn) = (GpuVector::from_slice(&gpu, &keys[n_past * kvw..]), GpuVector::from_slice(&gpu, &values[n_past * kvw..]));
    let (gq, scores, out) =
        (GpuVector::from_slice(&gpu, &q), GpuVector::zeros(&gpu, tokens * heads * total), GpuVector::zeros(&gpu, q.len()));
    let shape = AttentionShape { head_dim, heads, kv_heads, tokens, n_past };
    k.run(&gpu, |enc| {
        k.kv_store(&gpu, enc, &kp, &gk, kvw, n_past, 0)?;
        k.kv_store(&gpu, enc, &vp, &gv, kvw, n_past, 0)?;
        k.kv_store(&gpu, enc, &kn, &gk, kvw, tokens, n_past)?;
        k.kv_store(&gpu, enc, &vn, &gv, kvw, tokens, n_past)?;
        k.attention(&gpu, enc, &gq, (&gk, &gv), &scores, &out, shape)
    })
    .unwrap();
    let round = |v: &[f32]| {
        let mut v = v.to_vec();
        crate::cpu::f16_round_all(&mut v);
        v
    };
    let (keys, values, q) = (round(&keys), round(&values), round(&q));
    // The cache holds the rounded rows.
    assert_close("key cache", &gk.read_blocking(&gpu).unwrap()[..total * kvw], &keys, |_| 0.0);
    let mut want = vec![0f32; q.len()];
    let scale = 1.0 / (head_dim as f64).sqrt();
    for t in 0..tokens {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let qh = &q[(t * heads + h) * head_dim..][..head_dim];
            let n = n_past + t + 1;
            let s: Vec<f64> = (0..n)
                .map(|j| {
                    qh.iter().zip(&keys[j * kvw + kvh * head_dim..][..head_dim]).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>()
                        * scale
                })
                .collect();
            let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
            let sum: f64 = e.iter().sum();
            // Probabilities rounded to f16, as the CPU backend (and llama.cpp) rounds them.
            let mut probs: Vec<f32> = e.iter().map(|x| (x / sum) as f32).collect();
            crate::cpu::f16_round_all(&mut probs);
            for d in 0..head_dim {
                let acc: f64 = (0..n).map(|j| f64::from(probs[j]) * f64::from(values[j * kvw + kvh * head_dim + d])).sum();
                want[(t * heads + h) * head_dim + d] = acc as f32;
            }
        }
    }
    assert_close("attention", &out.read_blocking(&gpu).unwrap(), &want, |i| 2e-5 * want[i].abs() + 2e-6);
}
