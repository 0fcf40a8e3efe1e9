//! `docmem eval answers`: answers as a user gets them, against the recipe people copy.
//!
//! Every document of the file becomes one document of one library, and a fixed, even
//! spread of the split's answerable and unanswerable questions is asked through a method.
//! Two layouts are read (`--data` takes either):
//! - SQuAD v2: an article is a document; its questions are about one paragraph (`local`)
//!   or have no answer in it (`unanswerable`, `is_impossible`);
//! - HotpotQA's distractor set: a titled paragraph is a document (about 3,000 for the
//!   sample), and each question needs two of them (`bridge`: the second reached through
//!   the first; `comparison`: two set side by side).
//!
//! The split is by article ([`crate::lab::eval::metrics::split`]), and the table reports each kind
//! of question apart. The methods:
//! - `ours`: the product's own path (`docmem_runtime::session::Session::ask`, what `docmem ask`, the npm
//!   package and the page run): sentence chunks, hybrid retrieval, small-to-big windows,
//!   the answer prompt, and the answerability check (`--no-check` turns it off, so the
//!   dev run records the evidence of every raw answer for calibration);
//! - `recipe`: the chunk-and-embed recipe of the tutorials, LangChain's defaults:
//!   `RecursiveCharacterTextSplitter` 1,000/200, all-MiniLM-L6-v2, the top 4 chunks by
//!   cosine, the `rlm/rag-prompt` wording, the same answerer model (docmem's CPU runtime
//!   is bit-exact with llama.cpp, so this is the model the recipe would run through
//!   llama-cpp-python);
//! - `gold`: the same model given the question's own paragraphs (SQuAD's one, HotpotQA's
//!   two) with our prompt (the ceiling that retrieval cannot pass).
//!
//! Each question's record (answer, the model's draft, refusal, EM/F1, evidence, timings)
//! goes to `--out` as a JSON line as soon as it is answered; the table of the run goes to
//! stdout. Answers are scored whole, citation markers removed, by SQuAD's EM and F1, and
//! by whether a gold answer occurs in them; an unanswerable question is right when it is
//! refused ("not in the documents", or the recipe's "I don't know").

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use crate::lab::eval::metrics::hotpot::parse_hotpot;
use crate::lab::eval::metrics::squad::parse_squad;
use crate::lab::eval::metrics::{exact_match, f1, normalize_answer, Split};
use clap::{Args, ValueEnum};
use docmem_core::answer::{says_not_in_documents, without_citations};
use docmem_core::chunk::recursive::{recursive_chunks, RecursiveParams};
use docmem_core::chunk::ChunkerKind;
use docmem_core::library::{Library, LibrarySettings, MemStore};
use docmem_core::{Document, EmbedRole};
use docmem_runtime::answerer::Answerer;
use docmem_runtime::lm::{Lm, LmContext, LoadOptions};
use docmem_runtime::pipeline::ingest::MemoryMethod;
use docmem_runtime::pipeline::qa::AskParams;
use docmem_runtime::session::{AddOptions, Answering, AskOptions, Session};
use serde::Serialize;

use crate::CliError;

/// Which pipeline answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMethod {
    /// docmem's own path (`docmem ask`).
    Ours,
    /// LangChain's tutorial recipe with the same model.
    Recipe,
    /// The same model given the gold paragraph.
    Gold,
    /// docmem's own path over the same library with the reader's memories (from
    /// `--memories`) swapped in for the sentence chunks, as the page ends up once its
    /// background memories are written.
    Memories,
}

