//! `docmem eval clues`: clue-guided retrieval (MemoRAG) against plain retrieval.
//!
//! 1. SQuAD (`--data`): every article is one document of one library (memories by the
//!    first of `--methods`, cached as in `docmem eval retrieval`); each answerable
//!    question of the split is searched with the question alone and with clues the
//!    `--model` writes from the library's global memory. Scored at equal budgets of 500,
//!    1,000 and 2,000 characters and recall@1/3/8, overall and by *overlap bucket*: the
//!    share of the question's content terms found in its answer sentence (the sentence of
//!    the article that holds a gold answer and shares the most terms with the question;
//!    SQuAD's `answer_start` is per paragraph and not kept). Clues should help most where
//!    overlap is low.
//! 2. HotpotQA (`--hotpot`): each question's ten paragraphs are one library (sentence
//!    chunks; its global memory is each paragraph's title and opening), and a question is
//!    a hit at k when the top k chunks come from both gold paragraphs.
//!
//! The clue writer's K/V cache of the global memory is kept between SQuAD questions
//! (`LmText`), so a question costs its own tokens only.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use docmem_core::chunk::ChunkerKind;
use docmem_core::clues::{CluesMode, GlobalMemory, GlobalMemorySettings};
use docmem_core::eval::{score_ranked, RetrievalScores, BUDGETS, RANK_CUTOFFS};
use docmem_core::library::{Library, LibrarySettings, MemStore};
use docmem_core::retrieve::{RetrievalMode, SearchParams};
use docmem_core::route::terms::{coverage, term_set};
use docmem_core::route::SymbolicMemory;
use docmem_core::{Document, DocumentMemory, Embedder};
use docmem_runtime::guided::{global_memory, prepare_guided, GuideSettings};
use docmem_runtime::lm::{Lm, LmText, LoadOptions};
use docmem_runtime::qa::AskParams;
use serde::{Deserialize, Serialize};

use crate::eval::{load_set, method_memories, parse_method, RetrievalEvalArgs};
use crate::CliError;

#[derive(Args)]
pub struct CluesEvalArgs {
    #[command(flatten)]
    pub retrieval: RetrievalEvalArgs,
    /// The clue writer [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Most tokens of the global memory (a gist pass compresses it past this).
    #[arg(long, default_value_t = 2048)]
    pub global_tokens: usize,
    /// Chunks retrieved per question (enough to fill the largest budget).
    #[arg(long, default_value_t = 16)]
    pub k: usize,
    /// HotpotQA distractor-format JSON (e.g. shared/eval/hotpotqa-dev-distractor-sample.json).
    #[arg(long)]
    pub hotpot: Option<PathBuf>,
    /// HotpotQA questions used, evenly spaced (0: all).
    #[arg(long, default_value_t = 40)]
    pub hotpot_limit: usize,
}

/// The overlap buckets: [0, 0.25), [0.25, 0.5), [0.5, 1].
const BUCKETS: [(&str, f64, f64); 3] = [("low (<0.25)", 0.0, 0.25), ("mid (0.25–0.5)", 0.25, 0.5), ("high (≥0.5)", 0.5, 1.01)];

#[derive(Serialize)]
struct BucketRow {
    bucket: String,
    plain: RetrievalScores,
    clues: RetrievalScores,
}

#[derive(Serialize, Default)]
struct HotpotRow {
    questions: usize,
    /// Both gold paragraphs among the top k chunks, k = 2, 4, 8.
    plain_support: [f64; 3],
    clues_support: [f64; 3],
}

#[derive(Serialize)]
struct CluesReport {
    data: String,
    split: String,
    documents: usize,
    method: String,
    embedder: String,
    model: String,
    global_memory_tokens: usize,
    global_memory_gist: bool,
    global_memory_seconds: f64,
    mean_clues: f64,
    clue_seconds_per_question: f64,
    rows: Vec<BucketRow>,
    hotpot: Option<HotpotRow>,
}

