//! Question answering over a library: retrieve through the three layers, build the
//! answer prompt from the numbered memories, stream the answer, read its citations.
//!
//! The glue between [`docmem_core::library`], [`docmem_core::answer`] and an
//! [`Answerer`] (a local [`crate::lm::Lm`] or a hosted model), so
//! the CLI, the npm package and the tests all answer the same way.

use std::fmt;
use std::ops::ControlFlow;

use docmem_core::answer::{answer_prompt, attribute, cited, says_not_in_documents, Memory};
use docmem_core::library::{Library, LibraryError, Store};
use docmem_core::retrieve::{ListRank, RetrievedChunk, SearchParams};
use docmem_core::text::detect_language;
use docmem_core::{DocId, Embedder, ErrorCode, HasErrorCode, Span};
use serde::Serialize;

use crate::answerer::Answerer;
use crate::lm::{Finish, LmError};

/// Why a question could not be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum QaError {
    /// Retrieval failed.
    Library(LibraryError),
    /// The answerer failed.
    Lm(LmError),
    /// The question is empty.
    EmptyQuestion,
    /// The model that writes clues, sub-queries or judgements failed.
    Model(docmem_core::reader::ModelError),
    /// Clues were asked for without a global memory to write them from.
    NoGlobalMemory,
    /// Routing was asked for in a library with no collection (no document).
    NoCollections,
}

impl HasErrorCode for QaError {
    fn code(&self) -> ErrorCode {
        match self {
            QaError::Library(e) => e.code(),
            QaError::Lm(e) => e.code(),
            QaError::EmptyQuestion => ErrorCode::BadQuestion,
            QaError::Model(e) => e.code(),
            QaError::NoGlobalMemory => ErrorCode::BadArgument,
            QaError::NoCollections => ErrorCode::NotFound,
        }
    }
}

impl fmt::Display for QaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QaError::Library(e) => write!(f, "{e}"),
            QaError::Lm(e) => write!(f, "{e}"),
            QaError::EmptyQuestion => write!(f, "the question is empty"),
            QaError::Model(e) => write!(f, "{e}"),
            QaError::NoGlobalMemory => write!(f, "clues need the library's global memory, and none was given"),
            QaError::NoCollections => write!(f, "the library is empty: there is no collection to route to"),
        }
    }
}

impl std::error::Error for QaError {}

impl From<LibraryError> for QaError {
    fn from(e: LibraryError) -> Self {
        QaError::Library(e)
    }
}
impl From<docmem_core::embed::EmbedError> for QaError {
    fn from(e: docmem_core::embed::EmbedError) -> Self {
        QaError::Library(e.into())
    }
}
impl From<LmError> for QaError {
    fn from(e: LmError) -> Self {
        QaError::Lm(e)
    }
}

/// One memory shown to the answerer, numbered from 1.
#[derive(Clone, Debug, Serialize)]
pub struct Source {
    /// Its number in the prompt.
    pub n: usize,
    /// Document id.
    pub doc_id: DocId,
    /// Document title.
    pub title: String,
    /// Byte span in the document.
    pub span: Span,
    /// Character span in the document (what a person counts).
    pub chars: (usize, usize),
    /// The outline item.
    pub outline: Option<String>,
    /// The core content.
    pub core: String,
    /// The chunk text.
    pub text: String,
    /// The fused score and each list's rank (per layer).
    pub score: f64,
    /// Ranks in each layer's lists.
    pub ranks: Vec<ListRank>,
}

/// An answer and its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    /// The answer text.
    pub answer: String,
    /// True when the answerer said the documents do not answer the question.
    pub not_in_documents: bool,
    /// The numbers of the sources the answer cites.
    pub cited: Vec<usize>,
    /// Where `cited` came from: `model` (the answer's own `[n]`), `overlap` (the answer
    /// cited nothing; the sources that hold its words), or `none`.
    pub citations_from: &'static str,
    /// Every memory shown to the answerer.
    pub sources: Vec<Source>,
    /// Seconds: retrieval, prompt processing, generation.
    pub retrieve_seconds: f64,
    /// Prompt processing time.
    pub prefill_seconds: f64,
    /// Generation time.
    pub decode_seconds: f64,
    /// Why generation stopped.
    pub finish: Finish,
}

/// How to answer.
#[derive(Clone, Debug)]
pub struct AskParams {
    /// Memories retrieved and shown.
    pub k: usize,
    /// Most answer tokens.
    pub max_tokens: usize,
    /// Characters of each chunk shown (longer chunks are cut; 0: whole chunks).
    pub max_chunk_chars: usize,
}

impl Default for AskParams {
    fn default() -> Self {
        AskParams { k: 8, max_tokens: 256, max_chunk_chars: 1500 }
    }
}

fn char_offset(text: &str, byte: usize) -> usize {
    text.get(..byte).map_or(0, |s| s.chars().count())
}

fn cut(s: &str, chars: usize) -> &str {
    if chars == 0 {
        return s;
    }
    s.char_indices().nth(chars).map_or(s, |(i, _)| &s[..i])
}

