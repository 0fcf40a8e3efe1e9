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
//!    a hit at k when the top k chunks come from both gold paragraphs. Its questions are
//!    taken from the same side of `--split` as the SQuAD ones (HotpotQA's sides group the
//!    questions that share a paragraph: `HotpotSet::sides`).
//!
//! The clue writer's K/V cache of the global memory is kept between SQuAD questions
//! (`LmText`), so a question costs its own tokens only.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use crate::lab::eval::metrics::hotpot::{parse_hotpot, HotpotQuestion};
use crate::lab::eval::metrics::{score_ranked, RetrievalScores, Split, BUDGETS, RANK_CUTOFFS};
use clap::Args;
use docmem_core::chunk::ChunkerKind;
use docmem_core::clues::{fuse_clue_lists, write_clues, Clue, ClueFilter, ClueKind, ClueWeights, GlobalMemorySettings};
use docmem_core::library::{Library, LibrarySettings, MemStore};
use docmem_core::retrieve::SearchParams;
use docmem_core::route::terms::{coverage, term_set};
use docmem_core::{Document, DocumentMemory, Embedder};
use docmem_runtime::lm::{Lm, LmText, LoadOptions};
use docmem_runtime::pipeline::guided::global_memory;
use serde::{Deserialize, Serialize};

use crate::lab::eval::{load_set, method_memories, parse_method, RetrievalEvalArgs};
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
    /// Characters of each core content in the global memory (0: outline items only, the
    /// compact memory a small model's context holds for a large library).
    #[arg(long, default_value_t = 240)]
    pub core_chars: usize,
    /// Chunks retrieved per question (enough to fill the largest budget).
    #[arg(long, default_value_t = 16)]
    pub k: usize,
    /// Fusion variants scored from the same clues: `kind` (each clue list at its kind's
    /// weight) and numbers s (the clue lists together at most s × the question's weight;
    /// 0.02 is the default of `docmem ask`).
    #[arg(long, default_value = "kind,1,0.25,0.05,0.02,0.01", value_delimiter = ',')]
    pub fusions: Vec<String>,
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
    /// One per fusion variant, in `fusions` order.
    clues: Vec<RetrievalScores>,
}

#[derive(Serialize, Default)]
struct HotpotRow {
    questions: usize,
    /// Both gold paragraphs among the top k chunks, k = 2, 4, 8.
    plain_support: [f64; 3],
    /// Per fusion variant.
    clues_support: Vec<[f64; 3]>,
}

/// A fusion variant: its name and weights.
fn fusions(names: &[String]) -> Result<Vec<(String, ClueWeights)>, CliError> {
    names
        .iter()
        .map(|n| match n.trim() {
            "kind" => Ok(("kind".to_string(), ClueWeights { clue_share: None, ..ClueWeights::default() })),
            v => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => {
                    Ok((format!("share {v}"), ClueWeights { clue_share: Some(x), ..ClueWeights::default() }))
                }
                _ => Err(CliError::BadArgument { message: format!("--fusions: '{v}' is not kind or a number ≥ 0") }),
            },
        })
        .collect()
}

/// Clues written so far, by question, kept next to the memories so a second run (another
/// fusion, another split) does not ask the model again.
#[derive(Serialize, Deserialize, Default)]
struct ClueCache {
    clues: std::collections::BTreeMap<String, Vec<Clue>>,
}

impl ClueCache {
    fn load(path: &std::path::Path) -> Self {
        std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    fn save(&self, path: &std::path::Path) -> Result<(), CliError> {
        let bytes = serde_json::to_vec(self).map_err(|e| CliError::Output(e.into()))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|source| CliError::Read { path: path.to_path_buf(), source })
    }
}

/// Chunks in rank order, as (document, span).
type Ranked = Vec<(docmem_core::DocId, docmem_core::Span)>;

/// Search with the question and each clue, and fuse each variant's way: the question's
/// own list (plain) and one ranked list per variant.
fn clued_lists(
    library: &Library<MemStore>,
    embedder: &mut dyn Embedder,
    question: &str,
    clues: &[Clue],
    variants: &[(String, ClueWeights)],
    k: usize,
) -> Result<(Ranked, Vec<Ranked>), CliError> {
    let params = SearchParams { k, ..SearchParams::default() };
    let mut queries = vec![Clue::new(ClueKind::Question, question)];
    queries.extend(clues.iter().cloned());
    let mut lists = Vec::with_capacity(queries.len());
    for q in &queries {
        lists.push(library.search(&q.text, embedder, &params)?);
    }
    let plain = lists[0].iter().map(|h| (h.doc_id, h.span)).collect();
    let fused = variants
        .iter()
        .map(|(_, w)| fuse_clue_lists(&queries, &lists, w, k, params.rrf_k).iter().map(|c| (c.chunk.doc_id, c.chunk.span)).collect())
        .collect();
    Ok((plain, fused))
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
    fusions: Vec<String>,
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
    let settings = LibrarySettings::new(embedder.name(), embedder.dim());
    let mut library = Library::open(MemStore::default(), &settings)?;
    for (i, (d, m)) in docs.iter().zip(memories).enumerate() {
        library.add_to(&collections(i), d, m, embedder)?;
    }
    Ok(library)
}