#[derive(Args)]
pub struct AnswersEvalArgs {
    /// SQuAD v2 JSON (e.g. ../shared/eval/squad-v2-dev-sample.json) or HotpotQA's
    /// distractor JSON (../shared/eval/hotpotqa-dev-distractor-sample.json).
    #[arg(long)]
    pub data: PathBuf,
    /// dev (tune here) or test (report these): the questions of whole articles, see
    /// `crate::lab::eval::metrics::split`.
    #[arg(long, default_value = "test")]
    pub split: Split,
    /// Answerable questions asked: as many of each kind (HotpotQA's bridge and comparison
    /// questions), each kind's evenly spread over the split.
    #[arg(long, default_value_t = 40)]
    pub answerable: usize,
    /// Unanswerable questions asked, evenly spread over the split (SQuAD; HotpotQA has
    /// none).
    #[arg(long, default_value_t = 20)]
    pub unanswerable: usize,
    /// Methods, comma-separated: ours, recipe, gold, memories.
    #[arg(long, value_enum, default_value = "ours", value_delimiter = ',')]
    pub methods: Vec<AnswerMethod>,
    /// A library (`docmem ingest --chunker mom`, the same embedder) whose reader-written
    /// memories method `memories` swaps in for the documents of `--data` it holds.
    #[arg(long)]
    pub memories: Option<PathBuf>,
    /// The answerer [default: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in $DOCMEM_MODELS or ./models]
    #[arg(long)]
    pub answerer: Option<PathBuf>,
    /// Pieces retrieved (ours).
    #[arg(long)]
    pub k: Option<usize>,
    /// Most characters one window grows to around its hit (ours).
    #[arg(long)]
    pub window_chars: Option<usize>,
    /// Characters of windows the answerer reads (ours; 0: the pieces themselves).
    #[arg(long)]
    pub budget_chars: Option<usize>,
    /// Keep every answer as written (no answerability check): the dev run that the
    /// calibration is fitted on.
    #[arg(long)]
    pub no_check: bool,
    /// Most answer tokens.
    #[arg(long, default_value_t = 160)]
    pub max_tokens: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// One JSON line per question is appended here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of answering: for each question, the answerer's hidden state at the last
    /// token of its answer prompt (ours) and at the question's last token, one JSON line
    /// `{id, answerable, retrieval, question_alone, question_first, layers, states,
    /// question_states, refusal_opening}` appended here: what the answerability probe is fitted on
    /// (`refusal_opening`: the refusal's opening token's `logprob` after the prompt, and
    /// whether it is `greedy`; with `--question-alone`, `retrieval` and `refusal_opening`
    /// are null and both states are of the prompt without passages).
    #[arg(long)]
    pub states: Option<PathBuf>,
    /// Layers (0-based, comma-separated) whose states `--states` records.
    #[arg(long, value_delimiter = ',', default_value = "8,14,20,27")]
    pub state_layers: Vec<usize>,
    /// With `--states`: also write each greedy answer after its prompt and record the
    /// states at its tokens (`answer`, `answer_states`: the last token of what it says
    /// before any citation, the mean over those tokens, and the reply's last token): what a
    /// probe that reads the answer, not only the prompt, is fitted on.
    #[arg(long, requires = "states")]
    pub answer_states: bool,
    /// With `--states`: read the question alone, in the answer prompt's wording with no
    /// passages, instead of the prompt with its passages (no retrieval, a short prefill):
    /// the state a question gives before any evidence, to set beside its state after the
    /// passages.
    #[arg(long, requires = "states", conflicts_with = "answer_states")]
    pub question_alone: bool,
    /// With `--states`: lay the prompt out with the question also before the passages
    /// (`docmem_core::answer::answer_prompt_question_first`), so that its states can be
    /// compared with the usual layout's on the same questions.
    #[arg(long, requires = "states", conflicts_with = "question_alone")]
    pub question_first: bool,
    /// Leave out the questions a run with `--answerable A --unanswerable U` asks (`A,U`;
    /// repeatable): a dev run apart from the questions a rule was fitted on.
    #[arg(long, value_parser = parse_counts)]
    pub exclude_run: Vec<(usize, usize)>,
    /// When the answerer refuses by itself (ours), also record what it writes with the
    /// refusal's opening token banned (`forced`): what a rule that overrules its refusal
    /// would show.
    #[arg(long)]
    pub forced: bool,
    #[command(flatten)]
    pub embedder: crate::embed::EmbedderArgs,
}

/// One question as the evaluation asks it.
struct Asked {
    id: String,
    question: String,
    /// Gold answers (none: unanswerable).
    answers: Vec<String>,
    /// `local`, `unanswerable`, `bridge` or `comparison`.
    kind: &'static str,
    /// The paragraphs that hold its answer: title and text.
    gold: Vec<(String, String)>,
}

/// The documents of a file (all of them, whatever the split: the library a person would
/// have) and the questions of the split.
struct AskSet {
    documents: Vec<Document>,
    questions: Vec<Asked>,
}

/// Read `bytes` as SQuAD (a JSON object) or HotpotQA (a JSON array), keeping `split`'s
/// questions.
fn load_questions(bytes: &[u8], split: Split) -> Result<AskSet, CliError> {
    let bad = |e: serde_json::Error| CliError::BadArgument { message: format!("--data: {e} (expected SQuAD or HotpotQA JSON)") };
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        let set = parse_hotpot(bytes).map_err(bad)?;
        let sides = set.sides();
        let questions = set
            .questions
            .iter()
            .zip(sides)
            .filter(|(_, side)| split.includes(*side))
            .map(|(q, _)| Asked {
                id: q.id.clone(),
                question: q.question.clone(),
                answers: vec![q.answer.clone()],
                kind: if q.kind == "comparison" { "comparison" } else { "bridge" },
                gold: q
                    .paragraphs
                    .iter()
                    .map(|&p| &set.documents[p])
                    .filter(|d| q.gold_titles.contains(&d.title))
                    .map(|d| (d.title.clone(), d.text.clone()))
                    .collect(),
            })
            .collect();
        return Ok(AskSet { documents: set.documents, questions });
    }
    let set = parse_squad(bytes).map_err(bad)?;
    let sides = set.sides();
    let questions = set
        .questions
        .iter()
        .filter(|q| split.includes(sides[q.document]))
        .map(|q| Asked {
            id: q.id.clone(),
            question: q.question.clone(),
            answers: q.answers.clone(),
            kind: if q.answers.is_empty() { "unanswerable" } else { "local" },
            gold: vec![(
                set.documents[q.document].title.clone(),
                q.paragraph.slice(&set.documents[q.document].text).unwrap_or_default().to_string(),
            )],
        })
        .collect();
    Ok(AskSet { documents: set.documents, questions })
}

