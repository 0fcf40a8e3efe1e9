//! The fused kernels' check (`fused` in [`super::checks::CHECKS`]): each fused step against
//! the steps it replaces, on the adapter at hand.
//!
//! A fused kernel does in one dispatch what several did, in the same float order, so where
//! its parts are already held to the CPU (the other checks) it must give their results
//! bit for bit: a norm's copies are the quantize and f16 kernels' own, attention's copies
//! likewise, a product's residual add is the add kernel's, a stacked matrix's product is
//! the product of the matrix alone. Where an operation is new here (RoPE and the cache
//! append of the Q/K/V rows, SwiGLU as a product's epilogue) it is compared with the CPU
//! backend's functions, to RoPE's and SwiGLU's tolerances.

use super::kernels::AttentionKernel;
use super::{f16_len, q8_len, AttentionShape, Copies, Epilogue, Gpu, GpuMatrix, GpuVector, Kernels, Operand, Placement};
use crate::gguf::GgmlType;
use crate::testdata::{activations, weight_row};
use crate::Error;

/// Every fused step against its parts.
pub(super) async fn fused(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    norm_with_copies(gpu, k).await?;
    // A decode step's few tokens, and a prompt's many (the tiled kernel).
    for tokens in [3, 40] {
        stacked_products(gpu, k, tokens).await?;
    }
    for (neox, rope_dims, biased) in [(false, 64, true), (true, 64, true), (true, 32, false)] {
        rope_append(gpu, k, neox, rope_dims, biased).await?;
    }
    attention_with_copies(gpu, k).await
}

/// Exact equality, element by element (bits, so a NaN is never equal to anything).
fn same(check: &str, got: &[f32], want: &[f32]) -> Result<(), Error> {
    if got.len() != want.len() {
        return Err(Error::GpuShape { what: "check result", expected: want.len(), got: got.len() });
    }
    match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        Some(i) => Err(Error::WrongResult { check: check.to_string(), index: i, gpu: got[i], cpu: want[i], tolerance: 0.0 }),
        None => Ok(()),
    }
}

/// Room for `n` activations and both their copies.
fn operand_buffers(gpu: &Gpu, n: usize) -> (GpuVector, GpuVector, GpuVector) {
    (GpuVector::zeros(gpu, n), GpuVector::zeros(gpu, q8_len(n)), GpuVector::zeros(gpu, f16_len(n)))
}

/// RMSNorm writing both copies must give the plain norm's values and the copies the
/// quantize and f16 kernels make of them.
async fn norm_with_copies(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let (n, rows) = (1536, 3);
    let (mut x, weight) = (activations(n * rows, 41), activations(n, 42));
    // One activation as large as SmolLM2 grows one (about 22,000): its row's other values
    // become small beside it.
    x[n + 100] = 20_000.0;
    let (gx, gw) = (GpuVector::from_slice(gpu, &x), GpuVector::from_slice(gpu, &weight));
    let fused = operand_buffers(gpu, n * rows);
    let apart = operand_buffers(gpu, n * rows);
    // The f16 kernel to compare with runs only on the f16 path.
    let copies = Copies { q8: true, f16: gpu.has_f16() };
    k.run(gpu, |enc| {
        k.rms_norm_with_copies(gpu, enc, (&gx, 0), &gw, 1e-6, Operand { f32: &fused.0, q8: &fused.1, f16: &fused.2 }, copies)?;
        k.rms_norm(gpu, enc, &gx, &gw, 1e-6, &apart.0)?;
        k.quantize_q8(gpu, enc, &apart.0, &apart.1)?;
        if copies.f16 {
            k.activations_f16(gpu, enc, &apart.0, &apart.2)?;
        }
        Ok(())
    })?;
    // The last row alone, read where it lies (a decoder's head normalizes only its last rows).
    let last = GpuVector::zeros(gpu, n);
    k.run(gpu, |enc| {
        k.rms_norm_with_copies(gpu, enc, (&gx, rows - 1), &gw, 1e-6, Operand { f32: &last, q8: &last, f16: &last }, Copies::NONE)
    })?;
    let all = apart.0.read(gpu).await?;
    same("rms_norm of the last row alone", &last.read(gpu).await?, &all[(rows - 1) * n..])?;
    same("rms_norm with copies: values", &fused.0.read(gpu).await?, &all)?;
    same("rms_norm with copies: 8-bit copy", &fused.1.read(gpu).await?, &apart.1.read(gpu).await?)?;
    if copies.f16 {
        same("rms_norm with copies: f16 copy", &fused.2.read(gpu).await?, &apart.2.read(gpu).await?)?;
    }
    Ok(())
}

