//! A language model ready to use: tokenizer, chat template and a backend that runs the
//! decoder. This is the API the reader, scorer and answerer call.
//!
//! - [`Lm::generate`] streams text for a prompt or chat, can be cancelled from the
//!   callback, and is deterministic for a seed.
//! - [`Lm::prefill`] runs a prompt prefix once; [`Lm::generate_after`] forks its K/V cache
//!   for one continuation, [`Lm::generate_paths`] for several decoded together as one
//!   batch per step (MoM samples N memories of one document this way).
//! - An `Lm` keeps nothing between calls; an [`LmContext`] over it keeps the last answer
//!   prompt and background work that gave way (the model, its context and the sampler
//!   are apart, as in llama.cpp).
//! - [`Lm::score`] gives per-token log-probabilities of continuations; pairs that share a
//!   context reuse its cache. [`Lm::next_token_logprobs`] scores candidate next tokens.
//! - [`Backend`] is the seam for the CPU decoder here, the WebGPU one and a remote one.

mod context;
mod drafts;
pub mod parity;
mod paths;
mod prompt_cache;
mod reader;
pub(crate) mod sampler;
mod suspended;
mod text;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;
use std::path::Path;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::Scorer;
use serde::Serialize;

pub use context::LmContext;
pub use drafts::{DraftSettings, PromptLookup};
pub use reader::LmReader;
pub use sampler::{argmax, log_prob, DeviceDraw, Drawn, Sampler, SamplingParams};
pub use suspended::WorkDone;
pub use text::LmText;

use crate::chat::{ChatMessage, ChatTemplate};
use crate::cpu::transformer::{CpuTransformer, KvCache};
use crate::gguf::{GgufFile, MetaValue};
use crate::model::hf::{self, HfCheckpoint, LoadQuant};
use crate::model::{ModelConfig, ModelIdentity, Weights};
use crate::source::{ByteSource, FileSource};
use crate::tokenizer::Tokenizer;
use crate::Error;

/// Seconds since an arbitrary origin: `Instant` natively, the JS clock on wasm (where
/// `Instant` panics).
pub(crate) fn now_seconds() -> f64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
    }
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now() / 1000.0
    }
}

/// Which positions' logits a forward pass computes (every backend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token of the batch (generation).
    Last,
    /// Every token of the batch (scoring).
    All,
}

/// Runs a decoder: the CPU one, the WebGPU one, and later a remote one.
///
/// The forward passes are async because a browser reads GPU buffers back only through its
/// event loop (see `docmem_core::local_future`); the CPU backend's futures are ready when
/// first polled, and native callers [`block_on`](crate::block_on) them. Not `Send`: a
/// WebGPU future holds JavaScript objects.
#[allow(async_fn_in_trait)]
pub trait Backend {
    /// Per-sequence state (the K/V cache); cloning it forks the sequence.
    type Cache: Clone;
    /// The model's hyper-parameters.
    fn config(&self) -> &ModelConfig;
    /// An empty sequence.
    fn new_cache(&self) -> Self::Cache;
    /// Tokens in a sequence.
    fn cache_len(&self, cache: &Self::Cache) -> usize;
    /// Drop a sequence's tokens after the first `len`.
    fn truncate(&self, cache: &mut Self::Cache, len: usize);
    /// Append `tokens` to the sequence and return logits for the last one or for all.
    async fn forward(&self, cache: &mut Self::Cache, tokens: &[u32], which: Logits) -> Result<Vec<f32>, Error>;
    /// Whether [`forward_argmax`](Self::forward_argmax) picks the token where the logits
    /// are, without handing them back (the GPU reads back 4 bytes instead of a vocabulary
    /// of floats): greedy decoding then calls it.
    fn picks_on_device(&self) -> bool {
        false
    }
    /// Append `tokens` to the sequence and return the most likely next token (the first
    /// of equal logits, as the sampler's greedy pick). This default reads the logits.
    async fn forward_argmax(&self, cache: &mut Self::Cache, tokens: &[u32]) -> Result<u32, Error> {
        Ok(argmax(&self.forward(cache, tokens, Logits::Last).await?))
    }
    /// Whether [`forward_draw`](Self::forward_draw) draws sampled tokens where the logits
    /// are (the GPU reads back 4 bytes instead of a vocabulary of floats): sampled
    /// generation then calls it.
    fn draws_on_device(&self) -> bool {
        false
    }
    /// Append `tokens` to the sequence and draw the next token as `draw` says
    /// ([`Sampler::device_draw`]). A backend that cannot draw it where the logits are (this
    /// default, or settings beyond what its sampler does) hands the logits back and the
    /// caller finishes the draw on the CPU with the same uniform number
    /// ([`Sampler::finish_draw`]).
    async fn forward_draw(&self, cache: &mut Self::Cache, tokens: &[u32], draw: &DeviceDraw) -> Result<Drawn, Error> {
        let _ = draw;
        Ok(Drawn::Logits { logits: self.forward(cache, tokens, Logits::Last).await?, penalized: false })
    }
    /// [`forward`](Self::forward) for the last token's logits that also hands back the
    /// residual stream of the last token after `layer` (what a probe of the hidden state
    /// reads), where the backend can; this default runs the forward alone (`None`).
    async fn forward_state(&self, cache: &mut Self::Cache, tokens: &[u32], layer: usize) -> Result<(Vec<f32>, Option<Vec<f32>>), Error> {
        let _ = layer;
        Ok((self.forward(cache, tokens, Logits::Last).await?, None))
    }
    /// One step of several independent sequences: each `(cache, tokens)` appends its
    /// tokens to its own cache; returns logits for every row, sequence after sequence.
    /// Multi-path decoding calls this with one token per path. A backend should run the
    /// rows as one batch (weights read once per step: decoding is memory-bound) and must
    /// give each sequence the logits it would get alone; this default runs them one after
    /// another.
    async fn forward_batch(&self, seqs: &mut [(&mut Self::Cache, &[u32])]) -> Result<Vec<f32>, Error> {
        let mut out = Vec::new();
        for (cache, tokens) in seqs.iter_mut() {
            out.extend(self.forward(cache, tokens, Logits::All).await?);
        }
        Ok(out)
    }
}

