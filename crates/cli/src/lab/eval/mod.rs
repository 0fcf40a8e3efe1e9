//! `docmem eval retrieval|qa`: MoM memories against the baseline chunkers on SQuAD-format
//! data, at equal context budgets (the metrics are [`metrics`]'s).
//!
//! Every article of the file is one document of **one** library, and every question is
//! searched against the whole library. Every method indexes the same documents with the
//! same embedder and the same hybrid retrieval (embedding + BM25 lists fused by RRF;
//! `--dense-only` leaves BM25 out); question vectors are computed once and shared. Only
//! the questions of `--split`'s articles are scored (dev to tune, test to report; see
//! `crate::lab::eval::metrics::split`); the library always holds every article.
//!
//! MoM memories are the slow part (the reader writes them), so each document's memory is
//! cached under `--library-cache` as soon as it is written, keyed by the reader file, the
//! prompt and every extraction setting: a second run only re-indexes and re-scores, and an
//! interrupted run resumes after the documents already done.

mod answers;
mod clues;
pub(crate) mod metrics;
mod routing;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::lab::eval::metrics::squad::{parse_squad, SquadSet};
use crate::lab::eval::metrics::{score_questions, EvalQuestion, RetrievalScores, Split, BUDGETS, RANK_CUTOFFS};
use clap::{Args, Subcommand};
use docmem_core::chunk::ChunkerKind;
use docmem_core::index::SegmentParams;
use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::reader::{choose_prompt, extract_memory, ExtractSettings, Generated, ReaderModel, SampleSpec};
use docmem_core::retrieve::{MemoryIndex, RetrievalMode, RetrievedChunk, SearchParams};
use docmem_core::{DocId, Document, DocumentMemory, EmbedRole, Scorer};
use docmem_runtime::lm::{Lm, LmContext, LmReader, LoadOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::chunk::{chunk_document, passage_sizes};
use crate::ingest::parse_prompt;
use crate::CliError;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Answer recall at equal budgets of 500, 1,000 and 2,000 characters, recall@1/3/8 and
    /// MRR of each chunker and MoM retrieval variant.
    Retrieval(RetrievalEvalArgs),
    /// End to end: retrieve, answer with the answerer model, exact match and F1 (SQuAD
    /// normalisation) and informational support (NLL of the gold answer given the context).
    Qa(QaEvalArgs),
    /// Clue-guided retrieval (MemoRAG) against plain retrieval: recall at equal budgets by
    /// question–answer overlap bucket on SQuAD, supporting-paragraph recall on HotpotQA.
    Clues(clues::CluesEvalArgs),
    /// Routing across collections (SEGMEM-RAG) against every collection (EnumRAG), a
    /// random one (BlindRAG) and the router's ablations, over a stream of questions.
    Routing(routing::RoutingEvalArgs),
    /// Answers through the product's own path (small-to-big windows, the answerability
    /// check) against LangChain's tutorial recipe and the gold paragraph, with the same
    /// model: EM/F1, and refusals of answerable and unanswerable questions.
    Answers(answers::AnswersEvalArgs),
}

