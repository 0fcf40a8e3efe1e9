//! Sentence embeddings from BERT-family encoders (all-MiniLM-L6-v2 by default; bge, e5,
//! and the XLM-RoBERTa multilingual models load the same way), on the runtime's own CPU
//! kernels, natively and in wasm.
//!
//! Why here and not on a tensor framework: the embedder is one more model family beside
//! the LMs, with the same loaders ([`crate::safetensors`]), tokenizers (HF `tokenizers`),
//! thread pool and kernels ([`crate::cpu`]), so the wasm bundle carries one runtime and a
//! cold build compiles one (burn, tried first, took 30 minutes to build on CI's machine).
//!
//! A model is read the way sentence-transformers reads it ([`config`]); texts take the
//! model's own query or passage prefix ([`EmbedRole`]), are tokenized by its
//! `tokenizer.json`, truncated at its maximum length (the count of truncated texts is
//! reported), packed without padding into batches of at most
//! [`SentenceEmbedder::max_batch_tokens`] tokens ([`encoder`]), pooled as the model says and
//! L2-normalised. Vectors match sentence-transformers' (cosine ≥ 0.999 on a committed
//! golden set, `tests/embed_parity.rs`, in every [`Precision`]).
//!
//! With the `gpu` feature the encoder's layers may run on the GPU instead
//! ([`SentenceEmbedder::load_onto_gpu`], [`crate::gpu::GpuEncoder`]), on the decoder's device;
//! its vectors match the CPU encoder's (cosine ≥ 0.99999, `tests/gpu_embedder.rs`). A
//! browser waits for it with [`SentenceEmbedder::embed_async`] (the core's synchronous `Embedder`
//! trait, which the library's ingest calls, cannot wait for a GPU in a browser, so the
//! package's embedder stays on the CPU there for now).

pub mod config;
pub mod encoder;
pub mod gguf;

use std::collections::BTreeMap;
use std::path::Path;

pub use docmem_core::embed::EmbedRole;
use tokenizers::{Tokenizer, TruncationParams};

pub use self::config::{BertShape, DirFiles, EmbedderConfig, ModelFiles, Pooling};
pub use self::encoder::{Encoder, Precision};
use crate::cpu::threads::Threads;
use crate::safetensors::SafetensorsFile;
use crate::source::{ByteSource, MemorySource};
use crate::Error;

/// Vectors for a list of texts, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    /// One unit vector per text.
    pub vectors: Vec<Vec<f32>>,
    /// How many texts were longer than the model's maximum and were truncated.
    pub truncated: usize,
}

/// How to load an embedder.
#[derive(Clone, Copy, Debug)]
pub struct EmbedderOptions {
    /// How the weights are held ([`Precision`]); [`Precision::DEFAULT`] unless set.
    pub precision: Precision,
    /// Threads (0: one per core; always one in wasm).
    pub threads: usize,
}

impl Precision {
    /// The default: the fastest precision that meets the cosine bar against
    /// sentence-transformers (≥ 0.999 on every golden text, `tests/embed_parity.rs`),
    /// per target, as `docmem bench embed` measured it on MiniLM. Natively bf16: with
    /// AVX-512 BF16 (Zen 4, Sapphire Rapids) products of bf16 pairs run at twice the f32
    /// rate, cosine 0.99995; elsewhere its panels expand to f32 by a shift, as fast as f16,
    /// cosine ≥ 0.99997 (weights only rounded).
    #[cfg(not(target_arch = "wasm32"))]
    pub const DEFAULT: Precision = Precision::Bf16;
    /// The default in wasm: F32. With the written-out `simd128` micro-kernel, f32 panels
    /// measured 8% faster than Q8_0's (11.7 against 10.7 sentences/s at batch 1, Node, one
    /// thread): there is no expansion step, and the weights arrive as f32 in the
    /// safetensors file anyway. Q8_0 (a quarter of the memory, cosine 0.9994) stays a
    /// setting for memory-tight pages; f16 is the slowest here (`simd128` has no
    /// half-float conversion).
    #[cfg(target_arch = "wasm32")]
    pub const DEFAULT: Precision = Precision::F32;
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        EmbedderOptions { precision: Precision::DEFAULT, threads: 0 }
    }
}

