//! # docmem-runtime
//!
//! The model side of docmem: loading GGUF and safetensors files, tokenizers, the decoder
//! LMs (reader, scorer, answerer) and the sentence embedder, on the CPU and on WebGPU. It
//! implements the core's seams ([`docmem_core::Embedder`], [`docmem_core::Scorer`]), so
//! the core never depends on a model.
//!
//! Here so far: the byte sources models are read through ([`source`]); GGUF files
//! ([`gguf`], [`quant`]) and Hugging Face safetensors checkpoints ([`safetensors`],
//! [`model::hf`], quantized on load); tokenizers and chat templates ([`tokenizer`],
//! [`chat`]); the llama/qwen2 decoders on the CPU ([`cpu`], [`model`]) behind the [`lm`]
//! API; BERT-family sentence embedders on the same kernels ([`embed`]); and the hashing
//! embedder used when no embedding model is present. The WebGPU backend comes with the
//! next runtime issue.

pub mod chat;
pub mod cpu;
pub mod embed;
pub mod gguf;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod ingest;
pub mod lm;
pub mod model;
#[cfg(feature = "pdf")]
pub mod pdf;
pub mod qa;
pub mod quant;
pub mod safetensors;
pub mod source;
pub mod store;
pub mod tokenizer;

pub use docmem_core;

use docmem_core::embed::{EmbedError, EmbedRole};
use docmem_core::{Embedder, HashingEmbedder};

/// The embedder to use when no embedding model is present: feature hashing with 384
/// dimensions (the width of all-MiniLM-L6-v2), named as the fallback it is wherever
/// output shows the embedder.
pub fn fallback_embedder() -> Box<dyn Embedder> {
    Box::new(Fallback(HashingEmbedder::new(384)))
}

/// [`HashingEmbedder`] under a name that says it stands in for a model.
struct Fallback(HashingEmbedder);

impl Embedder for Fallback {
    fn dim(&self) -> usize {
        self.0.dim()
    }

    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0.embed(texts, role)
    }

    fn name(&self) -> String {
        format!("{} (fallback: no embedding model found)", self.0.name())
    }
}
