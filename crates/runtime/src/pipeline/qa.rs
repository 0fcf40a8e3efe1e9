//! Question answering over a library: retrieve through the three layers, build the
//! answer prompt from the numbered passages, stream the answer, read its citations, and
//! decide from evidence whether the documents answer the question at all.
//!
//! The answerer reads *windows*, not the retrieved pieces themselves: each hit grows into
//! the text around it (small-to-big, [`docmem_core::context`]), overlapping windows merge,
//! and the whole is cut to a budget. Cores and outline items are searched but not shown:
//! a small answerer is misled by paraphrased cores more than it is helped. After the
//! answer, [`docmem_core::answerability`] weighs the answerer's probabilities, the
//! answer's support in the passages and the retrieval score, and replaces an answer it
//! judges ungrounded by the refusal.
//!
//! The glue between [`docmem_core::library`], [`docmem_core::answer`] and an
//! [`Answerer`] (a local [`crate::lm::Lm`] or a hosted model), so
//! the CLI, the npm package and the tests all answer the same way.

use std::ops::ControlFlow;

use docmem_core::answer::{
    answer_parts, answer_prompt, attribute, checked_citations, cited, says_not_in_documents, without_markers, AnswerPart, Memory,
};
use docmem_core::answerability::{retrieval_floor, support, Calibration, Evidence};
use docmem_core::context::ContextParams;
use docmem_core::document::PAGE_BREAK;
use docmem_core::library::{Library, Store};
use docmem_core::retrieve::{Layer, ListKind, ListRank, RetrievedChunk, SearchParams};
use docmem_core::text::detect_language;
use docmem_core::{DocId, Embedder, Span};
use serde::Serialize;

use crate::answerer::{Answerer, ReplyOptions};
use crate::lm::Finish;
use crate::Error;

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
    /// The page (from 1) of its best retrieved piece, for a paged document (a PDF);
    /// `None` otherwise.
    pub page: Option<u32>,
    /// The retrieved pieces inside it, as character spans in the document, best first
    /// (a window shown to the answerer holds one or more; a search result is one).
    pub hits: Vec<(usize, usize)>,
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

impl Source {
    /// The memory as the answer prompt shows it (`docmem_core::answer::answer_prompt`).
    pub fn memory(&self) -> Memory<'_> {
        Memory { title: &self.title, outline: self.outline.as_deref(), core: &self.core, text: &self.text }
    }
}

/// An answer and its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Answer {
    /// The answer text.
    pub answer: String,
    /// The answer as it is shown: its text and its citations (`cited`, placed where the
    /// answer put them; after the text where they came from the passages' words), so that
    /// no caller parses `answer`.
    pub parts: Vec<AnswerPart>,
    /// True when the answerer said the documents do not answer the question.
    pub not_in_documents: bool,
    /// The numbers of the sources the answer cites.
    pub cited: Vec<usize>,
    /// Where `cited` came from: `model` (the answer's own `[n]`), `overlap` (the answer
    /// cited nothing; the sources that hold its words), `moved` (the sources it cited do
    /// not hold its words; these do), or `none`.
    pub citations_from: &'static str,
    /// Every memory shown to the answerer.
    pub sources: Vec<Source>,
    /// Seconds: retrieval, prompt processing, generation.
    pub retrieve_seconds: f64,
    /// Prompt processing time.
    pub prefill_seconds: f64,
    /// Prompt tokens the answerer did not run again: the start the prompt shared with the
    /// one it kept (the last answer's, or one read ahead: `Session::read_ahead`).
    pub reused_tokens: usize,
    /// The prompt's tokens, reused ones included (0 for a hosted answerer: its count is not
    /// asked for).
    pub prompt_tokens: usize,
    /// Generation time.
    pub decode_seconds: f64,
    /// Why generation stopped.
    pub finish: Finish,
    /// What the answerability check weighed.
    pub evidence: Evidence,
    /// The probability (0–1) that the answer is grounded in the passages, as the check
    /// judged it (`None` when the check was off or the answer was cancelled).
    pub grounded: Option<f32>,
    /// The answer the model wrote, when the check replaced it by the refusal.
    pub draft: Option<String>,
    /// Clue-guided retrieval's trace, when clues were on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clues: Option<crate::pipeline::guided::ClueTrace>,
    /// The router's trace, when routing was on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<crate::pipeline::guided::RouteTrace>,
}

