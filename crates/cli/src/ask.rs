//! `docmem ask`: answer a question from a library, citing the memories used.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use clap::Args;
use docmem_core::clues::{CluesMode, Scope, ScopeSource};
use docmem_core::library::{Library, LibrarySettings};
use docmem_core::route::{Controller, ExploreSettings, JudgeKind, RouteSettings, RouteTarget};
use docmem_core::Embedder;
use docmem_runtime::device::DevicePreference;
use docmem_runtime::lm::Finish;
use docmem_runtime::pipeline::guided::{ClueTrace, GuideSettings, RouteTrace};
use docmem_runtime::pipeline::qa::AskParams;
use docmem_runtime::pipeline::store::DirStore;
use docmem_runtime::session::{AskEvent, AskOptions, Session};

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
    /// The answerer model, a file or remote:NAME for a hosted model through --remote (it
    /// also writes clues, sub-queries and judgements)
    /// [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub answerer: Option<PathBuf>,
    /// Most answer tokens.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Where a local answerer runs: auto (a GPU that passes the kernel checks, else the
    /// CPU), cpu or gpu.
    #[arg(long, default_value = "auto", value_name = "auto|cpu|gpu")]
    pub backend: DevicePreference,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print one JSON object (answer, citations, per-layer ranks, timings, and the clue and
    /// routing traces).
    #[arg(long)]
    pub json: bool,
    /// Clue-guided retrieval (MemoRAG): `on` searches with clues the answerer writes from
    /// the library's global memory beside the question; `auto` does that for questions
    /// about something in the documents and answers questions about the documents as a
    /// whole from the outline layer and the global memory; `off` searches with the
    /// question alone.
    #[arg(long, default_value = "off")]
    pub clues: String,
    /// Routing across collections (SEGMEM-RAG): `auto` lets the router choose collections
    /// segment by segment, learning where questions are answered; a collection's name
    /// searches only it. Without it every collection is searched at once.
    #[arg(long)]
    pub route: Option<String>,
    #[command(flatten)]
    pub routing: RoutingArgs,
}

/// The router's settings.
#[derive(Args, Clone, Debug)]
pub struct RoutingArgs {
    /// Most routing segments (choose, sub-query, retrieve, judge) per question.
    #[arg(long, default_value_t = 3)]
    pub max_steps: usize,
    /// Collections with fewer judged searches than this get probes from the cold-start
    /// explorer after an answer.
    #[arg(long, default_value_t = 3)]
    pub t_min: u32,
    /// Most explorer probes after one answer.
    #[arg(long, default_value_t = 2)]
    pub probes: usize,
    /// Who judges the retrieved passages: model (the answerer, with an overlap fallback)
    /// or overlap (term coverage only).
    #[arg(long, default_value = "model")]
    pub judge: String,
    /// Who chooses collections: memory (the symbolic memory), static (the descriptors
    /// only), random (no memory controller).
    #[arg(long, default_value = "memory")]
    pub controller: String,
}

impl RoutingArgs {
    /// The router's settings.
    pub fn settings(&self) -> Result<RouteSettings, CliError> {
        let judge = match self.judge.as_str() {
            "model" => JudgeKind::Model,
            "overlap" => JudgeKind::Overlap,
            other => return Err(CliError::BadArgument { message: format!("--judge: '{other}' is not model or overlap") }),
        };
        let controller = match self.controller.as_str() {
            "memory" => Controller::Memory,
            "static" => Controller::Static,
            "random" => Controller::Random,
            other => return Err(CliError::BadArgument { message: format!("--controller: '{other}' is not memory, static or random") }),
        };
        if self.max_steps == 0 {
            return Err(CliError::BadArgument { message: "--max-steps must be at least 1".into() });
        }
        Ok(RouteSettings { max_steps: self.max_steps, t_min: self.t_min, judge, controller, ..RouteSettings::default() })
    }

    /// The explorer's settings.
    pub fn explore(&self, judge: JudgeKind) -> ExploreSettings {
        ExploreSettings { t_min: self.t_min, max_probes: self.probes, judge }
    }
}

/// Open the library at `path` for searching with `embedder` (the one it was built with).
pub fn open_library(path: &Path, embedder: &dyn Embedder) -> Result<Library<DirStore>, CliError> {
    if !path.join("manifest.json").is_file() {
        return Err(CliError::BadArgument {
            message: format!("--library: {} holds no library (make one with docmem ingest)", path.display()),
        });
    }
    let settings = LibrarySettings::new(embedder.name(), embedder.dim());
    Ok(Library::open(crate::open_store::writer(path)?, &settings)?)
}

