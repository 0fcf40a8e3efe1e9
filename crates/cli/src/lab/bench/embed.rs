//! `docmem bench embed`: sentences per second of the embedder at batch 1 and batch 32,
//! natively (each precision, `--threads` threads) and in wasm (Node, one thread), beside
//! sentence-transformers (PyTorch on the CPU, same threads) and transformers.js (its wasm
//! backend in Node, one thread) on the same texts and model weights in the same run.
//!
//! The peers are installed by `scripts/bench/setup-peers.sh` into `$DOCMEM_CACHE`; a peer
//! that is not there is reported as missing, not guessed. Their scripts travel inside the
//! binary, so an installed `docmem` needs no source tree.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Args;
use docmem_runtime::embed::{EmbedRole, EmbedderOptions, Precision, SentenceEmbedder};
use serde::Serialize;

use crate::CliError;

/// `docmem bench embed` arguments.
#[derive(Args, Debug)]
pub struct EmbedBenchArgs {
    /// A sentence-transformers model directory
    #[arg(long, required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub model: Option<PathBuf>,
    /// Instead of a model, a synthetic encoder of a real one's shapes (minilm,
    /// bge-small): seeded random f32 weights, in llama.cpp's bert GGUF layout, built in
    /// memory. Our engines only: the peers need the real model.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Texts at batch 32 (batch 1 runs the first 32)
    #[arg(long, default_value_t = 128)]
    pub texts: usize,
    /// Tokens per text (special tokens included)
    #[arg(long, default_value_t = 128)]
    pub tokens: usize,
    /// Threads, ours and PyTorch's
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Timed runs of each measurement (the best is kept)
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Python with sentence-transformers (default: $DOCMEM_CACHE/bench-venv/bin/python,
    /// made by scripts/bench/setup-peers.sh)
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The wasm package built for Node (default: $DOCMEM_CACHE/wasm-pkg-node, made by
    /// scripts/wasm-test.sh)
    #[arg(long)]
    pub wasm_pkg: Option<PathBuf>,
    /// Also time the encoder on the GPU (natively through wgpu; a software adapter such as
    /// llvmpipe is used when no GPU is found, and named)
    #[arg(long)]
    pub gpu: bool,
    /// Time the encoder on the GPU alone (no CPU precisions, no peers)
    #[arg(long)]
    pub gpu_only: bool,
    /// JSON output
    #[arg(long)]
    pub json: bool,
}

/// Sentences per second at the two batch sizes.
#[derive(Serialize, Clone, Copy, Debug)]
struct Speed {
    batch1: f64,
    batch32: f64,
}

#[derive(Serialize)]
struct Native {
    precision: &'static str,
    speed: Speed,
}

#[derive(Serialize)]
struct Report {
    model: String,
    texts: usize,
    tokens_per_text: usize,
    threads: usize,
    native: Vec<Native>,
    /// The encoder on the GPU (`--gpu`): the adapter and its speed.
    gpu: Option<(String, Speed)>,
    wasm: Option<Speed>,
    sentence_transformers: Option<Speed>,
    transformers_js: Option<Speed>,
    /// Ours (default precision) ÷ sentence-transformers, natively.
    ratio_native_vs_sentence_transformers: Option<Speed>,
    /// Ours in wasm ÷ transformers.js in wasm.
    ratio_wasm_vs_transformers_js: Option<Speed>,
}

/// Texts of exactly `tokens` WordPiece tokens with MiniLM's vocabulary (common words, one
/// token each, in the synthetic encoders' vocabulary too), varied so no two are equal.
fn texts(n: usize, tokens: usize) -> Vec<String> {
    const WORDS: [&str; 24] = docmem_runtime::synthetic::BENCH_WORDS;
    (0..n)
        .map(|i| (0..tokens.saturating_sub(2)).map(|k| WORDS[(i * 7 + k * 3 + k / 5) % WORDS.len()]).collect::<Vec<_>>().join(" "))
        .collect()
}

fn time_native(e: &mut SentenceEmbedder, texts: &[&str], tokens: usize, repeats: usize) -> Result<Speed, CliError> {
    e.embed(&texts[..4], EmbedRole::Passage)?; // warm-up (threads, allocations)
    let mut best = |batch: usize, n: usize| -> Result<f64, CliError> {
        e.max_batch_tokens = batch * tokens;
        let mut best = 0f64;
        for _ in 0..repeats {
            let t = Instant::now();
            for chunk in texts[..n].chunks(batch) {
                e.embed(chunk, EmbedRole::Passage)?;
            }
            best = best.max(n as f64 / t.elapsed().as_secs_f64());
        }
        Ok(best)
    };
    Ok(Speed { batch1: best(1, texts.len().min(32))?, batch32: best(32, texts.len())? })
}

/// The model an embed benchmark runs: a directory, or a synthetic encoder's GGUF bytes.
enum EmbedModel {
    Dir(PathBuf),
    Synthetic { name: String, gguf: Vec<u8> },
}

impl EmbedModel {
    fn of(a: &EmbedBenchArgs) -> Result<Self, CliError> {
        match (&a.synthetic, &a.model) {
            (Some(name), _) => {
                let shape = docmem_runtime::synthetic::embedder_shape(name)
                    .map_err(|e| CliError::BadArgument { message: format!("--synthetic: {e}") })?;
                Ok(EmbedModel::Synthetic {
                    name: format!("synthetic {} (seed 1)", shape.model),
                    gguf: docmem_runtime::synthetic::embedder_gguf(shape, 1),
                })
            }
            (None, Some(dir)) => Ok(EmbedModel::Dir(dir.clone())),
            (None, None) => Err(CliError::BadArgument { message: "give --model DIR or --synthetic NAME".into() }),
        }
    }

    fn name(&self) -> String {
        match self {
            EmbedModel::Dir(d) => d.display().to_string(),
            EmbedModel::Synthetic { name, .. } => name.clone(),
        }
    }

    fn load(&self, options: EmbedderOptions) -> Result<SentenceEmbedder, CliError> {
        Ok(match self {
            EmbedModel::Dir(d) => SentenceEmbedder::load(d, options)?,
            EmbedModel::Synthetic { name, gguf } => {
                SentenceEmbedder::from_gguf(&docmem_runtime::source::MemorySource::new(gguf.clone()), name.clone(), options)?
            }
        })
    }

    #[cfg(feature = "gpu")]
    fn load_onto_gpu(&self, gpu: docmem_runtime::gpu::Gpu) -> Result<SentenceEmbedder, CliError> {
        Ok(match self {
            EmbedModel::Dir(d) => SentenceEmbedder::load_onto_gpu(d, gpu)?,
            EmbedModel::Synthetic { name, gguf } => {
                SentenceEmbedder::from_gguf_onto_gpu(&docmem_runtime::source::MemorySource::new(gguf.clone()), name.clone(), gpu)?
            }
        })
    }
}

/// The encoder on the GPU: the adapter's name and the speed.
#[cfg(feature = "gpu")]
fn time_gpu(model: &EmbedModel, texts: &[&str], tokens: usize, repeats: usize) -> Result<(String, Speed), CliError> {
    use docmem_runtime::gpu::{Gpu, GpuOptions};
    let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() })
        .map_err(|e| CliError::BadArgument { message: format!("--gpu: {e}") })?;
    let adapter = gpu.describe();
    eprintln!("docmem: the GPU encoder runs on {adapter}");
    let mut e = model.load_onto_gpu(gpu)?;
    Ok((adapter, time_native(&mut e, texts, tokens, repeats)?))
}