#[derive(Args)]
pub struct QaEvalArgs {
    #[command(flatten)]
    pub retrieval: RetrievalEvalArgs,
    /// The answerer model [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub answerer: Option<PathBuf>,
    /// Characters of retrieved chunk text shown to the answerer (the ranked chunks cut
    /// there, as the retrieval budgets are).
    #[arg(long, default_value_t = 2000)]
    pub context_chars: usize,
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
    /// Use only N answerable questions of the split, evenly spaced over it so that every
    /// article is asked about (0: all).
    #[arg(long, default_value_t = 0)]
    pub limit_questions: usize,
    /// Which questions are scored: dev (the questions of about 30% of the articles; tune
    /// here), test (the other articles'; report these) or all. The library holds every
    /// article.
    #[arg(long, default_value = "test")]
    pub split: Split,
    /// Methods, comma-separated: mom (every retrieval variant), fixed, sentence,
    /// recursive, semantic; a chunker may take its size and overlap as NAME:SIZE[:OVERLAP]
    /// (sentence: tokens; fixed, recursive: characters), e.g. sentence:40:0,fixed:512.
    #[arg(long, default_value = "mom,fixed,sentence,recursive,semantic", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// MoM: index a memory chunk longer than this many characters as sentence-bounded
    /// pieces of at most this length, as new libraries do (0: whole chunks). Baseline
    /// chunkers' passages are not cut.
    #[arg(long, default_value_t = docmem_core::pieces::DEFAULT_PIECE_CHARS)]
    pub piece_chars: usize,
    /// Only the embedding lists, no BM25 (dense retrieval, as the chunk-and-embed
    /// reference figures were measured).
    #[arg(long)]
    pub dense_only: bool,
    /// Layer weights of mom's three-layer variant, e.g. `outline=0.25,core=0.5,chunk`
    /// (as `docmem search --layers`; default: the library's tuned weights).
    #[arg(long)]
    pub layers: Option<String>,
    /// The reader model for mom [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub reader: Option<PathBuf>,
    /// The reader prompt: auto, zh-think, zh, en-think, en, en-numbered, zh-numbered,
    /// en-lines, zh-lines, or a prompt file.
    #[arg(long, default_value = "auto")]
    pub prompt: String,
    /// Sampled candidates per window besides the greedy one.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Most document tokens per reading window (0: half the context).
    #[arg(long, default_value_t = 0)]
    pub window_tokens: usize,
    /// Most tokens per reader reply (0: as the window needs).
    #[arg(long, default_value_t = 0)]
    pub max_new_tokens: usize,
    /// Worker threads for the reader (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    pub json: bool,
}

/// One method of `--methods`: mom, or a chunker with optional size and overlap.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Method {
    /// As written (the row's name).
    pub(crate) label: String,
    /// `None` for mom.
    chunker: Option<ChunkerKind>,
    size: Option<usize>,
    overlap: Option<usize>,
}

pub(crate) fn parse_method(s: &str) -> Result<Method, CliError> {
    let bad = |why: &str| CliError::BadArgument { message: format!("--methods: '{s}': {why}") };
    let mut parts = s.trim().split(':');
    let name = parts.next().unwrap_or("");
    let mut number = |what: &str| -> Result<Option<usize>, CliError> {
        parts.next().map(|n| n.parse::<usize>().map_err(|_| bad(&format!("{what} '{n}' is not a number")))).transpose()
    };
    let (size, overlap) = (number("size")?, number("overlap")?);
    if name == "mom" {
        if size.is_some() {
            return Err(bad("mom takes no size"));
        }
        return Ok(Method { label: "mom".into(), chunker: None, size: None, overlap: None });
    }
    let kind: ChunkerKind = name.parse().map_err(|_| bad("not mom, fixed, sentence, recursive or semantic"))?;
    Ok(Method { label: s.trim().to_string(), chunker: Some(kind), size, overlap })
}

/// The evaluation set after the split and the limits: documents and answerable questions.
pub(crate) fn load_set(a: &RetrievalEvalArgs) -> Result<SquadSet, CliError> {
    let bytes = std::fs::read(&a.data).map_err(|source| CliError::Read { path: a.data.clone(), source })?;
    let mut set = parse_squad(&bytes).map_err(|e| CliError::BadArgument { message: format!("--data {}: {e}", a.data.display()) })?;
    // The split is of the whole file's articles, whatever `--limit-docs` keeps.
    let sides = set.sides();
    if a.limit_docs > 0 {
        set.documents.truncate(a.limit_docs);
        set.questions.retain(|q| q.document < a.limit_docs);
    }
    set.questions.retain(|q| !q.answers.is_empty() && a.split.includes(sides[q.document]));
    let n = set.questions.len();
    if a.limit_questions > 0 && a.limit_questions < n {
        // Question i·n/limit for i in 0..limit: a fixed, even spread over the split.
        let keep: Vec<usize> = (0..a.limit_questions).map(|i| i * n / a.limit_questions).collect();
        let mut i = 0;
        set.questions.retain(|_| {
            let kept = keep.binary_search(&i).is_ok();
            i += 1;
            kept
        });
    }
    Ok(set)
}

