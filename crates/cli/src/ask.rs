//! `docmem ask`: answer a question from a library, citing the memories used.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use clap::Args;
use docmem_core::library::{Library, LibrarySettings};
use docmem_core::retrieve::RetrievalMode;
use docmem_core::Embedder;
use docmem_runtime::lm::{Lm, LoadOptions};
use docmem_runtime::qa::{ask, AskParams};
use docmem_runtime::store::DirStore;

use crate::CliError;

#[derive(Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    /// The library directory (made by `docmem ingest`).
    #[arg(long)]
    pub library: PathBuf,
    /// Memories to retrieve and show the answerer.
    #[arg(long, default_value_t = 8)]
    pub k: usize,
    /// The answerer model [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub answerer: Option<PathBuf>,
    /// Most answer tokens.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print one JSON object (answer, citations, per-layer ranks, timings).
    #[arg(long)]
    pub json: bool,
}

/// Open the library at `path` for searching with `embedder` (the one it was built with).
pub fn open_library(path: &Path, embedder: &dyn Embedder) -> Result<Library<DirStore>, CliError> {
    if !path.join("manifest.json").is_file() {
        return Err(CliError::BadArgument {
            message: format!("--library: {} holds no library (make one with docmem ingest)", path.display()),
        });
    }
    let settings = LibrarySettings { embedder: embedder.name(), dim: embedder.dim(), mode: RetrievalMode::ThreeLayer };
    Ok(Library::open(DirStore::open(path)?, &settings)?)
}

pub fn run(a: &AskArgs) -> Result<(), CliError> {
    if a.k == 0 {
        return Err(CliError::BadArgument { message: "--k must be at least 1".into() });
    }
    let mut embedder = a.embedder.open()?;
    let library = open_library(&a.library, embedder.as_ref())?;
    let path = a.answerer.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument { message: format!("--answerer: {} does not exist", path.display()) });
    }
    let lm = Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?;
    let params = AskParams { k: a.k, max_tokens: a.max_tokens, ..AskParams::default() };
    let mut out = std::io::stdout().lock();
    let json = a.json;
    let answer = docmem_runtime::block_on(ask(&library, embedder.as_mut(), &lm, &a.question, &params, |piece| {
        if !json {
            let _ = write!(out, "{piece}");
            let _ = out.flush();
        }
        ControlFlow::Continue(())
    }))?;
    if json {
        serde_json::to_writer_pretty(&mut out, &answer).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out)?;
    if answer.not_in_documents {
        writeln!(out, "\n(the documents do not answer this)")?;
        return Ok(());
    }
    let shown: Vec<usize> = if answer.cited.is_empty() { (1..=answer.sources.len().min(3)).collect() } else { answer.cited.clone() };
    match answer.citations_from {
        "model" => writeln!(out)?,
        "overlap" => writeln!(out, "\n(the answer cites nothing itself; these memories hold its words:)")?,
        _ => writeln!(out, "\n(no memory holds the answer's words; the best-ranked memories were:)")?,
    }
    for n in shown {
        if let Some(s) = answer.sources.get(n - 1) {
            writeln!(out, "[{n}] → {}, characters {}–{}", s.title, s.chars.0, s.chars.1)?;
        }
    }
    Ok(())
}
