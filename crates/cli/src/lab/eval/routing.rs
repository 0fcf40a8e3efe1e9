//! `docmem eval routing`: routing across collections (SEGMEM-RAG) against searching every
//! collection (EnumRAG), a random collection (BlindRAG), and two ablations of the router.
//!
//! The SQuAD articles are grouped in order into `--collections` collections of one
//! library; the answerable questions of the split come as one stream in a seeded random
//! order (so each collection's questions are spread over it), and the memory controller
//! learns as the stream goes: after each answer its update is applied and the cold-start
//! explorer probes a little, as `docmem ask --route auto` does. Per method: routing
//! accuracy (the first segment's collection is the question's article's), final accuracy
//! (the collection answered from), answer recall at 500 / 1,000 / 2,000 characters of the
//! passages answered from, and segments per question; for the learning router also the
//! first and second half of the stream apart.
//!
//! Strategies (`--strategies`): `enum` (every collection at once: the library search), `blind` (one random
//! collection), `route-memory` (the router with the symbolic memory, learning),
//! `route-static` (the router with the descriptors only, nothing learned), `route-random`
//! (the router's segments and judge without the memory controller: collections in a
//! random order).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use crate::lab::eval::metrics::{score_ranked, RetrievalScores, BUDGETS, RANK_CUTOFFS};
use clap::Args;
use docmem_core::retrieve::SearchParams;
use docmem_core::route::{route, CollectionSearch, Controller, JudgeKind, RouteSettings, RouteTarget, SymbolicMemory};
use docmem_core::text_model::TextModel;
use docmem_runtime::lm::{Lm, LmText, LoadOptions};
use docmem_runtime::pipeline::guided::{collection_search, explore_collections, refresh_descriptors};
use serde::Serialize;

use crate::lab::eval::clues::memory_library;
use crate::lab::eval::{load_set, method_memories, parse_method, RetrievalEvalArgs};
use crate::CliError;

#[derive(Args)]
pub struct RoutingEvalArgs {
    #[command(flatten)]
    pub retrieval: RetrievalEvalArgs,
    /// Collections the articles are grouped into (in order).
    #[arg(long, default_value_t = 4)]
    pub collections: usize,
    /// The router's settings, as `docmem ask` takes them (`--controller` is not used: the
    /// strategies name the controllers).
    #[command(flatten)]
    pub routing: crate::ask::RoutingArgs,
    /// The judge and sub-query writer when `--judge model` [default: the default reader]
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Chunks per search.
    #[arg(long, default_value_t = 16)]
    pub k: usize,
    /// Seed of the question order and the random choices.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Strategies to compare (`--methods` names the memories, as in `eval retrieval`).
    #[arg(long, default_value = "enum,blind,route-memory,route-static,route-random", value_delimiter = ',')]
    pub strategies: Vec<String>,
}

#[derive(Serialize, Clone)]
struct MethodRow {
    method: String,
    questions: usize,
    routing_accuracy: Option<f64>,
    final_accuracy: Option<f64>,
    /// Routing accuracy over the first and the second half of the stream.
    halves: Option<(f64, f64)>,
    segments_per_question: f64,
    scores: RetrievalScores,
    seconds_per_question: f64,
}

