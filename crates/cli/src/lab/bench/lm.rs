//! `docmem bench lm`: prefill and decode speed of our CPU backend beside llama.cpp's
//! `llama-bench` on the same model file with the same thread count, in the same run.
//!
//! `--backend gpu` runs our WebGPU backend natively (wgpu; the model loaded straight onto
//! the adapter), decoding with the greedy pick on the GPU, and llama-bench with `-ngl 99`
//! (its GPU backend, when the build has one). Where the adapter offers timestamp queries,
//! every kernel is timed: GPU microseconds per token by kernel, in prefill and decoding,
//! and each kernel's share of a decode step.
//!
//! `--synthetic MODEL:QUANT` benchmarks a model of a real one's shapes and block formats built
//! in memory from seeded values ([`docmem_runtime::synthetic`]), where the file cannot go;
//! llama-bench then reads the same bytes from a temporary file. The report gives the weights
//! a decode step reads and, with `--peak-gbs`, the share of the memory's bandwidth decoding
//! reaches.
//!
//! Prefill: one forward pass over `--prompt-tokens` tokens (llama-bench's `pp`). Decode:
//! `--gen-tokens` single-token steps after that prompt (its `tg` run at depth
//! `-d <prompt-tokens>`, so both decode over the same context lengths). Peak memory is the
//! process's high-water mark (Linux `VmHWM`). llama.cpp is found at `--llama-bench` or
//! where `scripts/llamacpp/build.sh` puts it; without it, only our figures are printed.
//!
//! Multi-path decoding (`--paths N`, N ≥ 2): MoM's candidates after the same prompt, one
//! greedy path and N − 1 sampled ones (temperature 0.7, top-p 0.8, seeds 1..), each up to
//! `--gen-tokens` long, decoded together as one batch per step ([`Lm::generate_paths`])
//! and, in the same run, the same paths one after another ([`Lm::generate_after`]).
//! They alternate for `--rounds` rounds and each keeps its fastest (this VM's speed drifts
//! within a run). Aggregate tokens/s of each and their ratio are reported, with whether the two gave
//! identical tokens (they must). Sampling is part of both timings, as it is in extraction.
//! With `--document FILE`, the same paths run on the MemReader prompt of that document,
//! batched, with and without prompt-lookup drafts: tokens/s of each, their ratio, the
//! share of drafted tokens accepted, and whether greedy output was the same.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::Args;
use docmem_runtime::gguf::GgufFile;
use docmem_runtime::lm::{argmax, Backend, DraftSettings, Lm, LoadOptions, PrefillOptions, Prefix, Prompt, PromptLookup, SamplingParams};
use docmem_runtime::source::{ByteSource, FileSource, MemorySource};
use docmem_runtime::synthetic::{self, DecoderSpec};
use serde::Serialize;

use crate::CliError;