/// Where the encoder's layers run. (One per embedder: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum Engine {
    /// The runtime's CPU kernels, in the chosen [`Precision`].
    Cpu(Encoder),
    /// The GPU (f32 weights), on a device shared with the decoder.
    #[cfg(feature = "gpu")]
    Gpu(crate::gpu::GpuEncoder),
}

/// The GPU to load an encoder onto, where the runtime has the GPU backend.
#[cfg(feature = "gpu")]
type OnGpu = Option<crate::gpu::Gpu>;
#[cfg(not(feature = "gpu"))]
type OnGpu = Option<std::convert::Infallible>;

/// A sentence embedder: tokenizer, encoder and the model's conventions.
pub struct SentenceEmbedder {
    config: EmbedderConfig,
    tokenizer: Tokenizer,
    encoder: Engine,
    threads: Threads,
    name: String,
    /// Tokens per forward pass (texts are packed end to end up to this many; a longer
    /// text runs alone).
    pub max_batch_tokens: usize,
}

/// Tokens per forward pass by default: about four 128-token texts. Larger passes keep more
/// activations than the caches hold (the FFN's are `tokens × 1536` floats per layer on
/// MiniLM); 512 embedded 256 such texts about 15% faster than 8,192 on this 2-core machine,
/// and no slower one text at a time.
pub const MAX_BATCH_TOKENS: usize = 512;

impl std::fmt::Debug for SentenceEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEmbedder")
            .field("name", &self.name)
            .field("precision", &self.precision())
            .field("on_gpu", &self.on_gpu())
            .finish()
    }
}

/// Refuse a shape whose weights, at `bits` bits each at least, would not fit in the
/// `bytes` of the file meant to hold them: the encoder allocates for its widths before it
/// reads each tensor, and the widths come from the configuration (a fuzz finding: a
/// `hidden_size` of 16777215 asked for petabytes and aborted the process).
fn weights_fit(shape: &BertShape, bytes: u64, bits: u64, config: &str, weights: &str) -> Result<(), Error> {
    match shape.parameters() {
        Some(n) if n.saturating_mul(bits) / 8 <= bytes => Ok(()),
        n => Err(Error::BadConfig {
            file: config.to_owned(),
            reason: match n {
                Some(n) => format!("its shape has {n} weights, more than the {bytes} bytes of {weights} can hold"),
                None => "its shape has more weights than any file can hold".to_owned(),
            },
        }),
    }
}

/// The prefixes under which checkpoints store the encoder's tensors.
const PREFIXES: [&str; 4] = ["", "bert.", "roberta.", "model."];

impl SentenceEmbedder {
    /// Load a model directory (`config.json`, `model.safetensors`, `tokenizer.json`, and
    /// sentence-transformers' optional files), or a `.gguf` file in llama.cpp's `bert`
    /// layout ([`gguf`]).
    pub fn load(path: &Path, options: EmbedderOptions) -> Result<Self, Error> {
        Self::load_on(path, options, None)
    }

    /// [`SentenceEmbedder::load`] with the encoder's layers on `gpu` (f32 weights; the tokenizer,
    /// the word table and the pooling stay on the CPU). `gpu` may be a clone of the
    /// decoder's device: both then run on one.
    #[cfg(feature = "gpu")]
    pub fn load_onto_gpu(path: &Path, gpu: crate::gpu::Gpu) -> Result<Self, Error> {
        Self::load_on(path, EmbedderOptions { precision: Precision::F32, threads: 1 }, Some(gpu))
    }

    /// [`SentenceEmbedder::from_files`] with the encoder's layers on `gpu` (see
    /// [`SentenceEmbedder::load_onto_gpu`]).
    #[cfg(feature = "gpu")]
    pub fn from_files_onto_gpu(files: BTreeMap<String, Vec<u8>>, name: &str, gpu: crate::gpu::Gpu) -> Result<Self, Error> {
        Self::from_files_on(files, name, EmbedderOptions { precision: Precision::F32, threads: 1 }, Some(gpu))
    }