#[cfg(not(feature = "gpu"))]
fn time_gpu(_: &EmbedModel, _: &[&str], _: usize, _: usize) -> Result<(String, Speed), CliError> {
    Err(CliError::BadArgument { message: "--gpu: this docmem was built without the gpu feature".into() })
}

const ST_SCRIPT: &str = include_str!("../../../../../scripts/bench/st_embed.py");
const TJS_SCRIPT: &str = include_str!("../../../../../scripts/bench/tjs_embed.mjs");
const WASM_SCRIPT: &str = include_str!("../../../../../scripts/bench/wasm_embed.cjs");

fn cache() -> PathBuf {
    std::env::var_os("DOCMEM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/docmem"))
}

/// Run a peer's script (written next to `texts_file`) and read its `{batch1, batch32}`.
fn peer(name: &str, program: &Path, script: (&str, &str), args: &[&std::ffi::OsStr]) -> Option<Speed> {
    let path = std::env::temp_dir().join(format!("docmem-bench-{}-{}", std::process::id(), script.0));
    std::fs::write(&path, script.1).ok()?;
    let out = Command::new(program).arg(&path).args(args).output();
    let _ = std::fs::remove_file(&path);
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            eprintln!("docmem: the {name} run failed: {}", err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""));
            return None;
        }
        Err(e) => {
            eprintln!("docmem: cannot run {} for {name}: {e}", program.display());
            return None;
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(Speed { batch1: v["batch1"].as_f64()?, batch32: v["batch32"].as_f64()? })
}

fn ratio(a: Option<Speed>, b: Option<Speed>) -> Option<Speed> {
    let (a, b) = (a?, b?);
    Some(Speed { batch1: a.batch1 / b.batch1, batch32: a.batch32 / b.batch32 })
}