#[derive(Args, Debug)]
pub struct LmBenchArgs {
    /// A GGUF model file.
    #[arg(long, required_unless_present = "synthetic", conflicts_with = "synthetic")]
    model: Option<PathBuf>,
    /// Instead of a file, a synthetic model of a real model's shapes and block formats,
    /// built in memory from seeded random values: MODEL:QUANT, e.g. qwen2-1.5b:q4_k_m
    /// (`docmem synth-gguf --list` names them). llama-bench, when found, is timed on the
    /// same bytes written to a temporary file.
    #[arg(long)]
    synthetic: Option<String>,
    /// Seed of the synthetic weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The GPU's peak memory bandwidth in GB/s: the report then gives the share of it that
    /// decoding reaches (weights read per token × tokens/s ÷ this).
    #[arg(long)]
    peak_gbs: Option<f64>,
    /// Backend: cpu, or gpu (WebGPU's native wgpu backend: the model loaded straight
    /// onto the adapter, each kernel timed with timestamp queries where it offers them).
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// With --backend gpu: multiply in f32 even where the adapter offers shader-f16 (the
    /// K-quants' f16 path), to compare the two.
    #[arg(long)]
    gpu_f32: bool,
    /// Prompt length for the prefill figure.
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// Tokens generated for the decode figure.
    #[arg(long, default_value_t = 128)]
    gen_tokens: usize,
    /// Threads for both engines.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// llama.cpp's llama-bench binary.
    #[arg(long)]
    llama_bench: Option<PathBuf>,
    /// Also check parity with llama.cpp against this golden file (from
    /// scripts/golden/lm.py); exits 1 when it does not hold
    #[arg(long)]
    golden: Option<PathBuf>,
    /// Also time this many paths (one greedy, the rest sampled) decoded as one batch
    /// against the same paths decoded one after another (0 or 1: skip).
    #[arg(long, default_value_t = 0)]
    paths: usize,
    /// Rounds of the --paths and --document timings (each way keeps its fastest round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// With --paths: also time prompt-lookup drafts on the MemReader prompt of this
    /// document (its first ~--prompt-tokens tokens), batched paths with and without drafts.
    #[arg(long)]
    document: Option<PathBuf>,
    /// With --paths: also time prompt-lookup drafts without a document, on a copy-heavy
    /// prompt (for models with nothing to copy, such as synthetic ones): a bench prompt,
    /// with drafts looked up in it followed by the greedy path's own continuation
    /// (generated first), as if the prompt were a document the path copies from.
    #[arg(long, conflicts_with = "document")]
    drafts: bool,
    /// Paths of the drafts figure (default: --paths); 1 times the greedy path alone.
    #[arg(long)]
    draft_paths: Option<usize>,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct DraftFigures {
    /// The prompt drafted from: a document's MemReader prompt, or the copy-heavy prompt.
    document: String,
    prompt_tokens: usize,
    paths: usize,
    /// Tokens generated over all paths, without drafts / with drafts.
    tokens: usize,
    tokens_drafted_run: usize,
    plain_tok_s: f64,
    drafted_tok_s: f64,
    /// `drafted_tok_s / plain_tok_s`.
    ratio: f64,
    drafted: usize,
    accepted: usize,
    /// `accepted / drafted`.
    acceptance: f64,
    /// Whether the greedy path wrote the same tokens with drafts as without.
    greedy_identical: bool,
}

#[derive(Serialize)]
struct PathsFigures {
    paths: usize,
    /// Tokens generated over all paths (each run).
    tokens: usize,
    /// Tokens of each path (a path that ends early leaves the batch narrower).
    lengths: Vec<usize>,
    sequential_tok_s: f64,
    batched_tok_s: f64,
    /// `batched_tok_s / sequential_tok_s`.
    ratio: f64,
    /// Whether both runs gave every path the same tokens.
    identical: bool,
}

/// GPU kernel times over one timed stretch: (kernel, dispatches, seconds), and the
/// dispatches left untimed.
pub struct KernelLap {
    by_kernel: Vec<(String, usize, f64)>,
    untimed: usize,
}

/// One kernel's GPU time per token, in prefill and in decoding.
#[derive(Serialize)]
struct KernelRow {
    kernel: String,
    prefill_us_per_token: f64,
    decode_us_per_token: f64,
    decode_dispatches_per_token: f64,
    /// Share of the decode step's GPU time.
    decode_share: f64,
}

#[derive(Serialize)]
struct GpuKernels {
    rows: Vec<KernelRow>,
    /// GPU time per token summed over kernels (the rest of a step's wall time is the CPU's
    /// recording, submission and read-back).
    prefill_gpu_us_per_token: f64,
    decode_gpu_us_per_token: f64,
    untimed_dispatches: usize,
}

impl GpuKernels {
    /// Per-token rows from the prefill and decode laps (`None` when kernels were not timed).
    fn of(prefill: Option<KernelLap>, prompt_tokens: usize, decode: Option<KernelLap>, gen_tokens: usize) -> Option<GpuKernels> {
        let (prefill, decode) = (prefill?, decode?);
        let (p_n, d_n) = (prompt_tokens.max(1) as f64, gen_tokens.max(1) as f64);
        let decode_total: f64 = decode.by_kernel.iter().map(|k| k.2).sum();
        let prefill_total: f64 = prefill.by_kernel.iter().map(|k| k.2).sum();
        let mut names: Vec<&String> = decode.by_kernel.iter().map(|k| &k.0).collect();
        names.extend(prefill.by_kernel.iter().map(|k| &k.0).filter(|n| !decode.by_kernel.iter().any(|d| &d.0 == *n)));
        let find = |lap: &KernelLap, name: &str| lap.by_kernel.iter().find(|k| k.0 == name).map_or((0, 0.0), |k| (k.1, k.2));
        let rows = names
            .into_iter()
            .map(|name| {
                let (d_count, d_s) = find(&decode, name);
                let (_, p_s) = find(&prefill, name);
                KernelRow {
                    kernel: name.clone(),
                    prefill_us_per_token: p_s * 1e6 / p_n,
                    decode_us_per_token: d_s * 1e6 / d_n,
                    decode_dispatches_per_token: d_count as f64 / d_n,
                    decode_share: if decode_total > 0.0 { d_s / decode_total } else { 0.0 },
                }
            })
            .collect();
        Some(GpuKernels {
            rows,
            prefill_gpu_us_per_token: prefill_total * 1e6 / p_n,
            decode_gpu_us_per_token: decode_total * 1e6 / d_n,
            untimed_dispatches: prefill.untimed + decode.untimed,
        })
    }
}

/// Work a GPU recorded, counted whatever the adapter (`Gpu::work_counts`): dispatches,
/// compute passes, submissions.
#[derive(Clone, Copy, Default)]
pub struct WorkTally {
    dispatches: usize,
    passes: usize,
    submissions: usize,
}

/// The GPU's work per decoded token and per prompt: what a decode step costs in launches,
/// on any adapter (llvmpipe counts what a GPU would run).
#[derive(Serialize)]
struct GpuWork {
    dispatches_per_decoded_token: f64,
    /// Dispatches per decoded token, per layer.
    dispatches_per_layer: f64,
    dispatches_per_prompt: usize,
    compute_passes_per_forward: f64,
    submissions_per_decoded_token: f64,
}

impl GpuWork {
    fn of(start: WorkTally, prefilled: WorkTally, end: WorkTally, gen_tokens: usize, layers: usize) -> GpuWork {
        let n = gen_tokens.max(1) as f64;
        let decode = end.dispatches - prefilled.dispatches;
        GpuWork {
            dispatches_per_decoded_token: decode as f64 / n,
            dispatches_per_layer: decode as f64 / n / layers.max(1) as f64,
            dispatches_per_prompt: prefilled.dispatches - start.dispatches,
            compute_passes_per_forward: (end.passes - start.passes) as f64 / (n + 1.0),
            submissions_per_decoded_token: (end.submissions - prefilled.submissions) as f64 / n,
        }
    }
}

#[derive(Serialize, Default)]
struct Figures {
    prefill_tok_s: f64,
    decode_tok_s: f64,
    ttft_ms: f64,
}

#[derive(Serialize)]
struct Report {
    /// The model file, or `synthetic MODEL:QUANT (seed N)`.
    model: String,
    /// The file's identity (`docmem_runtime::model::ModelIdentity`), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<String>,
    /// Whether the answerability probe was fitted on this very file.
    probe_fitted: bool,
    /// `cpu` or `gpu`.
    backend: String,
    /// The GPU adapter (`--backend gpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter: Option<String>,
    /// The CPU kernels' path (`portable`, `avx2`, `avx512`, `vnni`; `DOCMEM_CPU` caps it).
    cpu_path: &'static str,
    threads: usize,
    prompt_tokens: usize,
    gen_tokens: usize,
    docmem: Figures,
    peak_rss_mb: Option<f64>,
    /// Bytes of weights one decode step reads: every tensor but the embedding table (one
    /// row of it), which a tied model reads whole as its output head.
    weight_bytes_per_token: Option<u64>,
    /// `weight_bytes_per_token × decode tok/s`, in GB/s.
    decode_weight_gbs: Option<f64>,
    /// `--peak-gbs`, and `decode_weight_gbs` as a share of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_gbs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parity: Option<docmem_runtime::lm::parity::ParityReport>,
    llama_cpp: Option<Figures>,
    prefill_ratio: Option<f64>,
    decode_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    multi_path: Option<PathsFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drafts: Option<DraftFigures>,
    /// GPU time per kernel (timestamp queries), per token.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_kernels: Option<GpuKernels>,
    /// Dispatches, passes and submissions (`--backend gpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_work: Option<GpuWork>,
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn default_llama_bench() -> Option<PathBuf> {
    let cache = std::env::var_os("DOCMEM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/docmem")))?;
    std::fs::read_dir(cache.join("llamacpp")).ok()?.flatten().map(|e| e.path().join("bin/llama-bench")).find(|p| p.is_file())
}

