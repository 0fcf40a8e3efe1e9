//! `docmem eval retrieval`: MoM memories against the baseline chunkers on SQuAD-format
//! data, at an equal context budget (see `docmem_core::eval`).
//!
//! Each article is one document. Every method indexes the same documents with the same
//! embedder; question vectors are computed once and shared. MoM memories are the slow
//! part (the reader writes them), so they are cached under `--library-cache`, keyed by
//! reader, prompt and sample count: a second run only re-indexes and re-scores.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use docmem_core::chunk::ChunkerKind;
use docmem_core::eval::squad::parse_squad;
use docmem_core::eval::{score_questions, RetrievalScores};
use docmem_core::index::SegmentParams;
use docmem_core::reader::{extract_memory, ExtractSettings};
use docmem_core::retrieve::{MemoryIndex, RetrievalMode};
use docmem_core::{DocId, Document, DocumentMemory, EmbedRole};
use docmem_runtime::lm::{Lm, LmReader, LoadOptions};
use serde::{Deserialize, Serialize};

use crate::chunk::{chunk_document, passage_sizes};
use crate::CliError;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Answer-span recall@k and MRR of each chunker and retrieval variant.
    Retrieval(RetrievalEvalArgs),
    /// End to end: retrieve, answer with the answerer model, exact match and F1 (SQuAD
    /// normalisation) and informational support (NLL of the gold answer given the context).
    Qa(QaEvalArgs),
}

#[derive(Args)]
pub struct QaEvalArgs {
    #[command(flatten)]
    pub retrieval: RetrievalEvalArgs,
    /// The answerer model [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub answerer: Option<PathBuf>,
    /// Memories shown to the answerer.
    #[arg(long, default_value_t = 5)]
    pub k: usize,
    /// Most answer tokens.
    #[arg(long, default_value_t = 32)]
    pub max_tokens: usize,
}

