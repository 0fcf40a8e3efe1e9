//! `docmem gpu-check`: the kernel checks (every WGSL kernel against the CPU reference) on
//! this machine's adapter, on both of the K-quants' paths, with what the adapter is and
//! offers. A driver's shader compiler is one more thing that can be wrong, so a new
//! adapter is checked before its speed is believed.

use std::time::Instant;

use clap::Args;
use serde::Serialize;

use crate::CliError;

/// `docmem gpu-check` arguments.
#[derive(Args, Debug)]
pub struct GpuCheckArgs {
    /// Accept a CPU adapter (llvmpipe) when no GPU is found
    #[arg(long)]
    allow_cpu: bool,
    /// JSON output
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct CheckResult {
    check: &'static str,
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    ms: f64,
    /// The kernels the check compares with the CPU.
    kernels: Vec<&'static str>,
}

#[derive(Serialize)]
struct PathResult {
    /// `f16` (the K-quants multiply in f16) or `f32`.
    path: &'static str,
    /// Why the path was not run (the adapter lacks `shader-f16`).
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    checks: Vec<CheckResult>,
}

/// A whole forward pass on the GPU against the CPU backend, on a synthetic model: the
/// kernels in the order a model runs them, with the dispatches' ordering on the device.
#[derive(Serialize)]
struct ForwardResult {
    /// The synthetic model (`qwen2-tiny:q4_k_m`, …).
    model: String,
    /// The path (`f16` or `f32`).
    path: &'static str,
    /// Cosine similarity of the last position's logits, GPU against CPU.
    cosine: f64,
    /// Largest absolute difference of a logit.
    max_abs_diff: f32,
    /// Whether both pick the same next token.
    same_top1: bool,
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    adapter: Option<docmem_runtime::gpu::AdapterReport>,
    paths: Vec<PathResult>,
    /// Forward passes of synthetic models, GPU against CPU.
    forward: Vec<ForwardResult>,
    passed: usize,
    failed: usize,
}

#[cfg(feature = "gpu")]
pub fn run(a: &GpuCheckArgs) -> Result<(), CliError> {
    use docmem_runtime::gpu::{checks, Gpu, GpuOptions};
    let mut report = Report { adapter: None, paths: Vec::new(), forward: Vec::new(), passed: 0, failed: 0 };
    for (path, avoid_f16) in [("f16", false), ("f32", true)] {
        let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: a.allow_cpu, avoid_f16, ..GpuOptions::default() })
            .map_err(|e| CliError::CheckFailed { message: format!("no GPU device: {e}") })?;
        report.adapter.get_or_insert_with(|| gpu.adapter_report());
        if !avoid_f16 && !gpu.has_f16() {
            report.paths.push(PathResult { path, skipped: Some("the adapter does not offer shader-f16".into()), checks: Vec::new() });
            continue;
        }
        let mut results = Vec::new();
        for check in checks::CHECKS {
            let t = Instant::now();
            let outcome = docmem_runtime::block_on(checks::run(&gpu, check));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let kernels = checks::kernels_held_by(&gpu, check);
            results.push(CheckResult { check, passed: outcome.is_ok(), error: outcome.err().map(|e| e.to_string()), ms, kernels });
        }
        report.passed += results.iter().filter(|r| r.passed).count();
        report.failed += results.iter().filter(|r| !r.passed).count();
        report.paths.push(PathResult { path, skipped: None, checks: results });
        for model in FORWARD_MODELS {
            let r = forward_parity(&gpu, model, path);
            report.passed += usize::from(r.passed);
            report.failed += usize::from(!r.passed);
            report.forward.push(r);
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(std::io::Error::from)?);
    } else {
        if let Some(ad) = &report.adapter {
            println!("adapter: {} ({}, {}), driver {} {}", ad.name, ad.backend, ad.device_type, ad.driver, ad.driver_info);
        }
        for p in &report.paths {
            match &p.skipped {
                Some(why) => println!("{} path: skipped ({why})", p.path),
                None => {
                    for c in &p.checks {
                        let status = if c.passed { "ok".to_owned() } else { format!("FAILED: {}", c.error.as_deref().unwrap_or("")) };
                        let kernels = if c.kernels.is_empty() { String::new() } else { format!("  ({})", c.kernels.join(", ")) };
                        println!("{} path  {:<16} {:>8.1} ms  {status}{kernels}", p.path, c.check, c.ms);
                    }
                }
            }
        }
        for f in &report.forward {
            let status = match (&f.error, f.passed) {
                (Some(e), _) => format!("FAILED: {e}"),
                (None, true) => "ok".into(),
                (None, false) => "FAILED".into(),
            };
            println!(
                "{} path  forward {:<18} cosine {:.6}, max |diff| {:.4}, same next token {}  {status}",
                f.path, f.model, f.cosine, f.max_abs_diff, f.same_top1
            );
        }
        println!("{} passed, {} failed", report.passed, report.failed);
    }
    if report.failed > 0 {
        return Err(CliError::CheckFailed { message: format!("{} checks failed (kernel checks and forward passes)", report.failed) });
    }
    Ok(())
}