fn run_llama_bench(bin: &PathBuf, model: &std::path::Path, a: &LmBenchArgs) -> Option<Figures> {
    // Prefill from an empty cache; decode at the depth our decode runs at (after the
    // prompt), which llama-bench's `-d` prefills before timing.
    let avg_ts = |extra: &[String]| -> Option<f64> {
        let out = Command::new(bin)
            .arg("-m")
            .arg(model)
            .args(extra)
            .args(["-t", &a.threads.to_string(), "-r", "2", "-o", "json"])
            // Against our GPU backend, llama.cpp's layers on its GPU backend (a build
            // without one runs them on the CPU; the report names the backend).
            .args(if a.backend == "gpu" { &["-ngl", "99"][..] } else { &[][..] })
            .output()
            .ok()?;
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        rows.as_array()?.first()?["avg_ts"].as_f64()
    };
    let prefill = avg_ts(&["-p".into(), a.prompt_tokens.to_string(), "-n".into(), "0".into()])?;
    let decode = avg_ts(&["-p".into(), "0".into(), "-n".into(), a.gen_tokens.to_string(), "-d".into(), a.prompt_tokens.to_string()])?;
    Some(Figures { prefill_tok_s: prefill, decode_tok_s: decode, ttft_ms: a.prompt_tokens as f64 / prefill * 1000.0 })
}

