//! `docmem generate`, `docmem logits` and `docmem tokenize`: the language model from the
//! terminal, shaped like llama.cpp's tools so outputs can be compared directly.

use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::{log_prob, Backend, Lm, LoadOptions, Prompt, SamplingParams};
use docmem_runtime::tokenizer::Tokenizer;
use serde::Serialize;

use crate::CliError;

/// Where the model runs.
#[derive(Clone, Copy, Debug, ValueEnum, Default)]
pub enum BackendKind {
    /// The CPU (SIMD kernels, all cores).
    #[default]
    Cpu,
    /// The GPU through WebGPU's native APIs (Vulkan, Metal, D3D12); a CPU adapter such as
    /// llvmpipe is taken when no GPU is found, and named on stderr.
    #[cfg(feature = "gpu")]
    Gpu,
}

/// Run `$body` with `$lm` bound to the model on the backend `$args` asks for (the commands
/// are generic over [`Backend`]).
macro_rules! with_lm {
    ($args:expr, |$lm:ident| $body:expr) => {
        match $args.backend {
            BackendKind::Cpu => {
                let $lm = $args.load()?;
                $body
            }
            #[cfg(feature = "gpu")]
            BackendKind::Gpu => {
                let $lm = $args.load_gpu()?;
                $body
            }
        }
    };
}

/// Options every LM command shares.
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// A GGUF model file, or a Hugging Face checkpoint directory (config.json,
    /// model.safetensors, tokenizer.json)
    #[arg(long)]
    pub model: PathBuf,
    /// Block format a checkpoint directory's weights are quantized to on load (GGUF files
    /// keep their own)
    #[arg(long, value_enum, default_value_t = QuantArg::Q8_0)]
    pub quant: QuantArg,
    /// Backend.
    #[arg(long, value_enum, default_value_t)]
    pub backend: BackendKind,
    /// With --backend gpu: multiply in f32 even where the adapter offers shader-f16 (the
    /// K-quants' f16 path).
    #[cfg(feature = "gpu")]
    #[arg(long)]
    pub gpu_f32: bool,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

impl ModelArgs {
    /// The model on the CPU.
    pub fn load(&self) -> Result<Lm, CliError> {
        Ok(Lm::load(&self.model, &LoadOptions { threads: self.threads, context: 0, quant: self.quant.into() })?)
    }

    /// The model on the GPU (loaded, then uploaded); the adapter is named on stderr.
    #[cfg(feature = "gpu")]
    pub fn load_gpu(&self) -> Result<Lm<docmem_runtime::gpu::GpuTransformer>, CliError> {
        use docmem_runtime::gpu::{Gpu, GpuOptions, GpuTransformer};

        let options = GpuOptions { allow_cpu_adapter: true, avoid_f16: self.gpu_f32, ..GpuOptions::default() };
        let gpu = Gpu::new_blocking(&options)?;
        eprintln!("[backend: gpu, {}, {}]", gpu.describe(), if gpu.has_f16() { "f16 path" } else { "f32 path" });
        Ok(self.load()?.map_backend(|cpu| GpuTransformer::from_cpu(gpu, cpu))?)
    }
}

/// `--quant`: the block format for safetensors checkpoints.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum QuantArg {
    /// 8-bit blocks (near-lossless)
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit blocks (half the memory)
    #[value(name = "q4_0")]
    Q4_0,
}

impl From<QuantArg> for docmem_runtime::model::LoadQuant {
    fn from(q: QuantArg) -> Self {
        match q {
            QuantArg::Q8_0 => docmem_runtime::model::LoadQuant::Q8_0,
            QuantArg::Q4_0 => docmem_runtime::model::LoadQuant::Q4_0,
        }
    }
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (or the user message with --chat).
    #[arg(long)]
    prompt: String,
    /// Wrap the prompt as a user turn in the model's chat template.
    #[arg(long)]
    chat: bool,
    /// System message (with --chat).
    #[arg(long)]
    system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling threshold.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep only the k most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Repetition penalty (1: none).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop strings.
    #[arg(long)]
    stop: Vec<String>,
    /// Print one JSON object (text, tokens, timings) instead of streaming text.
    #[arg(long)]
    json: bool,
}

pub fn generate(a: &GenerateArgs) -> Result<(), CliError> {
    with_lm!(a.model, |lm| generate_with(a, &lm))
}