pub fn run(a: &EmbedBenchArgs) -> Result<(), CliError> {
    if a.texts < 4 || a.tokens < 3 || a.threads == 0 || a.repeats == 0 {
        return Err(CliError::BadArgument {
            message: "--texts must be at least 4, --tokens at least 3, --threads and --repeats at least 1".into(),
        });
    }
    let owned = texts(a.texts, a.tokens);
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let model = EmbedModel::of(a)?;
    let mut native = Vec::new();
    // --gpu-only: the GPU machine's CPU figures are not what it is lent for.
    for precision in Precision::ALL.into_iter().filter(|_| !a.gpu_only) {
        let mut e = model.load(EmbedderOptions { precision, threads: a.threads })?;
        native.push(Native { precision: precision.name(), speed: time_native(&mut e, &texts, a.tokens, a.repeats)? });
    }
    let gpu = if a.gpu || a.gpu_only { Some(time_gpu(&model, &texts, a.tokens, a.repeats)?) } else { None };
    let EmbedModel::Dir(dir) = &model else {
        return print_report(a, model.name(), native, gpu, None, None, None);
    };
    let texts_file = std::env::temp_dir().join(format!("docmem-bench-embed-{}.json", std::process::id()));
    std::fs::write(&texts_file, serde_json::to_vec(&owned).map_err(std::io::Error::from)?)?;
    let (repeats, threads) = (a.repeats.to_string(), a.threads.to_string());
    let file = texts_file.as_os_str();
    let model_name = dir.display().to_string();
    let model = dir.as_os_str();

    let pkg = a.wasm_pkg.clone().unwrap_or_else(|| cache().join("wasm-pkg-node"));
    let wasm = if pkg.join("docmem_wasm.js").is_file() {
        peer("docmem wasm", Path::new("node"), ("wasm.cjs", WASM_SCRIPT), &[pkg.as_os_str(), model, file, repeats.as_ref()])
    } else {
        eprintln!("docmem: no wasm package at {} (bash scripts/wasm-test.sh builds it)", pkg.display());
        None
    };
    let python = a.python.clone().unwrap_or_else(|| cache().join("bench-venv/bin/python"));
    let st = if python.is_file() {
        peer("sentence-transformers", &python, ("st.py", ST_SCRIPT), &[model, file, threads.as_ref(), repeats.as_ref()])
    } else {
        eprintln!("docmem: no sentence-transformers at {} (bash scripts/bench/setup-peers.sh installs it)", python.display());
        None
    };
    let (node_dir, onnx) = (cache().join("bench-node"), cache().join("bench-onnx/all-MiniLM-L6-v2"));
    let tjs = if node_dir.join("node_modules/@huggingface/transformers").is_dir() && onnx.join("onnx/model.onnx").is_file() {
        peer(
            "transformers.js",
            Path::new("node"),
            ("tjs.mjs", TJS_SCRIPT),
            &[node_dir.as_os_str(), onnx.as_os_str(), file, repeats.as_ref()],
        )
    } else {
        eprintln!("docmem: no transformers.js in {} (bash scripts/bench/setup-peers.sh installs it)", node_dir.display());
        None
    };
    let _ = std::fs::remove_file(&texts_file);
    print_report(a, model_name, native, gpu, wasm, st, tjs)
}

/// Print the figures as JSON (`--json`) or a table.
fn print_report(
    a: &EmbedBenchArgs,
    model: String,
    native: Vec<Native>,
    gpu: Option<(String, Speed)>,
    wasm: Option<Speed>,
    st: Option<Speed>,
    tjs: Option<Speed>,
) -> Result<(), CliError> {
    let default = native.iter().find(|n| n.precision == Precision::DEFAULT.name()).map(|n| n.speed);
    let report = Report {
        model,
        texts: a.texts,
        tokens_per_text: a.tokens,
        threads: a.threads,
        ratio_native_vs_sentence_transformers: ratio(default, st),
        ratio_wasm_vs_transformers_js: ratio(wasm, tjs),
        native,
        gpu,
        wasm,
        sentence_transformers: st,
        transformers_js: tjs,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(std::io::Error::from)?);
        return Ok(());
    }
    let row = |name: &str, s: Option<Speed>| match s {
        Some(s) => println!("{name:<40} {:>10.1} {:>10.1}", s.batch1, s.batch32),
        None => println!("{name:<40} {:>10} {:>10}", "-", "-"),
    };
    println!("{} texts of {} tokens; sentences/s", a.texts, a.tokens);
    println!("{:<40} {:>10} {:>10}", "engine", "batch 1", "batch 32");
    for n in &report.native {
        row(&format!("docmem native {} ({} threads)", n.precision, a.threads), Some(n.speed));
    }
    if let Some((adapter, speed)) = &report.gpu {
        row(&format!("docmem GPU f32 ({adapter})"), Some(*speed));
    }
    row(&format!("sentence-transformers ({} threads)", a.threads), st);
    row("docmem wasm (Node, 1 thread)", wasm);
    row("transformers.js wasm (Node, 1 thread)", tjs);
    let ratio_row = |name: &str, r: Option<Speed>| {
        if let Some(r) = r {
            println!("{name:<40} {:>9.2}x {:>9.2}x", r.batch1, r.batch32);
        }
    };
    ratio_row(&format!("ratio native {} / sentence-transformers", Precision::DEFAULT.name()), report.ratio_native_vs_sentence_transformers);
    ratio_row("ratio wasm / transformers.js", report.ratio_wasm_vs_transformers_js);
    Ok(())
}
