//! `docmem bench ...`: benchmarks. Each prints JSON (with `--json`) or a table, and times
//! a reference in the same run so figures are ratios, not absolutes from another day.

use clap::Subcommand;

use crate::CliError;

mod embed;
mod index;
mod library;
mod lm;
mod stats;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Vector search: exact flat scan vs int8 scan vs HNSW on random unit vectors.
    Index(index::IndexBenchArgs),
    /// Language model: prefill and decode tokens/s beside llama.cpp's llama-bench.
    Lm(lm::LmBenchArgs),
    /// Sentence embedder: sentences/s at batch 1 and 32, native and wasm, beside
    /// sentence-transformers and transformers.js.
    Embed(embed::EmbedBenchArgs),
    /// Library at scale: seconds and bytes written per added document as it grows, open
    /// and search times, resident memory (sentence chunks, hashing embedder).
    Library(library::LibraryBenchArgs),
}

pub fn run(cmd: &BenchCommand) -> Result<(), CliError> {
    match cmd {
        BenchCommand::Index(a) => index::run(a),
        BenchCommand::Lm(a) => lm::run(a),
        BenchCommand::Embed(a) => embed::run(a),
        BenchCommand::Library(a) => library::run(a),
    }
}