/// How to answer.
#[derive(Clone, Debug)]
pub struct AskParams {
    /// Pieces retrieved (each grows into a window of its neighbours).
    pub k: usize,
    /// Most answer tokens.
    pub max_tokens: usize,
    /// Characters of each chunk shown when `context` is off (longer chunks are cut; 0:
    /// whole chunks).
    pub max_chunk_chars: usize,
    /// The windows the answerer reads, in characters (`budget` 0: the retrieved pieces
    /// themselves, with their cores and outline items, as a search shows them).
    pub context: ContextParams,
    /// Whether an answer judged ungrounded is replaced by the refusal.
    pub check_answerability: bool,
}

impl Default for AskParams {
    /// Chosen on the dev split of the SQuAD sample with the 1.5B answerer (docs/evaluation.md).
    fn default() -> Self {
        AskParams { k: 6, max_tokens: 160, max_chunk_chars: 1500, context: ContextParams::default(), check_answerability: true }
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
/// answer (`docmem search`), and the evidence an ask shows the answerer.
pub fn retrieve<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &SearchParams,
    max_chunk_chars: usize,
) -> Result<Vec<Source>, Error> {
    if question.trim().is_empty() {
        return Err(Error::EmptyQuestion);
    }
    let hits = library.search(question, embedder, params)?;
    sources_from_hits(library, &hits, max_chunk_chars)
}

/// [`retrieve`] with any embedder: one whose vectors must be awaited (on WebGPU) embeds
/// the question first.
pub async fn retrieve_async<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &SearchParams,
    max_chunk_chars: usize,
) -> Result<Vec<Source>, Error> {
    docmem_core::embed_ahead::ahead(embedder, |e| retrieve(library, e, question, params, max_chunk_chars)).await
}

/// The retrieved chunks `hits` as numbered [`Source`]s (from 1, in order), each chunk's
/// text cut to `max_chunk_chars` characters (0: whole).
pub fn sources_from_hits<S: Store>(library: &Library<S>, hits: &[RetrievedChunk], max_chunk_chars: usize) -> Result<Vec<Source>, Error> {
    let mut sources = Vec::new();
    for hit in hits {
        let Some(p) = library.passage(hit) else { continue };
        let (doc, _) = library.get(p.doc_id)?;
        let chars = (char_offset(&doc.text, p.span.start), char_offset(&doc.text, p.span.end));
        sources.push(Source {
            n: sources.len() + 1,
            doc_id: p.doc_id,
            title: p.title.to_string(),
            span: p.span,
            chars,
            page: doc.page_at(p.span.start),
            hits: vec![chars],
            outline: p.outline.map(str::to_string),
            core: p.core.to_string(),
            text: cut(p.text, max_chunk_chars).to_string(),
            score: hit.score,
            ranks: hit.ranks.clone(),
        });
    }
    Ok(sources)
}