#[derive(Args)]
pub struct RetrievalEvalArgs {
    /// SQuAD-format JSON (e.g. shared/eval/squad-v2-dev-sample.json).
    #[arg(long)]
    pub data: PathBuf,
    /// Where MoM memories are cached between runs.
    #[arg(long)]
    pub library_cache: PathBuf,
    /// Use only the first N articles (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit_docs: usize,
    /// Use only the first N answerable questions of those articles (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit_questions: usize,
    /// Methods, comma-separated: mom (every retrieval variant), fixed, sentence,
    /// recursive, semantic.
    #[arg(long, default_value = "mom,fixed,sentence,recursive,semantic", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// The reader model for mom [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub reader: Option<PathBuf>,
    /// Sampled candidates per window besides the greedy one.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Most document tokens per reading window (0: half the context).
    #[arg(long, default_value_t = 0)]
    pub window_tokens: usize,
    /// Most tokens per reader reply (0: as the window needs).
    #[arg(long, default_value_t = 0)]
    pub max_new_tokens: usize,
    /// Characters of retrieved text per rank (k × this is the budget at k).
    #[arg(long, default_value_t = 400)]
    pub budget: usize,
    /// Worker threads for the reader (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

/// The evaluation set after the limits: documents and answerable questions.
fn load_set(a: &RetrievalEvalArgs) -> Result<docmem_core::eval::squad::SquadSet, CliError> {
    let bytes = std::fs::read(&a.data).map_err(|source| CliError::Read { path: a.data.clone(), source })?;
    let mut set = parse_squad(&bytes).map_err(|e| CliError::BadArgument { message: format!("--data {}: {e}", a.data.display()) })?;
    if a.limit_docs > 0 {
        set.documents.truncate(a.limit_docs);
        set.questions.retain(|q| q.document < a.limit_docs);
    }
    set.questions.retain(|q| !q.answers.is_empty());
    if a.limit_questions > 0 {
        set.questions.truncate(a.limit_questions);
    }
    Ok(set)
}

/// Memories of every document by `method` (mom: cached reader memories; else a baseline
/// chunker), the retrieval modes to evaluate them with, and ingest seconds per document.
fn method_memories(
    a: &RetrievalEvalArgs,
    method: &str,
    docs: &[Document],
    embedder: &mut dyn docmem_core::Embedder,
    reader_name: &mut Option<String>,
) -> Result<(Vec<DocumentMemory>, Vec<RetrievalMode>, f64), CliError> {
    let started = Instant::now();
    if method == "mom" {
        let (name, mems) = mom_memories(a, docs)?;
        *reader_name = Some(name);
        let per_doc = mems.iter().map(|m| m.1).sum::<f64>() / mems.len().max(1) as f64;
        return Ok((mems.into_iter().map(|m| m.0).collect(), RetrievalMode::ALL.to_vec(), per_doc));
    }
    let kind: ChunkerKind =
        method.parse().map_err(|_| CliError::BadArgument { message: format!("--methods: unknown method '{method}'") })?;
    let mut mems = Vec::new();
    for doc in docs {
        // The same passages as `docmem ingest` makes.
        let (size, overlap) = passage_sizes(kind, None, None);
        let spans = chunk_document(doc, kind, size, overlap, embedder)?;
        mems.push(DocumentMemory::from_spans(doc, &spans, kind.name()));
    }
    Ok((mems, vec![RetrievalMode::ChunkOnly], started.elapsed().as_secs_f64() / docs.len().max(1) as f64))
}

fn build_index(
    mode: RetrievalMode,
    docs: &[Document],
    memories: &[DocumentMemory],
    embedder: &mut dyn docmem_core::Embedder,
) -> Result<MemoryIndex, CliError> {
    let mut index = MemoryIndex::new(mode, embedder.dim(), SegmentParams::default());
    for (doc, memory) in docs.iter().zip(memories) {
        if memory.check(doc).is_ok() {
            index.add_document(doc, memory, embedder)?;
        } else {
            index.add_chunks(doc, memory, embedder)?;
        }
    }
    Ok(index)
}

#[derive(Serialize, Deserialize)]
struct CachedMemory {
    memory: DocumentMemory,
    seconds: f64,
}

#[derive(Serialize)]
struct Row {
    method: String,
    #[serde(flatten)]
    scores: RetrievalScores,
    chunks: usize,
    mean_chunk_chars: f64,
    ingest_seconds_per_doc: f64,
    fallback_docs: usize,
}

#[derive(Serialize)]
struct Report {
    data: String,
    documents: usize,
    questions: usize,
    budget_chars_per_rank: usize,
    embedder: String,
    reader: Option<String>,
    rows: Vec<Row>,
}

pub fn run(cmd: &EvalCommand) -> Result<(), CliError> {
    match cmd {
        EvalCommand::Retrieval(a) => retrieval(a),
        EvalCommand::Qa(a) => qa(a),
    }
}

fn mom_memories(a: &RetrievalEvalArgs, docs: &[Document]) -> Result<(String, Vec<(DocumentMemory, f64)>), CliError> {
    let path = a.reader.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument {
            message: format!("--reader: {} does not exist (or leave mom out of --methods)", path.display()),
        });
    }
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let key = format!(
        "{}-s{}-w{}-n{}",
        name.to_ascii_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
        a.samples,
        a.window_tokens,
        a.max_new_tokens
    );
    let dir = a.library_cache.join("mom").join(&key);
    std::fs::create_dir_all(&dir).map_err(|source| CliError::Read { path: dir.clone(), source })?;
    let mut lm: Option<Lm> = None;
    let settings = ExtractSettings {
        samples: a.samples,
        max_window_tokens: a.window_tokens,
        max_new_tokens: a.max_new_tokens,
        ..ExtractSettings::default()
    };
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let file = dir.join(format!("{}.json", doc.id));
        if let Some(c) = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice::<CachedMemory>(&b).ok()) {
            if c.memory.check(doc).is_ok() {
                out.push((c.memory, c.seconds));
                continue;
            }
        }
        if lm.is_none() {
            lm = Some(Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?);
        }
        let Some(model) = &lm else { continue };
        let t = Instant::now();
        let mut reader = LmReader::new(model, name.clone());
        let mut last = usize::MAX;
        let memory = extract_memory(doc, &mut reader, None, &settings, &mut |p| {
            if p.candidates_done != last {
                last = p.candidates_done;
                eprintln!(
                    "docmem eval: [{}/{}] {}: window {}/{}, candidates {}/{}, {:.0} s",
                    i + 1,
                    docs.len(),
                    doc.title,
                    p.window,
                    p.windows,
                    p.candidates_done,
                    p.candidates_total,
                    t.elapsed().as_secs_f64()
                );
            }
            true
        })?;
        let seconds = t.elapsed().as_secs_f64();
        let bytes = serde_json::to_vec(&CachedMemory { memory: memory.clone(), seconds }).map_err(|e| CliError::Output(e.into()))?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|source| CliError::Read { path: file.clone(), source })?;
        out.push((memory, seconds));
    }
    Ok((name, out))
}