    fn load_on(path: &Path, options: EmbedderOptions, gpu: OnGpu) -> Result<Self, Error> {
        let is_gguf = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        let weights_path = if is_gguf { path.to_owned() } else { path.join("model.safetensors") };
        #[cfg(not(target_arch = "wasm32"))]
        let src = crate::source::MmapSource::open(&weights_path);
        #[cfg(target_arch = "wasm32")]
        let src = crate::source::FileSource::open(&weights_path);
        let src = src.map_err(|e| {
            // The operating system's words alone: the path is named once, by the variant.
            let reason = match e {
                Error::Io { source, .. } => source.to_string(),
                e => e.to_string(),
            };
            Error::MissingFile { path: weights_path.display().to_string(), reason }
        })?;
        if is_gguf {
            let name = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            return Self::from_gguf_on(&src, name, options, gpu);
        }
        let files = DirFiles(path.to_owned());
        Self::build(&files, &src, files.model_name(), options, gpu)
    }

    /// Load a GGUF file in llama.cpp's `bert` layout from any byte source.
    pub fn from_gguf(src: &dyn ByteSource, name: String, options: EmbedderOptions) -> Result<Self, Error> {
        Self::from_gguf_on(src, name, options, None)
    }

    /// [`SentenceEmbedder::from_gguf`] with the encoder's layers on `gpu` (see
    /// [`SentenceEmbedder::load_onto_gpu`]).
    #[cfg(feature = "gpu")]
    pub fn from_gguf_onto_gpu(src: &dyn ByteSource, name: String, gpu: crate::gpu::Gpu) -> Result<Self, Error> {
        Self::from_gguf_on(src, name, EmbedderOptions { precision: Precision::F32, threads: 1 }, Some(gpu))
    }

    fn from_gguf_on(src: &dyn ByteSource, name: String, options: EmbedderOptions, gpu: OnGpu) -> Result<Self, Error> {
        let file = crate::gguf::GgufFile::read(src).map_err(|e| Error::BadConfig { file: "GGUF".into(), reason: e.to_string() })?;
        let (config, tokenizer) = gguf::read_config(&file)?;
        // No supported block format stores a weight in fewer than 4 bits.
        weights_fit(&config.shape, src.len(), 4, "GGUF metadata", "the GGUF file")?;
        let read = |name: &str, shape: &[usize]| gguf::read_tensor(&file, src, name, shape);
        Self::assemble(config, tokenizer, &read, name, options, gpu)
    }

    /// Load from files held in memory by name (what a page hands to the wasm package):
    /// `model.safetensors`, `config.json`, `tokenizer.json`, and where present
    /// `modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`,
    /// `config_sentence_transformers.json`, `tokenizer_config.json`.
    pub fn from_files(files: BTreeMap<String, Vec<u8>>, name: &str, options: EmbedderOptions) -> Result<Self, Error> {
        Self::from_files_on(files, name, options, None)
    }

    fn from_files_on(mut files: BTreeMap<String, Vec<u8>>, name: &str, options: EmbedderOptions, gpu: OnGpu) -> Result<Self, Error> {
        let weights = files
            .remove("model.safetensors")
            .ok_or_else(|| Error::MissingFile { path: "model.safetensors".into(), reason: "not given".into() })?;
        Self::build(&files, &MemorySource::new(weights), name.to_owned(), options, gpu)
    }