/// One question's outcome.
#[derive(Serialize)]
struct Record<'a> {
    method: AnswerMethod,
    id: &'a str,
    kind: &'a str,
    question: &'a str,
    answerable: bool,
    golds: &'a [String],
    answer: String,
    /// What the model wrote, before any refusal replaced it.
    written: String,
    refused: bool,
    exact_match: f64,
    f1: f64,
    contains_gold: bool,
    evidence: Option<docmem_core::answerability::Evidence>,
    grounded: Option<f32>,
    seconds: f64,
    prefill_seconds: f64,
    /// `--forced`: what the model wrote with its refusal's opening banned, when it refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    forced: Option<String>,
    /// The text of each passage the answerer was shown (ours), in their order, without the
    /// titles the prompt numbers them with: what a rule fitted on these records can read
    /// besides the evidence (absent when nothing was found).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    passages: Vec<String>,
}

/// The `rlm/rag-prompt` wording (LangChain hub), as the tutorials send it.
fn rag_prompt(question: &str, context: &str) -> String {
    format!(
        "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer the question. \
         If you don't know the answer, just say that you don't know. Use three sentences maximum and keep the answer concise.\n\
         Question: {question} \nContext: {context} \nAnswer:"
    )
}

/// Whether a reply is a refusal: ours, or the recipe's "I don't know".
fn is_refusal(answer: &str) -> bool {
    let lower = answer.to_lowercase();
    says_not_in_documents(answer) || lower.contains("don't know") || lower.contains("do not know") || lower.trim().is_empty()
}

/// `n` items spread evenly over `items`.
fn spread<T: Clone>(items: &[T], n: usize) -> Vec<T> {
    if n >= items.len() {
        return items.to_vec();
    }
    (0..n).map(|i| items[i * items.len() / n].clone()).collect()
}

/// `n` of `questions`, as many of each kind as there are kinds (the first kinds take the
/// remainder; a kind with fewer takes all it has), each kind's spread evenly over it, so
/// that a rarer kind (HotpotQA's comparisons, 17% of the sample) is asked often enough
/// to report apart. In the order of `questions`.
fn spread_by_kind<'a>(questions: &[&'a Asked], n: usize) -> Vec<&'a Asked> {
    let mut kinds: Vec<&str> = Vec::new();
    for q in questions {
        if !kinds.contains(&q.kind) {
            kinds.push(q.kind);
        }
    }
    let mut keep = std::collections::HashSet::new();
    for (i, kind) in kinds.iter().enumerate() {
        let share = n / kinds.len() + usize::from(i < n % kinds.len());
        let of_kind: Vec<&Asked> = questions.iter().copied().filter(|q| q.kind == *kind).collect();
        keep.extend(spread(&of_kind, share).into_iter().map(|q| q.id.as_str()));
    }
    questions.iter().copied().filter(|q| keep.contains(q.id.as_str())).collect()
}