/// A library in memory holding `docs` with their memories.
pub(crate) fn memory_library(
    docs: &[Document],
    memories: &[DocumentMemory],
    collections: &dyn Fn(usize) -> String,
    embedder: &mut dyn Embedder,
) -> Result<Library<MemStore>, CliError> {
    let settings = LibrarySettings { embedder: embedder.name(), dim: embedder.dim(), mode: RetrievalMode::ThreeLayer };
    let mut library = Library::open(MemStore::default(), &settings)?;
    for (i, (d, m)) in docs.iter().zip(memories).enumerate() {
        library.add_to(&collections(i), d, m, embedder)?;
    }
    Ok(library)
}

/// The share of the question's terms in its answer sentence (see the module docs).
fn answer_overlap(question: &str, golds: &[String], doc: &str) -> f64 {
    let q = term_set(question);
    let golds: Vec<String> = golds.iter().map(|g| docmem_core::eval::normalize_answer(g)).collect();
    doc.split_inclusive(['.', '?', '!', '\n'])
        .filter(|s| {
            let n = docmem_core::eval::normalize_answer(s);
            golds.iter().any(|g| !g.is_empty() && n.contains(g.as_str()))
        })
        .map(|s| coverage(&q, &term_set(s)))
        .fold(0.0, f64::max)
}

fn texts_of<'a>(library: &'a Library<MemStore>, hits: &[(docmem_core::DocId, docmem_core::Span)]) -> Vec<&'a str> {
    hits.iter().filter_map(|(id, span)| library.get(*id).ok().and_then(|(d, _)| span.slice(&d.text))).collect()
}