/// A method's memories of every document, with what making them cost.
pub(crate) struct Memories {
    pub(crate) memories: Vec<DocumentMemory>,
    /// Seconds per document to make the memories (reader or chunker).
    seconds_per_doc: f64,
    /// The reader's generation speed, tokens per second (mom only).
    reader_tok_s: Option<f64>,
}

/// Memories of every document by `method`: cached reader memories for mom, else the
/// chunker's passages (the same ones `docmem ingest` makes, unless a size is given).
pub(crate) fn method_memories(
    a: &RetrievalEvalArgs,
    method: &Method,
    docs: &[Document],
    embedder: &mut dyn docmem_core::Embedder,
    reader_name: &mut Option<String>,
) -> Result<Memories, CliError> {
    let Some(kind) = method.chunker else {
        let (name, mems) = mom_memories(a, docs)?;
        *reader_name = Some(name);
        let n = mems.len().max(1) as f64;
        let (tokens, gen_seconds): (usize, f64) = mems.iter().fold((0, 0.0), |(t, s), m| (t + m.reader_tokens, s + m.reader_seconds));
        return Ok(Memories {
            seconds_per_doc: mems.iter().map(|m| m.seconds).sum::<f64>() / n,
            reader_tok_s: (gen_seconds > 0.0).then(|| tokens as f64 / gen_seconds),
            memories: mems.into_iter().map(|m| m.memory).collect(),
        });
    };
    let started = Instant::now();
    let (size, overlap) = passage_sizes(kind, method.size, method.overlap);
    let mut memories = Vec::new();
    for doc in docs {
        let spans = chunk_document(doc, kind, size, overlap, embedder)?;
        memories.push(DocumentMemory::from_spans(doc, &spans, kind.name()));
    }
    Ok(Memories { memories, seconds_per_doc: started.elapsed().as_secs_f64() / docs.len().max(1) as f64, reader_tok_s: None })
}

fn build_index(
    mode: RetrievalMode,
    piece_chars: usize,
    docs: &[Document],
    memories: &[DocumentMemory],
    embedder: &mut dyn docmem_core::Embedder,
) -> Result<MemoryIndex, CliError> {
    let mut index = MemoryIndex::new(mode, embedder.dim(), SegmentParams::default()).with_piece_chars(piece_chars);
    for (doc, memory) in docs.iter().zip(memories) {
        if memory.check(doc).is_ok() {
            index.add_document(doc, memory, embedder)?;
        } else {
            index.add_chunks(doc, memory, embedder)?;
        }
    }
    Ok(index)
}

/// One document's cached MoM memory and what it cost.
#[derive(Serialize, Deserialize)]
struct CachedMemory {
    memory: DocumentMemory,
    /// Seconds the whole extraction took (reading and scoring).
    seconds: f64,
    /// Tokens the reader generated, and the seconds its generate calls took (prompt
    /// prefill included).
    #[serde(default)]
    reader_tokens: usize,
    #[serde(default)]
    reader_seconds: f64,
}

/// A reader that counts the tokens it generates and the time its generate calls take.
struct TimedReader<R> {
    inner: R,
    tokens: usize,
    seconds: f64,
}

impl<R: Scorer> Scorer for TimedReader<R> {
    fn continuation_logprobs<'a>(
        &'a mut self,
        pairs: &'a [(&'a str, &'a str)],
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        self.inner.continuation_logprobs(pairs)
    }
    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
        self.inner.next_token_logprobs(prompt, candidates)
    }
    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        self.inner.count_tokens(text)
    }
}