pub fn run(a: &AnswersEvalArgs) -> Result<(), CliError> {
    let bytes = std::fs::read(&a.data).map_err(|source| CliError::Read { path: a.data.clone(), source })?;
    let set = load_questions(&bytes, a.split)?;
    let mut answerable: Vec<&Asked> = set.questions.iter().filter(|q| !q.answers.is_empty()).collect();
    let mut unanswerable: Vec<&Asked> = set.questions.iter().filter(|q| q.answers.is_empty()).collect();
    let mut excluded = std::collections::HashSet::new();
    for &(yes, no) in &a.exclude_run {
        excluded.extend(spread_by_kind(&answerable, yes).into_iter().chain(spread(&unanswerable, no)).map(|q| q.id.as_str()));
    }
    answerable.retain(|q| !excluded.contains(q.id.as_str()));
    unanswerable.retain(|q| !excluded.contains(q.id.as_str()));
    let mut questions = spread_by_kind(&answerable, a.answerable);
    questions.extend(spread(&unanswerable, a.unanswerable));

    let path = a.answerer.clone().unwrap_or_else(crate::models::default_reader);
    if !path.exists() {
        return Err(CliError::BadArgument { message: format!("--answerer: {} does not exist", path.display()) });
    }
    // A calibration run records every piece of evidence, the verification included.
    if a.no_check {
        docmem_runtime::answerer::measure_verification(true);
    }
    // One context for every method, as one app would keep: the answer prompts of all of
    // them share its kept prompt.
    let lm = LmContext::new(Lm::load(&path, &LoadOptions { threads: a.threads, context: 0, ..LoadOptions::default() })?);
    if let (Some(states), true) = (&a.states, a.question_alone) {
        // No passages: no embedder and no library.
        return dump_states(a, states, &questions, None, lm.model());
    }
    let mut embedder = std::cell::RefCell::new(a.embedder.open()?);
    if let Some(states) = &a.states {
        let library = build_library(&set.documents, &embedder)?;
        return dump_states(a, states, &questions, Some((&library, embedder.get_mut().as_mut())), lm.model());
    }
    let mut out = match &a.out {
        Some(p) => Some(
            std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|source| CliError::Read { path: p.clone(), source })?,
        ),
        None => None,
    };
    let mut rows = Vec::new();
    for &method in &a.methods {
        let mut records = Vec::new();
        let mut library = None;
        let mut recipe = None;
        match method {
            AnswerMethod::Ours => library = Some(Session::new(build_library(&set.documents, &embedder)?)),
            AnswerMethod::Recipe => recipe = Some(RecipeIndex::build(&set.documents, embedder.get_mut().as_mut())?),
            AnswerMethod::Gold => {}
            AnswerMethod::Memories => {
                let Some(from) = &a.memories else {
                    return Err(CliError::BadArgument { message: "--methods memories needs --memories LIBRARY".into() });
                };
                let mut swapped = build_library(&set.documents, &embedder)?;
                let n = swap_in_memories(&mut swapped, from, embedder.get_mut().as_mut())?;
                eprintln!("docmem eval answers: {n} reader memories from {} swapped in", from.display());
                library = Some(Session::new(swapped));
            }
        }
        for (i, q) in questions.iter().enumerate() {
            let t = Instant::now();
            let mut forced = None;
            let mut passages = Vec::new();
            let (answer, written, evidence, grounded, prefill) = match method {
                AnswerMethod::Ours | AnswerMethod::Memories => {
                    let Some(library) = &library else { continue };
                    let params = ours_params(a);
                    let options = AskOptions { params: params.clone(), ..AskOptions::default() };
                    let answering = Answering::local(&lm, "answerer");
                    let r = docmem_runtime::block_on(
                        library.ask(&q.question, &options, answering, &embedder, &mut |_| ControlFlow::Continue(())),
                    )?;
                    let written = r.draft.clone().unwrap_or_else(|| r.answer.clone());
                    passages = r.sources.iter().map(|s| s.text.clone()).collect();
                    if a.forced && is_refusal(&written) {
                        forced = Some(forced_reply(lm.model(), &*library.library()?, embedder.get_mut().as_mut(), &q.question, &params)?);
                    }
                    (r.answer, written, Some(r.evidence), r.grounded, r.prefill_seconds)
                }
                AnswerMethod::Recipe => {
                    let Some(recipe) = &recipe else { continue };
                    let v = embedder.get_mut().embed(&[q.question.as_str()], EmbedRole::Query)?;
                    let context = recipe.top(&v[0], 4).join("\n\n");
                    let r = reply(&lm, &rag_prompt(&q.question, &context), a.max_tokens)?;
                    (r.text.trim().to_string(), r.text.trim().to_string(), None, None, r.prefill_seconds)
                }
                AnswerMethod::Gold => {
                    let memories: Vec<docmem_core::answer::Memory<'_>> =
                        q.gold.iter().map(|(title, text)| docmem_core::answer::Memory { title, outline: None, core: "", text }).collect();
                    let prompt = docmem_core::answer::answer_prompt(&q.question, &memories, false);
                    let r = reply(&lm, &prompt, a.max_tokens)?;
                    (r.text.trim().to_string(), r.text.trim().to_string(), None, None, r.prefill_seconds)
                }
            };
            let scored = without_citations(&answer);
            let golds: Vec<&str> = q.answers.iter().map(String::as_str).collect();
            let refused = is_refusal(&answer);
            let contains_gold = !golds.is_empty() && golds.iter().any(|g| normalize_answer(&scored).contains(&normalize_answer(g)));
            let rec = Record {
                method,
                id: &q.id,
                kind: q.kind,
                question: &q.question,
                answerable: !golds.is_empty(),
                golds: &q.answers,
                exact_match: if golds.is_empty() { 0.0 } else { exact_match(&scored, &golds) },
                f1: if golds.is_empty() { 0.0 } else { f1(&scored, &golds) },
                contains_gold,
                refused,
                answer,
                written,
                evidence,
                grounded,
                seconds: t.elapsed().as_secs_f64(),
                prefill_seconds: prefill,
                forced,
                passages,
            };
            eprintln!(
                "docmem eval answers: {method:?} {}/{}: {:?} (gold {:?}) {:.1} s",
                i + 1,
                questions.len(),
                rec.answer,
                q.answers.first(),
                rec.seconds
            );
            if let Some(f) = &mut out {
                serde_json::to_writer(&mut *f, &rec).map_err(|e| CliError::Output(e.into()))?;
                writeln!(f)?;
            }
            records.push(Summary::of(&rec, q.kind));
        }
        rows.push(rows_of(method, &records));
    }
    let mut o = std::io::stdout().lock();
    writeln!(o, "| method | questions | n | EM | F1 | gold in answer | refused | s/question |")?;
    writeln!(o, "| --- | --- | --- | --- | --- | --- | --- | --- |")?;
    for r in rows.iter().flatten() {
        let (em, f1, contains) = if r.kind == "unanswerable" {
            ("".to_string(), "".to_string(), "".to_string())
        } else {
            (format!("{:.2}", r.em), format!("{:.2}", r.f1), format!("{:.0}%", 100.0 * r.contains))
        };
        writeln!(
            o,
            "| {:?} | {} | {} | {em} | {f1} | {contains} | {:.0}% | {:.1} |",
            r.method,
            r.kind,
            r.n,
            100.0 * r.refused,
            r.seconds_per_question
        )?;
    }
    Ok(())
}

