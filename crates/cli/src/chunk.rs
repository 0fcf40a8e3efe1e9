//! `docmem chunk`: run a baseline chunker over a file.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use docmem_core::chunk::{chunk_with, ChunkOptions, ChunkerKind};
use docmem_core::{Document, Embedder, Span};
use serde::Serialize;

use crate::input::read_document;
use crate::CliError;
pub use docmem_core::chunk::passage_sizes;

/// The chunker and its settings, shared by the commands that chunk.
#[derive(Args)]
pub struct ChunkerArgs {
    /// The chunker: fixed, sentence, recursive or semantic.
    #[arg(long, default_value = "sentence")]
    pub chunker: ChunkerKind,
    /// Chunk size: characters for fixed and recursive, tokens for sentence
    /// (defaults: fixed 1000, sentence 1024, recursive 4000; `retrieve` uses 128 for sentence).
    #[arg(long)]
    pub size: Option<usize>,
    /// Overlap between neighbouring chunks (sentence: tokens, recursive: characters;
    /// defaults 200, `retrieve` uses 16 for sentence).
    #[arg(long)]
    pub overlap: Option<usize>,
}

#[derive(Args)]
pub struct ChunkArgs {
    #[command(flatten)]
    pub chunking: ChunkerArgs,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The document (.txt or .md).
    pub file: PathBuf,
}

/// Chunk a document with the named chunker and its settings (`embedder` serves the
/// semantic chunker).
pub fn chunk_document(
    doc: &Document,
    kind: ChunkerKind,
    size: Option<usize>,
    overlap: Option<usize>,
    embedder: &mut dyn Embedder,
) -> Result<Vec<Span>, CliError> {
    Ok(chunk_with(kind, &doc.text, ChunkOptions { size, overlap }, Some(embedder))?)
}

#[derive(Serialize)]
struct ChunkOut<'a> {
    index: usize,
    start: usize,
    end: usize,
    chars: usize,
    text: &'a str,
}

#[derive(Serialize)]
struct Output<'a> {
    document: &'a str,
    doc_id: String,
    chunker: ChunkerKind,
    chunks: Vec<ChunkOut<'a>>,
}

pub fn run(args: &ChunkArgs) -> Result<(), CliError> {
    let doc = read_document(&args.file)?;
    let c = &args.chunking;
    let mut embedder = args.embedder.open()?;
    let spans = chunk_document(&doc, c.chunker, c.size, c.overlap, embedder.as_mut())?;
    let chunks: Vec<ChunkOut<'_>> = spans
        .iter()
        .enumerate()
        .map(|(index, s)| {
            let text = s.slice(&doc.text).unwrap_or("");
            ChunkOut { index, start: s.start, end: s.end, chars: text.chars().count(), text }
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        let o = Output { document: &doc.title, doc_id: doc.id.to_string(), chunker: c.chunker, chunks };
        serde_json::to_writer_pretty(&mut out, &o).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}: {} chunks ({} chunker)", doc.title, chunks.len(), c.chunker)?;
        for c in &chunks {
            writeln!(out, "[{:>3}] bytes {}..{} ({} chars): {}", c.index, c.start, c.end, c.chars, preview(c.text, 100))?;
        }
    }
    Ok(())
}

/// The first `n` characters of `text` on one line, with an ellipsis when cut.
pub fn preview(text: &str, n: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= n {
        flat
    } else {
        let cut: String = flat.chars().take(n).collect();
        format!("{cut}…")
    }
}