impl<R: ReaderModel> ReaderModel for TimedReader<R> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn context_tokens(&self) -> usize {
        self.inner.context_tokens()
    }
    fn chat_overhead_tokens(&mut self) -> usize {
        self.inner.chat_overhead_tokens()
    }
    fn generate<'a>(
        &'a mut self,
        user_turn: &'a str,
        specs: &'a [SampleSpec],
        max_tokens: usize,
        after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
        boxed(async move {
            let t = Instant::now();
            let out = self.inner.generate(user_turn, specs, max_tokens, after_each).await;
            self.seconds += t.elapsed().as_secs_f64();
            if let Ok(g) = &out {
                self.tokens += g.iter().map(|g| g.tokens).sum::<usize>();
            }
            out
        })
    }
}

#[derive(Serialize)]
struct Row {
    method: String,
    /// The retrieval variant (chunk-only for the chunkers).
    retrieval: &'static str,
    #[serde(flatten)]
    scores: RetrievalScores,
    chunks: usize,
    mean_chunk_chars: f64,
    /// Memories (reader or chunker) plus this variant's index (embedding), per document.
    ingest_seconds_per_doc: f64,
    reader_tok_s: Option<f64>,
    fallback_docs: usize,
}

#[derive(Serialize)]
struct Report {
    data: String,
    split: Split,
    documents: usize,
    questions: usize,
    embedder: String,
    retrieval: &'static str,
    reader: Option<String>,
    rows: Vec<Row>,
}

pub fn run(cmd: &EvalCommand) -> Result<(), CliError> {
    match cmd {
        EvalCommand::Retrieval(a) => retrieval(a),
        EvalCommand::Qa(a) => qa(a),
        EvalCommand::Clues(a) => clues::run(a),
        EvalCommand::Routing(a) => routing::run(a),
        EvalCommand::Answers(a) => answers::run(a),
    }
}

/// The cache folder's name for a reader and its settings: the file's name and size and a
/// hash of every extraction setting and the prompts it resolves to.
fn cache_key(path: &Path, name: &str, settings: &ExtractSettings) -> String {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut h = Sha256::new();
    h.update(format!("{settings:?}\n{size}\n").as_bytes());
    for language in ["en", "zh"] {
        h.update(choose_prompt(&settings.prompt, language, name).render("").as_bytes());
    }
    let hash: String = h.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-s{}-{hash}",
        name.to_ascii_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
        settings.prompt.name(),
        settings.samples
    )
}

fn mom_memories(a: &RetrievalEvalArgs, docs: &[Document]) -> Result<(String, Vec<CachedMemory>), CliError> {
    let path = a.reader.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument {
            message: format!("--reader: {} does not exist (or leave mom out of --methods)", path.display()),
        });
    }
    let name = crate::input::file_label(&path);
    let settings = ExtractSettings {
        prompt: parse_prompt(&a.prompt)?,
        samples: a.samples,
        max_window_tokens: a.window_tokens,
        max_new_tokens: a.max_new_tokens,
        ..ExtractSettings::default()
    };
    let dir = a.library_cache.join("mom").join(cache_key(&path, &name, &settings));
    std::fs::create_dir_all(&dir).map_err(|source| CliError::Read { path: dir.clone(), source })?;
    let mut lm: Option<LmContext> = None;
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        // Named by the document's content hash: a changed article is read again.
        let file = dir.join(format!("{}.json", doc.id));
        if let Some(c) = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice::<CachedMemory>(&b).ok()) {
            if c.memory.check(doc).is_ok() {
                out.push(c);
                continue;
            }
        }
        if lm.is_none() {
            eprintln!("docmem eval: reading with {name}; memories go to {}", dir.display());
            lm = Some(LmContext::new(Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?));
        }
        let Some(model) = &lm else { continue };
        let t = Instant::now();
        let mut reader = TimedReader { inner: LmReader::new(model, name.clone()), tokens: 0, seconds: 0.0 };
        let mut last = usize::MAX;
        let memory = docmem_runtime::block_on(extract_memory(doc, &mut reader, None, &settings, &mut |p| {
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
        }))?;
        let cached =
            CachedMemory { memory, seconds: t.elapsed().as_secs_f64(), reader_tokens: reader.tokens, reader_seconds: reader.seconds };
        // Written whole and renamed into place: an interrupted run leaves no half file.
        let bytes = serde_json::to_vec(&cached).map_err(|e| CliError::Output(e.into()))?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|source| CliError::Read { path: file.clone(), source })?;
        out.push(cached);
    }
    Ok((name, out))
}