/// Every id is one of the vocabulary's (the CPU backend indexes its embeddings with them).
fn check_ids(cfg: &ModelConfig, tokens: &[u32]) -> Result<(), Error> {
    match tokens.iter().find(|&&t| t as usize >= cfg.vocab) {
        Some(&bad) => Err(Error::UnknownTokenId { id: bad }),
        None => Ok(()),
    }
}

impl Backend for CpuTransformer {
    type Cache = KvCache;
    fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    fn new_cache(&self) -> KvCache {
        KvCache::new(&self.cfg)
    }
    fn cache_len(&self, cache: &KvCache) -> usize {
        cache.len()
    }
    fn truncate(&self, cache: &mut KvCache, len: usize) {
        cache.truncate(len);
    }
    async fn forward(&self, cache: &mut KvCache, tokens: &[u32], which: Logits) -> Result<Vec<f32>, Error> {
        check_ids(&self.cfg, tokens)?;
        Ok(CpuTransformer::forward(self, cache, tokens, which))
    }
    async fn forward_state(&self, cache: &mut KvCache, tokens: &[u32], layer: usize) -> Result<(Vec<f32>, Option<Vec<f32>>), Error> {
        check_ids(&self.cfg, tokens)?;
        let (logits, mut states) = self.forward_states(cache, tokens, &[layer]);
        Ok((logits, states.pop().filter(|s| !s.is_empty())))
    }
    async fn forward_batch(&self, seqs: &mut [(&mut KvCache, &[u32])]) -> Result<Vec<f32>, Error> {
        for (_, tokens) in seqs.iter() {
            check_ids(&self.cfg, tokens)?;
        }
        Ok(CpuTransformer::forward_batch(self, seqs))
    }
}

/// What to generate from.
#[derive(Clone, Copy, Debug)]
pub enum Prompt<'a> {
    /// Raw text (BOS added as the model wants).
    Text(&'a str),
    /// Chat turns, rendered with the model's template, ending where the assistant replies.
    Chat(&'a [ChatMessage]),
}

/// Where the earliest stop string in `text` begins, looking only at matches that end
/// in the bytes appended since `before` (earlier ones were found on earlier steps). Every
/// index is on a character boundary: a search window that would begin inside a
/// multi-byte character (Chinese output, ASCII stop string) starts at that character.
fn find_stop(text: &str, before: usize, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let mut from = before.saturating_sub(s.len()).min(text.len());
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            text[from..].find(s.as_str()).map(|i| i + from)
        })
        .min()
}

/// How many bytes at the end of `text` to hold back from streaming: the longest tail that
/// is a proper prefix of some stop string, so it may yet become one. Streaming it and then
/// cutting it from the result would make the streamed text and the returned text differ
/// (a stop string `"ed"` arriving as `"e"`, then `"d"`). A tail starts on a character
/// boundary, so what is streamed is always whole characters.
fn stop_prefix_held(text: &str, stops: &[String]) -> usize {
    stops
        .iter()
        .filter_map(|s| {
            (1..s.len().min(text.len() + 1)).rev().find(|&n| {
                let from = text.len() - n;
                text.is_char_boundary(from) && s.as_bytes().starts_with(&text.as_bytes()[from..])
            })
        })
        .max()
        .unwrap_or(0)
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// An end-of-sequence or end-of-turn token.
    EndOfText,
    /// A stop string.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The callback asked to stop.
    Cancelled,
    /// The context window is full.
    ContextFull,
    /// Nothing was written: the answerer's probe read the prompt as one the passages do
    /// not answer ([`crate::answerer::ReplyOptions::probe_decides`]).
    Withheld,
    /// The reply did not open as its format requires ([`SamplingParams::opening`]).
    OffFormat,
}

/// A finished generation.
#[derive(Clone, Debug, Serialize)]
pub struct Generation {
    /// The text generated (stop string excluded): always what `on_text` was given. While
    /// the text ends in what may become a stop string, that tail is held back from
    /// `on_text`; it goes out once it cannot, or at the end, and is dropped when the caller
    /// cancels (so a cancel is noticed at the next piece streamed).
    pub text: String,
    /// Token ids generated (those of a stop string, or of a tail dropped by a cancel,
    /// included).
    pub tokens: Vec<u32>,
    /// Tokens in the prompt (prefix included).
    pub prompt_tokens: usize,
    /// Why it stopped.
    pub finish: Finish,
    /// Seconds spent on the prompt.
    pub prefill_seconds: f64,
    /// Seconds spent generating.
    pub decode_seconds: f64,
    /// Tokens drafted from the prompt and verified (prompt-lookup decoding).
    #[serde(skip_serializing_if = "is_zero")]
    pub drafted: usize,
    /// Of those, the ones kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub accepted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Which hidden state a prefill hands back ([`PrefillOptions::state_at`]): the residual stream after
/// `layer` at the last of the prompt's first `after_tokens` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateAt {
    /// The layer (0-based) whose output is read.
    pub layer: usize,
    /// How many of the prompt's tokens come up to and including the token read (the
    /// prompt's length reads its last token).
    pub after_tokens: usize,
}

