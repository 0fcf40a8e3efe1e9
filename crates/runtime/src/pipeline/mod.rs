//! The application pipeline: what docmem does with its models and the core's library.
//!
//! A document goes in through [`ingest`] (a memory written by a reader, or a baseline
//! chunker's chunks, indexed into a library); a question is answered through [`qa`]
//! (search, the small-to-big prompt, the answerer's reply, citations, "not in the
//! documents"), with clues and routing through [`guided`]. [`store`] keeps a library
//! in a folder natively (a browser keeps it in IndexedDB, through the wasm layer's
//! journal), and [`pdf`] reads a PDF's text for the CLI.
//!
//! These are the steps; [`crate::session::Session`] is the one caller that puts them in
//! order for a document or a question.
//!
//! The pipeline sees models only as roles (the core's `ReaderModel`, `Scorer`,
//! `TextModel` and `Embedder`, and [`crate::answerer::Answerer`]), so a model on the CPU,
//! on WebGPU or on a host is the same to it; the engine beside it (the rest of this crate)
//! runs them.

pub mod guided;
pub mod ingest;
#[cfg(feature = "pdf")]
pub mod pdf;
pub mod qa;
pub mod store;