/// The windows around `hits` (small-to-big, per `params`, sizes in characters) as
/// numbered [`Source`]s: each window's text, with the best hit's score and ranks.
pub fn sources_from_windows<S: Store>(library: &Library<S>, hits: &[RetrievedChunk], params: &ContextParams) -> Result<Vec<Source>, Error> {
    let windows = library.context_windows(hits, params, &mut |t: &str| t.chars().count());
    let mut sources = Vec::with_capacity(windows.len());
    for w in windows {
        let (doc, _) = library.get(w.doc_id)?;
        let Some(text) = w.span.slice(&doc.text) else { continue };
        let best = &hits[w.hits[0]];
        let chars_of = |s: Span| (char_offset(&doc.text, s.start), char_offset(&doc.text, s.end));
        sources.push(Source {
            n: sources.len() + 1,
            doc_id: w.doc_id,
            title: doc.title.clone(),
            span: w.span,
            chars: chars_of(w.span),
            page: doc.page_at(best.span.start),
            hits: w.hits.iter().map(|&h| chars_of(hits[h].span)).collect(),
            outline: None,
            core: String::new(),
            text: text.replace(PAGE_BREAK, "\n"),
            score: best.score,
            ranks: best.ranks.clone(),
        });
    }
    Ok(sources)
}

/// The best cosine similarity of the question to a retrieved chunk (a vector list's own
/// score), the retrieval feature of the answerability check.
pub fn best_similarity(hits: &[RetrievedChunk]) -> Option<f32> {
    hits.iter()
        .flat_map(|h| &h.ranks)
        .filter(|r| r.kind == ListKind::Vector && matches!(r.layer, Layer::Chunk | Layer::Mixed | Layer::Combined))
        .map(|r| r.score)
        .fold(None, |best: Option<f32>, s| Some(best.map_or(s, |b| b.max(s))))
}

/// The best retrieval similarity `question` must reach in `library` to be answered
/// ([`retrieval_floor`] of the library's embedder), for a question in Latin script, the
/// floor's measure; `None` otherwise.
pub fn question_floor<S: Store>(library: &Library<S>, question: &str) -> Option<f32> {
    retrieval_floor(&library.manifest().embedder).filter(|_| detect_language(question) == "en")
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
    /// The best similarity of the question to a retrieved piece ([`best_similarity`]).
    pub retrieval: Option<f32>,
    /// The similarity under which [`answer`] refuses the question without asking the
    /// answerer ([`question_floor`]; `None`: none applies).
    pub retrieval_floor: Option<f32>,
    /// Whether [`answer`] replaces an answer judged ungrounded by the refusal.
    pub check_answerability: bool,
}

/// Retrieve the evidence for `question` from `library` and build the answer prompt.
pub fn prepare<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &AskParams,
) -> Result<AnswerPrompt, Error> {
    // Not `Instant`: it panics in wasm32-unknown-unknown.
    let t = crate::lm::now_seconds();
    if question.trim().is_empty() {
        return Err(Error::EmptyQuestion);
    }
    let search = SearchParams { k: params.k.max(1), ..SearchParams::default() };
    let hits = library.search(question, embedder, &search)?;
    let sources = if params.context.budget == 0 {
        sources_from_hits(library, &hits, params.max_chunk_chars)?
    } else {
        sources_from_windows(library, &hits, &params.context)?
    };
    let retrieve_seconds = crate::lm::now_seconds() - t;
    let memories: Vec<Memory<'_>> = sources.iter().map(Source::memory).collect();
    let chinese = detect_language(question) == "zh";
    let user_turn = answer_prompt(question, &memories, chinese);
    Ok(AnswerPrompt {
        sources,
        user_turn,
        retrieve_seconds,
        retrieval: best_similarity(&hits),
        retrieval_floor: question_floor(library, question),
        check_answerability: params.check_answerability,
    })
}

/// [`prepare`] with an embedder that may have to be awaited (the GPU encoder in a browser):
/// the question's vector is embedded ahead ([`docmem_core::embed_ahead::ahead`]).
pub async fn prepare_async<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    question: &str,
    params: &AskParams,
) -> Result<AnswerPrompt, Error> {
    let t = crate::lm::now_seconds();
    let mut prompt = docmem_core::embed_ahead::ahead(embedder, |e| prepare(library, e, question, params)).await?;
    // The question's vector was awaited before the last run: count it.
    prompt.retrieve_seconds = crate::lm::now_seconds() - t;
    Ok(prompt)
}

