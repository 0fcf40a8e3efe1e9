//! One handle per role, whatever runs the model.
//!
//! A person's language model may run on the CPU (the SIMD kernels, native or in wasm), on
//! their GPU through WebGPU, or on a host behind the edge worker; their embedder likewise.
//! The pipeline (ingest, answers, clues and routing) asks for roles, never for a backend:
//! a reader writes memories and a scorer ranks their candidates
//! ([`docmem_core::reader::ReaderModel`], [`docmem_core::Scorer`]), an answerer writes
//! replies ([`crate::answerer::Answerer`]), a text model writes clues and routing's
//! judgements ([`docmem_core::text_model::TextModel`]), an embedder makes vectors
//! ([`docmem_core::Embedder`]). [`ModelHandle`] and [`EmbedderHandle`] are the one value a
//! binding or the CLI holds for each model, and hand out those roles over whichever
//! backend the model has, so that no caller branches on where a model runs.

mod embedder;
mod model;

pub use embedder::EmbedderHandle;
pub use model::{ModelBackend, ModelHandle};