pub fn run(a: &CluesEvalArgs) -> Result<(), CliError> {
    let r = &a.retrieval;
    let method = parse_method(r.methods.first().map_or("mom", String::as_str))?;
    let set = load_set(r)?;
    let mut embedder = r.embedder.open()?;
    let mut reader_name = None;
    let mems = method_memories(r, &method, &set.documents, embedder.as_mut(), &mut reader_name)?;
    eprintln!("docmem eval clues: indexing {} documents ({})", set.documents.len(), method.label);
    let mut library = memory_library(&set.documents, &mems.memories, &|_| "default".into(), embedder.as_mut())?;
    let path = a.model.clone().unwrap_or_else(crate::models::default_reader);
    let lm = Lm::load(&path, &LoadOptions { threads: r.threads, context: 0, ..LoadOptions::default() })?;
    let model_name = crate::input::file_label(&path);
    let mut text = LmText::new(&lm);
    let t = Instant::now();
    let gsettings = GlobalMemorySettings { max_tokens: a.global_tokens, ..GlobalMemorySettings::default() };
    let global = docmem_runtime::block_on(global_memory(&mut library, &mut text, &model_name, &gsettings))?;
    let global_seconds = t.elapsed().as_secs_f64();
    let global_tokens = docmem_core::text_model::TextModel::count_tokens(&mut text, &global.text).unwrap_or(0);
    eprintln!("docmem eval clues: global memory {global_tokens} tokens (gist: {}) in {global_seconds:.0} s", global.gist);

    let params = AskParams { k: a.k, max_chunk_chars: 0, ..AskParams::default() };
    let on = GuideSettings { clues: CluesMode::On, ..GuideSettings::default() };
    let memory = SymbolicMemory::new();
    let mut rows: Vec<BucketRow> = BUCKETS
        .iter()
        .map(|(name, _, _)| BucketRow {
            bucket: (*name).into(),
            plain: RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS),
            clues: RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS),
        })
        .collect();
    let mut all = BucketRow {
        bucket: "all".into(),
        plain: RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS),
        clues: RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS),
    };
    let (mut clue_count, mut clue_seconds) = (0usize, 0.0);
    let n = set.questions.len();
    for (qi, q) in set.questions.iter().enumerate() {
        let golds: Vec<&str> = q.answers.iter().map(String::as_str).collect();
        let plain_hits = library.search(&q.question, embedder.as_mut(), &SearchParams { k: a.k, ..SearchParams::default() })?;
        let plain: Vec<_> = plain_hits.iter().map(|h| (h.doc_id, h.span)).collect();
        let t = Instant::now();
        let guided = docmem_runtime::block_on(prepare_guided(
            &library,
            embedder.as_mut(),
            &mut text,
            Some(&global),
            &memory,
            &q.question,
            &params,
            &on,
        ))?;
        clue_seconds += t.elapsed().as_secs_f64();
        clue_count += guided.clues.as_ref().map_or(0, |c| c.queries.len().saturating_sub(1));
        let clued: Vec<_> = guided.prompt.sources.iter().map(|s| (s.doc_id, s.span)).collect();
        let po = score_ranked(&texts_of(&library, &plain), &golds, &BUDGETS, &RANK_CUTOFFS);
        let co = score_ranked(&texts_of(&library, &clued), &golds, &BUDGETS, &RANK_CUTOFFS);
        let overlap = answer_overlap(&q.question, &q.answers, &set.documents[q.document].text);
        let b = BUCKETS.iter().position(|(_, lo, hi)| overlap >= *lo && overlap < *hi).unwrap_or(0);
        for row in [&mut rows[b], &mut all] {
            row.plain.add(&po, plain.len());
            row.clues.add(&co, clued.len());
        }
        if (qi + 1) % 10 == 0 || qi + 1 == n {
            eprintln!(
                "docmem eval clues: {}/{n}: recall@1000 plain {:.3}, clues {:.3} ({:.1} s/question)",
                qi + 1,
                all.plain.budget_recall[1],
                all.clues.budget_recall[1],
                clue_seconds / (qi + 1) as f64
            );
        }
    }
    rows.push(all);
    let hotpot = match &a.hotpot {
        Some(p) => Some(hotpot_eval(p, a.hotpot_limit, &mut text, embedder.as_mut(), a.k)?),
        None => None,
    };
    let report = CluesReport {
        data: r.data.display().to_string(),
        split: r.split.name().into(),
        documents: set.documents.len(),
        method: method.label.clone(),
        embedder: embedder.name(),
        model: model_name,
        global_memory_tokens: global_tokens,
        global_memory_gist: global.gist,
        global_memory_seconds: global_seconds,
        mean_clues: clue_count as f64 / n.max(1) as f64,
        clue_seconds_per_question: clue_seconds / n.max(1) as f64,
        rows,
        hotpot,
    };
    print_report(&report, r.json)
}

fn print_report(report: &CluesReport, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, report).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} documents ({}), {} split, embedder {}, clue writer {}; global memory {} tokens{} ({:.0} s); {:.1} clues and {:.1} s per question",
        report.documents,
        report.method,
        report.split,
        report.embedder,
        report.model,
        report.global_memory_tokens,
        if report.global_memory_gist { ", gist pass" } else { "" },
        report.global_memory_seconds,
        report.mean_clues,
        report.clue_seconds_per_question
    )?;
    writeln!(out, "\n| overlap bucket | questions | plain @500 | clues @500 | plain @1000 | clues @1000 | plain @2000 | clues @2000 | plain R@1 | clues R@1 | plain R@8 | clues R@8 |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &report.rows {
        let (p, c) = (&r.plain, &r.clues);
        writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r.bucket,
            p.questions,
            p.budget_recall[0],
            c.budget_recall[0],
            p.budget_recall[1],
            c.budget_recall[1],
            p.budget_recall[2],
            c.budget_recall[2],
            p.recall[0],
            c.recall[0],
            p.recall[2],
            c.recall[2]
        )?;
    }
    if let Some(h) = &report.hotpot {
        writeln!(out, "\nHotpotQA, {} questions, both gold paragraphs among the top k chunks:\n", h.questions)?;
        writeln!(out, "| retrieval | k=2 | k=4 | k=8 |\n| --- | --- | --- | --- |")?;
        writeln!(out, "| plain | {:.3} | {:.3} | {:.3} |", h.plain_support[0], h.plain_support[1], h.plain_support[2])?;
        writeln!(out, "| clues | {:.3} | {:.3} | {:.3} |", h.clues_support[0], h.clues_support[1], h.clues_support[2])?;
    }
    Ok(())
}