fn generate_with<B: Backend>(a: &GenerateArgs, lm: &Lm<B>) -> Result<(), CliError> {
    let params = SamplingParams {
        temperature: a.temperature,
        top_p: a.top_p,
        top_k: a.top_k,
        repetition_penalty: a.repetition_penalty,
        seed: a.seed,
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        ..Default::default()
    };
    let mut messages = Vec::new();
    if let Some(s) = &a.system {
        messages.push(ChatMessage::new("system", s));
    }
    messages.push(ChatMessage::new("user", &a.prompt));
    let prompt = if a.chat { Prompt::Chat(&messages) } else { Prompt::Text(&a.prompt) };
    let mut out = std::io::stdout().lock();
    let mut write_err = None;
    let g = docmem_runtime::block_on(lm.generate(prompt, &params, |piece| {
        if a.json {
            return ControlFlow::Continue(());
        }
        match out.write_all(piece.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                write_err = Some(e);
                ControlFlow::Break(())
            }
        }
    }))?;
    if let Some(e) = write_err {
        return Err(CliError::Output(e));
    }
    if a.json {
        serde_json::to_writer_pretty(&mut out, &g).map_err(std::io::Error::from)?;
    }
    writeln!(out)?;
    let tps = g.tokens.len() as f64 / g.decode_seconds.max(1e-9);
    eprintln!(
        "[{} prompt tokens in {:.2} s, {} generated at {:.1} tok/s, {:?}]",
        g.prompt_tokens,
        g.prefill_seconds,
        g.tokens.len(),
        tps,
        g.finish
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct LogitsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (BOS is added as llama.cpp adds it).
    #[arg(long)]
    prompt: String,
    /// How many of the most likely next tokens to print.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct TopToken {
    id: u32,
    text: String,
    logprob: f32,
}

pub fn logits(a: &LogitsArgs) -> Result<(), CliError> {
    with_lm!(a.model, |lm| logits_with(a, &lm))
}

fn logits_with<B: Backend>(a: &LogitsArgs, lm: &Lm<B>) -> Result<(), CliError> {
    let (ids, logits) = docmem_runtime::block_on(lm.next_token_logits(Prompt::Text(&a.prompt)))?;
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let k = a.top.min(order.len()).max(1);
    order.select_nth_unstable_by(k - 1, |&x, &y| logits[y as usize].total_cmp(&logits[x as usize]).then(x.cmp(&y)));
    order.truncate(k);
    order.sort_by(|&x, &y| logits[y as usize].total_cmp(&logits[x as usize]).then(x.cmp(&y)));
    let top: Vec<TopToken> =
        order.iter().map(|&id| TopToken { id, text: token_text(&lm.tokenizer, id), logprob: log_prob(&logits, id) }).collect();
    let mut out = std::io::stdout().lock();
    if a.json {
        let v = serde_json::json!({ "prompt_tokens": ids, "top": top });
        serde_json::to_writer_pretty(&mut out, &v).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{:>8}  {:>9}  token", "id", "logprob")?;
        for t in &top {
            writeln!(out, "{:>8}  {:>9.4}  {:?}", t.id, t.logprob, t.text)?;
        }
    }
    Ok(())
}

fn token_text(tok: &Tokenizer, id: u32) -> String {
    tok.token_bytes(id).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// A GGUF model file (only its tokenizer is read).
    #[arg(long)]
    model: PathBuf,
    /// Print a JSON array (otherwise ids separated by spaces).
    #[arg(long)]
    json: bool,
}

/// Reads only the header and builds the tokenizer: no weights are loaded.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, CliError> {
    use docmem_runtime::gguf::GgufFile;
    use docmem_runtime::source::FileSource;
    let src = FileSource::open(path)?;
    let g = GgufFile::read(&src)?;
    Ok(Tokenizer::from_gguf(&g)?)
}

pub fn tokenize(a: &TokenizeArgs) -> Result<(), CliError> {
    let tok = load_tokenizer(&a.model)?;
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| CliError::BadArgument { message: format!("stdin is not UTF-8 text: {e}") })?;
    let ids = tok.encode(&text)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer(&mut out, &ids).map_err(std::io::Error::from)?;
    } else {
        let s: Vec<String> = ids.iter().map(u32::to_string).collect();
        write!(out, "{}", s.join(" "))?;
    }
    writeln!(out)?;
    Ok(())
}