/// The multi-path figures: `a.paths` paths after `prefix`, batched and one by one.
fn bench_paths<B: Backend>(lm: &Lm<B>, prefix: &Prefix<B::Cache>, a: &LmBenchArgs) -> Result<PathsFigures, CliError> {
    let paths = mom_paths(a.paths, a.gen_tokens);
    // Rounds alternate the two ways and each keeps its fastest: this VM's speed drifts
    // within a run, and alternating lets both meet the same drift.
    let (mut batched, mut sequential) = (Vec::new(), Vec::new());
    let (mut batched_s, mut sequential_s) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..a.rounds.max(1) {
        let t0 = Instant::now();
        batched = docmem_runtime::block_on(lm.generate_paths(prefix, &paths))?;
        batched_s = batched_s.min(t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        sequential.clear();
        for p in &paths {
            sequential.push(docmem_runtime::block_on(lm.generate_after(prefix, "", p, |_| ControlFlow::Continue(())))?);
        }
        sequential_s = sequential_s.min(t1.elapsed().as_secs_f64());
    }
    let tokens: usize = batched.iter().map(|g| g.tokens.len()).sum();
    let identical = batched.iter().zip(&sequential).all(|(b, s)| b.tokens == s.tokens);
    let (batched_tok_s, sequential_tok_s) = (tokens as f64 / batched_s, tokens as f64 / sequential_s);
    let lengths = batched.iter().map(|g| g.tokens.len()).collect();
    Ok(PathsFigures {
        paths: a.paths,
        tokens,
        lengths,
        sequential_tok_s,
        batched_tok_s,
        ratio: batched_tok_s / sequential_tok_s,
        identical,
    })
}

/// The prompt drafts are timed on, prefilled; what it is; and the tokens drafts are looked
/// up in. With `--document`: its MemReader prompt, drafts from the prompt itself. With
/// `--drafts` (a model that has nothing to copy, such as a synthetic one): a bench prompt
/// of `--prompt-tokens`, drafts from that prompt followed by the greedy path's own
/// continuation, measured beforehand, as if the prompt were a document holding the text
/// the reader copies out of it. Acceptance is reported beside the speed either way.
fn drafts_prefix<B: Backend>(lm: &Lm<B>, a: &LmBenchArgs) -> Result<DraftsPrompt<B::Cache>, CliError> {
    if let Some(doc) = &a.document {
        let text = std::fs::read_to_string(doc).map_err(|e| CliError::Read { path: doc.clone(), source: e })?;
        // About four characters a token: the document's first ~--prompt-tokens tokens.
        let mut cut = text.len().min(a.prompt_tokens * 4);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let user = docmem_runtime::docmem_core::reader::ReaderPrompt::English.render(&text[..cut]);
        let messages = [docmem_runtime::chat::ChatMessage::new("user", &user)];
        let prefix = docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages))?, PrefillOptions::default()))?.prefix;
        let table = prefix.tokens().to_vec();
        return Ok(DraftsPrompt { what: doc.display().to_string(), prefix, table });
    }
    let prompt = bench_prompt(lm.backend.config().vocab, a.prompt_tokens);
    let prefix = docmem_runtime::block_on(lm.prefill(prompt.clone(), PrefillOptions::default())).map(|p| p.prefix)?;
    let greedy = SamplingParams { temperature: 0.0, top_p: 1.0, max_tokens: a.gen_tokens, ..SamplingParams::default() };
    let continued = docmem_runtime::block_on(lm.generate_paths(&prefix, &[greedy]))?;
    let table = [prompt, continued[0].tokens.clone()].concat();
    let what = format!("copy-heavy: {} bench tokens, drafts from them and the greedy path's own continuation", a.prompt_tokens);
    Ok(DraftsPrompt { what, prefix, table })
}

/// What [`drafts_prefix`] gives: what the prompt is, the prompt prefilled, and the tokens
/// drafts are looked up in.
struct DraftsPrompt<C> {
    what: String,
    prefix: Prefix<C>,
    table: Vec<u32>,
}