fn retrieval(a: &RetrievalEvalArgs) -> Result<(), CliError> {
    let set = load_set(a)?;
    let ks = [1usize, 3, 8];
    let mut embedder = a.embedder.open()?;
    let texts: Vec<&str> = set.questions.iter().map(|q| q.question.as_str()).collect();
    let vectors = embedder.embed(&texts, EmbedRole::Query).map_err(docmem_core::retrieve::RetrieveError::Embed)?;
    let questions: Vec<(&str, &[f32], Vec<&str>)> = set
        .questions
        .iter()
        .zip(&vectors)
        .map(|(q, v)| (q.question.as_str(), v.as_slice(), q.answers.iter().map(String::as_str).collect()))
        .collect();
    let by_id: HashMap<DocId, &Document> = set.documents.iter().map(|d| (d.id, d)).collect();
    let chunk_text =
        |hit: &docmem_core::retrieve::RetrievedChunk| by_id.get(&hit.doc_id).and_then(|d| hit.span.slice(&d.text)).map(str::to_string);

    let mut rows = Vec::new();
    let mut reader_name = None;
    for method in &a.methods {
        let (memories, variants, per_doc) = method_memories(a, method, &set.documents, embedder.as_mut(), &mut reader_name)?;
        let chunks: usize = memories.iter().map(|m| m.scenarios.len()).sum();
        let chars: usize =
            memories.iter().zip(&set.documents).flat_map(|(m, d)| m.scenarios.iter().map(move |s| s.span.char_len(&d.text))).sum();
        let fallback_docs = memories.iter().filter(|m| m.provenance.fallback.is_some()).count();
        for mode in variants {
            let index = build_index(mode, &set.documents, &memories, embedder.as_mut())?;
            let scores = score_questions(&index, &questions, &chunk_text, &ks, a.budget)?;
            let name = if method == "mom" { format!("mom ({})", mode.name()) } else { method.clone() };
            eprintln!("docmem eval: {name}: recall@8 {:.3}", scores.recall[2]);
            rows.push(Row {
                method: name,
                scores,
                chunks,
                mean_chunk_chars: chars as f64 / chunks.max(1) as f64,
                ingest_seconds_per_doc: per_doc,
                fallback_docs,
            });
        }
    }
    let report = Report {
        data: a.data.display().to_string(),
        documents: set.documents.len(),
        questions: questions.len(),
        budget_chars_per_rank: a.budget,
        embedder: embedder.name(),
        reader: reader_name,
        rows,
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} documents, {} answerable questions, {} characters per rank, embedder {}",
        report.documents, report.questions, a.budget, report.embedder
    )?;
    writeln!(out, "\n| method | recall@1 | recall@3 | recall@8 | MRR | chunks | mean chunk chars | ingest s/doc | fallbacks |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &report.rows {
        writeln!(
            out,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.0} | {:.1} | {} |",
            r.method,
            r.scores.recall[0],
            r.scores.recall[1],
            r.scores.recall[2],
            r.scores.mrr,
            r.chunks,
            r.mean_chunk_chars,
            r.ingest_seconds_per_doc,
            r.fallback_docs
        )?;
    }
    Ok(())
}

#[derive(Serialize)]
struct QaRow {
    method: String,
    questions: usize,
    exact_match: f64,
    f1: f64,
    /// Mean NLL of the gold answer's tokens given the prompt (lower is better).
    informational_support: f64,
    not_in_documents: usize,
    seconds_per_question: f64,
}