    fn build(files: &dyn ModelFiles, weights: &dyn ByteSource, name: String, options: EmbedderOptions, gpu: OnGpu) -> Result<Self, Error> {
        let config = EmbedderConfig::from_files(files)?;
        let tok_bytes = files
            .read("tokenizer.json")?
            .ok_or_else(|| Error::MissingFile { path: files.describe("tokenizer.json"), reason: "not found".into() })?;
        let (tokenizer, _) = crate::tokenizer::hf_tokenizer_from_json(&tok_bytes).map_err(|reason| Error::EmbedderTokenizer { reason })?;
        let file = SafetensorsFile::read(weights).map_err(|e| e.in_file("model.safetensors"))?;
        // Safetensors weights are loaded from F32, F16 or BF16: 16 bits at least.
        weights_fit(&config.shape, weights.len(), 16, &files.describe("config.json"), "model.safetensors")?;
        let prefix = PREFIXES.into_iter().find(|p| file.tensor(&format!("{p}embeddings.word_embeddings.weight")).is_some()).unwrap_or("");
        let read = |name: &str, shape: &[usize]| -> Result<Vec<f32>, Error> {
            let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
            file.read_f32(weights, &format!("{prefix}{name}"), &dims).map_err(|e| e.in_file("model.safetensors"))
        };
        Self::assemble(config, tokenizer, &read, name, options, gpu)
    }