/// How [`Lm::prefill`] (or [`LmContext::prefill`]) runs a prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefillOptions {
    /// Also read this token's residual stream after this layer.
    pub state_at: Option<StateAt>,
}

/// A prompt run by [`Lm::prefill`] or [`LmContext::prefill`].
#[derive(Clone, Debug)]
pub struct Prefilled<C> {
    /// The prompt's cache and last logits, to continue.
    pub prefix: Prefix<C>,
    /// Tokens not run again: the start shared with a context's kept prompt (0 for
    /// [`Lm::prefill`]).
    pub reused: usize,
    /// The state asked for by `state_at`, where the backend can read it back.
    pub state: Option<Vec<f32>>,
}

/// A prompt prefix run once, to be continued many times.
#[derive(Clone, Debug)]
pub struct Prefix<C> {
    cache: C,
    tokens: Vec<u32>,
    last_logits: Vec<f32>,
}

impl<C> Prefix<C> {
    /// The prefix's tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Its K/V cache (clone it to continue the prefix by hand).
    pub fn cache(&self) -> &C {
        &self.cache
    }

    /// Logits after its last token.
    pub fn last_logits(&self) -> &[f32] {
        &self.last_logits
    }
}

/// How to load a model.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Context window (0: the model's own, capped at 8192).
    pub context: usize,
    /// The block format safetensors checkpoints are quantized to on load (GGUF files keep
    /// their own).
    pub quant: LoadQuant,
}

/// A language model: tokenizer, chat template, backend. It keeps nothing between calls
/// (an [`LmContext`] does).
pub struct Lm<B: Backend = CpuTransformer> {
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    chat: ChatTemplate,
    /// The decoder.
    pub backend: B,
    context_window: usize,
    /// Which trained weights it runs (GGUF files; `None` for a Hugging Face checkpoint):
    /// what a probe fitted on one model is matched by.
    identity: Option<ModelIdentity>,
}

impl<B: Backend> fmt::Debug for Lm<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lm").field("config", self.backend.config()).field("context_window", &self.context_window).finish()
    }
}

/// A Hugging Face checkpoint's small files, as bytes: `config.json`, `tokenizer.json` and
/// `tokenizer_config.json` (the chat template, special tokens) where the model has one.
#[derive(Clone, Copy, Debug)]
pub struct HfParts<'a> {
    /// `config.json`.
    pub config: &'a [u8],
    /// `tokenizer.json`.
    pub tokenizer: &'a [u8],
    /// `tokenizer_config.json`, if there is one.
    pub tokenizer_config: Option<&'a [u8]>,
}

impl HfParts<'_> {
    /// `tokenizer_config.json` parsed (null when there is none).
    fn tokenizer_config(&self) -> Result<serde_json::Value, Error> {
        match self.tokenizer_config {
            Some(bytes) => {
                Ok(serde_json::from_slice(bytes).map_err(|e| Error::ModelConfig { reason: format!("tokenizer_config.json: {e}") })?)
            }
            None => Ok(serde_json::Value::Null),
        }
    }
}

fn missing_file(name: &str) -> Error {
    Error::ModelConfig { reason: format!("{name} is missing") }
}

impl Lm<CpuTransformer> {
    /// Load a model for the CPU backend: a GGUF file, or a Hugging Face checkpoint
    /// directory (`config.json`, safetensors, `tokenizer.json`).
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Self, Error> {
        if hf::is_checkpoint(path) {
            return Self::load_hf(path, opts);
        }
        let src = FileSource::open(path)?;
        Self::load_from(&src, opts)
    }