pub fn run(a: &AskArgs) -> Result<(), CliError> {
    if a.k == 0 {
        return Err(CliError::BadArgument { message: "--k must be at least 1".into() });
    }
    let clues: CluesMode = a.clues.parse().map_err(|e| CliError::BadArgument { message: format!("--clues: {e}") })?;
    let route_settings = a.routing.settings()?;
    let embedder = std::cell::RefCell::new(a.embedder.open()?);
    let library = open_library(&a.library, embedder.borrow().as_ref())?;
    let route = a.route.as_deref().map(RouteTarget::from_setting);
    if let Some(RouteTarget::Collection(name)) = &route {
        if !library.collections().contains(&name.as_str()) {
            return Err(CliError::BadArgument {
                message: format!("--route: no collection '{name}' in the library (it has: {})", library.collections().join(", ")),
            });
        }
    }
    let path = a.answerer.clone().unwrap_or_else(crate::models::default_reader);
    // The answerer, and the same model as the short-reply writer of clues and routing.
    let model = crate::model_arg::open(&path, "answerer", &a.embedder.remote, a.threads, a.backend, || {
        format!("--answerer: {} does not exist", path.display())
    })?;
    let options = AskOptions {
        params: AskParams { k: a.k, max_tokens: a.max_tokens, ..AskParams::default() },
        explore: a.routing.explore(route_settings.judge),
        guide: GuideSettings { clues, route, route_settings, ..GuideSettings::default() },
    };
    let json = a.json;
    let mut shown = Ok(());
    let session = Session::new(library);
    let answer = docmem_runtime::block_on(session.ask(&a.question, &options, model.answering(), &embedder, &mut |event| {
        if json {
            return ControlFlow::Continue(());
        }
        match event {
            AskEvent::Passages { clues, route, .. } => shown = show_traces(&mut std::io::stdout().lock(), clues, route),
            AskEvent::Text(piece) => {
                let mut o = std::io::stdout().lock();
                let _ = write!(o, "{piece}");
                let _ = o.flush();
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }))?;
    shown?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &answer).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
    } else {
        show_citations(&mut out, &answer)?;
    }
    Ok(())
}

fn show_traces(out: &mut impl Write, clues: Option<&ClueTrace>, route: Option<&RouteTrace>) -> Result<(), CliError> {
    if let Some(c) = clues {
        if let Some((scope, by)) = c.scope {
            writeln!(
                out,
                "(question classified {} by {})",
                if scope == Scope::Global { "global" } else { "local" },
                match by {
                    ScopeSource::Model => "the model",
                    _ => "keywords",
                }
            )?;
        }
        if c.queries.len() > 1 {
            writeln!(out, "Clues:")?;
            for (i, q) in c.queries.iter().enumerate().skip(1) {
                let found: Vec<String> = c
                    .found_by
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.iter().any(|(qi, _)| *qi == i))
                    .map(|(s, _)| format!("[{}]", s + 1))
                    .collect();
                let found = if found.is_empty() { String::new() } else { format!(" → found {}", found.join(" ")) };
                writeln!(out, "  {:?}: {}{found}", q.kind, q.text)?;
            }
        } else if !c.overview {
            writeln!(out, "(no clues: the model wrote none that passed the filter; searched with the question alone)")?;
        }
        if c.overview {
            writeln!(out, "(answered from the outline layer and the library's global memory)")?;
        }
    }
    if let Some(r) = route {
        writeln!(out, "Routing:")?;
        for s in &r.segments {
            writeln!(
                out,
                "  {}. {} ({}) \"{}\": {} passages, {} — {}",
                s.step,
                s.collection,
                s.chosen_by,
                s.sub_query,
                s.passages,
                if s.verdict.satisfied { "satisfied" } else { "not satisfied" },
                s.verdict.reflection
            )?;
        }
    }
    if clues.is_some() || route.is_some() {
        writeln!(out)?;
    }
    Ok(())
}

fn show_citations(out: &mut impl Write, answer: &docmem_runtime::pipeline::qa::Answer) -> Result<(), CliError> {
    if answer.finish != Finish::Withheld {
        writeln!(out)?; // ends the streamed reply's line
    }
    if answer.draft.is_some() {
        // The text streamed above was the model's; the check judged it ungrounded.
        writeln!(out, "\n(not in the documents: the passages do not support the answer above, so docmem does not give it)")?;
        return Ok(());
    }
    if answer.finish == Finish::Withheld {
        // Nothing was streamed: the answerability probe refused once the prompt was read.
        writeln!(out, "{}\n\n(the passages found do not answer this, judged before a reply was written)", answer.answer)?;
        return Ok(());
    }
    if answer.not_in_documents {
        writeln!(out, "\n(the documents do not answer this)")?;
        return Ok(());
    }
    let shown: Vec<usize> = if answer.cited.is_empty() { (1..=answer.sources.len().min(3)).collect() } else { answer.cited.clone() };
    match answer.citations_from {
        "model" => writeln!(out)?,
        "overlap" => writeln!(out, "\n(the answer cites nothing itself; these memories hold its words:)")?,
        "moved" => writeln!(out, "\n(the memories the answer cites do not hold its words; these do:)")?,
        _ => writeln!(out, "\n(no memory holds the answer's words; the best-ranked memories were:)")?,
    }
    for n in shown {
        if let Some(s) = answer.sources.get(n - 1) {
            let page = s.page.map(|p| format!("p. {p}, ")).unwrap_or_default();
            writeln!(out, "[{n}] → {}, {page}characters {}–{}", s.title, s.chars.0, s.chars.1)?;
        }
    }
    Ok(())
}