/// Matrices stacked in one buffer (two of one format, one of another, as a Q4_K_M layer's
/// Q, K and V can be): the joined pair's product, written side by side with the third's,
/// and all three in one dispatch of the kernel for a pair of formats, equal each one's
/// product alone; a product added to what its output holds equals the
/// product plus those values; and a stacked gate and up with SwiGLU as the epilogue equals
/// SwiGLU (the CPU's) of the two products.
async fn stacked_products(gpu: &Gpu, k: &Kernels, tokens: usize) -> Result<(), Error> {
    let cols = 512;
    let x = activations(cols * tokens, 43);
    let shapes = [(GgmlType::Q4K, 40, 51), (GgmlType::Q4K, 24, 52), (GgmlType::Q6K, 24, 53)];
    let data: Vec<Vec<u8>> = shapes.iter().map(|&(ty, rows, seed)| weight_row(ty, rows * cols, seed)).collect();
    let upload = |i: usize| GpuMatrix::upload(gpu, shapes[i].0, shapes[i].1, cols, &data[i]);
    let alone = [upload(0)?, upload(1)?, upload(2)?];
    let stacked = GpuMatrix::stack(gpu, [upload(0)?, upload(1)?, upload(2)?]);
    let Some(pair) = stacked[0].joined(&stacked[1]) else {
        return Err(Error::GpuShape { what: "stacked matrices of one format (joined)", expected: 1, got: 0 });
    };
    if stacked[1].joined(&stacked[2]).is_some() {
        return Err(Error::GpuShape { what: "matrices of two formats joined", expected: 0, got: 1 });
    }
    let width: usize = shapes.iter().map(|s| s.1).sum();
    let gx = GpuVector::from_slice(gpu, &x);
    let (_, q8, f16) = operand_buffers(gpu, x.len());
    let xin = Operand { f32: &gx, q8: &q8, f16: &f16 };
    if !k.pairs(&pair, &stacked[2]) {
        return Err(Error::GpuShape { what: "Q4_K rows then Q6_K rows as a pair for one kernel", expected: 1, got: 0 });
    }
    let side_by_side = GpuVector::zeros(gpu, tokens * width);
    let in_one = GpuVector::zeros(gpu, tokens * width);
    let each: Vec<GpuVector> = shapes.iter().map(|s| GpuVector::zeros(gpu, tokens * s.1)).collect();
    let base = activations(tokens * 40, 44);
    let added = GpuVector::from_slice(gpu, &base);
    let types: Vec<GgmlType> = shapes.iter().map(|s| s.0).collect();
    k.run(gpu, |enc| {
        k.prepare(gpu, enc, xin, &types)?;
        let at = |offset| Placement { width, offset, epilogue: Epilogue::Store };
        k.product_to(gpu, enc, &pair, xin, tokens, &side_by_side, at(0))?;
        k.product_to(gpu, enc, &stacked[2], xin, tokens, &side_by_side, at(64))?;
        k.product_pair(gpu, enc, (&pair, &stacked[2]), xin, tokens, &in_one, (width, 0))?;
        for (w, y) in alone.iter().zip(&each) {
            k.product(gpu, enc, w, xin, tokens, y)?;
        }
        k.product_to(gpu, enc, &stacked[0], xin, tokens, &added, Placement { width: 40, offset: 0, epilogue: Epilogue::Add })
    })?;
    let got = side_by_side.read(gpu).await?;
    let mut want = vec![0f32; tokens * width];
    let mut offset = 0;
    for (s, y) in shapes.iter().zip(&each) {
        let y = y.read(gpu).await?;
        for t in 0..tokens {
            want[t * width + offset..][..s.1].copy_from_slice(&y[t * s.1..][..s.1]);
        }
        offset += s.1;
    }
    same("stacked products side by side", &got, &want)?;
    // Another pipeline: its compiler may contract a multiply and an add where the single
    // format's did not (llvmpipe does, by an ulp), so to the matrix checks' scale, not bits.
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    super::checks::compare("a pair of formats in one dispatch", &in_one.read(gpu).await?, &want, |_| 1e-5 * scale)?;
    let product = each[0].read(gpu).await?;
    let sum: Vec<f32> = base.iter().zip(&product).map(|(b, p)| b + p).collect();
    same("a product added to its output", &added.read(gpu).await?, &sum)?;

    // A gate of 24 rows stacked on an up of 24.
    let (gate_data, up_data) = (weight_row(GgmlType::Q4K, 24 * cols, 54), weight_row(GgmlType::Q4K, 24 * cols, 55));
    let [gate, up] = GpuMatrix::stack(
        gpu,
        [GpuMatrix::upload(gpu, GgmlType::Q4K, 24, cols, &gate_data)?, GpuMatrix::upload(gpu, GgmlType::Q4K, 24, cols, &up_data)?],
    );
    let Some(gate_up) = gate.joined(&up) else {
        return Err(Error::GpuShape { what: "stacked gate and up (joined)", expected: 1, got: 0 });
    };
    let (glu, g, u) = (GpuVector::zeros(gpu, tokens * 24), GpuVector::zeros(gpu, tokens * 24), GpuVector::zeros(gpu, tokens * 24));
    k.run(gpu, |enc| {
        k.prepare(gpu, enc, xin, &[GgmlType::Q4K])?;
        k.product_to(gpu, enc, &gate_up, xin, tokens, &glu, Placement { width: 24, offset: 0, epilogue: Epilogue::Glu })?;
        k.product(gpu, enc, &gate, xin, tokens, &g)?;
        k.product(gpu, enc, &up, xin, tokens, &u)
    })?;
    let mut want = g.read(gpu).await?;
    crate::cpu::mathfn::swiglu(&mut want, &u.read(gpu).await?);
    let got = glu.read(gpu).await?;
    super::checks::compare("gate and up with SwiGLU as the epilogue", &got, &want, |i| 2e-6 * want[i].abs() + 1e-7)
}