    /// Load a Hugging Face checkpoint directory, quantizing its matrices to `opts.quant`.
    pub fn load_hf(dir: &Path, opts: &LoadOptions) -> Result<Self, Error> {
        let ck = HfCheckpoint::open(dir)?;
        let tok_config = match std::fs::read(dir.join("tokenizer_config.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::ModelConfig { reason: format!("{}: {e}", dir.join("tokenizer_config.json").display()) })?,
            Err(_) => serde_json::Value::Null,
        };
        let json = std::fs::read(dir.join("tokenizer.json"))
            .map_err(|e| Error::Io { what: dir.join("tokenizer.json").display().to_string(), source: e })?;
        Self::from_hf_parts(ck, &json, &tok_config, opts)
    }

    /// Load a Hugging Face checkpoint from files held in memory by name: `config.json`,
    /// `model.safetensors`, `tokenizer.json`, and `tokenizer_config.json` where the model
    /// has one.
    pub fn load_hf_files(mut files: BTreeMap<String, Vec<u8>>, opts: &LoadOptions) -> Result<Self, Error> {
        let weights = files.remove("model.safetensors").ok_or_else(|| missing_file("model.safetensors"))?;
        let parts = HfParts {
            config: files.get("config.json").ok_or_else(|| missing_file("config.json"))?,
            tokenizer: files.get("tokenizer.json").ok_or_else(|| missing_file("tokenizer.json"))?,
            tokenizer_config: files.get("tokenizer_config.json").map(Vec::as_slice),
        };
        Self::load_hf_sources(&parts, vec![Box::new(crate::source::MemorySource::new(weights))], opts)
    }

    /// Load a Hugging Face checkpoint whose safetensors files (`model.safetensors`, or
    /// every shard) are read through `shards` by offset, a tensor at a time, as a page
    /// reads a folder the user dropped: only the quantized model is held whole.
    pub fn load_hf_sources(parts: &HfParts<'_>, shards: Vec<Box<dyn ByteSource>>, opts: &LoadOptions) -> Result<Self, Error> {
        let ck = HfCheckpoint::from_sources(parts.config, shards)?;
        Self::from_hf_parts(ck, parts.tokenizer, &parts.tokenizer_config()?, opts)
    }

    /// The model of an opened checkpoint, its `tokenizer.json` and `tokenizer_config.json`.
    fn from_hf_parts(ck: HfCheckpoint, json: &[u8], tok_config: &serde_json::Value, opts: &LoadOptions) -> Result<Self, Error> {
        let cfg = ModelConfig::from_hf(&ck.config)?;
        let tokenizer = Tokenizer::from_hf(json, tok_config)?;
        // `chat_template` is a string, or a list of named templates ("default" first).
        let template = tok_config.get("chat_template").and_then(|t| {
            t.as_str().map(str::to_owned).or_else(|| {
                let list = t.as_array()?;
                let named = |n: &str| list.iter().find(|e| e.get("name").and_then(|v| v.as_str()) == Some(n));
                named("default").or(list.first())?.get("template")?.as_str().map(str::to_owned)
            })
        });
        let text = |id: Option<u32>| id.and_then(|i| tokenizer.token_str(i)).unwrap_or("").to_owned();
        let chat = ChatTemplate::new(template.as_deref(), &text(tokenizer.bos()), &text(tokenizer.eos()))?;
        let weights = Weights::from_hf(&ck, &cfg, opts.quant)?;
        let context = if opts.context == 0 { cfg.context_length.min(8192) } else { opts.context };
        Ok(Lm::with_backend(tokenizer, chat, CpuTransformer::new(cfg, weights, opts.threads), context))
    }

    /// The residual stream of `prompt`'s last token after each of `layers` (0-based), read
    /// in one fresh pass over the prompt: the hidden state a linear probe of the model
    /// reads (the answerability probe is fitted on these). A layer the model does not
    /// have gets an empty row.
    pub fn prompt_states(&self, prompt: Prompt<'_>, layers: &[usize]) -> Result<Vec<Vec<f32>>, Error> {
        let tokens = self.prompt_tokens(prompt)?;
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.check_fits(tokens.len())?;
        let mut cache = self.backend.new_cache();
        Ok(self.backend.forward_states(&mut cache, &tokens, layers).1)
    }

    /// Load a GGUF model from any byte source (tensors are read one at a time).
    pub fn load_from(src: &dyn ByteSource, opts: &LoadOptions) -> Result<Self, Error> {
        let (g, cfg, tokenizer, chat, context) = gguf_parts(src, opts)?;
        let identity = ModelIdentity::of_gguf(&g, src)?;
        let weights = Weights::load(&g, src, &cfg)?;
        Ok(Lm::with_backend(tokenizer, chat, CpuTransformer::new(cfg, weights, opts.threads), context).with_identity(identity))
    }
}

#[cfg(feature = "gpu")]
impl Lm<crate::gpu::GpuTransformer> {
    /// Load a GGUF model from any byte source straight onto `gpu`, one block's tensors at
    /// a time ([`crate::gpu::GpuTransformer::load`]): the whole file is never in memory.
    pub fn load_onto_gpu(src: &dyn ByteSource, opts: &LoadOptions, gpu: crate::gpu::Gpu) -> Result<Self, Error> {
        let (g, cfg, tokenizer, chat, context) = gguf_parts(src, opts)?;
        let identity = ModelIdentity::of_gguf(&g, src)?;
        let backend = crate::gpu::GpuTransformer::load(gpu, &g, src, cfg)?;
        Ok(Lm::with_backend(tokenizer, chat, backend, context).with_identity(identity))
    }
}

/// A GGUF file's header, hyper-parameters, tokenizer, chat template and the context
/// window `opts` asks for: everything but the tensors.
fn gguf_parts(src: &dyn ByteSource, opts: &LoadOptions) -> Result<(GgufFile, ModelConfig, Tokenizer, ChatTemplate, usize), Error> {
    let g = GgufFile::read(src)?;
    let cfg = ModelConfig::from_gguf(&g)?;
    let tokenizer = Tokenizer::from_gguf(&g)?;
    let chat = chat_template(&g, &tokenizer)?;
    let context = if opts.context == 0 { cfg.context_length.min(8192) } else { opts.context };
    Ok((g, cfg.for_context(context), tokenizer, chat, context))
}

fn chat_template(g: &GgufFile, tok: &Tokenizer) -> Result<ChatTemplate, Error> {
    let text = |id: Option<u32>| id.and_then(|i| tok.token_str(i)).unwrap_or("").to_owned();
    let source = g.get("tokenizer.chat_template").and_then(MetaValue::as_str);
    ChatTemplate::new(source, &text(tok.bos()), &text(tok.eos()))
}

/// Bytes of streamed tokens, released as text once they form whole UTF-8 characters.
#[derive(Default)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_some() => {
                // Invalid bytes (not merely incomplete): pass them through lossily.
                let s = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                return s;
            }
            Err(e) => e.valid_up_to(),
        };
        let s = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        s
    }
}