fn qa(q: &QaEvalArgs) -> Result<(), CliError> {
    use docmem_core::answer::{answer_prompt, says_not_in_documents, Memory};
    use docmem_core::eval::{exact_match, f1};
    use docmem_core::score::informational_support;
    use docmem_runtime::chat::ChatMessage;
    use docmem_runtime::lm::{Prompt, SamplingParams};

    let a = &q.retrieval;
    let set = load_set(a)?;
    let path = q.answerer.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument { message: format!("--answerer: {} does not exist", path.display()) });
    }
    let lm = Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?;
    let mut embedder = a.embedder.open()?;
    let by_id: HashMap<DocId, &Document> = set.documents.iter().map(|d| (d.id, d)).collect();
    let mut rows = Vec::new();
    let mut reader_name = None;
    for method in &a.methods {
        let (memories, _, _) = method_memories(a, method, &set.documents, embedder.as_mut(), &mut reader_name)?;
        let mode = if method == "mom" { RetrievalMode::ThreeLayer } else { RetrievalMode::ChunkOnly };
        let index = build_index(mode, &set.documents, &memories, embedder.as_mut())?;
        let mem_of: HashMap<DocId, &DocumentMemory> = memories.iter().map(|m| (m.doc_id, m)).collect();
        let (mut em, mut f, mut nll, mut nll_n, mut refusals) = (0.0, 0.0, 0.0, 0usize, 0usize);
        let started = Instant::now();
        for (i, question) in set.questions.iter().enumerate() {
            let hits = index.search_text(
                &question.question,
                embedder.as_mut(),
                &docmem_core::retrieve::SearchParams { k: q.k, ..Default::default() },
            )?;
            // The same budget as retrieval: k × budget characters of chunk text.
            let mut left = q.k * a.budget;
            let mut owned = Vec::new();
            for h in &hits {
                let (Some(doc), Some(m)) = (by_id.get(&h.doc_id), mem_of.get(&h.doc_id)) else { continue };
                let text: String = h.span.slice(&doc.text).unwrap_or("").chars().take(left).collect();
                left -= text.chars().count();
                let s = m.scenarios.get(h.scenario as usize);
                let outline = s.and_then(|s| s.outline_item).and_then(|o| m.outline.get(o as usize)).cloned();
                owned.push((doc.title.clone(), outline, s.map(|s| s.core.clone()).unwrap_or_default(), text));
                if left == 0 {
                    break;
                }
            }
            let shown: Vec<Memory<'_>> =
                owned.iter().map(|(t, o, c, x)| Memory { title: t, outline: o.as_deref(), core: c, text: x }).collect();
            let prompt = answer_prompt(&question.question, &shown, false);
            let messages = [ChatMessage::new("user", &prompt)];
            let g =
                lm.generate(Prompt::Chat(&messages), &SamplingParams { max_tokens: q.max_tokens, ..SamplingParams::default() }, |_| {
                    std::ops::ControlFlow::Continue(())
                })?;
            let answer = g.text.trim().lines().next().unwrap_or("").to_string();
            let golds: Vec<&str> = question.answers.iter().map(String::as_str).collect();
            em += exact_match(&answer, &golds);
            f += f1(&answer, &golds);
            refusals += usize::from(says_not_in_documents(&answer));
            let rendered = lm.render_chat(&messages)?;
            let gold = format!(" {}", golds[0]);
            if let Some(lps) = lm.score(&[(rendered.as_str(), gold.as_str())])?.first() {
                if let Some(v) = informational_support(lps) {
                    nll += v;
                    nll_n += 1;
                }
            }
            eprintln!("docmem eval qa: {method} {}/{}: {answer:?} (gold {:?})", i + 1, set.questions.len(), golds[0]);
        }
        let n = set.questions.len().max(1) as f64;
        rows.push(QaRow {
            method: method.clone(),
            questions: set.questions.len(),
            exact_match: em / n,
            f1: f / n,
            informational_support: nll / nll_n.max(1) as f64,
            not_in_documents: refusals,
            seconds_per_question: started.elapsed().as_secs_f64() / n,
        });
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &rows).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "| method | questions | EM | F1 | informational support (NLL, lower is better) | refusals | s/question |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {} | {:.1} |",
            r.method, r.questions, r.exact_match, r.f1, r.informational_support, r.not_in_documents, r.seconds_per_question
        )?;
    }
    Ok(())
}