impl AnswerPrompt {
    /// The user turn up to its question: the instructions and the numbered passages,
    /// which an answerer can read while the question is still being typed.
    pub fn before_question(&self, question: &str) -> &str {
        let end = self.user_turn.len() - question.trim().len();
        self.user_turn.get(..end).unwrap_or("")
    }
}

/// Generate the answer to a prepared question with `answerer` (a local [`crate::lm::Lm`] or a hosted
/// model; at most `max_tokens`), streaming its text to `on_text`, and read its citations.
pub async fn answer(
    prompt: AnswerPrompt,
    answerer: &dyn Answerer,
    max_tokens: usize,
    mut on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<Answer, Error> {
    let AnswerPrompt { sources, user_turn, retrieve_seconds, retrieval, retrieval_floor, check_answerability } = prompt;
    // Nothing found (an empty library, or one whose documents are still being added), or
    // nothing near: there is nothing to answer from, and a model asked anyway answers from
    // what it knows.
    let below_floor = retrieval.zip(retrieval_floor).is_some_and(|(best, floor)| best < floor);
    if check_answerability && (sources.is_empty() || below_floor) {
        return Ok(off_topic(&user_turn, sources, retrieve_seconds, retrieval));
    }
    let options = ReplyOptions { max_tokens, probe_decides: check_answerability };
    let g = answerer.reply(&user_turn, options, &mut on_text).await?;
    let written = g.text.trim().to_string();
    let texts: Vec<&str> = sources.iter().map(|s| s.text.as_str()).collect();
    let evidence = Evidence {
        refusal_logprob: g.probabilities.map(|p| p.refusal),
        answer_logprob: g.probabilities.map(|p| p.reply),
        // Against everything the answerer was given: the passages, and the question and
        // instructions ("The answer is: …" invents nothing).
        support: support(&written, &[user_turn.as_str()]),
        retrieval,
        verification: g.probabilities.and_then(|p| p.verified),
        probe: g.probabilities.and_then(|p| p.probe),
    };
    let model_refused = says_not_in_documents(&written);
    // The rule was fitted on a local answerer's answers; a hosted model's are its own to
    // refuse (they refuse far more readily than a 1.5B does).
    let calibration = Calibration::for_evidence(&evidence);
    let judged = check_answerability && g.finish != Finish::Cancelled && !model_refused && calibration.is_some();
    let grounded = calibration.filter(|_| judged).map(|c| c.grounded(&evidence));
    // An empty reply answers nothing: it is shown as the refusal, never as a blank.
    let refuse = written.is_empty() || calibration.zip(grounded).is_some_and(|(c, p)| p < c.threshold);
    let (answer, draft) = if refuse && g.finish != Finish::Cancelled {
        (refusal_text(&written), Some(written).filter(|w| !w.is_empty()))
    } else {
        (written, None)
    };
    let not_in_documents = model_refused || draft.is_some() || says_not_in_documents(&answer);
    let mut citations = if not_in_documents { Vec::new() } else { cited(&answer, sources.len()) };
    let mut citations_from = if citations.is_empty() { "none" } else { "model" };
    if !citations.is_empty() {
        let moved;
        (citations, moved) = checked_citations(&answer, citations, &texts);
        if moved {
            citations_from = "moved";
        }
    } else if !not_in_documents {
        citations = attribute(&answer, &texts);
        if !citations.is_empty() {
            citations_from = "overlap";
        }
    }
    let parts = shown_parts(&answer, &citations, citations_from, sources.len(), not_in_documents);
    Ok(Answer {
        parts,
        not_in_documents,
        cited: citations,
        citations_from,
        answer,
        sources,
        retrieve_seconds,
        prefill_seconds: g.prefill_seconds,
        reused_tokens: g.reused_tokens,
        prompt_tokens: g.prompt_tokens,
        decode_seconds: g.decode_seconds,
        finish: g.finish,
        evidence,
        grounded,
        draft,
        clues: None,
        route: None,
    })
}

/// The refusal of a question no passage comes near ([`question_floor`]), or of one asked of
/// a library where nothing was found: the answerer is not asked, so it comes at once, and
/// the passages found are kept to be shown. The refusal is in the language of the user
/// turn (the question's: its instructions follow it).
fn off_topic(user_turn: &str, sources: Vec<Source>, retrieve_seconds: f64, retrieval: Option<f32>) -> Answer {
    let answer = refusal_text(user_turn);
    Answer {
        parts: vec![AnswerPart::Text(answer.clone())],
        not_in_documents: true,
        cited: Vec::new(),
        citations_from: "none",
        answer,
        sources,
        retrieve_seconds,
        prefill_seconds: 0.0,
        reused_tokens: 0,
        prompt_tokens: 0,
        decode_seconds: 0.0,
        finish: Finish::Withheld,
        evidence: Evidence { retrieval, ..Evidence::default() },
        grounded: None,
        draft: None,
        clues: None,
        route: None,
    }
}

/// `answer` as it is shown: a refusal as its text; the model's own citations where it put
/// them; citations taken from the passages' words after the text (the model's markers
/// dropped when they were moved).
fn shown_parts(answer: &str, citations: &[usize], citations_from: &str, sources: usize, refused: bool) -> Vec<AnswerPart> {
    if refused {
        return vec![AnswerPart::Text(answer.to_string())];
    }
    match citations_from {
        "moved" | "overlap" if !citations.is_empty() => {
            let text = if citations_from == "moved" { without_markers(answer) } else { answer.to_string() };
            vec![AnswerPart::Text(text + " "), AnswerPart::Cite(citations.to_vec())]
        }
        _ => answer_parts(answer, sources),
    }
}

/// The refusal shown for an answer the check replaced, in the language of what was written
/// (or of the user turn, for a question refused before anything was written).
fn refusal_text(written: &str) -> String {
    if detect_language(written) == "zh" {
        format!("{}。", docmem_core::answer::NOT_IN_DOCUMENTS_ZH)
    } else {
        "Not in the documents.".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answerer::testing::Scripted;
    use crate::answerer::{Reply, ReplyProbabilities};
    use docmem_core::library::{LibrarySettings, MemStore};
    use docmem_core::local_future::{boxed, LocalBoxFuture};
    use docmem_core::{Document, DocumentMemory, HashingEmbedder};

    /// A library of one paged document chunked a sentence at a time, with overlaps.
    fn library() -> (Library<MemStore>, HashingEmbedder) {
        library_with(HashingEmbedder::new(64))
    }

    /// [`library`] built with `embedder`, under its name.
    fn library_with<E: Embedder>(mut embedder: E) -> (Library<MemStore>, E) {
        let text = "Printing came late to England.\n\u{c}\nWilliam Caxton set up a press at Westminster in 1476. \
                    He printed Chaucer. Rivers flow into the sea. Mountains are tall.";
        let doc = Document::new("press", text);
        let sentences = [
            "Printing came late to England.",
            "William Caxton set up a press at Westminster in 1476.",
            "He printed Chaucer.",
            "Rivers flow into the sea.",
            "Mountains are tall.",
        ];
        let mut spans: Vec<Span> = sentences
            .iter()
            .map(|s| {
                let start = text.find(s).unwrap();
                Span::new(start, start + s.len())
            })
            .collect();
        // An overlapping chunk, as the sentence chunker makes: sentences 2 and 3 together.
        spans.push(Span::new(spans[1].start, spans[2].end));
        let memory = DocumentMemory::from_spans(&doc, &spans, "sentence");
        let mut lib = Library::open(MemStore::default(), &LibrarySettings::new(embedder.name(), embedder.dim())).unwrap();
        lib.add(&doc, &memory, &mut embedder).unwrap();
        (lib, embedder)
    }

    /// The steps a session's plain ask takes: [`prepare`], then [`answer`].
    async fn ask(
        library: &Library<MemStore>,
        embedder: &mut dyn Embedder,
        answerer: &dyn Answerer,
        question: &str,
        params: &AskParams,
        on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Answer, Error> {
        let prompt = prepare(library, embedder, question, params)?;
        answer(prompt, answerer, params.max_tokens, on_text).await
    }

    fn ask_with(answerer: &Scripted, check: bool) -> Answer {
        let (lib, mut e) = library();
        let params = AskParams { k: 3, check_answerability: check, ..AskParams::default() };
        crate::block_on(ask(&lib, &mut e, answerer, "Who set up a press at Westminster?", &params, |_| ControlFlow::Continue(()))).unwrap()
    }

    #[test]
    fn the_answerer_reads_windows_with_each_sentence_once_and_their_page() {
        let a = ask_with(&Scripted { text: "William Caxton [1]", probabilities: None }, false);
        let shown: String = a.sources.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(shown.matches("William Caxton").count(), 1, "{shown}");
        let caxton = a.sources.iter().find(|s| s.text.contains("Caxton")).unwrap();
        assert_eq!(caxton.page, Some(2));
        assert!(!caxton.text.contains('\u{c}'), "page breaks are not shown to the answerer");
        // The retrieved piece lies inside its window.
        assert!(caxton.hits.iter().all(|&(s, e)| caxton.chars.0 <= s && e <= caxton.chars.1));
        assert_eq!((a.answer.as_str(), a.cited.as_slice(), a.draft.as_deref()), ("William Caxton [1]", &[1][..], None));
        assert_eq!(a.parts, [AnswerPart::Text("William Caxton ".into()), AnswerPart::Cite(vec![1])]);
    }

    /// An answer from the retrieved sentences themselves (no windows), so that each is a
    /// source of its own.
    fn ask_pieces(text: &'static str) -> Answer {
        let (lib, mut e) = library();
        let context = ContextParams { budget: 0, ..ContextParams::default() };
        let params = AskParams { k: 3, check_answerability: false, context, ..AskParams::default() };
        let answerer = Scripted { text, probabilities: None };
        crate::block_on(ask(&lib, &mut e, &answerer, "Who set up a press at Westminster?", &params, |_| ControlFlow::Continue(()))).unwrap()
    }

    #[test]
    fn citations_found_from_the_passages_words_follow_the_text() {
        // No marker: the passage holding the answer's words is cited after it.
        let a = ask_pieces("William Caxton set up a press at Westminster");
        assert_eq!(a.citations_from, "overlap");
        assert_eq!(a.parts, [AnswerPart::Text("William Caxton set up a press at Westminster ".into()), AnswerPart::Cite(a.cited.clone())]);
        assert!(a.cited.iter().all(|&n| a.sources[n - 1].text.contains("Westminster")), "{a:?}");
        // A marker naming a passage without those words: it is dropped, and the passages
        // that hold them follow the text.
        let wrong = a.sources.iter().find(|s| !s.text.contains("Westminster")).expect("a passage without the answer").n;
        let text: &'static str = Box::leak(format!("Caxton set up a press at Westminster [{wrong}].").into_boxed_str());
        let a = ask_pieces(text);
        assert_eq!(a.citations_from, "moved", "{a:?}");
        assert_eq!(a.parts, [AnswerPart::Text("Caxton set up a press at Westminster. ".into()), AnswerPart::Cite(a.cited.clone())]);
        assert!(!a.cited.contains(&wrong));
        // A refusal is its text alone.
        let a = ask_with(&Scripted { text: "Not in the documents.", probabilities: None }, false);
        assert_eq!(a.parts, [AnswerPart::Text("Not in the documents.".into())]);
    }

    #[test]
    fn a_grounded_answer_is_kept_and_an_ungrounded_one_becomes_the_refusal() {
        let sure = Some(ReplyProbabilities { refusal: -25.0, reply: -0.05, verified: Some(4.0), probe: None });
        let a = ask_with(&Scripted { text: "William Caxton [1]", probabilities: sure }, true);
        assert!(!a.not_in_documents && a.draft.is_none(), "{a:?}");
        assert!(a.grounded.unwrap() > 0.5 && a.evidence.support == 1.0);

        let unsure = Some(ReplyProbabilities { refusal: -0.5, reply: -3.0, verified: Some(-3.0), probe: None });
        let a = ask_with(&Scripted { text: "Johannes Gutenberg of Mainz [2]", probabilities: unsure }, true);
        assert!(a.not_in_documents, "{a:?}");
        assert_eq!(a.answer, "Not in the documents.");
        assert_eq!(a.draft.as_deref(), Some("Johannes Gutenberg of Mainz [2]"));
        assert!(a.cited.is_empty());
        assert!(a.evidence.support < 0.5, "{}", a.evidence.support);

        // With the check off the same answer stands.
        let a = ask_with(&Scripted { text: "Johannes Gutenberg of Mainz [2]", probabilities: unsure }, false);
        assert!(!a.not_in_documents && a.grounded.is_none());
    }

    /// A local answerer whose probe reads every prompt as not answered.
    struct Withholding;

    impl Answerer for Withholding {
        fn reply<'a>(
            &'a self,
            _user_turn: &'a str,
            options: ReplyOptions,
            on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
        ) -> LocalBoxFuture<'a, Result<Reply, Error>> {
            boxed(async move {
                let probabilities = Some(ReplyProbabilities { refusal: -2.0, reply: -0.1, verified: None, probe: Some(-1.5) });
                let (text, finish) = if options.probe_decides { ("", Finish::Withheld) } else { ("William Caxton [1]", Finish::EndOfText) };
                if !text.is_empty() {
                    let _ = on_text(text);
                }
                let reply = Reply {
                    text: text.into(),
                    finish,
                    prefill_seconds: 0.0,
                    decode_seconds: 0.0,
                    reused_tokens: 0,
                    prompt_tokens: 0,
                    probabilities,
                };
                Ok(reply)
            })
        }
    }

    #[test]
    fn a_reply_the_probe_withheld_is_the_refusal_and_the_check_off_lets_the_model_write() {
        let (lib, mut e) = library();
        let ask_checked = |check: bool, e: &mut HashingEmbedder| {
            let params = AskParams { k: 3, check_answerability: check, ..AskParams::default() };
            let mut streamed = String::new();
            let a = crate::block_on(ask(&lib, e, &Withholding, "Who set up a press at Westminster?", &params, |t| {
                streamed.push_str(t);
                ControlFlow::Continue(())
            }))
            .unwrap();
            (a, streamed)
        };
        let (a, streamed) = ask_checked(true, &mut e);
        assert_eq!(
            (a.answer.as_str(), a.not_in_documents, a.draft.as_deref(), a.finish),
            ("Not in the documents.", true, None, Finish::Withheld)
        );
        assert!(streamed.is_empty() && a.cited.is_empty() && a.grounded.unwrap() < 0.5, "{a:?}");
        assert_eq!(a.evidence.probe, Some(-1.5));

        // With the check off the probe decides nothing and the reply stands as written.
        let (a, streamed) = ask_checked(false, &mut e);
        assert_eq!((a.answer.as_str(), streamed.as_str(), a.not_in_documents), ("William Caxton [1]", "William Caxton [1]", false));
    }

    #[test]
    fn an_empty_reply_is_shown_as_the_refusal() {
        let a = ask_with(&Scripted { text: "  ", probabilities: None }, false);
        assert_eq!((a.answer.as_str(), a.not_in_documents, a.draft.as_deref()), ("Not in the documents.", true, None));
    }

    /// The hashing embedder under the name of the one the retrieval floor was measured on.
    struct AsMiniLm(HashingEmbedder);

    impl Embedder for AsMiniLm {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn embed(&mut self, texts: &[&str], role: docmem_core::EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
            self.0.embed(texts, role)
        }
        fn name(&self) -> String {
            "all-MiniLM-L6-v2 (bf16)".into()
        }
    }

    /// An answerer that must not be asked.
    struct NotAsked;

    impl Answerer for NotAsked {
        fn reply<'a>(
            &'a self,
            user_turn: &'a str,
            _options: ReplyOptions,
            _on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
        ) -> LocalBoxFuture<'a, Result<Reply, Error>> {
            panic!("the answerer was asked: {user_turn}")
        }
    }

    #[test]
    fn a_question_no_passage_comes_near_is_refused_without_asking_the_answerer() {
        let (lib, mut e) = library_with(AsMiniLm(HashingEmbedder::new(64)));
        let params = AskParams { k: 3, ..AskParams::default() };
        let go_on = |_: &str| ControlFlow::Continue(());
        let off_topic = "What is the capital of Australia?";
        let a = crate::block_on(ask(&lib, &mut e, &NotAsked, off_topic, &params, go_on)).unwrap();
        assert!(a.evidence.retrieval.unwrap() < 0.212, "{:?}", a.evidence);
        assert_eq!((a.answer.as_str(), a.not_in_documents, a.finish), ("Not in the documents.", true, Finish::Withheld));
        assert_eq!(a.parts, [AnswerPart::Text("Not in the documents.".into())]);
        assert!(a.cited.is_empty() && a.grounded.is_none() && a.draft.is_none() && !a.sources.is_empty(), "{a:?}");

        // A question near a passage is answered; so is the off-topic one with the check
        // off, and a Chinese one (the floor was measured on English questions).
        let caxton = Scripted { text: "William Caxton [1]", probabilities: None };
        let a = crate::block_on(ask(&lib, &mut e, &caxton, "Who set up a press at Westminster?", &params, go_on)).unwrap();
        assert!(a.evidence.retrieval.unwrap() >= 0.212 && a.answer == "William Caxton [1]", "{a:?}");
        let unchecked = AskParams { check_answerability: false, ..params.clone() };
        let a = crate::block_on(ask(&lib, &mut e, &caxton, off_topic, &unchecked, go_on)).unwrap();
        assert_eq!(a.answer, "William Caxton [1]");
        let a = crate::block_on(ask(&lib, &mut e, &caxton, "澳大利亚的首都是哪里？", &params, go_on)).unwrap();
        assert_eq!(a.answer, "William Caxton [1]");

        // A library of another embedder has no floor.
        let (lib, mut e) = library();
        let a = crate::block_on(ask(&lib, &mut e, &caxton, off_topic, &params, go_on)).unwrap();
        assert_eq!(a.answer, "William Caxton [1]");

        // Nothing to find (an empty library, as while the first document is being added):
        // refused without asking, whatever the embedder.
        let empty = Library::open(MemStore::default(), &LibrarySettings::new("hashing-64".into(), 64)).unwrap();
        let a = crate::block_on(ask(&empty, &mut e, &NotAsked, "Who set up a press at Westminster?", &params, go_on)).unwrap();
        assert_eq!((a.answer.as_str(), a.finish, a.sources.len()), ("Not in the documents.", Finish::Withheld, 0));
        let a = crate::block_on(ask(&empty, &mut e, &NotAsked, "卡克斯顿在哪里开设印刷店？", &params, go_on)).unwrap();
        assert_eq!(a.answer, format!("{}。", docmem_core::answer::NOT_IN_DOCUMENTS_ZH), "a Chinese question's refusal is Chinese");
    }
}