impl<B: Backend> Lm<B> {
    /// Wrap a backend with its tokenizer and template.
    pub fn with_backend(tokenizer: Tokenizer, chat: ChatTemplate, backend: B, context: usize) -> Self {
        Lm { tokenizer, chat, backend, context_window: context, identity: None }
    }

    /// The same model, known to hold the weights `identity` names.
    pub fn with_identity(mut self, identity: ModelIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Which trained weights it runs, where known (GGUF files).
    pub fn identity(&self) -> Option<&ModelIdentity> {
        self.identity.as_ref()
    }

    /// The same model on another backend built from this one (the GPU backend is built
    /// from the loaded CPU weights).
    pub fn map_backend<C: Backend, E>(self, build: impl FnOnce(B) -> Result<C, E>) -> Result<Lm<C>, E> {
        Ok(Lm {
            tokenizer: self.tokenizer,
            chat: self.chat,
            backend: build(self.backend)?,
            context_window: self.context_window,
            identity: self.identity,
        })
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        self.backend.config()
    }

    /// The context window in tokens: the longest sequence it runs.
    pub fn context_window(&self) -> usize {
        self.context_window
    }

    /// The text of a chat prompt in this model's template.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String, Error> {
        self.chat.render(messages, true)
    }

    /// Token ids of a prompt (BOS as the model wants it).
    pub fn prompt_tokens(&self, prompt: Prompt<'_>) -> Result<Vec<u32>, Error> {
        let text = match prompt {
            Prompt::Text(t) => t.to_owned(),
            Prompt::Chat(m) => self.render_chat(m)?,
        };
        self.tokenizer.encode_prompt(&text)
    }

    fn check_fits(&self, needed: usize) -> Result<(), Error> {
        if needed > self.context_window {
            return Err(Error::ContextFull { needed, limit: self.context_window });
        }
        Ok(())
    }