#[derive(Deserialize)]
struct HotpotQuestion {
    question: String,
    supporting_facts: Vec<(String, u32)>,
    context: Vec<(String, Vec<String>)>,
}

/// Both gold titles among the titles of `hits`' top k.
fn both_gold(titles: &[String], golds: &[String], k: usize) -> bool {
    golds.iter().all(|g| titles.iter().take(k).any(|t| t == g))
}

fn hotpot_eval(
    path: &PathBuf,
    limit: usize,
    text: &mut dyn docmem_core::text_model::TextModel,
    embedder: &mut dyn Embedder,
    k: usize,
) -> Result<HotpotRow, CliError> {
    let bytes = std::fs::read(path).map_err(|source| CliError::Read { path: path.clone(), source })?;
    let all: Vec<HotpotQuestion> =
        serde_json::from_slice(&bytes).map_err(|e| CliError::BadArgument { message: format!("--hotpot {}: {e}", path.display()) })?;
    let n = all.len();
    let take = if limit == 0 || limit >= n { n } else { limit };
    let mut row = HotpotRow::default();
    let on = GuideSettings { clues: CluesMode::On, ..GuideSettings::default() };
    let params = AskParams { k, max_chunk_chars: 0, ..AskParams::default() };
    for i in 0..take {
        let q = &all[i * n / take];
        let docs: Vec<Document> = q.context.iter().map(|(title, sentences)| Document::new(title, sentences.concat())).collect();
        let memories: Vec<DocumentMemory> = docs
            .iter()
            .map(|d| {
                let spans = docmem_core::chunk::chunk_with(ChunkerKind::Sentence, &d.text, Default::default(), None).unwrap_or_default();
                DocumentMemory::from_spans(d, &spans, "sentence")
            })
            .collect();
        let mut library = memory_library(&docs, &memories, &|_| "default".into(), embedder)?;
        let global = docmem_runtime::block_on(global_memory(&mut library, text, "hotpot", &GlobalMemorySettings::default()))?;
        let golds: Vec<String> = {
            let mut g: Vec<String> = q.supporting_facts.iter().map(|(t, _)| t.clone()).collect();
            g.sort();
            g.dedup();
            g
        };
        let title_of = |id: docmem_core::DocId| docs.iter().find(|d| d.id == id).map_or(String::new(), |d| d.title.clone());
        let plain = library.search(&q.question, embedder, &SearchParams { k, ..SearchParams::default() })?;
        let plain_titles: Vec<String> = plain.iter().map(|h| title_of(h.doc_id)).collect();
        let guided = docmem_runtime::block_on(prepare_guided(
            &library,
            embedder,
            text,
            Some(&GlobalMemory { ..global }),
            &SymbolicMemory::new(),
            &q.question,
            &params,
            &on,
        ))?;
        let clue_titles: Vec<String> = guided.prompt.sources.iter().map(|s| s.title.clone()).collect();
        let m = row.questions as f64;
        for (j, kk) in [2usize, 4, 8].into_iter().enumerate() {
            row.plain_support[j] = (row.plain_support[j] * m + f64::from(u8::from(both_gold(&plain_titles, &golds, kk)))) / (m + 1.0);
            row.clues_support[j] = (row.clues_support[j] * m + f64::from(u8::from(both_gold(&clue_titles, &golds, kk)))) / (m + 1.0);
        }
        row.questions += 1;
        if row.questions % 10 == 0 {
            eprintln!(
                "docmem eval clues: hotpot {}/{take}: support@4 plain {:.3}, clues {:.3}",
                row.questions, row.plain_support[1], row.clues_support[1]
            );
        }
    }
    Ok(row)
}