/// MoM's paths (as [`bench_paths`]) after the drafts prompt ([`drafts_prefix`]), batched,
/// with and without prompt-lookup drafts.
fn bench_drafts<B: Backend>(lm: &Lm<B>, a: &LmBenchArgs) -> Result<DraftFigures, CliError> {
    let DraftsPrompt { what: document, prefix, table } = drafts_prefix(lm, a)?;
    let paths = mom_paths(a.draft_paths.unwrap_or(a.paths), a.gen_tokens);
    let lookup = PromptLookup::new(&table, DraftSettings::default());
    let (mut plain, mut drafted) = (Vec::new(), Vec::new());
    let (mut plain_s, mut drafted_s) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..a.rounds.max(1) {
        let t0 = Instant::now();
        plain = docmem_runtime::block_on(lm.generate_paths(&prefix, &paths))?;
        plain_s = plain_s.min(t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        drafted = docmem_runtime::block_on(lm.generate_paths_drafted(
            &prefix,
            &paths,
            Some(&lookup),
            |_, _| ControlFlow::Continue(()),
            &mut || ControlFlow::Continue(()),
        ))?;
        drafted_s = drafted_s.min(t1.elapsed().as_secs_f64());
    }
    let tokens: usize = plain.iter().map(|g| g.tokens.len()).sum();
    let tokens_drafted_run: usize = drafted.iter().map(|g| g.tokens.len()).sum();
    let (d, acc) = drafted.iter().fold((0, 0), |(d, acc), g| (d + g.drafted, acc + g.accepted));
    let (plain_tok_s, drafted_tok_s) = (tokens as f64 / plain_s, tokens_drafted_run as f64 / drafted_s);
    Ok(DraftFigures {
        document,
        prompt_tokens: prefix.tokens().len(),
        paths: paths.len(),
        tokens,
        tokens_drafted_run,
        plain_tok_s,
        drafted_tok_s,
        ratio: drafted_tok_s / plain_tok_s,
        drafted: d,
        accepted: acc,
        acceptance: if d == 0 { 0.0 } else { acc as f64 / d as f64 },
        greedy_identical: plain[0].tokens == drafted[0].tokens,
    })
}

/// MoM's candidates: one greedy path, the rest sampled at temperature 0.7, top-p 0.8.
/// A prompt of `n` ordinary tokens, as llama-bench uses random ones: ids cycling through
/// the vocabulary, away from the first and last hundred (where special tokens usually
/// sit) when the vocabulary is large enough to leave any.
fn bench_prompt(vocab: usize, n: usize) -> Vec<u32> {
    let (lo, span) = if vocab > 400 { (100, vocab - 200) } else { (0, vocab.max(1)) };
    (0..n).map(|i| (lo + (i * 7919) % span) as u32).collect()
}

fn mom_paths(n: usize, max_tokens: usize) -> Vec<SamplingParams> {
    (0..n)
        .map(|i| SamplingParams {
            temperature: if i == 0 { 0.0 } else { 0.7 },
            top_p: if i == 0 { 1.0 } else { 0.8 },
            seed: i as u64,
            max_tokens,
            ..SamplingParams::default()
        })
        .collect()
}

/// The model a run benchmarks: a file, or a synthetic model's bytes in memory.
struct BenchModel {
    /// What the report calls it.
    name: String,
    /// The GGUF bytes (`None`: a Hugging Face checkpoint directory, loaded by path).
    source: Option<Box<dyn ByteSource>>,
    /// The file llama-bench reads (a synthetic model's is written when llama-bench is
    /// found, and removed on drop).
    file: Option<PathBuf>,
    temporary: bool,
    /// Weights one decode step reads ([`weight_bytes_per_token`]; GGUF models).
    weight_bytes_per_token: Option<u64>,
}

impl Drop for BenchModel {
    fn drop(&mut self) {
        if let (true, Some(f)) = (self.temporary, &self.file) {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Bytes of weights a decode step reads: every tensor, less the embedding table when the
/// model has its own output head (a step reads one row of the table).
fn weight_bytes_per_token(g: &GgufFile) -> u64 {
    let all: u64 = g.tensors.iter().map(|t| t.size).sum();
    match (g.tensor("token_embd.weight"), g.tensor("output.weight")) {
        (Some(embd), Some(_)) => all - embd.size + embd.size / embd.dims.get(1).copied().unwrap_or(1).max(1),
        _ => all,
    }
}

fn bench_model(a: &LmBenchArgs, llama_bench: Option<&PathBuf>) -> Result<BenchModel, CliError> {
    let (name, source, file, temporary): (String, Option<Box<dyn ByteSource>>, Option<PathBuf>, bool) = match (&a.synthetic, &a.model) {
        (Some(spec), _) => {
            let spec: DecoderSpec = spec.parse().map_err(|e| CliError::BadArgument { message: format!("--synthetic: {e}") })?;
            let t = Instant::now();
            let bytes = synthetic::decoder_gguf(spec.shape, spec.quant, a.seed);
            eprintln!("[synthetic {spec}: {:.0} MB built in {:.1} s]", bytes.len() as f64 / 1e6, t.elapsed().as_secs_f64());
            let file = match llama_bench {
                Some(_) => {
                    let path = std::env::temp_dir().join(format!(
                        "docmem-synthetic-{}-{}.gguf",
                        std::process::id(),
                        spec.to_string().replace(':', "-")
                    ));
                    std::fs::write(&path, &bytes).map_err(CliError::Output)?;
                    Some(path)
                }
                None => None,
            };
            (format!("synthetic {spec} (seed {})", a.seed), Some(Box::new(MemorySource::new(bytes))), file, true)
        }
        (None, Some(path)) if path.is_dir() => (path.display().to_string(), None, None, false),
        (None, Some(path)) => {
            let src = FileSource::open(path)?;
            (path.display().to_string(), Some(Box::new(src)), Some(path.clone()), false)
        }
        (None, None) => return Err(CliError::BadArgument { message: "give --model FILE or --synthetic MODEL:QUANT".into() }),
    };
    let weights = match &source {
        Some(src) => Some(weight_bytes_per_token(&GgufFile::read(&**src)?)),
        None => None,
    };
    Ok(BenchModel { name, weight_bytes_per_token: weights, source, file, temporary })
}

pub fn run(a: &LmBenchArgs) -> Result<(), CliError> {
    if a.prompt_tokens == 0 || a.gen_tokens == 0 {
        return Err(CliError::BadArgument { message: "--prompt-tokens and --gen-tokens must be at least 1".into() });
    }
    if a.draft_paths == Some(0) {
        return Err(CliError::BadArgument { message: "--draft-paths must be at least 1".into() });
    }
    if a.peak_gbs.is_some_and(|p| !(p.is_finite() && p > 0.0)) {
        return Err(CliError::BadArgument { message: "--peak-gbs must be a positive number of GB/s".into() });
    }
    let llama_bench = a.llama_bench.clone().or_else(default_llama_bench);
    let model = bench_model(a, llama_bench.as_ref())?;
    // Room for the MemReader instructions around a --document too.
    let mut context = a.prompt_tokens + a.gen_tokens + 1 + if a.document.is_some() { 1024 } else { 0 };
    if a.golden.is_some() {
        // The golden's long text (about 1,300 tokens) is read in one context.
        context = context.max(2048);
    }
    let opts = LoadOptions { threads: a.threads, context, ..Default::default() };
    match a.backend.as_str() {
        "cpu" => {
            let lm = match (&model.source, &a.model) {
                (Some(src), _) => Lm::load_from(&**src, &opts)?,
                (None, Some(dir)) => Lm::load(dir, &opts)?,
                (None, None) => unreachable!("bench_model gives a source or a directory"),
            };
            let parity = match &a.golden {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| CliError::Read { path: path.clone(), source: e })?;
                    let golden = serde_json::from_str(&text)
                        .map_err(|e| CliError::BadArgument { message: format!("--golden {}: {e}", path.display()) })?;
                    Some(docmem_runtime::lm::parity::check(&lm, &golden)?)
                }
                None => None,
            };
            report(a, &model, llama_bench.as_ref(), &lm, parity, None, (&|_| None, &|| None))
        }
        #[cfg(feature = "gpu")]
        "gpu" => {
            use docmem_runtime::gpu::{Gpu, GpuOptions};
            if a.golden.is_some() {
                return Err(CliError::BadArgument { message: "--golden checks the CPU backend; leave it out with --backend gpu".into() });
            }
            let options = GpuOptions { allow_cpu_adapter: true, profile: true, avoid_f16: a.gpu_f32, ..GpuOptions::default() };
            let gpu = Gpu::new_blocking(&options)?;
            let shapes = if gpu.runs_gpu_kernels() { "a GPU's kernel shapes" } else { "a software adapter's kernel shapes" };
            let path = if gpu.has_f16() { "f16 path" } else { "f32 path" };
            let adapter = format!("{}, {shapes}, {path}", gpu.describe());
            let timed = if gpu.can_profile() { "kernels timed in a run of their own" } else { "no timestamp queries" };
            eprintln!("[backend: gpu, {adapter}, {timed}]");
            gpu.set_profiling(false);
            let t = Instant::now();
            let src = model.source.as_deref().ok_or_else(|| CliError::BadArgument {
                message: "--backend gpu loads GGUF files (or --synthetic), not checkpoint directories".into(),
            })?;
            let lm = Lm::load_onto_gpu(src, &opts, gpu)?;
            eprintln!("[loaded onto the GPU in {:.1} s]", t.elapsed().as_secs_f64());
            // Turns timing on or off; gives the times since the last call, and starts afresh.
            let lap = |on: bool| {
                let gpu = lm.backend.gpu();
                let times = gpu.kernel_times();
                gpu.reset_kernel_times();
                gpu.set_profiling(on);
                times.map(|(t, untimed)| KernelLap {
                    untimed,
                    by_kernel: t.into_iter().map(|k| (k.kernel, k.dispatches, k.seconds)).collect(),
                })
            };
            let counts = || {
                let c = lm.backend.gpu().work_counts();
                Some(WorkTally { dispatches: c.dispatches, passes: c.passes, submissions: c.submissions })
            };
            report(a, &model, llama_bench.as_ref(), &lm, None, Some(adapter), (&lap, &counts))
        }
        #[cfg(not(feature = "gpu"))]
        "gpu" => Err(CliError::BadArgument { message: "--backend gpu: this docmem was built without the gpu feature".into() }),
        other => Err(CliError::BadArgument { message: format!("--backend {other}: cpu or gpu") }),
    }
}

/// Prefill `prompt`, then decode `gen` tokens greedily (each picked where the logits are,
/// as a user's greedy decode picks it), calling `between` after the prefill: the prefix and
/// the seconds of each.
fn prefill_and_decode<B: Backend>(
    lm: &Lm<B>,
    prompt: &[u32],
    gen: usize,
    between: &dyn Fn(),
) -> Result<(Prefix<B::Cache>, f64, f64), CliError> {
    let t0 = Instant::now();
    let prefix = docmem_runtime::block_on(lm.prefill(prompt.to_vec(), PrefillOptions::default())).map(|p| p.prefix)?;
    let prefill = t0.elapsed().as_secs_f64();
    between();
    let mut cache = prefix.cache().clone();
    let mut next = argmax(prefix.last_logits());
    let t1 = Instant::now();
    for _ in 0..gen {
        next = docmem_runtime::block_on(Backend::forward_argmax(&lm.backend, &mut cache, &[next]))?;
    }
    Ok((prefix, prefill, t1.elapsed().as_secs_f64()))
}

/// What [`report`] reads from a GPU backend (nothing from the CPU's): kernel times, which
/// the closure turns on or off and returns since its last call, and the work recorded.
type GpuProbes<'a> = (&'a dyn Fn(bool) -> Option<KernelLap>, &'a dyn Fn() -> Option<WorkTally>);

/// Time prefill and greedy decoding, then the kernels (a GPU that can time them), then the
/// multi-path figures, on `lm`'s backend; then print.
fn report<B: Backend>(
    a: &LmBenchArgs,
    model: &BenchModel,
    llama_bench: Option<&PathBuf>,
    lm: &Lm<B>,
    parity: Option<docmem_runtime::lm::parity::ParityReport>,
    adapter: Option<String>,
    (kernel_lap, work_counts): GpuProbes<'_>,
) -> Result<(), CliError> {
    let backend = &lm.backend;
    let prompt = bench_prompt(backend.config().vocab, a.prompt_tokens);
    // Warm-up through the very calls timed below, on a short prompt: it pages in weights,
    // spins up threads and compiles every pipeline prefill and greedy decode dispatch (the
    // GPU compiles a kernel when it is first dispatched, so a warm-up that skipped one of
    // them would leave its compile inside a timed figure).
    prefill_and_decode(lm, &prompt[..prompt.len().min(16)], 2, &|| ())?;
    let start = work_counts();
    let prefilled = std::cell::Cell::new(None);
    let (prefix, prefill, decode) = prefill_and_decode(lm, &prompt, a.gen_tokens, &|| prefilled.set(work_counts()))?;
    let gpu_work = match (start, prefilled.get(), work_counts()) {
        (Some(s), Some(p), Some(e)) => Some(GpuWork::of(s, p, e, a.gen_tokens, backend.config().n_layer)),
        _ => None,
    };
    // Kernel times in a run of their own: timestamps cost a read-back per submission,
    // which the figures above must not pay.
    let prefill_kernels = std::cell::RefCell::new(None);
    let mut decode_kernels = None;
    if kernel_lap(true).is_some() {
        prefill_and_decode(lm, &prompt, a.gen_tokens, &|| *prefill_kernels.borrow_mut() = kernel_lap(true))?;
        decode_kernels = kernel_lap(false);
    }
    let prefill_kernels = prefill_kernels.into_inner();
    let ours =
        Figures { prefill_tok_s: a.prompt_tokens as f64 / prefill, decode_tok_s: a.gen_tokens as f64 / decode, ttft_ms: prefill * 1000.0 };
    let multi_path = if a.paths >= 2 { Some(bench_paths(lm, &prefix, a)?) } else { None };
    let drafts = if (a.document.is_some() || a.drafts) && a.paths >= 1 { Some(bench_drafts(lm, a)?) } else { None };
    let llama = match (llama_bench, &model.file) {
        (Some(bin), Some(file)) => run_llama_bench(bin, file, a),
        _ => None,
    };
    let decode_weight_gbs = model.weight_bytes_per_token.map(|b| b as f64 * ours.decode_tok_s / 1e9);
    let report = Report {
        model: model.name.clone(),
        identity: lm.identity().map(|i| i.to_hex()),
        probe_fitted: docmem_runtime::probe::for_model(lm.identity()).is_some(),
        weight_bytes_per_token: model.weight_bytes_per_token,
        decode_weight_gbs,
        peak_gbs: a.peak_gbs,
        bandwidth_share: a.peak_gbs.zip(decode_weight_gbs).map(|(p, g)| g / p),
        backend: a.backend.clone(),
        adapter,
        cpu_path: docmem_runtime::cpu::isa::in_use().name(),
        threads: a.threads,
        prompt_tokens: a.prompt_tokens,
        gen_tokens: a.gen_tokens,
        prefill_ratio: llama.as_ref().map(|l| ours.prefill_tok_s / l.prefill_tok_s),
        decode_ratio: llama.as_ref().map(|l| ours.decode_tok_s / l.decode_tok_s),
        docmem: ours,
        peak_rss_mb: peak_rss_mb(),
        llama_cpp: llama,
        parity,
        multi_path,
        drafts,
        gpu_kernels: GpuKernels::of(prefill_kernels, a.prompt_tokens, decode_kernels, a.gen_tokens),
        gpu_work,
    };
    let failures = report.parity.as_ref().map(|p| p.failures()).unwrap_or_default();
    let parity_result = || {
        if failures.is_empty() {
            Ok(())
        } else {
            Err(CliError::CheckFailed { message: format!("parity with llama.cpp does not hold:\n{}", failures.join("\n")) })
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(std::io::Error::from)?);
        return parity_result();
    }
    println!("CPU kernels: {} (DOCMEM_CPU=portable|avx2|avx512|vnni caps the path)", report.cpu_path);
    println!(
        "answerability probe: {} (identity {})",
        if report.probe_fitted { "fitted on this file" } else { "none for this file" },
        report.identity.as_deref().unwrap_or("unknown")
    );
    println!("{:<12} {:>12} {:>12} {:>10}", "engine", "prefill t/s", "decode t/s", "TTFT ms");
    println!("{:<12} {:>12.1} {:>12.1} {:>10.0}", "docmem", report.docmem.prefill_tok_s, report.docmem.decode_tok_s, report.docmem.ttft_ms);
    if let Some(l) = &report.llama_cpp {
        println!("{:<12} {:>12.1} {:>12.1} {:>10.0}", "llama.cpp", l.prefill_tok_s, l.decode_tok_s, l.ttft_ms);
        println!("{:<12} {:>11.2}x {:>11.2}x", "ratio", report.prefill_ratio.unwrap_or(0.0), report.decode_ratio.unwrap_or(0.0));
    } else {
        println!("(llama.cpp not found: run scripts/llamacpp/build.sh or pass --llama-bench)");
    }
    if let Some(m) = &report.multi_path {
        println!(
            "{} paths ({} tokens: {:?}): one batch {:.1} t/s, one after another {:.1} t/s, ratio {:.2}x{}",
            m.paths,
            m.tokens,
            m.lengths,
            m.batched_tok_s,
            m.sequential_tok_s,
            m.ratio,
            if m.identical { " (identical tokens)" } else { " (TOKENS DIFFER)" }
        );
    }
    if let Some(d) = &report.drafts {
        println!(
            "drafts on {} ({} prompt tokens, {} paths): {:.1} t/s with, {:.1} t/s without, ratio {:.2}x; {}/{} drafted tokens accepted ({:.0}%){}",
            d.document,
            d.prompt_tokens,
            d.paths,
            d.drafted_tok_s,
            d.plain_tok_s,
            d.ratio,
            d.accepted,
            d.drafted,
            d.acceptance * 100.0,
            if d.greedy_identical { ", greedy identical" } else { ", GREEDY DIFFERS" }
        );
    }
    if let Some(m) = report.peak_rss_mb {
        println!("peak memory {m:.0} MB");
    }
    if let (Some(bytes), Some(gbs)) = (report.weight_bytes_per_token, report.decode_weight_gbs) {
        println!(
            "decode reads {:.0} MB of weights a token: {gbs:.1} GB/s{}",
            bytes as f64 / 1e6,
            match (report.peak_gbs, report.bandwidth_share) {
                (Some(p), Some(s)) => format!(", {:.1}% of {p:.0} GB/s", s * 100.0),
                _ => String::new(),
            }
        );
    }
    if let Some(w) = &report.gpu_work {
        println!(
            "GPU work: {:.1} dispatches a decoded token ({:.2} a layer), {} for the {}-token prompt, {:.2} compute passes a forward, {:.1} submissions a decoded token",
            w.dispatches_per_decoded_token,
            w.dispatches_per_layer,
            w.dispatches_per_prompt,
            report.prompt_tokens,
            w.compute_passes_per_forward,
            w.submissions_per_decoded_token
        );
    }
    if let Some(g) = &report.gpu_kernels {
        println!(
            "GPU time per token (timestamp queries, {}): prefill {:.0} us, decode {:.0} us{}",
            report.adapter.as_deref().unwrap_or("GPU"),
            g.prefill_gpu_us_per_token,
            g.decode_gpu_us_per_token,
            if g.untimed_dispatches > 0 { format!(" ({} dispatches untimed)", g.untimed_dispatches) } else { String::new() }
        );
        println!("{:<14} {:>14} {:>14} {:>12} {:>8}", "kernel", "prefill us/tok", "decode us/tok", "decode disp", "share");
        for r in &g.rows {
            println!(
                "{:<14} {:>14.1} {:>14.1} {:>12.1} {:>7.1}%",
                r.kernel,
                r.prefill_us_per_token,
                r.decode_us_per_token,
                r.decode_dispatches_per_token,
                r.decode_share * 100.0
            );
        }
    }
    if let Some(p) = &report.parity {
        let greedy: Vec<String> = p.greedy.iter().map(|g| format!("{}/{}", g.identical, g.reference)).collect();
        println!(
            "parity with llama.cpp: top-1 {}/{}, greedy {}, worst top-20 log-prob difference {:.1e}{}",
            p.top1_agree,
            p.top1_total,
            greedy.join(" "),
            p.worst_top20,
            if failures.is_empty() { " (holds)" } else { "" }
        );
    }
    parity_result()
}

#[cfg(test)]
mod tests {
    use super::bench_prompt;

    #[test]
    fn a_tiny_vocabulary_gives_a_bench_prompt_without_underflow() {
        for vocab in [0, 1, 2, 150, 200, 401, 49152] {
            let p = bench_prompt(vocab, 64);
            assert_eq!(p.len(), 64);
            assert!(p.iter().all(|&t| (t as usize) < vocab.max(1)), "vocab {vocab}: {p:?}");
        }
        assert!(bench_prompt(49152, 512).iter().all(|&t| (100..49052).contains(&t)));
    }
}