/// Biases, RoPE and the cache append of a batch's second sequence (rows 1..4 of 5), at
/// cache row 6, against the CPU backend's bias add, RoPE and f16 rounding.
async fn rope_append(gpu: &Gpu, k: &Kernels, neox: bool, rope_dims: usize, biased: bool) -> Result<(), Error> {
    let (heads, kv_heads, head_dim) = (4, 2, 64);
    let (qw, kvw) = (heads * head_dim, kv_heads * head_dim);
    let width = qw + 2 * kvw;
    let (batch, first, tokens, n_past) = (5, 1, 3, 6);
    let pairs = rope_dims / 2;
    let freqs = crate::cpu::attention::RopeFrequencies::new(1e6, rope_dims, None);
    let qkv = activations(batch * width, 45);
    let bias = activations(width, 46);
    let mut angles = Vec::new();
    let position = |row: usize| if row >= first && row < first + tokens { n_past + row - first } else { row };
    for row in 0..batch {
        let mut cs = vec![(0f32, 0f32); pairs];
        freqs.angles(position(row), &mut cs);
        angles.extend(cs.iter().flat_map(|&(c, s)| [c, s]));
    }
    let (gqkv, gbias, gangles) = (GpuVector::from_slice(gpu, &qkv), GpuVector::from_slice(gpu, &bias), GpuVector::from_slice(gpu, &angles));
    let q_out = GpuVector::from_slice(gpu, &vec![-1.0; batch * qw]);
    let rows = n_past + tokens + 2;
    let (kc, vc) = (GpuVector::zeros(gpu, rows * kvw / 2), GpuVector::zeros(gpu, rows * kvw / 2));
    let shape = AttentionShape { head_dim, heads, kv_heads, tokens, n_past, first_row: first, window: 0 };
    k.run(gpu, |enc| k.rope_append(gpu, enc, &gqkv, biased.then_some(&gbias), &gangles, &q_out, (&kc, &vc), shape, (pairs, neox)))?;
    let mut want_q = vec![-1.0; batch * qw];
    let (mut want_k, mut want_v) = (vec![0f32; rows * kvw], vec![0f32; rows * kvw]);
    for row in first..first + tokens {
        let mut r: Vec<f32> = qkv[row * width..][..width].to_vec();
        if biased {
            r.iter_mut().zip(&bias).for_each(|(x, b)| *x += b);
        }
        let (q, rest) = r.split_at_mut(qw);
        let (kk, v) = rest.split_at_mut(kvw);
        crate::cpu::attention::rope(q, head_dim, rope_dims, neox, position(row), &freqs);
        crate::cpu::attention::rope(kk, head_dim, rope_dims, neox, position(row), &freqs);
        want_q[row * qw..][..qw].copy_from_slice(q);
        let at = (position(row)) * kvw;
        want_k[at..at + kvw].copy_from_slice(kk);
        want_v[at..at + kvw].copy_from_slice(v);
    }
    crate::cpu::f16_round_all(&mut want_k);
    crate::cpu::f16_round_all(&mut want_v);
    let halves = |words: Vec<f32>| -> Vec<f32> {
        words
            .iter()
            .flat_map(|w| {
                let bits = w.to_bits();
                [crate::quant::f16_to_f32(bits as u16), crate::quant::f16_to_f32((bits >> 16) as u16)]
            })
            .collect()
    };
    let what = |part: &str| format!("rope_append {part} (neox {neox}, {rope_dims} of {head_dim} dims, biases {biased})");
    super::checks::compare(&what("queries"), &q_out.read(gpu).await?, &want_q, |_| 1e-6)?;
    // A rotated key a float's rounding away from an f16 boundary may round either way.
    let step = |v: f32| f16_step(v);
    let got_k = halves(kc.read(gpu).await?);
    super::checks::compare(&what("key cache"), &got_k, &want_k, |i| step(want_k[i]))?;
    same(&what("value cache"), &halves(vc.read(gpu).await?), &want_v)
}

