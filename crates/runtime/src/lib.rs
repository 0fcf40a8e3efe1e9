//! # docmem-runtime
//!
//! Two parts, the model engine and the application pipeline.
//!
//! **The engine** runs models: loading GGUF and safetensors files, tokenizers, the decoder
//! LMs (reader, scorer, answerer) and the sentence embedder, on the CPU and on WebGPU. It
//! implements the core's seams ([`docmem_core::Embedder`], [`docmem_core::Scorer`]), so
//! the core never depends on a model.
//!
//! **The pipeline** ([`pipeline`]) is what docmem does with them: ingest, answers, guided
//! asks, the native store and PDF text. It holds models only as the core's roles, handed
//! out by a [`handle::ModelHandle`], so it never names a backend. A [`session::Session`]
//! owns a library and runs those steps in order: every front end adds a document and
//! answers a question through it.
//!
//! The engine's modules: the byte sources models are read through ([`source`]); GGUF files
//! ([`gguf`], [`quant`]) and Hugging Face safetensors checkpoints ([`safetensors`],
//! [`model::hf`], quantized on load); tokenizers and chat templates ([`tokenizer`],
//! [`chat`]); each architecture's forward pass written once over a backend's operations
//! (`arch`); the llama/qwen2 decoders on the CPU ([`cpu`], [`model`]) behind the [`lm`]
//! API; BERT-family sentence embedders on the same kernels ([`embed`]); and the hashing
//! embedder used when no embedding model is present; the WebGPU backend ([`gpu`]); and hosted
//! models through an OpenAI-compatible API ([`remote`]: the edge worker), in every role,
//! with the answer written by either through [`answerer::Answerer`]. Whatever runs a model,
//! callers hold one [`handle::ModelHandle`] (or [`handle::EmbedderHandle`]) and ask it for a
//! role, loaded onto the [`device::Device`] that [`device::choose`] picked.
//!
//! ## Unsafe code
//!
//! `unsafe` is denied crate-wide. The modules that need it (SIMD kernels chosen by
//! run-time CPU feature detection, the memory map, the thread pool's lifetime-erased job
//! pointer, and the raw output pointers its tasks write disjoint parts of) each carry one
//! audited module-level `#[allow(unsafe_code)]` that says why (`cpu` itself allows it item
//! by item, as a module-level allow there would cover every `cpu` submodule). Every
//! `unsafe fn` documents its contract under `# Safety` and every `unsafe` block says why it
//! holds in a `// SAFETY:` comment (`clippy::missing_safety_doc`,
//! `clippy::undocumented_unsafe_blocks`).

#![deny(unsafe_code)]
#![warn(clippy::missing_safety_doc, clippy::undocumented_unsafe_blocks)]

pub mod answerer;
pub(crate) mod arch;
pub mod chat;
pub mod cpu;
pub mod device;
pub mod embed;
pub mod error;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod fuzz_harness;
pub mod gguf;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod handle;
pub mod lm;
pub mod model;
pub mod pipeline;
pub mod probe;
pub mod quant;
pub mod remote;
pub mod safetensors;
pub mod session;
pub mod source;
pub mod synthetic;
#[cfg(any(test, feature = "gpu"))]
pub(crate) mod testdata;
pub mod tokenizer;

pub use docmem_core;
pub use error::{Error, Result};

/// Run `future` to its end on this thread. The models' methods are async (a browser's GPU
/// answers through the event loop: see `docmem_core::local_future`); natively, and for the
/// CPU backend everywhere, their futures finish without the event loop, so the CLI, the
/// tests and the synchronous wasm exports wait on them here.
///
/// In wasm32 a future that is not ready when first polled cannot be waited for (the thread
/// is the event loop): that is a bug in the caller, which must await it instead, and
/// panics with that message.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    #[cfg(not(target_arch = "wasm32"))]
    {
        pollster::block_on(future)
    }
    #[cfg(target_arch = "wasm32")]
    {
        match docmem_core::local_future::poll_once(future) {
            Some(out) => out,
            None => panic!("block_on: this future waits on the browser's event loop; await it instead"),
        }
    }
}

use docmem_core::embed::EmbedRole;
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

    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
        self.0.embed(texts, role)
    }

    fn name(&self) -> String {
        format!("{} (fallback: no embedding model found)", self.0.name())
    }
}