/// The ask parameters of method ours, as `a` sets them.
fn ours_params(a: &AnswersEvalArgs) -> AskParams {
    let d = AskParams::default();
    let mut context = d.context;
    context.window_chars = a.window_chars.unwrap_or(context.window_chars);
    context.budget = a.budget_chars.unwrap_or(context.budget);
    AskParams { k: a.k.unwrap_or(d.k), max_tokens: a.max_tokens, context, check_answerability: !a.no_check, ..d }
}

/// `--states`: each question's answer prompt (ours, over `search`'s library; with
/// `--question-alone`, `search` is `None` and the prompt holds no passages) read by the
/// answerer, and the hidden states of its last token and its question's after each of
/// `--state-layers` appended to `path`.
fn dump_states(
    a: &AnswersEvalArgs,
    path: &std::path::Path,
    questions: &[&Asked],
    mut search: Option<(&Library<MemStore>, &mut dyn docmem_core::Embedder)>,
    lm: &Lm,
) -> Result<(), CliError> {
    let n_layer = lm.config().n_layer;
    if let Some(bad) = a.state_layers.iter().find(|&&l| l >= n_layer) {
        return Err(CliError::BadArgument {
            message: format!("--state-layers: layer {bad}, but the model has {n_layer} (0 to {})", n_layer - 1),
        });
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    let params = ours_params(a);
    let refusal = lm.refusal_opening()?;
    // Answerable and unanswerable in turn, so that a run stopped early is still balanced.
    let (yes, no): (Vec<&Asked>, Vec<&Asked>) = questions.iter().copied().partition(|q| !q.answers.is_empty());
    let mut order = Vec::with_capacity(questions.len());
    for i in 0..yes.len().max(no.len()) {
        order.extend(yes.get(i).copied().into_iter().chain(no.get(i).copied()));
    }
    for (i, q) in order.iter().enumerate() {
        let t = Instant::now();
        let (user_turn, retrieval) = match search.as_mut() {
            Some((library, embedder)) => {
                let prompt = docmem_runtime::pipeline::qa::prepare(library, &mut **embedder, &q.question, &params)?;
                let user_turn = if a.question_first {
                    let memories: Vec<_> = prompt.sources.iter().map(docmem_runtime::pipeline::qa::Source::memory).collect();
                    let chinese = docmem_core::text::detect_language(&q.question) == "zh";
                    docmem_core::answer::answer_prompt_question_first(&q.question, &memories, chinese)
                } else {
                    prompt.user_turn
                };
                (user_turn, Some(prompt.retrieval))
            }
            // The answer prompt's wording (in the question's language, as `prepare` picks
            // it) with no passages.
            None if q.question.trim().is_empty() => return Err(docmem_runtime::Error::EmptyQuestion.into()),
            None => {
                let chinese = docmem_core::text::detect_language(&q.question) == "zh";
                (docmem_core::answer::answer_prompt(&q.question, &[], chinese), None)
            }
        };
        let messages = [docmem_runtime::chat::ChatMessage::new("user", user_turn.as_str())];
        let Some((question_states, states, logits, mut cache)) = prompt_states_at_question(lm, &messages, &q.question, &a.state_layers)?
        else {
            eprintln!("docmem eval answers --states: {} skipped: its prompt's tokens do not begin with its question's", q.id);
            continue;
        };
        let answer = if a.answer_states { Some(answer_states(lm, &mut cache, &logits, &a.state_layers, a.max_tokens)?) } else { None };
        let mut line = serde_json::json!({
            "id": q.id,
            "answerable": !q.answers.is_empty(),
            "retrieval": retrieval,
            "question_alone": a.question_alone,
            "question_first": a.question_first,
            "layers": a.state_layers,
            "states": states,
            "question_states": question_states,
            // With no passages, the instruction to refuse when they lack the answer always
            // applies: how the model leans towards its refusal then says nothing.
            "refusal_opening": if a.question_alone { None } else { refusal.map(|r| opening_reading(&logits, r)) },
        });
        if let Some(answer) = answer {
            line["refused"] = is_refusal(&answer.text).into();
            line["answer"] = answer.text.into();
            line["answer_states"] = serde_json::json!({ "last": answer.last, "mean": answer.mean, "end": answer.end });
        }
        serde_json::to_writer(&mut out, &line).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        eprintln!("docmem eval answers --states: {}/{} {:.1} s", i + 1, questions.len(), t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// How the answerer leans towards its refusal before it writes: the log-probability of
/// the refusal's opening token after the prompt, and whether that token is the greedy
/// choice (the model would open its reply with the refusal).
fn opening_reading(logits: &[f32], opening: u32) -> serde_json::Value {
    serde_json::json!({
        "logprob": docmem_runtime::lm::log_prob(logits, opening),
        "greedy": docmem_runtime::lm::argmax(logits) == opening,
    })
}

/// One token's hidden state after each of the layers asked for, in that order.
type LayerStates = Vec<Vec<f32>>;

/// The greedy answer written after a prompt, and the hidden states at its tokens.
struct AnsweredStates {
    /// The answer as the runtime would end it (at a blank line, or `max_tokens`).
    text: String,
    /// At the last token of what the answer says: before trailing citation markers,
    /// spaces and a full stop. Where a reader of the answer decides whether it holds.
    last: LayerStates,
    /// The mean over the answer's tokens up to and including `last`.
    mean: LayerStates,
    /// At the reply's last token.
    end: LayerStates,
}

/// Writes the greedy answer after a prompt already read into `cache` (its next-token
/// `logits`), one token at a time, keeping each token's states after `layers`: the
/// answer's states are read as it is written, at no extra prefill.
fn answer_states(
    lm: &Lm,
    cache: &mut docmem_runtime::cpu::transformer::KvCache,
    logits: &[f32],
    layers: &[usize],
    max_tokens: usize,
) -> Result<AnsweredStates, CliError> {
    let stops = docmem_runtime::answerer::answer_stops();
    let mut logits = logits.to_vec();
    let (mut tokens, mut states, mut ends): (Vec<u32>, Vec<LayerStates>, Vec<usize>) = (Vec::new(), Vec::new(), Vec::new());
    let mut text = String::new();
    while tokens.len() < max_tokens {
        let next = docmem_runtime::lm::argmax(&logits);
        if lm.tokenizer.stop_ids().contains(&next) {
            break;
        }
        tokens.push(next);
        text = lm.tokenizer.decode(&tokens)?;
        if let Some(cut) = stops.iter().filter_map(|s| text.find(s.as_str())).min() {
            text.truncate(cut);
            break;
        }
        let (l, s) = lm.backend.forward_states(cache, &[next], layers);
        logits = l;
        states.push(s);
        ends.push(text.len());
    }
    let text = text.trim_end().to_string();
    let said = said_before_citations(&text).len();
    // The token whose text reaches the end of what was said (the first, if nothing was).
    let last = ends.iter().position(|&e| e >= said).unwrap_or(ends.len().saturating_sub(1));
    let empty = || vec![vec![0.0f32; lm.config().n_embd]; layers.len()];
    let at = |i: usize| states.get(i).cloned().unwrap_or_else(empty);
    let mean = if states.is_empty() {
        empty()
    } else {
        let n = (last + 1) as f32;
        (0..layers.len())
            .map(|l| {
                let mut m = vec![0.0f32; states[0][l].len()];
                for s in &states[..=last] {
                    m.iter_mut().zip(&s[l]).for_each(|(m, v)| *m += v / n);
                }
                m
            })
            .collect()
    };
    Ok(AnsweredStates { last: at(last), mean, end: at(states.len().saturating_sub(1)), text })
}

/// What an answer says before its trailing citation markers (`[2]`, `[1][3]`), spaces
/// and full stop.
fn said_before_citations(answer: &str) -> &str {
    let mut s = answer;
    loop {
        let t = s.trim_end_matches(|c: char| c.is_whitespace() || c == '.');
        let t = match t.strip_suffix(']').and_then(|r| r.rsplit_once('[')) {
            Some((before, marker)) if !marker.is_empty() && marker.chars().all(|c| c.is_ascii_digit()) => before,
            _ => t,
        };
        if t.len() == s.len() {
            return s;
        }
        s = t;
    }
}

/// The hidden states after `layers` at two tokens of the answer prompt `messages`: the
/// question's last (where the model has just read the question after the passages; what
/// the runtime's probe reads), and the prompt's last (where the answer begins), and the
/// logits after the prompt, and the cache that read it. The prompt is read in two pieces
/// split after the question, so this costs one prefill. `None` when the prompt's tokens do
/// not begin with its question's.
#[allow(clippy::type_complexity)]
fn prompt_states_at_question(
    lm: &Lm,
    messages: &[docmem_runtime::chat::ChatMessage],
    question: &str,
    layers: &[usize],
) -> Result<Option<(LayerStates, LayerStates, Vec<f32>, docmem_runtime::cpu::transformer::KvCache)>, CliError> {
    use docmem_runtime::lm::Prompt;
    let tokens = lm.prompt_tokens(Prompt::Chat(messages))?;
    if tokens.len() > lm.context_window() {
        return Err(docmem_runtime::Error::ContextFull { needed: tokens.len(), limit: lm.context_window() }.into());
    }
    // The question ends the user's turn, where the chat template's closing special token
    // begins (the token the runtime's probe reads at `ProbePosition::Question`); anything
    // else (a template this does not know) is `None`.
    let split = match (messages.last(), question.trim()) {
        (Some(turn), question) if turn.content.trim_end().ends_with(question) => lm.user_turn_end(&turn.content, &tokens)?,
        _ => None,
    };
    let Some(split) = split.filter(|&s| s < tokens.len()) else { return Ok(None) };
    let mut cache = docmem_runtime::lm::Backend::new_cache(&lm.backend);
    let (_, at_question) = lm.backend.forward_states(&mut cache, &tokens[..split], layers);
    let (logits, at_end) = lm.backend.forward_states(&mut cache, &tokens[split..], layers);
    Ok(Some((at_question, at_end, logits, cache)))
}

/// `--exclude-run`'s `A,U`.
fn parse_counts(s: &str) -> Result<(usize, usize), String> {
    let parse = |p: &str| p.trim().parse::<usize>().map_err(|_| format!("'{s}' is not two counts A,U (e.g. 200,200)"));
    match s.split_once(',') {
        Some((yes, no)) => Ok((parse(yes)?, parse(no)?)),
        None => Err(format!("'{s}' is not two counts A,U (e.g. 200,200)")),
    }
}

/// `--forced`: the answer to `question` (ours) with the refusal's opening token banned.
fn forced_reply(
    lm: &Lm,
    library: &Library<MemStore>,
    embedder: &mut dyn docmem_core::Embedder,
    question: &str,
    params: &AskParams,
) -> Result<String, CliError> {
    let prompt = docmem_runtime::pipeline::qa::prepare(library, embedder, question, params)?;
    let messages = [docmem_runtime::chat::ChatMessage::new("user", prompt.user_turn.as_str())];
    let banned = lm.refusal_opening()?.into_iter().collect();
    let sampling = docmem_runtime::lm::SamplingParams {
        max_tokens: params.max_tokens,
        stop: docmem_runtime::answerer::answer_stops(),
        first_token_banned: banned,
        ..Default::default()
    };
    let g = docmem_runtime::block_on(lm.generate(docmem_runtime::lm::Prompt::Chat(&messages), &sampling, |_| ControlFlow::Continue(())))?;
    Ok(g.text.trim().to_string())
}

/// A greedy reply to one user turn, ended by a blank line as answers are.
fn reply(lm: &LmContext, user_turn: &str, max_tokens: usize) -> Result<docmem_runtime::answerer::Reply, CliError> {
    // The baselines are the model as it writes: no probe decides for them.
    let options = docmem_runtime::answerer::ReplyOptions { max_tokens, probe_decides: false };
    Ok(docmem_runtime::block_on(lm.reply(user_turn, options, &mut |_| ControlFlow::Continue(())))?)
}

/// The library `docmem ingest --chunker sentence` makes of the articles, in memory.
fn build_library(docs: &[Document], embedder: &std::cell::RefCell<Box<dyn docmem_core::Embedder>>) -> Result<Library<MemStore>, CliError> {
    let settings = LibrarySettings::new(embedder.borrow().name(), embedder.borrow().dim());
    let session = Session::new(Library::open(MemStore::default(), &settings)?);
    for doc in docs {
        let mut method = MemoryMethod::chunker(ChunkerKind::Sentence);
        docmem_runtime::block_on(session.add(doc, &mut method, embedder, &AddOptions::default(), &mut |_| true))?;
    }
    Ok(session.into_library())
}

/// Replace the memory of each document of `library` that the library at `from` holds
/// with a reader's memory (outline or cores; a memory that fell back to chunks is not
/// one) by that memory. Returns how many were; none is an error, since the method would
/// then measure sentence chunks under another name.
fn swap_in_memories(
    library: &mut Library<MemStore>,
    from: &std::path::Path,
    embedder: &mut dyn docmem_core::Embedder,
) -> Result<usize, CliError> {
    let source = crate::ask::open_library(from, embedder)?;
    let mut swapped = 0;
    let ids: Vec<docmem_core::DocId> = library.documents().iter().map(|e| e.id).collect();
    for id in ids {
        if !source.contains(id) {
            continue;
        }
        let (_, memory) = source.get(id)?;
        if memory.has_summaries() && library.replace_memory(memory, embedder)? {
            swapped += 1;
        }
    }
    if swapped == 0 {
        return Err(CliError::BadArgument {
            message: format!(
                "--memories {}: no reader-written memory of a document of --data (write them with docmem ingest --chunker mom)",
                from.display()
            ),
        });
    }
    Ok(swapped)
}

/// The recipe's index: 1,000/200 recursive chunks and their vectors, searched by cosine.
struct RecipeIndex {
    chunks: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

impl RecipeIndex {
    fn build(docs: &[Document], embedder: &mut dyn docmem_core::Embedder) -> Result<Self, CliError> {
        let params = RecursiveParams { chunk_size: 1000, chunk_overlap: 200, ..RecursiveParams::default() };
        let chunks: Vec<String> = docs
            .iter()
            .flat_map(|d| {
                recursive_chunks(&d.text, &params).into_iter().filter_map(|s| s.slice(&d.text).map(str::to_string)).collect::<Vec<_>>()
            })
            .collect();
        let mut vectors = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(32) {
            let texts: Vec<&str> = batch.iter().map(String::as_str).collect();
            vectors.extend(embedder.embed(&texts, EmbedRole::Passage)?);
        }
        Ok(RecipeIndex { chunks, vectors })
    }

    fn top(&self, query: &[f32], k: usize) -> Vec<&str> {
        let cos = |v: &[f32]| {
            let (mut dot, mut a, mut b) = (0.0f32, 0.0f32, 0.0f32);
            for (x, y) in v.iter().zip(query) {
                dot += x * y;
                a += x * x;
                b += y * y;
            }
            dot / (a.sqrt() * b.sqrt()).max(1e-12)
        };
        let mut scored: Vec<(f32, usize)> = self.vectors.iter().enumerate().map(|(i, v)| (cos(v), i)).collect();
        scored.sort_by(|x, y| y.0.total_cmp(&x.0));
        scored.into_iter().take(k).map(|(_, i)| self.chunks[i].as_str()).collect()
    }
}

struct Summary {
    kind: &'static str,
    em: f64,
    f1: f64,
    contains: bool,
    refused: bool,
    seconds: f64,
}

impl Summary {
    fn of(r: &Record<'_>, kind: &'static str) -> Self {
        Summary { kind, em: r.exact_match, f1: r.f1, contains: r.contains_gold, refused: r.refused, seconds: r.seconds }
    }
}

/// One method's figures over one kind of question. For an unanswerable question a
/// refusal is right; for the others it is a miss.
struct Row {
    method: AnswerMethod,
    kind: &'static str,
    n: usize,
    em: f64,
    f1: f64,
    contains: f64,
    refused: f64,
    seconds_per_question: f64,
}

/// A method's rows: one per kind of question, in the order kinds first appear.
fn rows_of(method: AnswerMethod, s: &[Summary]) -> Vec<Row> {
    let mut kinds: Vec<&'static str> = Vec::new();
    for x in s {
        if !kinds.contains(&x.kind) {
            kinds.push(x.kind);
        }
    }
    kinds
        .into_iter()
        .map(|kind| {
            let v: Vec<&Summary> = s.iter().filter(|x| x.kind == kind).collect();
            let mean = |f: &dyn Fn(&Summary) -> f64| v.iter().map(|x| f(x)).sum::<f64>() / v.len() as f64;
            Row {
                method,
                kind,
                n: v.len(),
                em: mean(&|x| x.em),
                f1: mean(&|x| x.f1),
                contains: mean(&|x| f64::from(u8::from(x.contains))),
                refused: mean(&|x| f64::from(u8::from(x.refused))),
                seconds_per_question: mean(&|x| x.seconds),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rarer_kind_is_asked_as_often_as_a_common_one() {
        let asked = |i: usize, kind: &'static str| Asked {
            id: format!("q{i}"),
            question: String::new(),
            answers: vec!["x".into()],
            kind,
            gold: vec![],
        };
        // 17 bridge questions, then 3 comparisons.
        let all: Vec<Asked> = (0..20).map(|i| asked(i, if i < 17 { "bridge" } else { "comparison" })).collect();
        let refs: Vec<&Asked> = all.iter().collect();
        let kinds = |v: &[&Asked]| (v.iter().filter(|q| q.kind == "bridge").count(), v.iter().filter(|q| q.kind == "comparison").count());
        assert_eq!(kinds(&spread_by_kind(&refs, 6)), (3, 3));
        assert_eq!(kinds(&spread_by_kind(&refs, 7)), (4, 3), "the first kind takes the remainder");
        assert_eq!(kinds(&spread_by_kind(&refs, 10)), (5, 3), "a kind with fewer gives all it has");
        // In the order given, and one kind alone is the plain even spread.
        let picked = spread_by_kind(&refs, 6);
        let index = |q: &Asked| q.id[1..].parse::<usize>().unwrap();
        assert!(picked.windows(2).all(|w| index(w[0]) < index(w[1])));
        let bridges: Vec<&Asked> = refs[..17].to_vec();
        let ids = |v: Vec<&Asked>| v.into_iter().map(|q| q.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(spread_by_kind(&bridges, 5)), ids(spread(&bridges, 5)));
    }

    #[test]
    fn what_an_answer_says_ends_before_its_citations() {
        assert_eq!(said_before_citations("3.5 million households [2]"), "3.5 million households");
        assert_eq!(said_before_citations("Solar energy. [2]"), "Solar energy");
        assert_eq!(said_before_citations("Great Yuan [1][2].  "), "Great Yuan");
        assert_eq!(said_before_citations("see [a]"), "see [a]");
        assert_eq!(said_before_citations("[1]"), "");
        assert_eq!(said_before_citations(""), "");
    }

    #[test]
    fn the_refusals_opening_is_read_from_the_logits_after_the_prompt() {
        let logits = [0.0f32, 1.0, 3.0];
        let ln_z = (0f64.exp() + 1f64.exp() + 3f64.exp()).ln();
        let lean = opening_reading(&logits, 2);
        assert_eq!(lean["greedy"], true);
        assert!((lean["logprob"].as_f64().unwrap() - (3.0 - ln_z)).abs() < 1e-5, "{lean}");
        let lean = opening_reading(&logits, 0);
        assert_eq!(lean["greedy"], false);
        assert!((lean["logprob"].as_f64().unwrap() + ln_z).abs() < 1e-5, "{lean}");
    }
}
