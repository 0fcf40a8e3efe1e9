//! The laboratory: what measures docmem rather than what a user runs it for. Evaluations
//! on question-answering data (`docmem eval`), benchmarks timed beside a peer in the same
//! run (`docmem bench`), and synthetic model files for both (`docmem synth-gguf`).
//!
//! It is kept apart from the product's subcommands (ingest, ask, search, models, …) so that
//! a reader of those meets only what a user meets; it uses the same library crates and no
//! private path into them.

pub mod bench;
pub mod eval;
pub mod synth;