#[derive(Serialize)]
struct RoutingReport {
    data: String,
    split: String,
    documents: usize,
    collections: Vec<Vec<String>>,
    judge: String,
    method_memories: String,
    rows: Vec<MethodRow>,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

pub fn run(a: &RoutingEvalArgs) -> Result<(), CliError> {
    let r = &a.retrieval;
    if a.collections == 0 {
        return Err(CliError::BadArgument { message: "--collections must be at least 1".into() });
    }
    let base = a.routing.settings()?;
    let judge = base.judge;
    let method = parse_method(r.methods.first().map_or("mom", String::as_str))?;
    let set = load_set(r)?;
    let n_docs = set.documents.len();
    let per = n_docs.div_ceil(a.collections).max(1);
    let collection_of = |i: usize| format!("c{}", i / per + 1);
    let mut embedder = r.embedder.open()?;
    let mut reader_name = None;
    let mems = method_memories(r, &method, &set.documents, embedder.as_mut(), &mut reader_name)?;
    eprintln!("docmem eval routing: indexing {n_docs} documents in {} collections", n_docs.div_ceil(per));
    let library = memory_library(&set.documents, &mems.memories, &collection_of, embedder.as_mut())?;
    let names: Vec<String> = library.collections().into_iter().map(String::from).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let lm = match judge {
        JudgeKind::Model => {
            let path = a.model.clone().unwrap_or_else(crate::models::default_reader);
            Some(Lm::load(&path, &LoadOptions { threads: r.threads, context: 0, ..LoadOptions::default() })?)
        }
        _ => None,
    };
    let mut text = lm.as_ref().map(LmText::new);
    // The stream: the split's answerable questions in a seeded random order.
    let mut order: Vec<usize> = (0..set.questions.len()).collect();
    let mut s = a.seed | 1;
    for i in (1..order.len()).rev() {
        order.swap(i, (xorshift(&mut s) % (i as u64 + 1)) as usize);
    }
    let mut rows = Vec::new();
    for m in &a.strategies {
        let t = Instant::now();
        let mut scores = RetrievalScores::new(&BUDGETS, &RANK_CUTOFFS);
        let (mut first_ok, mut final_ok, mut segments) = (Vec::new(), 0usize, 0usize);
        let mut memory = SymbolicMemory::new();
        refresh_descriptors(&library, &mut memory)?;
        let controller = match m.as_str() {
            "route-memory" => Some(Controller::Memory),
            "route-static" => Some(Controller::Static),
            "route-random" => Some(Controller::Random),
            "enum" | "blind" => None,
            other => {
                return Err(CliError::BadArgument {
                    message: format!("--strategies: '{other}' is not enum, blind, route-memory, route-static or route-random"),
                })
            }
        };
        let mut rng = a.seed.wrapping_mul(31) | 1;
        for (step, &qi) in order.iter().enumerate() {
            let q = &set.questions[qi];
            let gold = collection_of(q.document);
            let golds: Vec<&str> = q.answers.iter().map(String::as_str).collect();
            let passages: Vec<String> = match (m.as_str(), controller) {
                ("enum", _) => {
                    let hits = library.search(&q.question, embedder.as_mut(), &SearchParams { k: a.k, ..SearchParams::default() })?;
                    hits.iter().filter_map(|h| library.passage(h).map(|p| p.text.to_string())).collect()
                }
                ("blind", _) => {
                    let c = &names[(xorshift(&mut rng) % names.len() as u64) as usize];
                    first_ok.push(*c == gold);
                    final_ok += usize::from(*c == gold);
                    segments += 1;
                    let params = SearchParams { k: a.k, ..SearchParams::default() };
                    let mut search = collection_search(&library, embedder.as_mut(), &params);
                    docmem_runtime::block_on(search.search(c, &q.question))?.into_iter().map(|f| f.text).collect()
                }
                (_, Some(controller)) => {
                    let settings = RouteSettings { controller, seed: a.seed.wrapping_add(step as u64), ..base.clone() };
                    let model: Option<&mut dyn TextModel> = text.as_mut().map(|t| t as &mut dyn TextModel);
                    let routed = {
                        let params = SearchParams { k: a.k, ..SearchParams::default() };
                        let mut search = collection_search(&library, embedder.as_mut(), &params);
                        docmem_runtime::block_on(route(&q.question, &name_refs, &memory, model, &RouteTarget::Auto, &settings, &mut search))
                            .map_err(|e| CliError::BadArgument { message: e.to_string() })?
                    };
                    first_ok.push(routed.segments.first().is_some_and(|s| s.collection == gold));
                    final_ok += usize::from(routed.collection.as_deref() == Some(gold.as_str()));
                    segments += routed.segments.len();
                    if controller == Controller::Memory {
                        memory.apply(&routed.update);
                        let explore_settings = a.routing.explore(judge);
                        let model: Option<&mut dyn TextModel> = text.as_mut().map(|t| t as &mut dyn TextModel);
                        let probes = docmem_runtime::block_on(explore_collections(
                            &library,
                            embedder.as_mut(),
                            model,
                            &memory,
                            &explore_settings,
                            a.k,
                        ))?;
                        memory.apply(&probes);
                    }
                    routed.passages.into_iter().map(|f| f.text).collect()
                }
                _ => Vec::new(),
            };
            let texts: Vec<&str> = passages.iter().map(String::as_str).collect();
            scores.add(&score_ranked(&texts, &golds, &BUDGETS, &RANK_CUTOFFS), texts.len());
            if (step + 1) % 50 == 0 {
                eprintln!("docmem eval routing: {m}: {}/{}: recall@1000 {:.3}", step + 1, order.len(), scores.budget_recall[1]);
            }
        }
        let n = order.len().max(1);
        let acc = |v: &[bool]| v.iter().filter(|x| **x).count() as f64 / v.len().max(1) as f64;
        let routed = m != "enum";
        let half = first_ok.len() / 2;
        rows.push(MethodRow {
            method: m.clone(),
            questions: order.len(),
            routing_accuracy: routed.then(|| acc(&first_ok)),
            final_accuracy: routed.then(|| final_ok as f64 / n as f64),
            halves: (routed && half > 0).then(|| (acc(&first_ok[..half]), acc(&first_ok[half..]))),
            segments_per_question: if routed { segments as f64 / n as f64 } else { names.len() as f64 },
            scores,
            seconds_per_question: t.elapsed().as_secs_f64() / n as f64,
        });
    }
    let mut collections: Vec<Vec<String>> = vec![Vec::new(); names.len()];
    for (i, d) in set.documents.iter().enumerate() {
        if let Some(c) = names.iter().position(|n| *n == collection_of(i)) {
            collections[c].push(d.title.clone());
        }
    }
    let report = RoutingReport {
        data: r.data.display().to_string(),
        split: r.split.name().into(),
        documents: n_docs,
        collections,
        judge: a.routing.judge.clone(),
        method_memories: method.label.clone(),
        rows,
    };
    let mut out = std::io::stdout().lock();
    if r.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} documents in {} collections ({} memories), {} questions ({} split), judge {}",
        report.documents,
        report.collections.len(),
        report.method_memories,
        report.rows.first().map_or(0, |r| r.questions),
        report.split,
        report.judge
    )?;
    writeln!(out, "\n| method | routing acc. | first / second half | final acc. | segments | recall @500 | @1000 | @2000 | s/question |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")?;
    let f = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.3}"));
    for row in &report.rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.3} | {:.2} |",
            row.method,
            f(row.routing_accuracy),
            row.halves.map_or("–".to_string(), |(a, b)| format!("{a:.3} / {b:.3}")),
            f(row.final_accuracy),
            row.segments_per_question,
            row.scores.budget_recall[0],
            row.scores.budget_recall[1],
            row.scores.budget_recall[2],
            row.seconds_per_question
        )?;
    }
    Ok(())
}