    /// Run prompt `tokens` once (a prompt's tokens: [`Lm::prompt_tokens`]) from nothing
    /// ([`LmContext::prefill`] reuses the prompt a context keeps), and with
    /// `options.state_at`, also read the residual stream of one of the prompt's tokens after
    /// one layer (`None` where the backend cannot read it back, or `state_at` points
    /// outside the prompt): what the answerability probe reads. A state before the
    /// prompt's end is read by running the prompt in two pieces split after that token: no
    /// extra pass over the prompt, one more small batch for the rest.
    pub async fn prefill(&self, tokens: Vec<u32>, options: PrefillOptions) -> Result<Prefilled<B::Cache>, Error> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.check_fits(tokens.len())?;
        self.prefill_from(self.backend.new_cache(), 0, tokens, options).await
    }

    /// How many of a prompt's first tokens a kept cache may stand for: the last token
    /// always runs (a kept prompt holds only its own last logits), and so does the one
    /// whose state is read.
    fn must_run(&self, tokens: &[u32], options: PrefillOptions) -> usize {
        let state_at = options.state_at.filter(|s| (1..=tokens.len()).contains(&s.after_tokens));
        state_at.map_or(tokens.len(), |s| s.after_tokens) - 1
    }

    /// [`Lm::prefill`] of non-empty `tokens` that fit, from `cache`, which holds their
    /// first `reused` (at most [`Lm::must_run`] of them).
    async fn prefill_from(
        &self,
        mut cache: B::Cache,
        reused: usize,
        tokens: Vec<u32>,
        options: PrefillOptions,
    ) -> Result<Prefilled<B::Cache>, Error> {
        let state_at = options.state_at.filter(|s| (1..=tokens.len()).contains(&s.after_tokens));
        let (last_logits, state) = match state_at {
            Some(StateAt { layer, after_tokens }) => {
                let (logits, state) = self.backend.forward_state(&mut cache, &tokens[reused..after_tokens], layer).await?;
                let logits = if after_tokens < tokens.len() {
                    self.backend.forward(&mut cache, &tokens[after_tokens..], Logits::Last).await?
                } else {
                    logits
                };
                (logits, state)
            }
            None => (self.backend.forward(&mut cache, &tokens[reused..], Logits::Last).await?, None),
        };
        Ok(Prefilled { prefix: Prefix { cache, tokens, last_logits }, reused, state })
    }

    /// Append `tokens` to `cache` `chunk` at a time, asking `stop` before each: how many
    /// ran, and the logits after the last one (`None` when none ran).
    async fn forward_pieces(
        &self,
        cache: &mut B::Cache,
        tokens: &[u32],
        chunk: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<(usize, Option<Vec<f32>>), Error> {
        let (mut ran, mut last_logits) = (0, None);
        for part in tokens.chunks(chunk.max(1)) {
            if stop() {
                break;
            }
            last_logits = Some(self.backend.forward(cache, part, Logits::Last).await?);
            ran += part.len();
        }
        Ok((ran, last_logits))
    }

    /// Generate from a prompt. `on_text` receives each new piece of text; returning
    /// `ControlFlow::Break` cancels.
    pub async fn generate(
        &self,
        prompt: Prompt<'_>,
        params: &SamplingParams,
        on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, Error> {
        let start = now_seconds();
        let prefix = self.prefill(self.prompt_tokens(prompt)?, PrefillOptions::default()).await?.prefix;
        let prefill_seconds = now_seconds() - start;
        let mut g = self.generate_after(&prefix, "", params, on_text).await?;
        g.prefill_seconds += prefill_seconds;
        Ok(g)
    }

    /// Continue a prefilled prefix with `suffix` (text, no BOS) and generate; the prefix
    /// is left as it was, so it can be continued again.
    pub async fn generate_after(
        &self,
        prefix: &Prefix<B::Cache>,
        suffix: &str,
        params: &SamplingParams,
        on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, Error> {
        let suffix_ids = self.tokenizer.encode(suffix)?;
        self.generate_after_tokens(prefix, &suffix_ids, params, on_text).await
    }

    /// [`Lm::generate_after`] with the suffix as token ids (for a caller that cut one
    /// tokenized prompt in two, so no token straddles the cut).
    pub async fn generate_after_tokens(
        &self,
        prefix: &Prefix<B::Cache>,
        suffix_ids: &[u32],
        params: &SamplingParams,
        mut on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation, Error> {
        let start = now_seconds();
        let mut cache = prefix.cache.clone();
        let mut history = prefix.tokens.clone();
        let mut logits = if suffix_ids.is_empty() {
            prefix.last_logits.clone()
        } else {
            self.check_fits(history.len() + suffix_ids.len())?;
            history.extend(suffix_ids);
            self.backend.forward(&mut cache, suffix_ids, Logits::Last).await?
        };
        let prompt_tokens = history.len();
        let prefill_seconds = now_seconds() - start;
        let start = now_seconds();
        let mut sampler = Sampler::new(params.clone());
        let mut stream = Utf8Stream::default();
        let (mut text, mut tokens) = (String::new(), Vec::new());
        // Bytes of `text` given to `on_text`; the rest is held (see `stop_prefix_held`).
        let mut streamed = 0;
        let mut finish = Finish::Length;
        // Greedy on a backend that picks on the device, or sampling on one that draws
        // there: the token comes back, not logits.
        let pick_on_device = params.is_plain_greedy() && self.backend.picks_on_device();
        let draw_on_device = !pick_on_device && self.backend.draws_on_device();
        let mut picked: Option<u32> = None;
        while tokens.len() < params.max_tokens {
            let next = match picked.take() {
                Some(token) => token,
                None => sampler.sample(&mut logits, &history),
            };
            if self.tokenizer.stop_ids().contains(&next) {
                finish = Finish::EndOfText;
                break;
            }
            tokens.push(next);
            history.push(next);
            let piece = stream.push(&self.tokenizer.token_bytes(next)?);
            let before = text.len();
            text.push_str(&piece);
            if let Some(cut) = find_stop(&text, before, &params.stop) {
                // What precedes the stop string and was held back goes out; the held
                // text guarantees the stop string never began in text already streamed.
                if cut > streamed {
                    let _ = on_text(&text[streamed..cut]);
                }
                text.truncate(cut);
                finish = Finish::Stop;
                break;
            }
            // Stream all but a tail that could still become a stop string.
            let ready = text.len() - stop_prefix_held(&text, &params.stop);
            if ready > streamed {
                let flow = on_text(&text[streamed..ready]);
                streamed = ready;
                if flow.is_break() {
                    // The caller stopped reading: the result is what it was given.
                    text.truncate(streamed);
                    finish = Finish::Cancelled;
                    break;
                }
            }
            if tokens.len() >= params.max_tokens {
                break;
            }
            if history.len() >= self.context_window {
                finish = Finish::ContextFull;
                break;
            }
            if params.opening.is_some_and(|o| o.missed(&text, tokens.len())) {
                finish = Finish::OffFormat;
                break;
            }
            if pick_on_device {
                picked = Some(self.backend.forward_argmax(&mut cache, &[next]).await?);
            } else if draw_on_device {
                let draw = sampler.device_draw(&history);
                picked = Some(match self.backend.forward_draw(&mut cache, &[next], &draw).await? {
                    Drawn::Token(token) => token,
                    Drawn::Logits { mut logits, penalized } => sampler.finish_draw(&mut logits, &draw, penalized),
                });
            } else {
                logits = self.backend.forward(&mut cache, &[next], Logits::Last).await?;
            }
        }
        if matches!(finish, Finish::Length | Finish::EndOfText | Finish::ContextFull | Finish::OffFormat) && text.len() > streamed {
            // No stop string came: the held tail was text after all.
            let _ = on_text(&text[streamed..]);
        }
        let decode_seconds = now_seconds() - start;
        Ok(Generation { text, tokens, prompt_tokens, finish, prefill_seconds, decode_seconds, drafted: 0, accepted: 0 })
    }

    /// The `n` most likely tokens after `tokens`, one after another, picked where the
    /// backend picks ([`Backend::forward_argmax`]): a check of the backend's own picks, not
    /// a generation, so end-of-text tokens are kept and nothing stops early but the
    /// context window (the cache never holds more than it: fewer tokens then).
    pub async fn greedy(&self, tokens: &[u32], n: usize) -> Result<Vec<u32>, Error> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        self.check_fits(tokens.len())?;
        // The last token picked is never fed back.
        let n = n.min(self.context_window + 1 - tokens.len());
        let mut cache = self.backend.new_cache();
        let mut out = Vec::with_capacity(n);
        let mut feed = tokens.to_vec();
        while out.len() < n {
            let next = self.backend.forward_argmax(&mut cache, &feed).await?;
            out.push(next);
            feed = vec![next];
        }
        Ok(out)
    }

    /// Log-probabilities at the end of `prompt` for all tokens.
    pub async fn next_token_logits(&self, prompt: Prompt<'_>) -> Result<(Vec<u32>, Vec<f32>), Error> {
        let prefix = self.prefill(self.prompt_tokens(prompt)?, PrefillOptions::default()).await?.prefix;
        Ok((prefix.tokens, prefix.last_logits))
    }

    /// For each `(context, continuation)`, the log-probability of each continuation token.
    /// Consecutive pairs with the same context reuse its cache.
    pub async fn score(&self, pairs: &[(&str, &str)]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(pairs.len());
        let mut last: Option<(&str, Prefix<B::Cache>)> = None;
        for &(context, continuation) in pairs {
            let cont = self.tokenizer.encode(continuation)?;
            if cont.is_empty() {
                out.push(Vec::new());
                continue;
            }
            let prefix = match &last {
                Some((c, p)) if *c == context => p,
                _ => {
                    let mut ids = self.tokenizer.encode_prompt(context)?;
                    if ids.is_empty() {
                        // An empty context: condition on BOS (or the first token alone).
                        ids = self.tokenizer.bos().into_iter().collect();
                    }
                    let p = if ids.is_empty() { None } else { Some(self.prefill(ids, PrefillOptions::default()).await?.prefix) };
                    match p {
                        Some(p) => &last.insert((context, p)).1,
                        None => {
                            out.push(self.score_without_context(&cont).await?);
                            continue;
                        }
                    }
                }
            };
            out.push(self.score_tokens_after(prefix, &cont).await?);
        }
        Ok(out)
    }

    /// The log-probability of each token of `continuation` (text, no BOS) after a
    /// prefilled prefix, which is left as it was: a caller that has just generated from a
    /// prompt scores a reference answer without running the prompt again.
    pub async fn score_after(&self, prefix: &Prefix<B::Cache>, continuation: &str) -> Result<Vec<f32>, Error> {
        let cont = self.tokenizer.encode(continuation)?;
        if cont.is_empty() {
            return Ok(Vec::new());
        }
        self.score_tokens_after(prefix, &cont).await
    }

    /// The logits after `prefix` continued with `tokens` (non-empty); the prefix is left as
    /// it was.
    pub async fn logits_after(&self, prefix: &Prefix<B::Cache>, tokens: &[u32]) -> Result<Vec<f32>, Error> {
        if tokens.is_empty() {
            return Ok(prefix.last_logits.clone());
        }
        self.check_fits(prefix.tokens.len() + tokens.len())?;
        let mut cache = prefix.cache.clone();
        self.backend.forward(&mut cache, tokens, Logits::Last).await
    }

    /// The one token `text` is written with, if it is one token.
    pub fn single_token(&self, text: &str) -> Result<Option<u32>, Error> {
        let ids = self.tokenizer.encode(text)?;
        Ok(match ids[..] {
            [id] => Some(id),
            _ => None,
        })
    }

    /// [`Lm::score_after`] for a non-empty continuation as token ids.
    async fn score_tokens_after(&self, prefix: &Prefix<B::Cache>, cont: &[u32]) -> Result<Vec<f32>, Error> {
        self.check_fits(prefix.tokens.len() + cont.len())?;
        let mut cache = prefix.cache.clone();
        let all = self.backend.forward(&mut cache, &cont[..cont.len() - 1], Logits::All).await?;
        let vocab = self.config().vocab;
        let mut lps = vec![log_prob(&prefix.last_logits, cont[0])];
        for (i, &id) in cont.iter().enumerate().skip(1) {
            lps.push(log_prob(&all[(i - 1) * vocab..i * vocab], id));
        }
        Ok(lps)
    }

    async fn score_without_context(&self, cont: &[u32]) -> Result<Vec<f32>, Error> {
        let mut cache = self.backend.new_cache();
        let all = self.backend.forward(&mut cache, cont, Logits::All).await?;
        let vocab = self.config().vocab;
        // The first token has nothing to be predicted from; it is not scored.
        Ok(cont.iter().enumerate().skip(1).map(|(i, &id)| log_prob(&all[(i - 1) * vocab..i * vocab], id)).collect())
    }

    /// Log-probability of each candidate as the continuation of `prompt` (summed over a
    /// multi-token candidate's tokens). The prompt runs once.
    pub async fn next_token_logprobs(&self, prompt: &str, candidates: &[&str]) -> Result<Vec<f32>, Error> {
        let pairs: Vec<(&str, &str)> = candidates.iter().map(|c| (prompt, *c)).collect();
        Ok(self.score(&pairs).await?.into_iter().map(|l| l.iter().sum()).collect())
    }

    /// [`score`](Self::score) as the core's [`Scorer`] wants it: every continuation has a
    /// token, and errors are [`docmem_core::Error`]s.
    async fn scorer_logprobs(&self, pairs: &[(&str, &str)]) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
        let out = self.score(pairs).await.map_err(|e| docmem_core::Error::ScorerFailed { message: e.to_string() })?;
        if out.iter().any(Vec::is_empty) {
            return Err(docmem_core::Error::EmptyContinuation);
        }
        Ok(out)
    }

    /// [`next_token_logprobs`](Self::next_token_logprobs) with [`docmem_core::Error`]s.
    async fn scorer_next_token_logprobs(&self, prompt: &str, candidates: &[&str]) -> Result<Vec<f32>, docmem_core::Error> {
        self.next_token_logprobs(prompt, candidates).await.map_err(|e| docmem_core::Error::ScorerFailed { message: e.to_string() })
    }

    fn scorer_count_tokens(&self, text: &str) -> Result<usize, docmem_core::Error> {
        self.tokenizer.encode(text).map(|v| v.len()).map_err(|e| docmem_core::Error::ScorerFailed { message: e.to_string() })
    }
}

impl<B: Backend> Scorer for Lm<B> {
    fn continuation_logprobs<'a>(
        &'a mut self,
        pairs: &'a [(&'a str, &'a str)],
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        boxed(self.scorer_logprobs(pairs))
    }

    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
        boxed(self.scorer_next_token_logprobs(prompt, candidates))
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        self.scorer_count_tokens(text)
    }
}

