//! # docmem-core
//!
//! Everything in docmem that is pure logic lives here, so it can be tested natively, run in
//! the browser through wasm, and build for a bare-metal target (`--no-default-features`
//! proves that no `std` crept in). No model code lives here: models enter through three
//! traits that `docmem-runtime` implements ([`Embedder`], [`Scorer`], and the token
//! counter of the sentence chunker).
//!
//! The pieces, in the order a document passes through them:
//! - [`document`]: a [`Document`] and its content-hash id;
//! - [`parse`]: the MemReader's raw output (`<think>`, `<outline>`, `<scenario>` blocks) into a
//!   [`ParsedMemory`], never panicking, with warnings for whatever was off;
//! - [`align`]: each `prefix[MASK]suffix` chunk mapped onto a span of the source, repaired so
//!   the spans tile the document, then MoM's short-chunk merge rule;
//! - [`memory`]: the resulting [`DocumentMemory`] (outline, scenarios, provenance);
//! - [`chunk`]: the baseline chunkers the MoM paper compares against;
//! - [`score`] and [`select`]: clarity, completeness and informational support from LM
//!   log-probabilities, and the RRF choice among N sampled memories;
//! - [`rrf`]: reciprocal rank fusion with a reusable scratch;
//! - [`index`]: flat, int8 and HNSW vector search, segments with tombstones, BM25, and a
//!   checksummed binary format;
//! - [`retrieve`]: three-layer (outline, core, chunk) retrieval fused with RRF, plus the two
//!   variants the MoM paper compares it with;
//! - [`clues`]: MemoRAG's clue-guided retrieval over a global memory of the library;
//! - [`route`]: SEGMEM-RAG's routing across collections with a symbolic memory;
//! - [`text_model`]: the short-reply model trait clues and routing use;
//! - [`error_code`]: the stable category ([`ErrorCode`]) of every error, for the bindings;
//! - [`local_future`]: why the model traits are async, and their future type.
#![cfg_attr(not(feature = "std"), no_std)]
// One audited exception: the AVX2 dispatch in `vector` (see its docs).
#![deny(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod align;
pub mod answer;
pub mod answerability;
pub mod chunk;
pub mod clues;
pub mod context;
pub mod document;
pub mod embed;
pub mod embed_ahead;
pub mod error;
pub mod error_code;
pub mod f16;
#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod fuzz_harness;
pub mod html;
pub mod index;
#[cfg(feature = "serde")]
pub mod library;
pub mod local_future;
pub mod memory;
pub mod parse;
pub mod pieces;
pub mod reader;
pub mod retrieve;
pub mod route;
pub mod rrf;
pub mod score;
pub mod select;
pub mod span;
pub mod text;
pub mod text_model;
pub mod vector;

pub use align::{align_memory, AlignParams, AlignedMemory, AlignmentStats};
pub use document::{DocId, Document};
pub use embed::{EmbedRole, Embedder, HashingEmbedder};
pub use error::Error;
pub use error_code::{ErrorCode, HasErrorCode};
pub use memory::{DocumentMemory, Provenance, Scenario};
pub use parse::{parse_memreader_output, ChunkPattern, ParseWarning, ParsedMemory, ParsedScenario};
pub use rrf::{RankedList, RrfFuser, RrfParams};
pub use score::Scorer;
pub use span::Span;