/// The passages of `library` that best match `question`, numbered from 1 in rank order,
/// each with its document, spans, outline item, core content, chunk text (cut to
/// `max_chunk_chars` characters; 0: whole) and per-layer ranks: retrieval without an
/// answer (`docmem search`), and the evidence [`ask`] shows the answerer.
pub fn retrieve<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &SearchParams,
    max_chunk_chars: usize,
) -> Result<Vec<Source>, QaError> {
    if question.trim().is_empty() {
        return Err(QaError::EmptyQuestion);
    }
    let hits = library.search(question, embedder, params)?;
    sources_from_hits(library, &hits, max_chunk_chars)
}

/// The retrieved chunks `hits` as numbered [`Source`]s (from 1, in order), each chunk's
/// text cut to `max_chunk_chars` characters (0: whole).
pub fn sources_from_hits<S: Store>(library: &Library<S>, hits: &[RetrievedChunk], max_chunk_chars: usize) -> Result<Vec<Source>, QaError> {
    let mut sources = Vec::new();
    for hit in hits {
        let Some(p) = library.passage(hit) else { continue };
        let (doc, _) = library.get(p.doc_id)?;
        sources.push(Source {
            n: sources.len() + 1,
            doc_id: p.doc_id,
            title: p.title.to_string(),
            span: p.span,
            chars: (char_offset(&doc.text, p.span.start), char_offset(&doc.text, p.span.end)),
            outline: p.outline.map(str::to_string),
            core: p.core.to_string(),
            text: cut(p.text, max_chunk_chars).to_string(),
            score: hit.score,
            ranks: hit.ranks.clone(),
        });
    }
    Ok(sources)
}

/// A question with its evidence, put into the answerer's prompt: what [`answer`] needs.
/// Apart from [`answer`] because retrieval borrows the library and the embedder briefly,
/// while generation may wait on a GPU for a long time (in a browser, across the event
/// loop), holding neither.
#[derive(Clone, Debug)]
pub struct AnswerPrompt {
    /// The memories shown, numbered from 1.
    pub sources: Vec<Source>,
    /// The user turn: the question and the numbered memories.
    pub user_turn: String,
    /// Seconds spent retrieving.
    pub retrieve_seconds: f64,
}

/// Retrieve the evidence for `question` from `library` and build the answer prompt.
pub fn prepare<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &AskParams,
) -> Result<AnswerPrompt, QaError> {
    // Not `Instant`: it panics in wasm32-unknown-unknown.
    let t = crate::lm::now_seconds();
    let search = SearchParams { k: params.k.max(1), ..SearchParams::default() };
    let sources = retrieve(library, embedder, question, &search, params.max_chunk_chars)?;
    let retrieve_seconds = crate::lm::now_seconds() - t;
    let memories: Vec<Memory<'_>> =
        sources.iter().map(|s| Memory { title: &s.title, outline: s.outline.as_deref(), core: &s.core, text: &s.text }).collect();
    let chinese = detect_language(question) == "zh";
    let user_turn = answer_prompt(question, &memories, chinese);
    Ok(AnswerPrompt { sources, user_turn, retrieve_seconds })
}

/// [`prepare`] with an embedder that may have to be awaited (the GPU encoder in a browser):
/// the question's vector is embedded ahead ([`docmem_core::embed_ahead::ahead`]).
pub async fn prepare_async<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &AskParams,
) -> Result<AnswerPrompt, QaError> {
    let t = crate::lm::now_seconds();
    let mut prompt = docmem_core::embed_ahead::ahead(embedder, |e| prepare(library, e, question, params)).await?;
    // The question's vector was awaited before the last run: count it.
    prompt.retrieve_seconds = crate::lm::now_seconds() - t;
    Ok(prompt)
}

/// Generate the answer to a prepared question with `answerer` (a local [`crate::lm::Lm`] or a hosted
/// model; at most `max_tokens`), streaming its text to `on_text`, and read its citations.
pub async fn answer(
    prompt: AnswerPrompt,
    answerer: &dyn Answerer,
    max_tokens: usize,
    mut on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Answer, QaError> {
    let AnswerPrompt { sources, user_turn, retrieve_seconds } = prompt;
    let g = answerer.reply(&user_turn, max_tokens, &mut on_text).await?;
    let answer = g.text.trim().to_string();
    let not_in_documents = says_not_in_documents(&answer);
    let mut citations = cited(&answer, sources.len());
    let mut citations_from = if citations.is_empty() { "none" } else { "model" };
    if citations.is_empty() && !not_in_documents {
        let texts: Vec<&str> = sources.iter().map(|s| s.text.as_str()).collect();
        citations = attribute(&answer, &texts);
        if !citations.is_empty() {
            citations_from = "overlap";
        }
    }
    Ok(Answer {
        not_in_documents,
        cited: citations,
        citations_from,
        answer,
        sources,
        retrieve_seconds,
        prefill_seconds: g.prefill_seconds,
        decode_seconds: g.decode_seconds,
        finish: g.finish,
    })
}

/// Answer `question` from `library`, streaming answer text to `on_text`: [`prepare`], then
/// [`answer`].
pub async fn ask<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    answerer: &dyn Answerer,
    question: &str,
    params: &AskParams,
    on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Answer, QaError> {
    let prompt = prepare_async(library, embedder, question, params).await?;
    answer(prompt, answerer, params.max_tokens, on_text).await
}
