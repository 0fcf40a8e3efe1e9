//! `docmem ingest`: read documents into a library, with the MemReader (MoM memories) or a
//! baseline chunker.
//!
//! Every file is read and checked before any model work, so a bad file fails fast and
//! names itself. Each document is added atomically (see `docmem_core::library`): a crash
//! or Ctrl-C mid-ingest leaves the library as it was before that document. A document
//! whose content is already there is skipped before the reader runs.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use docmem_core::chunk::ChunkerKind;
use docmem_core::library::{Library, LibrarySettings};
use docmem_core::reader::{ExtractSettings, Progress, ReaderPrompt, ReadingCost, Stage};
use docmem_core::{Document, DocumentMemory};
use docmem_runtime::device::DevicePreference;
use docmem_runtime::pipeline::ingest::{IngestLimits, MemoryMethod};
use docmem_runtime::session::{AddOptions, Session};
use serde::Serialize;

use crate::input::read_document;
use crate::model_arg::Model;
use crate::CliError;

/// The reader model used when `--reader` is not given (fetched by `npm run demo`).

#[derive(Args)]
pub struct IngestArgs {
    /// The library directory (created if missing).
    #[arg(long)]
    pub library: PathBuf,
    /// The collection the documents go into (routing chooses among collections: `docmem
    /// ask --route auto`).
    #[arg(long, default_value = docmem_core::library::DEFAULT_COLLECTION)]
    pub collection: String,
    /// How documents become memories: mom (the reader model writes outline, cores and
    /// chunks) or a baseline chunker (fixed, sentence, recursive, semantic).
    #[arg(long, default_value = "mom")]
    pub chunker: String,
    /// The reader model (GGUF or checkpoint directory, or remote:NAME for a hosted model
    /// through --remote) for --chunker mom
    /// [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub reader: Option<PathBuf>,
    /// A scorer model for the candidates, a file or remote:NAME (default: the reader
    /// itself).
    #[arg(long)]
    pub scorer: Option<PathBuf>,
    /// Sampled candidates per window, besides the greedy one.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// The reader prompt: auto, zh-think, zh, en-think, en (MemReader's tags), en-numbered,
    /// zh-numbered (numbered sentences, tags: auto's choice for other readers), en-lines,
    /// zh-lines (numbered sentences, one line a group: a choice, for readers that follow it),
    /// or a file whose text has `{document}` where the document goes.
    #[arg(long, default_value = "auto")]
    pub prompt: String,
    /// Most tokens of a reply (0: as the window needs).
    #[arg(long, default_value_t = 0)]
    pub max_new_tokens: usize,
    /// Most document tokens per reading window (0: half the context).
    #[arg(long, default_value_t = 0)]
    pub window_tokens: usize,
    /// Worker threads for the models (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Where local reader and scorer models run: auto (a GPU that passes the kernel
    /// checks, else the CPU), cpu or gpu.
    #[arg(long, default_value = "auto", value_name = "auto|cpu|gpu")]
    pub backend: DevicePreference,
    /// Largest document accepted, in bytes of text (a larger one is refused, naming this
    /// limit, before any model work).
    #[arg(long, default_value_t = docmem_runtime::pipeline::ingest::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub max_document_bytes: usize,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print one JSON object per document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Documents (.txt, .md, .html, .pdf) or folders of them.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Serialize)]
struct Report<'a> {
    file: String,
    id: String,
    title: &'a str,
    added: bool,
    scenarios: usize,
    outline: usize,
    fallback: Option<&'a str>,
    /// Cores the reader copied from another chunk's text, dropped.
    misplaced_cores: u32,
    seconds: f64,
    /// Where a reader's time went (a local reader's memory only).
    #[serde(skip_serializing_if = "Option::is_none")]
    reading: Option<ReadingCost>,
}

pub(crate) fn parse_prompt(s: &str) -> Result<ReaderPrompt, CliError> {
    if let Ok(p) = s.parse::<ReaderPrompt>() {
        return Ok(p);
    }
    let path = Path::new(s);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
        return Ok(ReaderPrompt::Custom(text));
    }
    Err(CliError::BadArgument {
        message: format!(
            "--prompt: '{s}' is not auto, zh-think, zh, en-think, en, en-numbered, zh-numbered, en-lines, zh-lines or a prompt file"
        ),
    })
}

