//! `docmem retrieve`: index documents in memory with a baseline chunker and search them.
//!
//! This is retrieval alone (no language model), a quick look at a folder without a
//! library. Chunks are embedded with the chosen embedder (all-MiniLM-L6-v2 when it has
//! been fetched, else the feature-hashing fallback) and searched through the chunk layer's
//! vector and BM25 lists, fused with RRF.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use docmem_core::index::SegmentParams;
use docmem_core::retrieve::{MemoryIndex, RetrievalMode, RetrievedChunk, SearchParams};
use docmem_core::{Document, DocumentMemory};
use serde::Serialize;

use crate::chunk::{chunk_document, passage_sizes, ChunkerArgs};
use crate::input::read_document;
use crate::CliError;

#[derive(Args)]
pub struct RetrieveArgs {
    /// The question or search query.
    #[arg(long, short)]
    pub query: String,
    #[command(flatten)]
    pub chunking: ChunkerArgs,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// How many chunks to print.
    #[arg(long, default_value_t = 5)]
    pub k: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Documents (.txt or .md).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Serialize)]
struct Hit<'a> {
    rank: usize,
    document: &'a str,
    start: usize,
    end: usize,
    score: f64,
    ranks: &'a [docmem_core::retrieve::ListRank],
    text: &'a str,
}

pub fn run(args: &RetrieveArgs) -> Result<(), CliError> {
    if args.k == 0 {
        return Err(CliError::BadArgument { message: "--k must be at least 1".into() });
    }
    let started = Instant::now();
    let docs: Vec<Document> = args.files.iter().map(|p| read_document(p)).collect::<Result<_, _>>()?;
    let mut embedder = args.embedder.open()?;
    let mut index = MemoryIndex::new(RetrievalMode::ChunkOnly, embedder.dim(), SegmentParams::default());
    let c = &args.chunking;
    let (size, overlap) = passage_sizes(c.chunker, c.size, c.overlap);
    for doc in &docs {
        let spans = chunk_document(doc, c.chunker, size, overlap, embedder.as_mut())?;
        let memory = DocumentMemory::from_spans(doc, &spans, c.chunker.name());
        // Baseline chunks may overlap, so they do not tile: index them as chunks directly.
        index.add_chunks(doc, &memory, embedder.as_mut())?;
    }
    let indexed = started.elapsed();
    let t = Instant::now();
    let results = index.search_text(&args.query, embedder.as_mut(), &SearchParams { k: args.k, ..SearchParams::default() })?;
    let searched = t.elapsed();
    print_results(args, &docs, &results, index.chunks(), indexed.as_secs_f64(), searched.as_secs_f64(), embedder.name())
}

fn print_results(
    args: &RetrieveArgs,
    docs: &[Document],
    results: &[RetrievedChunk],
    chunks: usize,
    index_s: f64,
    search_s: f64,
    embedder: String,
) -> Result<(), CliError> {
    let doc_of = |r: &RetrievedChunk| docs.iter().find(|d| d.id == r.doc_id);
    let mut out = std::io::stdout().lock();
    if args.json {
        let hits: Vec<Hit<'_>> = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let d = doc_of(r)?;
                Some(Hit {
                    rank: i + 1,
                    document: &d.title,
                    start: r.span.start,
                    end: r.span.end,
                    score: r.score,
                    ranks: &r.ranks,
                    text: r.span.slice(&d.text).unwrap_or(""),
                })
            })
            .collect();
        let o = serde_json::json!({
            "query": args.query, "chunker": args.chunking.chunker, "embedder": embedder, "documents": docs.len(),
            "chunks": chunks, "index_seconds": index_s, "search_seconds": search_s, "results": hits,
        });
        serde_json::to_writer_pretty(&mut out, &o).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "Indexed {} document(s) as {chunks} {} chunks in {:.0} ms (embedder: {embedder}; no language model).",
        docs.len(),
        args.chunking.chunker,
        index_s * 1e3
    )?;
    writeln!(out, "Query: {}\n", args.query)?;
    for (i, r) in results.iter().enumerate() {
        let Some(d) = doc_of(r) else { continue };
        let text = r.span.slice(&d.text).unwrap_or("");
        let lists: Vec<String> = r.ranks.iter().map(|l| format!("{:?} #{}", l.kind, l.rank).to_lowercase()).collect();
        writeln!(out, "[{}] {} · bytes {}..{} · score {:.4} · {}", i + 1, d.title, r.span.start, r.span.end, r.score, lists.join(", "))?;
        for line in wrap(text, 96) {
            writeln!(out, "    {line}")?;
        }
        writeln!(out)?;
    }
    writeln!(out, "Search took {:.2} ms.", search_s * 1e3)?;
    Ok(())
}

/// Words of `text` (white space folded) in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}