    /// The embedder from its configuration, tokenizer and a reader of its tensors.
    fn assemble(
        config: EmbedderConfig,
        mut tokenizer: Tokenizer,
        read: &encoder::TensorReader<'_>,
        name: String,
        options: EmbedderOptions,
        gpu: OnGpu,
    ) -> Result<Self, Error> {
        // The GPU's attention holds a sequence's scores in workgroup memory: a longer text is
        // truncated there, as at the model's own limit (and counted as truncated).
        #[cfg(feature = "gpu")]
        let config = {
            let mut config = config;
            if gpu.is_some() {
                config.max_tokens = config.max_tokens.min(crate::gpu::ENCODER_MAX_TOKENS);
            }
            config
        };
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: config.max_tokens, ..Default::default() }))
            .map_err(|e| Error::EmbedderTokenizer { reason: e.to_string() })?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab > config.shape.vocab {
            return Err(Error::VocabularyMismatch { tokenizer: vocab, model: config.shape.vocab });
        }
        let encoder = match gpu {
            None => Engine::Cpu(Encoder::load(config.shape.clone(), read, options.precision)?),
            #[cfg(feature = "gpu")]
            Some(gpu) => Engine::Gpu(crate::gpu::GpuEncoder::load(gpu, config.shape.clone(), read)?),
            #[cfg(not(feature = "gpu"))]
            Some(never) => match never {},
        };
        let name = if name.is_empty() { "embedder".to_owned() } else { name };
        Ok(SentenceEmbedder {
            config,
            tokenizer,
            encoder,
            threads: Threads::new(options.threads),
            name,
            max_batch_tokens: MAX_BATCH_TOKENS,
        })
    }

    /// The model's configuration as read.
    pub fn config(&self) -> &EmbedderConfig {
        &self.config
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.config.shape.hidden
    }

    /// The precision the weights are held in.
    pub fn precision(&self) -> Precision {
        match &self.encoder {
            Engine::Cpu(e) => e.precision(),
            #[cfg(feature = "gpu")]
            Engine::Gpu(_) => Precision::F32,
        }
    }

    /// Bytes of weights held (on the GPU, for a GPU encoder).
    pub fn weight_bytes(&self) -> usize {
        match &self.encoder {
            Engine::Cpu(e) => e.bytes(),
            #[cfg(feature = "gpu")]
            Engine::Gpu(g) => g.gpu_bytes(),
        }
    }

    /// Whether the encoder's layers run on the GPU.
    pub fn on_gpu(&self) -> bool {
        !matches!(self.encoder, Engine::Cpu(_))
    }

    /// The model's name (its directory's, or the one given).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids of each text as the encoder will see them (prefix added, special tokens
    /// added, truncated), and how many were truncated.
    pub fn tokenize(&self, texts: &[&str], role: EmbedRole) -> Result<(Vec<Vec<u32>>, usize), Error> {
        let prefix = match role {
            EmbedRole::Query => &self.config.query_prefix,
            EmbedRole::Passage => &self.config.passage_prefix,
        };
        let mut truncated = 0;
        let mut out = Vec::with_capacity(texts.len());
        for text in texts {
            let input = if prefix.is_empty() { (*text).to_owned() } else { format!("{prefix}{text}") };
            let enc = self.tokenizer.encode(input, true).map_err(|e| Error::EmbedderTokenizer { reason: e.to_string() })?;
            truncated += usize::from(!enc.get_overflowing().is_empty());
            let mut ids = enc.get_ids().to_vec();
            // The tokenizer's vocabulary was checked against the table at load; the cut
            // guards a tokenizer that adds tokens past its own count.
            ids.retain(|&id| (id as usize) < self.config.shape.vocab);
            ids.truncate(self.config.max_tokens);
            out.push(ids);
        }
        Ok((out, truncated))
    }

    /// Embed `texts` as `role`: one unit vector each, in order. A GPU encoder waits for
    /// the GPU here natively; in a browser only [`SentenceEmbedder::embed_async`] can wait for it.
    pub fn embed(&self, texts: &[&str], role: EmbedRole) -> Result<Embeddings, Error> {
        let (seqs, truncated) = self.tokenize(texts, role)?;
        let mut vectors = Vec::with_capacity(seqs.len());
        for batch in self.batches(&seqs) {
            let pooled = match &self.encoder {
                Engine::Cpu(e) => e.forward(&self.threads, batch, self.config.pooling),
                #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
                Engine::Gpu(g) => pollster::block_on(g.forward(batch, self.config.pooling))?,
                #[cfg(all(feature = "gpu", target_arch = "wasm32"))]
                Engine::Gpu(_) => {
                    return Err(Error::EmbedderGpu {
                        message: "a browser cannot wait for the GPU in a synchronous call: use embed_async".into(),
                    })
                }
            };
            vectors.extend(pooled.into_iter().map(unit));
        }
        Ok(Embeddings { vectors, truncated })
    }

    /// [`SentenceEmbedder::embed`], waiting for a GPU encoder without blocking (what a browser
    /// needs); a CPU encoder computes in place.
    pub async fn embed_async(&self, texts: &[&str], role: EmbedRole) -> Result<Embeddings, Error> {
        match &self.encoder {
            Engine::Cpu(_) => self.embed(texts, role),
            #[cfg(feature = "gpu")]
            Engine::Gpu(g) => {
                let (seqs, truncated) = self.tokenize(texts, role)?;
                let mut vectors = Vec::with_capacity(seqs.len());
                for batch in self.batches(&seqs) {
                    vectors.extend(g.forward(batch, self.config.pooling).await?.into_iter().map(unit));
                }
                Ok(Embeddings { vectors, truncated })
            }
        }
    }

    /// `seqs` in runs of at most [`SentenceEmbedder::max_batch_tokens`] tokens (a longer text alone).
    fn batches<'s>(&self, seqs: &'s [Vec<u32>]) -> Vec<&'s [Vec<u32>]> {
        let mut out = Vec::new();
        let mut rest = seqs;
        while !rest.is_empty() {
            let mut n = 0;
            let mut tokens = 0;
            while n < rest.len() && (n == 0 || tokens + rest[n].len() <= self.max_batch_tokens) {
                tokens += rest[n].len();
                n += 1;
            }
            let (batch, tail) = rest.split_at(n);
            out.push(batch);
            rest = tail;
        }
        out
    }
}

impl docmem_core::embed::Embedder for SentenceEmbedder {
    fn dim(&self) -> usize {
        SentenceEmbedder::dim(self)
    }

    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
        Ok(SentenceEmbedder::embed(self, texts, role)?.vectors)
    }

    /// A GPU encoder is awaited, so callers embed ahead of their steps
    /// ([`docmem_core::embed_ahead`]): the one path a browser can take, used natively too.
    fn needs_await(&self) -> bool {
        self.on_gpu()
    }

    fn embed_async<'a>(
        &'a mut self,
        texts: &'a [&'a str],
        role: EmbedRole,
    ) -> docmem_core::local_future::LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        docmem_core::local_future::boxed(async move { Ok(SentenceEmbedder::embed_async(self, texts, role).await?.vectors) })
    }

    fn name(&self) -> String {
        format!("{} ({})", self.name, self.precision().name())
    }
}

/// `v` scaled to length one (a zero vector stays zero).
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}