/// One f16 step at `x`'s magnitude (the spacing of halves near it).
fn f16_step(x: f32) -> f32 {
    let e = x.abs().max(6.1e-5).log2().floor();
    2f32.powf(e - 10.0)
}

/// Attention writing the copies of its output the output projection reads: the same
/// output as without, and the copies the quantize and f16 kernels make of it, with every
/// attention kernel.
async fn attention_with_copies(gpu: &Gpu, k: &Kernels) -> Result<(), Error> {
    let (heads, kv_heads, head_dim, tokens, n_past) = (4, 2, 64, 2, 5);
    let kvw = kv_heads * head_dim;
    let total = n_past + tokens;
    let (keys, values) = (activations(total * kvw, 47), activations(total * kvw, 48));
    let q = activations(tokens * heads * head_dim, 49);
    let (gk, gv) = (GpuVector::zeros(gpu, total * kvw / 2), GpuVector::zeros(gpu, total * kvw / 2));
    let (gkeys, gvalues) = (GpuVector::from_slice(gpu, &keys), GpuVector::from_slice(gpu, &values));
    let shape = AttentionShape { head_dim, heads, kv_heads, tokens, n_past, first_row: 0, window: 0 };
    let (gq, scores) = (GpuVector::from_slice(gpu, &q), GpuVector::zeros(gpu, super::kernels::attention_scratch(shape)));
    let copies = Copies { q8: true, f16: gpu.has_f16() };
    for kernel in [AttentionKernel::Narrow, AttentionKernel::Split] {
        let fused = operand_buffers(gpu, q.len());
        let apart = operand_buffers(gpu, q.len());
        let fused_in = Operand { f32: &fused.0, q8: &fused.1, f16: &fused.2 };
        k.run(gpu, |enc| {
            k.kv_store(gpu, enc, &gkeys, &gk, kvw, total, 0)?;
            k.kv_store(gpu, enc, &gvalues, &gv, kvw, total, 0)?;
            k.attention_as(kernel, gpu, enc, &gq, (&gk, &gv), &scores, (&fused.0, Some((fused_in, copies))), shape)?;
            k.attention_as(kernel, gpu, enc, &gq, (&gk, &gv), &scores, (&apart.0, None), shape)?;
            k.quantize_q8(gpu, enc, &apart.0, &apart.1)?;
            if copies.f16 {
                k.activations_f16(gpu, enc, &apart.0, &apart.2)?;
            }
            Ok(())
        })?;
        let name = format!("{kernel:?} attention");
        same(&format!("{name} with copies: values"), &fused.0.read(gpu).await?, &apart.0.read(gpu).await?)?;
        same(&format!("{name} with copies: 8-bit copy"), &fused.1.read(gpu).await?, &apart.1.read(gpu).await?)?;
        if copies.f16 {
            same(&format!("{name} with copies: f16 copy"), &fused.2.read(gpu).await?, &apart.2.read(gpu).await?)?;
        }
    }
    Ok(())
}
