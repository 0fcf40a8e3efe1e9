//! `docmem search`: retrieval from a library without an answer, so it can be checked from
//! outside: one question as an argument, or one per stdin line (one JSON object per line,
//! in input order).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::Args;
use docmem_core::retrieve::{Layer, SearchParams};
use docmem_runtime::pipeline::qa::Source;
use docmem_runtime::session::Session;
use serde::Serialize;

use crate::CliError;

#[derive(Args)]
pub struct SearchArgs {
    /// The question (without it, one question per line of stdin).
    pub question: Option<String>,
    /// The library directory.
    #[arg(long)]
    pub library: PathBuf,
    /// Passages per question.
    #[arg(long, default_value_t = 8)]
    pub k: usize,
    /// Layers searched and fused, comma-separated, each with an optional weight:
    /// e.g. `chunk`, or `outline=0.25,core=0.5,chunk` (a layer not named is not
    /// searched). Default: the library's tuned weights (`SearchParams::default`).
    #[arg(long)]
    pub layers: Option<String>,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// One JSON object per question: {"question", "passages": [...]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Result<'a> {
    question: &'a str,
    passages: &'a [Source],
}

/// The layer weights for `--layers` (also `docmem eval retrieval --layers`).
pub(crate) fn layer_weights(list: &str) -> std::result::Result<[(Layer, f64); 3], CliError> {
    SearchParams::parse_layer_weights(list).map_err(|e| CliError::BadArgument { message: format!("--layers: {e}") })
}

pub fn run(a: &SearchArgs) -> std::result::Result<(), CliError> {
    if a.k == 0 {
        return Err(CliError::BadArgument { message: "--k must be at least 1".into() });
    }
    let params = SearchParams { k: a.k, ..SearchParams::default() };
    let params = match &a.layers {
        Some(list) => SearchParams { layer_weights: layer_weights(list)?, ..params },
        None => params,
    };
    let embedder = std::cell::RefCell::new(a.embedder.open()?);
    let session = Session::new(crate::ask::open_library(&a.library, embedder.borrow().as_ref())?);
    let questions: Vec<String> = match &a.question {
        Some(q) => vec![q.clone()],
        None => std::io::stdin()
            .lock()
            .lines()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| CliError::BadArgument { message: format!("stdin: {e}") })?,
    };
    let mut out = std::io::stdout().lock();
    for q in &questions {
        let passages = docmem_runtime::block_on(session.search(q, &params, 0, &embedder))?;
        if a.json {
            serde_json::to_writer(&mut out, &Result { question: q, passages: &passages }).map_err(|e| CliError::Output(e.into()))?;
            writeln!(out)?;
            continue;
        }
        writeln!(out, "{q}")?;
        for p in &passages {
            let ranks: Vec<String> = p.ranks.iter().map(|r| format!("{:?} {:?} #{}", r.layer, r.kind, r.rank).to_lowercase()).collect();
            writeln!(out, "[{}] {}, characters {}–{} · {}", p.n, p.title, p.chars.0, p.chars.1, ranks.join(", "))?;
            if let Some(o) = &p.outline {
                writeln!(out, "    outline: {o}")?;
            }
            if !p.core.is_empty() {
                writeln!(out, "    core: {}", p.core)?;
            }
            writeln!(out, "    {}", p.text.split_whitespace().collect::<Vec<_>>().join(" "))?;
        }
        writeln!(out)?;
    }
    Ok(())
}