/// The search settings every method gets.
fn search_params(a: &RetrievalEvalArgs) -> SearchParams {
    SearchParams { lexical: !a.dense_only, ..SearchParams::default() }
}

fn retrieval(a: &RetrievalEvalArgs) -> Result<(), CliError> {
    let methods: Vec<Method> = a.methods.iter().map(|m| parse_method(m)).collect::<Result<_, _>>()?;
    let set = load_set(a)?;
    let mut embedder = a.embedder.open()?;
    let texts: Vec<&str> = set.questions.iter().map(|q| q.question.as_str()).collect();
    let vectors = embedder.embed(&texts, EmbedRole::Query)?;
    let questions: Vec<EvalQuestion<'_>> = set
        .questions
        .iter()
        .zip(&vectors)
        .map(|(q, v)| EvalQuestion { question: &q.question, vector: v, golds: q.answers.iter().map(String::as_str).collect() })
        .collect();
    let by_id: HashMap<DocId, &Document> = set.documents.iter().map(|d| (d.id, d)).collect();
    let chunk_text = |hit: &RetrievedChunk| by_id.get(&hit.doc_id).and_then(|d| hit.span.slice(&d.text)).map(str::to_string);
    let params = search_params(a);
    let three_layer_params = match &a.layers {
        Some(list) => SearchParams { layer_weights: crate::search::layer_weights(list)?, ..params.clone() },
        None => params.clone(),
    };
    let docs = set.documents.len().max(1) as f64;

    let mut rows = Vec::new();
    let mut reader_name = None;
    for method in &methods {
        let m = method_memories(a, method, &set.documents, embedder.as_mut(), &mut reader_name)?;
        let chars: usize =
            m.memories.iter().zip(&set.documents).flat_map(|(m, d)| m.scenarios.iter().map(move |s| s.span.char_len(&d.text))).sum();
        let fallback_docs = m.memories.iter().filter(|m| m.provenance.fallback.is_some()).count();
        let variants = if method.chunker.is_none() { RetrievalMode::ALL.to_vec() } else { vec![RetrievalMode::ChunkOnly] };
        for mode in variants {
            let t = Instant::now();
            let index = build_index(mode, a.piece_chars, &set.documents, &m.memories, embedder.as_mut())?;
            let index_seconds = t.elapsed().as_secs_f64();
            // What is searched: chunks, or their pieces (which tile them, so the
            // characters are the same).
            let chunks = index.chunks();
            let params = match mode {
                RetrievalMode::ThreeLayer => &three_layer_params,
                _ => &params,
            };
            let scores = score_questions(&index, &questions, &chunk_text, &BUDGETS, &RANK_CUTOFFS, params)?;
            let name = if method.chunker.is_none() { format!("mom ({})", mode.name()) } else { method.label.clone() };
            eprintln!(
                "docmem eval: {name}: recall {:.3} / {:.3} / {:.3} at 500 / 1000 / 2000 characters",
                scores.budget_recall[0], scores.budget_recall[1], scores.budget_recall[2]
            );
            rows.push(Row {
                method: name,
                retrieval: mode.name(),
                scores,
                chunks,
                mean_chunk_chars: chars as f64 / chunks.max(1) as f64,
                ingest_seconds_per_doc: m.seconds_per_doc + index_seconds / docs,
                reader_tok_s: m.reader_tok_s,
                fallback_docs,
            });
        }
    }
    let report = Report {
        data: a.data.display().to_string(),
        split: a.split,
        documents: set.documents.len(),
        questions: questions.len(),
        embedder: embedder.name(),
        retrieval: if a.dense_only { "dense" } else { "hybrid (dense + BM25, RRF)" },
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
        "{} documents in one library, {} answerable questions ({} split), embedder {}, {} retrieval{}",
        report.documents,
        report.questions,
        report.split,
        report.embedder,
        report.retrieval,
        report.reader.as_ref().map_or(String::new(), |r| format!(", reader {r}"))
    )?;
    writeln!(
        out,
        "\n| method | recall @500 chars | @1000 | @2000 | recall@1 | recall@3 | recall@8 | MRR | chunks | mean chunk chars | ingest s/doc | reader tok/s | fallbacks |"
    )?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &report.rows {
        let s = &r.scores;
        writeln!(
            out,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.0} | {:.2} | {} | {} |",
            r.method,
            s.budget_recall[0],
            s.budget_recall[1],
            s.budget_recall[2],
            s.recall[0],
            s.recall[1],
            s.recall[2],
            s.mrr,
            r.chunks,
            r.mean_chunk_chars,
            r.ingest_seconds_per_doc,
            r.reader_tok_s.map_or("–".to_string(), |t| format!("{t:.1}")),
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

#[derive(Serialize)]
struct QaReport {
    data: String,
    split: Split,
    documents: usize,
    context_chars: usize,
    answerer: String,
    rows: Vec<QaRow>,
}

fn qa(q: &QaEvalArgs) -> Result<(), CliError> {
    use crate::lab::eval::metrics::{budget_parts, exact_match, f1, search_to_fill};
    use docmem_core::answer::{answer_prompt, says_not_in_documents, without_citations, Memory};
    use docmem_core::score::informational_support;
    use docmem_runtime::chat::ChatMessage;
    use docmem_runtime::lm::{PrefillOptions, Prompt, SamplingParams};

    let a = &q.retrieval;
    let methods: Vec<Method> = a.methods.iter().map(|m| parse_method(m)).collect::<Result<_, _>>()?;
    let set = load_set(a)?;
    let path = q.answerer.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument { message: format!("--answerer: {} does not exist", path.display()) });
    }
    let lm = Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?;
    let mut embedder = a.embedder.open()?;
    let by_id: HashMap<DocId, &Document> = set.documents.iter().map(|d| (d.id, d)).collect();
    let params = search_params(a);
    let mut rows = Vec::new();
    let mut reader_name = None;
    for method in &methods {
        let m = method_memories(a, method, &set.documents, embedder.as_mut(), &mut reader_name)?;
        let mode = if method.chunker.is_none() { RetrievalMode::ThreeLayer } else { RetrievalMode::ChunkOnly };
        let index = build_index(mode, a.piece_chars, &set.documents, &m.memories, embedder.as_mut())?;
        let mem_of: HashMap<DocId, &DocumentMemory> = m.memories.iter().map(|m| (m.doc_id, m)).collect();
        let (mut em, mut f, mut nll, mut nll_n, mut refusals) = (0.0, 0.0, 0.0, 0usize, 0usize);
        let started = Instant::now();
        let mut scratch = docmem_core::retrieve::SearchScratch::default();
        let chars = |h: &RetrievedChunk| by_id.get(&h.doc_id).and_then(|d| h.span.slice(&d.text)).map_or(0, |t| t.chars().count());
        for (i, question) in set.questions.iter().enumerate() {
            let v = embedder.embed(&[question.question.as_str()], EmbedRole::Query)?;
            let v = v.into_iter().next().unwrap_or_default();
            let hits = search_to_fill(&index, &question.question, &v, &params, q.context_chars, &chars, &mut scratch)?;
            // The same cut as the retrieval budgets: the ranked chunk texts, end to end,
            // cut at --context-chars.
            let texts: Vec<&str> = hits.iter().map(|h| by_id.get(&h.doc_id).and_then(|d| h.span.slice(&d.text)).unwrap_or("")).collect();
            let parts = budget_parts(&texts, q.context_chars);
            let mut owned = Vec::new();
            for (h, text) in hits.iter().zip(parts) {
                let (Some(doc), Some(mem)) = (by_id.get(&h.doc_id), mem_of.get(&h.doc_id)) else { continue };
                let s = mem.scenarios.get(h.scenario as usize);
                let outline = s.and_then(|s| s.outline_item).and_then(|o| mem.outline.get(o as usize)).cloned();
                owned.push((doc.title.clone(), outline, s.map(|s| s.core.clone()).unwrap_or_default(), text.to_string()));
            }
            let shown: Vec<Memory<'_>> =
                owned.iter().map(|(t, o, c, x)| Memory { title: t, outline: o.as_deref(), core: c, text: x }).collect();
            let prompt = answer_prompt(&question.question, &shown, false);
            let messages = [ChatMessage::new("user", &prompt)];
            // The prompt runs once: the answer and the gold answer's score both continue it.
            // Only the answer's first non-blank line is scored, so generation stops once
            // that line has ended.
            let prefix =
                docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages))?, PrefillOptions::default()))?.prefix;
            let sampling = SamplingParams { max_tokens: q.max_tokens, ..SamplingParams::default() };
            let mut so_far = String::new();
            let g = docmem_runtime::block_on(lm.generate_after(&prefix, "", &sampling, |piece| {
                so_far.push_str(piece);
                if so_far.trim_start().contains('\n') {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            }))?;
            // The first line, without its citation markers, is the answer scored.
            let answer = without_citations(g.text.trim().lines().next().unwrap_or(""));
            let golds: Vec<&str> = question.answers.iter().map(String::as_str).collect();
            em += exact_match(&answer, &golds);
            f += f1(&answer, &golds);
            refusals += usize::from(says_not_in_documents(&answer));
            let gold = format!(" {}", golds.first().copied().unwrap_or(""));
            if let Some(v) = informational_support(&docmem_runtime::block_on(lm.score_after(&prefix, &gold))?) {
                nll += v;
                nll_n += 1;
            }
            eprintln!("docmem eval qa: {} {}/{}: {answer:?} (gold {:?})", method.label, i + 1, set.questions.len(), golds.first());
        }
        let n = set.questions.len().max(1) as f64;
        rows.push(QaRow {
            method: if method.chunker.is_none() { "mom (three-layer)".into() } else { method.label.clone() },
            questions: set.questions.len(),
            exact_match: em / n,
            f1: f / n,
            informational_support: nll / nll_n.max(1) as f64,
            not_in_documents: refusals,
            seconds_per_question: started.elapsed().as_secs_f64() / n,
        });
    }
    let report = QaReport {
        data: a.data.display().to_string(),
        split: a.split,
        documents: set.documents.len(),
        context_chars: q.context_chars,
        answerer: crate::input::file_label(&path),
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
        "{} documents in one library, {} split, {} characters of context, answerer {}\n",
        report.documents, report.split, report.context_chars, report.answerer
    )?;
    writeln!(out, "| method | questions | EM | F1 | informational support (NLL, lower is better) | refusals | s/question |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for r in &report.rows {
        writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {} | {:.1} |",
            r.method, r.questions, r.exact_match, r.f1, r.informational_support, r.not_in_documents, r.seconds_per_question
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_with_sizes() {
        let m = parse_method("sentence:40:0").unwrap();
        assert_eq!((m.chunker, m.size, m.overlap, m.label.as_str()), (Some(ChunkerKind::Sentence), Some(40), Some(0), "sentence:40:0"));
        assert_eq!(parse_method("mom").unwrap().chunker, None);
        assert_eq!(parse_method("fixed").unwrap().size, None);
        for bad in ["mom:3", "sentence:x", "words", "fixed:10:y"] {
            assert!(matches!(parse_method(bad), Err(CliError::BadArgument { .. })), "{bad}");
        }
    }
}
