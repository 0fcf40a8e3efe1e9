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
//! API; and the embedder the CLI uses while no model is configured. The WebGPU backend and
//! the model embedder come with the next runtime issues.

pub mod chat;
pub mod cpu;
pub mod gguf;
pub mod lm;
pub mod model;
pub mod quant;
pub mod safetensors;
pub mod source;
pub mod tokenizer;

pub use docmem_core;

use docmem_core::{Embedder, HashingEmbedder};

/// The embedder to use when no model is configured: feature hashing with 384 dimensions
/// (the width of all-MiniLM-L6-v2, so indexes keep their shape when a model arrives).
pub fn default_embedder() -> Box<dyn Embedder> {
    Box::new(HashingEmbedder::new(384))
}