/// Open the `--{role}` model at `path`; `default` when the path is the built-in default
/// (so a missing file is explained by how to fetch it).
fn open_model(path: &Path, a: &IngestArgs, role: &str, default: bool) -> Result<Model, CliError> {
    crate::model_arg::open(path, role, &a.embedder.remote, a.threads, a.backend, || {
        if default {
            format!(
                "--chunker mom needs a reader model: pass --reader MODEL.gguf (or remote:NAME with --remote), or fetch the default with `docmem models fetch default` (nothing at {})",
                path.display()
            )
        } else {
            format!("--{role}: {} does not exist", path.display())
        }
    })
}

/// A one-line progress report: rewritten in place on a terminal, one line per candidate
/// otherwise (logs, CI).
struct ProgressLine {
    tty: bool,
    started: Instant,
    last: (Stage, usize),
}

impl ProgressLine {
    fn show(&mut self, label: &str, p: &Progress) {
        if !self.tty && (p.stage, p.candidates_done) == self.last {
            return;
        }
        self.last = (p.stage, p.candidates_done);
        let elapsed = self.started.elapsed().as_secs_f64();
        let f = p.fraction();
        let left = if f > 0.0 && p.stage != Stage::Done { format!(", about {:.0} s left", elapsed / f - elapsed) } else { String::new() };
        let stage = match p.stage {
            Stage::Reading => "reading",
            Stage::Scoring => "scoring",
            Stage::Fallback => "fallback chunking",
            Stage::Done => "done",
        };
        let line = format!(
            "{label}: {stage}, window {}/{}, {}/{} tokens, candidates {}/{}, {:.0} s{left}",
            p.window, p.windows, p.tokens_done, p.tokens_total, p.candidates_done, p.candidates_total, elapsed
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            if p.stage == Stage::Done {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}

pub fn run(a: &IngestArgs) -> Result<(), CliError> {
    let baseline = if a.chunker == "mom" {
        None
    } else {
        Some(a.chunker.parse::<ChunkerKind>().map_err(|_| CliError::BadArgument {
            message: format!("--chunker: '{}' is not mom, fixed, sentence, recursive or semantic", a.chunker),
        })?)
    };
    let prompt = parse_prompt(&a.prompt)?;
    // Read everything first: a bad file fails before any model work.
    let docs: Vec<(PathBuf, Document)> =
        expand_inputs(&a.files)?.iter().map(|p| Ok((p.clone(), read_document(p)?))).collect::<Result<_, CliError>>()?;
    // So is one over the size limit (ingest would refuse it too, but only when its turn
    // came, after the documents before it).
    if let Some((_, doc)) = docs.iter().find(|(_, d)| d.text.len() > a.max_document_bytes) {
        let (title, bytes, limit) = (doc.title.clone(), doc.text.len(), a.max_document_bytes);
        return Err(docmem_runtime::Error::DocumentTooLarge { title, bytes, limit }.into());
    }
    let embedder = std::cell::RefCell::new(a.embedder.open()?);
    let settings = LibrarySettings::new(embedder.borrow().name(), embedder.borrow().dim());
    let session = Session::new(Library::open(crate::open_store::writer(&a.library)?, &settings)?);

    let reader_path = a.reader.clone().unwrap_or_else(crate::models::default_reader);
    let mut models: Option<(Model, Option<Model>)> = None;
    let extract = ExtractSettings {
        prompt,
        samples: a.samples,
        max_new_tokens: a.max_new_tokens,
        max_window_tokens: a.window_tokens,
        ..ExtractSettings::default()
    };
    let mut out = std::io::stdout().lock();
    // Documents land in batches: one manifest for each few seconds of work, so a folder of
    // small documents does not write it for every one, and an interrupted run keeps every
    // batch that finished.
    let mut batch_started = Instant::now();
    session.library_mut()?.begin_batch();
    session.library_mut()?.set_background_merges(true);
    let mut merges = crate::background_merge::BackgroundMerges::default();
    let mut add_all = || -> Result<(), CliError> {
        for (path, doc) in &docs {
            let started = Instant::now();
            if session.library()?.contains(doc.id) {
                report(&mut out, a.json, path, doc, None, false, None, started)?;
                continue;
            }
            let mut method = match baseline {
                Some(kind) => MemoryMethod::chunker(kind),
                None => {
                    if models.is_none() {
                        let reader = open_model(&reader_path, a, "reader", a.reader.is_none())?;
                        let scorer = a.scorer.as_ref().map(|p| open_model(p, a, "scorer", false)).transpose()?;
                        models = Some((reader, scorer));
                    }
                    let Some((reader, scorer)) = &models else { continue };
                    reader.memory_method(scorer.as_ref(), extract.clone())
                }
            };
            let mut line = ProgressLine { tty: std::io::stderr().is_terminal(), started, last: (Stage::Done, usize::MAX) };
            let label = doc.title.clone();
            let options = AddOptions {
                collection: a.collection.clone(),
                limits: IngestLimits::default().with_max_document_bytes(a.max_document_bytes),
            };
            let mut show = |p: &Progress| {
                line.show(&label, p);
                true
            };
            let done = docmem_runtime::block_on(session.add(doc, &mut method, &embedder, &options, &mut show))?;
            let reading = match &method {
                MemoryMethod::Mom { reader, .. } => reader.cost(),
                MemoryMethod::Chunker { .. } => None,
            };
            report(&mut out, a.json, path, doc, Some(&done.memory), done.added, reading, started)?;
            let mut library = session.library_mut()?;
            merges.poll(&mut library)?;
            if batch_started.elapsed() >= BATCH_SECONDS {
                library.finish_batch()?;
                library.begin_batch();
                batch_started = Instant::now();
            }
        }
        Ok(())
    };
    let result = add_all();
    // What was added stays, even when a later document failed; a merge under way lands.
    let mut library = session.into_library();
    let merged = merges.finish(&mut library);
    let finished = library.finish_batch().map_err(CliError::from);
    // The first error is the one to report: a document's, before a merge's or a commit's.
    result.and(merged).and(finished)
}

/// How long the documents of one batch may take to read before it is committed.
const BATCH_SECONDS: std::time::Duration = std::time::Duration::from_secs(2);

/// Files named, and the readable files (`.txt`, `.md`, `.html`, `.pdf`) under folders named,
/// recursively and in name order; other files in a folder are skipped with a note. A folder
/// reached twice (a symlink back up the tree, or two links to one place) is walked once.
fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    fn walk(dir: &Path, seen: &mut std::collections::HashSet<PathBuf>, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
        let real = std::fs::canonicalize(dir).map_err(|source| CliError::Read { path: dir.to_path_buf(), source })?;
        if !seen.insert(real) {
            eprintln!("docmem: skipping {} (a folder already read: a link loops back to it)", dir.display());
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|source| CliError::Read { path: dir.to_path_buf(), source })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, seen, out)?;
            } else if crate::input::is_readable(&p) {
                out.push(p);
            } else {
                eprintln!("docmem: skipping {} (not .txt, .md, .html or .pdf)", p.display());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in inputs {
        if p.is_dir() {
            walk(p, &mut seen, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn report(
    out: &mut impl Write,
    json: bool,
    path: &Path,
    doc: &Document,
    memory: Option<&DocumentMemory>,
    added: bool,
    reading: Option<ReadingCost>,
    started: Instant,
) -> Result<(), CliError> {
    let r = Report {
        file: path.display().to_string(),
        id: doc.id.to_string(),
        title: &doc.title,
        added,
        scenarios: memory.map_or(0, |m| m.scenarios.len()),
        outline: memory.map_or(0, |m| m.outline.len()),
        fallback: memory.and_then(|m| m.provenance.fallback.as_deref()),
        misplaced_cores: memory.map_or(0, |m| m.provenance.alignment.misplaced_cores),
        seconds: started.elapsed().as_secs_f64(),
        reading,
    };
    if json {
        serde_json::to_writer(&mut *out, &r).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
    } else if !added {
        writeln!(out, "{}: already in the library ({}), skipped", r.file, r.id)?;
    } else {
        write!(
            out,
            "{}: added {}, {} in {:.1} s",
            r.file,
            crate::input::count(r.scenarios, "chunk"),
            crate::input::count(r.outline, "outline item"),
            r.seconds
        )?;
        if let Some(c) = &r.reading {
            write!(
                out,
                "; the reader read {} of {} tokens in {:.1} s, wrote {} tokens in {:.1} s{}",
                crate::input::count(c.prompts, "prompt"),
                c.prompt_tokens,
                c.prefill_seconds,
                c.written_tokens,
                c.decode_seconds,
                if c.scorings > 0 { format!(", scored candidates in {:.1} s", c.scoring_seconds) } else { String::new() }
            )?;
        }
        if r.misplaced_cores > 0 {
            write!(out, "; {} copied from another chunk's text dropped", crate::input::count(r.misplaced_cores as usize, "core"))?;
        }
        match r.fallback {
            Some(why) => writeln!(out, " (fell back to the sentence chunker: {why})")?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}