/// The share of the question's terms in its answer sentence (see the module docs).
fn answer_overlap(question: &str, golds: &[String], doc: &str) -> f64 {
    let q = term_set(question);
    let golds: Vec<String> = golds.iter().map(|g| crate::lab::eval::metrics::normalize_answer(g)).collect();
    doc.split_inclusive(['.', '?', '!', '\n'])
        .filter(|s| {
            let n = crate::lab::eval::metrics::normalize_answer(s);
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
    let gsettings = GlobalMemorySettings { max_tokens: a.global_tokens, max_core_chars: a.core_chars };
    let global = docmem_runtime::block_on(global_memory(&mut library, &mut text, &model_name, &gsettings))?;
    let global_seconds = t.elapsed().as_secs_f64();
    let global_tokens = docmem_core::text_model::TextModel::count_tokens(&mut text, &global.text).unwrap_or(0);
    eprintln!("docmem eval clues: global memory {global_tokens} tokens (gist: {}) in {global_seconds:.0} s", global.gist);

    let variants = fusions(&a.fusions)?;
    let new_scores = || RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS);
    let mut rows: Vec<BucketRow> = BUCKETS
        .iter()
        .map(|(name, _, _)| BucketRow {
            bucket: (*name).into(),
            plain: new_scores(),
            clues: variants.iter().map(|_| new_scores()).collect(),
        })
        .collect();
    let mut all = BucketRow { bucket: "all".into(), plain: new_scores(), clues: variants.iter().map(|_| new_scores()).collect() };
    let cache_path = r.library_cache.join(format!("clues-{}-{}-c{}-g{}.json", method.label, model_name, a.core_chars, a.global_tokens));
    let mut cache = ClueCache::load(&cache_path);
    let (mut clue_count, mut clue_seconds, mut written) = (0usize, 0.0, 0usize);
    let n = set.questions.len();
    for (qi, q) in set.questions.iter().enumerate() {
        let golds: Vec<&str> = q.answers.iter().map(String::as_str).collect();
        let clues = match cache.clues.get(&q.id) {
            Some(c) => c.clone(),
            None => {
                let t = Instant::now();
                let c = docmem_runtime::block_on(write_clues(&mut text, &global, &q.question, false, &ClueFilter::default()))?;
                clue_seconds += t.elapsed().as_secs_f64();
                written += 1;
                cache.clues.insert(q.id.clone(), c.clone());
                cache.save(&cache_path)?;
                c
            }
        };
        clue_count += clues.len();
        let (plain, fused) = clued_lists(&library, embedder.as_mut(), &q.question, &clues, &variants, a.k)?;
        let po = score_ranked(&texts_of(&library, &plain), &golds, &BUDGETS, &RANK_CUTOFFS);
        let overlap = answer_overlap(&q.question, &q.answers, &set.documents[q.document].text);
        let b = BUCKETS.iter().position(|(_, lo, hi)| overlap >= *lo && overlap < *hi).unwrap_or(0);
        rows[b].plain.add(&po, plain.len());
        all.plain.add(&po, plain.len());
        for (vi, list) in fused.iter().enumerate() {
            let co = score_ranked(&texts_of(&library, list), &golds, &BUDGETS, &RANK_CUTOFFS);
            rows[b].clues[vi].add(&co, list.len());
            all.clues[vi].add(&co, list.len());
        }
        if (qi + 1) % 10 == 0 || qi + 1 == n {
            let best: Vec<String> = all.clues.iter().map(|c| format!("{:.3}", c.budget_recall[1])).collect();
            eprintln!(
                "docmem eval clues: {}/{n}: recall@1000 plain {:.3}, clues {} ({:.1} s per clue-writing)",
                qi + 1,
                all.plain.budget_recall[1],
                best.join(" / "),
                clue_seconds / written.max(1) as f64
            );
        }
    }
    rows.push(all);
    let hotpot = match &a.hotpot {
        Some(p) => {
            Some(hotpot_eval(p, r.split, a.hotpot_limit, &mut text, embedder.as_mut(), a.k, &variants, &r.library_cache, &model_name)?)
        }
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
        clue_seconds_per_question: clue_seconds / written.max(1) as f64,
        fusions: variants.iter().map(|(n, _)| n.clone()).collect(),
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
    let mut head = String::from("\n| overlap bucket | questions | retrieval | recall @500 | @1000 | @2000 | R@1 | R@8 |\n| --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in &report.rows {
        let line = |name: &str, s: &RetrievalScores| {
            format!(
                "\n| {} | {} | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                r.bucket, s.questions, s.budget_recall[0], s.budget_recall[1], s.budget_recall[2], s.recall[0], s.recall[2]
            )
        };
        head.push_str(&line("plain", &r.plain));
        for (name, s) in report.fusions.iter().zip(&r.clues) {
            head.push_str(&line(&format!("clues, {name}"), s));
        }
    }
    writeln!(out, "{head}")?;
    if let Some(h) = &report.hotpot {
        writeln!(out, "\nHotpotQA, {} questions, both gold paragraphs among the top k chunks:\n", h.questions)?;
        writeln!(out, "| retrieval | k=2 | k=4 | k=8 |\n| --- | --- | --- | --- |")?;
        writeln!(out, "| plain | {:.3} | {:.3} | {:.3} |", h.plain_support[0], h.plain_support[1], h.plain_support[2])?;
        for (name, v) in report.fusions.iter().zip(&h.clues_support) {
            writeln!(out, "| clues, {name} | {:.3} | {:.3} | {:.3} |", v[0], v[1], v[2])?;
        }
    }
    Ok(())
}

/// Both gold titles among the titles of `hits`' top k.
fn both_gold(titles: &[String], golds: &[String], k: usize) -> bool {
    golds.iter().all(|g| titles.iter().take(k).any(|t| t == g))
}

#[allow(clippy::too_many_arguments)]
fn hotpot_eval(
    path: &PathBuf,
    split: Split,
    limit: usize,
    text: &mut dyn docmem_core::text_model::TextModel,
    embedder: &mut dyn Embedder,
    k: usize,
    variants: &[(String, ClueWeights)],
    cache_dir: &std::path::Path,
    model_name: &str,
) -> Result<HotpotRow, CliError> {
    let bytes = std::fs::read(path).map_err(|source| CliError::Read { path: path.clone(), source })?;
    let set = parse_hotpot(&bytes).map_err(|e| CliError::BadArgument { message: format!("--hotpot {}: {e}", path.display()) })?;
    let sides = set.sides();
    let all: Vec<&HotpotQuestion> = set.questions.iter().zip(&sides).filter(|(_, side)| split.includes(**side)).map(|(q, _)| q).collect();
    let n = all.len();
    let take = if limit == 0 || limit >= n { n } else { limit };
    let mut row = HotpotRow { clues_support: vec![[0.0; 3]; variants.len()], ..HotpotRow::default() };
    let cache_path = cache_dir.join(format!("clues-hotpot-{model_name}.json"));
    let mut cache = ClueCache::load(&cache_path);
    for i in 0..take {
        let q = all[i * n / take];
        let docs: Vec<Document> = q.paragraphs.iter().map(|&p| set.documents[p].clone()).collect();
        let memories: Vec<DocumentMemory> = docs
            .iter()
            .map(|d| {
                let spans = docmem_core::chunk::chunk_with(ChunkerKind::Sentence, &d.text, Default::default(), None).unwrap_or_default();
                DocumentMemory::from_spans(d, &spans, "sentence")
            })
            .collect();
        let mut library = memory_library(&docs, &memories, &|_| "default".into(), embedder)?;
        let clues = match cache.clues.get(&q.question) {
            Some(c) => c.clone(),
            None => {
                let global = docmem_runtime::block_on(global_memory(&mut library, text, "hotpot", &GlobalMemorySettings::default()))?;
                let c = docmem_runtime::block_on(write_clues(text, &global, &q.question, false, &ClueFilter::default()))?;
                cache.clues.insert(q.question.clone(), c.clone());
                cache.save(&cache_path)?;
                c
            }
        };
        let golds = &q.gold_titles;
        let title_of = |(id, _): &(docmem_core::DocId, docmem_core::Span)| {
            docs.iter().find(|d| d.id == *id).map_or(String::new(), |d| d.title.clone())
        };
        let (plain, fused) = clued_lists(&library, embedder, &q.question, &clues, variants, k)?;
        let plain_titles: Vec<String> = plain.iter().map(title_of).collect();
        let m = row.questions as f64;
        let mean = |old: f64, hit: bool| (old * m + f64::from(u8::from(hit))) / (m + 1.0);
        for (j, kk) in [2usize, 4, 8].into_iter().enumerate() {
            row.plain_support[j] = mean(row.plain_support[j], both_gold(&plain_titles, golds, kk));
            for (vi, list) in fused.iter().enumerate() {
                let titles: Vec<String> = list.iter().map(title_of).collect();
                row.clues_support[vi][j] = mean(row.clues_support[vi][j], both_gold(&titles, golds, kk));
            }
        }
        row.questions += 1;
        if row.questions.is_multiple_of(10) {
            eprintln!("docmem eval clues: hotpot {}/{take}: support@4 plain {:.3}", row.questions, row.plain_support[1]);
        }
    }
    Ok(row)
}