#[cfg(test)]
mod tests {
    use super::{find_stop, stop_prefix_held};

    /// A wrapped failure is chained, not only printed: a caller (or a binding) can reach
    /// the operating system's error under a model that could not be read, through
    /// `source()`, however many layers wrap it.
    #[test]
    fn a_missing_model_file_chains_down_to_the_os_error() {
        let missing = std::env::temp_dir().join("docmem-no-such-model.gguf");
        let e = super::Lm::load(&missing, &super::LoadOptions::default()).unwrap_err();
        let qa = e;
        let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&qa);
        let mut io = None;
        while let Some(c) = cause {
            io = io.or(c.downcast_ref::<std::io::Error>());
            cause = c.source();
        }
        assert_eq!(io.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound), "{qa}");
    }

    /// The greedy check picks what the logits say, one token after another, and stops
    /// where the context window would overflow, never past it.
    #[test]
    fn greedy_picks_the_argmax_and_stops_at_the_context_window() {
        use crate::gguf::testing::{tiny_lm, TinyTokenizer};
        use crate::source::MemorySource;
        let options = super::LoadOptions { context: 8, ..Default::default() };
        let lm = super::Lm::load_from(&MemorySource::new(tiny_lm("qwen2", TinyTokenizer::Gpt2, None)), &options).unwrap();
        let prompt = [1, 2, 3];
        let picked = crate::block_on(lm.greedy(&prompt, 100)).unwrap();
        assert_eq!(picked.len(), 8 + 1 - prompt.len(), "the cache holds at most the window");
        let mut fed = prompt.to_vec();
        for &token in &picked {
            let mut cache = super::Backend::new_cache(&lm.backend);
            let logits = crate::block_on(super::Backend::forward(&lm.backend, &mut cache, &fed, super::Logits::Last)).unwrap();
            assert_eq!(token, super::argmax(&logits));
            fed.push(token);
        }
        assert_eq!(crate::block_on(lm.greedy(&prompt, 2)).unwrap(), picked[..2]);
        assert!(matches!(crate::block_on(lm.greedy(&[], 2)), Err(crate::Error::EmptyPrompt)));
        assert!(matches!(crate::block_on(lm.greedy(&[1; 9], 2)), Err(crate::Error::ContextFull { needed: 9, limit: 8 })));
    }

    /// Regression (CI, proptest): with the stop string `"ed"`, an `"e"` was streamed, then
    /// `"d"` came and the result was cut to `""`, so the streamed and returned text differed.
    /// A tail that may yet become a stop string is now held back.
    #[test]
    fn a_tail_that_may_become_a_stop_string_is_held_back() {
        let stops = vec!["ed".to_owned(), "</s>".to_owned(), "中文".to_owned()];
        assert_eq!(stop_prefix_held("the", &stops), 1);
        assert_eq!(stop_prefix_held("the <", &stops), 1);
        assert_eq!(stop_prefix_held("the </", &stops), 2);
        assert_eq!(stop_prefix_held("the </s", &stops), 3);
        assert_eq!(stop_prefix_held("the end", &stops), 0);
        assert_eq!(stop_prefix_held("文中", &stops), "中".len());
        assert_eq!(stop_prefix_held("", &stops), 0);
        assert_eq!(stop_prefix_held("e", &[String::new()]), 0);
        // A whole stop string is found by `find_stop`, never held.
        assert_eq!(stop_prefix_held("ed", &["ed".to_owned()]), 0);
    }

    /// Regression (found by fuzzing): the search window began `stop.len()` bytes before the new
    /// text, inside a three-byte Chinese character, and slicing there panicked.
    #[test]
    fn stop_strings_are_found_after_multibyte_text_without_panicking() {
        let stops = vec!["</s>".to_owned(), "\n\n".to_owned()];
        let text = "文档记忆由大纲组成";
        for before in 0..=text.len() {
            assert_eq!(find_stop(text, before, &stops), None);
        }
        let text = "文档记忆</s>后面";
        let at = text.find("</s>").unwrap();
        // The stop string arrived with the last piece, or began in text already streamed.
        assert_eq!(find_stop(text, at, &stops), Some(at));
        assert_eq!(find_stop(text, at + 2, &stops), Some(at));
        assert_eq!(find_stop("一二\n\n三", 7, &stops), Some(6));
        assert_eq!(find_stop("abc", 3, &[String::new()]), None);
    }
}
