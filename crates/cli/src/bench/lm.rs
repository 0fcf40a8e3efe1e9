//! `docmem bench lm`: prefill and decode speed of our CPU backend beside llama.cpp's
//! `llama-bench` on the same model file with the same thread count, in the same run.
//!
//! Prefill: one forward pass over `--prompt-tokens` tokens (llama-bench's `pp`). Decode:
//! `--gen-tokens` single-token steps after that prompt (its `tg` run at depth
//! `-d <prompt-tokens>`, so both decode over the same context lengths). Peak memory is the
//! process's high-water mark (Linux `VmHWM`). llama.cpp is found at `--llama-bench` or
//! where `scripts/llamacpp/build.sh` puts it; without it, only our figures are printed.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::Args;
use docmem_runtime::cpu::transformer::Logits;
use docmem_runtime::lm::{argmax, Backend, Lm, LoadOptions};
use serde::Serialize;

use crate::CliError;

#[derive(Args, Debug)]
pub struct LmBenchArgs {
    /// A GGUF model file.
    #[arg(long)]
    model: PathBuf,
    /// Backend (cpu).
    #[arg(long, default_value = "cpu")]
    backend: String,
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
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Figures {
    prefill_tok_s: f64,
    decode_tok_s: f64,
    ttft_ms: f64,
}

#[derive(Serialize)]
struct Report {
    model: String,
    threads: usize,
    prompt_tokens: usize,
    gen_tokens: usize,
    docmem: Figures,
    peak_rss_mb: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parity: Option<docmem_runtime::lm::parity::ParityReport>,
    llama_cpp: Option<Figures>,
    prefill_ratio: Option<f64>,
    decode_ratio: Option<f64>,
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

fn run_llama_bench(bin: &PathBuf, a: &LmBenchArgs) -> Option<Figures> {
    // Prefill from an empty cache; decode at the depth our decode runs at (after the
    // prompt), which llama-bench's `-d` prefills before timing.
    let avg_ts = |extra: &[String]| -> Option<f64> {
        let out = Command::new(bin)
            .arg("-m")
            .arg(&a.model)
            .args(extra)
            .args(["-t", &a.threads.to_string(), "-r", "2", "-o", "json"])
            .output()
            .ok()?;
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        rows.as_array()?.first()?["avg_ts"].as_f64()
    };
    let prefill = avg_ts(&["-p".into(), a.prompt_tokens.to_string(), "-n".into(), "0".into()])?;
    let decode = avg_ts(&["-p".into(), "0".into(), "-n".into(), a.gen_tokens.to_string(), "-d".into(), a.prompt_tokens.to_string()])?;
    Some(Figures { prefill_tok_s: prefill, decode_tok_s: decode, ttft_ms: a.prompt_tokens as f64 / prefill * 1000.0 })
}

pub fn run(a: &LmBenchArgs) -> Result<(), CliError> {
    if a.backend != "cpu" {
        return Err(CliError::BadArgument { message: format!("--backend {}: only cpu is available", a.backend) });
    }
    if a.prompt_tokens == 0 || a.gen_tokens == 0 {
        return Err(CliError::BadArgument { message: "--prompt-tokens and --gen-tokens must be at least 1".into() });
    }
    let lm = Lm::load(&a.model, &LoadOptions { threads: a.threads, context: a.prompt_tokens + a.gen_tokens + 1, ..Default::default() })?;
    let backend = &lm.backend;
    // A prompt of ordinary tokens (ids 100.. cycling), as llama-bench uses random ones.
    let vocab = backend.config().vocab as u32;
    let prompt: Vec<u32> = (0..a.prompt_tokens as u32).map(|i| 100 + (i * 7919) % (vocab - 200)).collect();
    // Warm-up (page in weights, spin up threads).
    let mut warm = backend.new_cache();
    Backend::forward(backend, &mut warm, &prompt[..prompt.len().min(16)], Logits::Last)?;
    let mut cache = backend.new_cache();
    let t0 = Instant::now();
    let logits = Backend::forward(backend, &mut cache, &prompt, Logits::Last)?;
    let prefill = t0.elapsed().as_secs_f64();
    let mut next = argmax(&logits);
    let t1 = Instant::now();
    for _ in 0..a.gen_tokens {
        let l = Backend::forward(backend, &mut cache, &[next], Logits::Last)?;
        next = argmax(&l);
    }
    let decode = t1.elapsed().as_secs_f64();
    let ours =
        Figures { prefill_tok_s: a.prompt_tokens as f64 / prefill, decode_tok_s: a.gen_tokens as f64 / decode, ttft_ms: prefill * 1000.0 };
    let llama = a.llama_bench.clone().or_else(default_llama_bench).and_then(|b| run_llama_bench(&b, a));
    let parity = match &a.golden {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| CliError::Read { path: path.clone(), source: e })?;
            let golden =
                serde_json::from_str(&text).map_err(|e| CliError::BadArgument { message: format!("--golden {}: {e}", path.display()) })?;
            Some(docmem_runtime::lm::parity::check(&lm, &golden)?)
        }
        None => None,
    };
    let report = Report {
        model: a.model.display().to_string(),
        threads: a.threads,
        prompt_tokens: a.prompt_tokens,
        gen_tokens: a.gen_tokens,
        prefill_ratio: llama.as_ref().map(|l| ours.prefill_tok_s / l.prefill_tok_s),
        decode_ratio: llama.as_ref().map(|l| ours.decode_tok_s / l.decode_tok_s),
        docmem: ours,
        peak_rss_mb: peak_rss_mb(),
        llama_cpp: llama,
        parity,
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
    println!("{:<12} {:>12} {:>12} {:>10}", "engine", "prefill t/s", "decode t/s", "TTFT ms");
    println!("{:<12} {:>12.1} {:>12.1} {:>10.0}", "docmem", report.docmem.prefill_tok_s, report.docmem.decode_tok_s, report.docmem.ttft_ms);
    if let Some(l) = &report.llama_cpp {
        println!("{:<12} {:>12.1} {:>12.1} {:>10.0}", "llama.cpp", l.prefill_tok_s, l.decode_tok_s, l.ttft_ms);
        println!("{:<12} {:>11.2}x {:>11.2}x", "ratio", report.prefill_ratio.unwrap_or(0.0), report.decode_ratio.unwrap_or(0.0));
    } else {
        println!("(llama.cpp not found: run scripts/llamacpp/build.sh or pass --llama-bench)");
    }
    if let Some(m) = report.peak_rss_mb {
        println!("peak memory {m:.0} MB");
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