/// The synthetic models whose forward passes are compared: each matrix format the GPU
/// runs, both architectures.
#[cfg(feature = "gpu")]
const FORWARD_MODELS: [&str; 3] = ["qwen2-tiny:q4_k_m", "llama-tiny:q4_1", "qwen2-tiny:q8_0"];

/// The least cosine similarity of the logits that passes: the two backends differ by
/// rounding (the CPU quantizes a K-quant's input to 8 bits, the f16 path to f16), not by
/// a wrong kernel, which gives a cosine far from 1.
#[cfg(feature = "gpu")]
const MIN_COSINE: f64 = 0.999;

/// A 24-token prompt through `model` on the CPU and on `gpu`, the last logits compared.
#[cfg(feature = "gpu")]
fn forward_parity(gpu: &docmem_runtime::gpu::Gpu, model: &str, path: &'static str) -> ForwardResult {
    use docmem_runtime::lm::{argmax, Lm, LoadOptions, PrefillOptions};
    use docmem_runtime::synthetic::{decoder_gguf, DecoderSpec};
    let run = || -> Result<(f64, f32, bool), String> {
        let spec: DecoderSpec = model.parse().map_err(|e| format!("{e}"))?;
        let src = docmem_runtime::source::MemorySource::new(decoder_gguf(spec.shape, spec.quant, 3));
        let opts = LoadOptions { threads: 1, context: 64, ..Default::default() };
        let cpu = Lm::load_from(&src, &opts).map_err(|e| e.to_string())?;
        let on_gpu = Lm::load_onto_gpu(&src, &opts, gpu.clone()).map_err(|e| e.to_string())?;
        let prompt: Vec<u32> = (0..24u32).map(|i| (i * 37 + 11) % spec.shape.vocab).collect();
        let want = docmem_runtime::block_on(cpu.prefill(prompt.clone(), PrefillOptions::default()))
            .map(|p| p.prefix)
            .map_err(|e| e.to_string())?;
        let got =
            docmem_runtime::block_on(on_gpu.prefill(prompt, PrefillOptions::default())).map(|p| p.prefix).map_err(|e| e.to_string())?;
        let (a, b) = (want.last_logits(), got.last_logits());
        let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
        let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let max = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        Ok((dot / (norm(a) * norm(b)).max(f64::MIN_POSITIVE), max, argmax(a) == argmax(b)))
    };
    match run() {
        Ok((cosine, max_abs_diff, same_top1)) => {
            ForwardResult { model: model.into(), path, cosine, max_abs_diff, same_top1, passed: cosine >= MIN_COSINE, error: None }
        }
        Err(e) => ForwardResult {
            model: model.into(),
            path,
            cosine: 0.0,
            max_abs_diff: f32::NAN,
            same_top1: false,
            passed: false,
            error: Some(e),
        },
    }
}

#[cfg(not(feature = "gpu"))]
pub fn run(_: &GpuCheckArgs) -> Result<(), CliError> {
    Err(CliError::BadArgument { message: "gpu-check: this docmem was built without the gpu feature".into() })
}
