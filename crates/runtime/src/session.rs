//! [`Session`]: the one owner of a library, and the one path a document and a question
//! take through docmem.
//!
//! The CLI and the wasm layer (and through it the npm package and the app) add documents
//! with [`Session::add`] and answer questions with [`Session::ask`], and so does the
//! evaluation's own arm ("ours"); none of them assembles retrieval, the answer prompt, the
//! answer and its citations itself. (The evaluation's probes read the prompt
//! [`Session::prepare`] builds, and its baselines answer without docmem's path, on
//! purpose.) The steps live in [`crate::pipeline`] (ingest, retrieval and the
//! answer in `qa`, clues and routing in `guided`); the session decides their order and
//! what each holds while it runs.
//!
//! **What it owns.** The library, behind a `RefCell`: a call that waits (on a GPU, on a
//! host, across a browser's event loop) holds only what it must, and a call made
//! meanwhile gets [`Error::Busy`] instead of a half-changed library. An ask holds the
//! library and the embedder while it searches (a guided one, with clues or routing, also
//! while it writes the global memory it searches from), then neither while it reports the
//! passages and the answerer writes; a routed one takes them again after the answer to
//! save what routing learned. The models are values passed to each call (a
//! [`crate::handle::ModelHandle`] gives them as [`Answering`], an embedder in a
//! `RefCell`), not owned: the npm package lets a page answer one question locally and the
//! next through its edge worker with the same library, and the embedder is shared with
//! the background memory writer.
//!
//! **What it tells.** An ask reports [`AskEvent`]s: the passages found (with the traces
//! of clues and routing) before the answerer reads them, then each piece of the answer;
//! it resolves to the [`Answer`] as data (citations as numbers, the refusal as a flag,
//! sources with spans and pages), so no caller parses answer text. Returning
//! `ControlFlow::Break` from the event callback is the cancel: at the passages it ends
//! the ask with [`Error::Cancelled`]; during the answer it stops the answerer, and the
//! answer so far comes back with `finish: cancelled`.

use std::cell::{Ref, RefCell, RefMut};
use std::ops::ControlFlow;

use docmem_core::answer::{AnswerPart, PartStream};
use docmem_core::clues::{CluesMode, GlobalMemorySettings};
use docmem_core::library::{Library, Store, DEFAULT_COLLECTION};
use docmem_core::reader::Progress;
use docmem_core::retrieve::SearchParams;
use docmem_core::route::memory::SYMBOLIC_MEMORY_VERSION;
use docmem_core::route::{Controller, ExploreSettings, SymbolicMemory};
use docmem_core::text_model::TextModel;
use docmem_core::{DocId, Document, DocumentMemory, Embedder};

use crate::answerer::Answerer;
use crate::pipeline::guided::{
    global_memory, learn_after_answer, prepare_guided, refresh_descriptors, ClueTrace, GuideSettings, RouteTrace,
};
use crate::pipeline::ingest::{ingest_into, rewrite_memory, IngestLimits, Ingested, MemoryMethod};
use crate::pipeline::qa::{self, Answer, AskParams, Source};
use crate::Error;

/// A library and the one path of its documents and questions (see the module docs).
pub struct Session<S: Store> {
    library: RefCell<Library<S>>,
}

/// The model that answers, in the two roles an ask may need of it.
pub struct Answering<'m> {
    /// Writes the answer.
    pub answerer: &'m dyn Answerer,
    /// The same model writing short replies: clues, routing's sub-queries and judgements,
    /// the library's global memory (used only with clues or routing).
    pub writer: Box<dyn TextModel + 'm>,
    /// Its name, under which the library keeps the global memory it wrote.
    pub name: &'m str,
}

impl<'m> Answering<'m> {
    /// A local model's context held as itself (the evaluation, tests), named `name`.
    pub fn local<B: crate::lm::Backend>(context: &'m crate::lm::LmContext<B>, name: &'m str) -> Self {
        Answering { answerer: context, writer: Box::new(crate::lm::LmText::new(context.model())), name }
    }
}

/// How to answer: retrieval and the answer ([`AskParams`]), and what guides retrieval.
#[derive(Clone, Debug, Default)]
pub struct AskOptions {
    /// Passages, windows, the answer's length, the answerability check.
    pub params: AskParams,
    /// Clues and routing (both off by default: the question alone searches every
    /// collection).
    pub guide: GuideSettings,
    /// The cold-start explorer's probes after a routed answer.
    pub explore: ExploreSettings,
}

impl AskOptions {
    /// Whether clues or routing take part.
    pub fn is_guided(&self) -> bool {
        self.guide.clues != CluesMode::Off || self.guide.route.is_some()
    }
}

/// What an ask reports while it runs.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum AskEvent<'a> {
    /// The passages found, numbered from 1, before the answerer reads them; with clues or
    /// routing, how they were found.
    Passages {
        /// The passages, as the answer's `sources` will hold them.
        sources: &'a [Source],
        /// The clues and which of them found each passage, when clues were on.
        clues: Option<&'a ClueTrace>,
        /// The router's segments, when routing was on.
        route: Option<&'a RouteTrace>,
    },
    /// A piece of the answer as the answerer writes it.
    Text(&'a str),
    /// A part of the answer those pieces complete, read as the answer's `parts` are: text,
    /// or a citation the moment its bracket closes (a page draws these, never parsing the
    /// text). The answer's `parts` are the final word: an answer the check replaces, or
    /// citations moved to the passages holding its words, are drawn again from them.
    Part(&'a AnswerPart),
}

/// Where a document goes, and the limits it must keep.
#[derive(Clone, Debug)]
pub struct AddOptions {
    /// The collection (routing's corpora); a document already in the library stays in
    /// its own.
    pub collection: String,
    /// Limits on what is taken (the document's size).
    pub limits: IngestLimits,
}

impl Default for AddOptions {
    fn default() -> Self {
        AddOptions { collection: DEFAULT_COLLECTION.to_string(), limits: IngestLimits::default() }
    }
}

/// `cell` borrowed to change, or [`Error::Busy`] naming `what`.
fn take<'c, T: ?Sized>(cell: &'c RefCell<T>, what: &'static str) -> Result<RefMut<'c, T>, Error> {
    cell.try_borrow_mut().map_err(|_| Error::Busy { what })
}

impl<S: Store> Session<S> {
    /// A session over `library`.
    pub fn new(library: Library<S>) -> Self {
        Session { library: RefCell::new(library) }
    }

    /// The library, to read, unless a call still running holds it.
    pub fn library(&self) -> Result<Ref<'_, Library<S>>, Error> {
        self.library.try_borrow().map_err(|_| Error::Busy { what: "the library" })
    }

    /// The library, to change (its batches, merges, storage), unless a call still running
    /// holds it.
    pub fn library_mut(&self) -> Result<RefMut<'_, Library<S>>, Error> {
        take(&self.library, "the library")
    }

    /// The library, the session ended.
    pub fn into_library(self) -> Library<S> {
        self.library.into_inner()
    }

    /// Write `doc`'s memory with `method` (a reader, or a baseline chunker:
    /// [`MemoryMethod::chunker`]) and add it to the library, embedded by `embedder`;
    /// `progress` is told each step and returning `false` cancels. Atomic: on an error or
    /// a cancel the library is as it was. A document already there is not read again.
    /// Holds the library and the embedder until it settles.
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    pub async fn add<E: Embedder>(
        &self,
        doc: &Document,
        method: &mut MemoryMethod<'_>,
        embedder: &RefCell<E>,
        options: &AddOptions,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<Ingested, Error> {
        let mut library = self.library_mut()?;
        let mut embedder = take(embedder, "the embedder")?;
        ingest_into(&mut library, &options.collection, doc, method, &mut *embedder, progress, &options.limits).await
    }

    /// Write the memory of document `id` (already in the library, with plain chunks) with
    /// `method`, and swap it in for the chunks in one commit; `None` when the document
    /// was removed meanwhile. Holds the library and the embedder until it settles.
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    pub async fn write_memory<E: Embedder>(
        &self,
        id: DocId,
        method: &mut MemoryMethod<'_>,
        embedder: &RefCell<E>,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<Option<DocumentMemory>, Error> {
        let mut library = self.library_mut()?;
        let mut embedder = take(embedder, "the embedder")?;
        rewrite_memory(&mut library, id, method, &mut *embedder, progress).await
    }

    /// Swap `memory`, written elsewhere a window at a time (the page's background writer),
    /// in for its document's memory, embedded by `embedder`; false when the document is
    /// gone. Holds the library and the embedder until it lands.
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    pub async fn replace_memory<E: Embedder>(&self, memory: &DocumentMemory, embedder: &RefCell<E>) -> Result<bool, Error> {
        let mut library = self.library_mut()?;
        let mut embedder = take(embedder, "the embedder")?;
        Ok(docmem_core::embed_ahead::ahead(&mut *embedder, |e| library.replace_memory(memory, e)).await?)
    }

    /// Remove a document from every layer; false when it was not there.
    pub fn remove(&self, id: DocId) -> Result<bool, Error> {
        Ok(self.library_mut()?.remove(id)?)
    }

    /// The passages that best match `question`, without an answer (each chunk's text cut
    /// to `max_chunk_chars` characters; 0: whole).
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    pub async fn search<E: Embedder>(
        &self,
        question: &str,
        params: &SearchParams,
        max_chunk_chars: usize,
        embedder: &RefCell<E>,
    ) -> Result<Vec<Source>, Error> {
        let library = self.library()?;
        let mut embedder = take(embedder, "the embedder")?;
        qa::retrieve_async(&library, &mut *embedder, question, params, max_chunk_chars).await
    }

    /// Read ahead what the answer to `question` will begin with while it is still being
    /// typed (`question`: what there is so far; empty: the instructions alone): the
    /// passages found now go into the answer prompt, and `answerer` reads it up to the
    /// question, asking `stop` between pieces. When the asked question finds the same
    /// passages its answer runs only the question. Returns the tokens the answerer keeps
    /// (0 at once for one that keeps nothing: a hosted model). Holds the library and the
    /// embedder while it searches, neither while the model reads.
    pub async fn read_ahead<E: Embedder>(
        &self,
        question: &str,
        params: &AskParams,
        answerer: &dyn Answerer,
        embedder: &RefCell<E>,
        stop: &dyn Fn() -> bool,
    ) -> Result<usize, Error> {
        if !answerer.reads_ahead() {
            return Ok(0);
        }
        let start = self.read_ahead_start(question, params, embedder).await?;
        answerer.read_ahead(&start, stop).await
    }

    async fn read_ahead_start<E: Embedder>(&self, question: &str, params: &AskParams, embedder: &RefCell<E>) -> Result<String, Error> {
        if question.trim().is_empty() {
            return Ok(docmem_core::answer::instructions(false).to_string());
        }
        Ok(self.prepare(question, params, embedder).await?.before_question(question).to_string())
    }

    /// Answer `question` from the library (see the module docs for what it reports and
    /// holds): retrieval (with clues or routing when `options` say), the answer prompt,
    /// the answer from `model`, its citations and the answerability check; after a routed
    /// answer, what routing learned is saved in the library.
    pub async fn ask<E: Embedder>(
        &self,
        question: &str,
        options: &AskOptions,
        model: Answering<'_>,
        embedder: &RefCell<E>,
        on_event: &mut dyn FnMut(AskEvent<'_>) -> ControlFlow<()>,
    ) -> Result<Answer, Error> {
        if options.is_guided() {
            return self.ask_guided(question, options, model, embedder, on_event).await;
        }
        let prompt = self.prepare(question, &options.params, embedder).await?;
        // The library and the embedder are free again: the callback may call in.
        if on_event(AskEvent::Passages { sources: &prompt.sources, clues: None, route: None }).is_break() {
            return Err(Error::Cancelled);
        }
        answer_streaming(prompt, model.answerer, options.params.max_tokens, on_event).await
    }

    /// The evidence for `question` and the answer prompt built from it, without an
    /// answer: what [`Session::ask`] shows its answerer (the evaluation's probes read
    /// it too).
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    pub async fn prepare<E: Embedder>(&self, question: &str, params: &AskParams, embedder: &RefCell<E>) -> Result<qa::AnswerPrompt, Error> {
        let library = self.library()?;
        let mut embedder = take(embedder, "the embedder")?;
        qa::prepare_async(&library, &mut *embedder, question, params).await
    }

    /// A question with clues or routing: the global memory (made once per library
    /// generation and model) or the router's refreshed descriptors, the guided search
    /// (holding the library and the embedder), the answer (holding neither), and after it
    /// what routing learned (holding both again).
    #[allow(clippy::await_holding_refcell_ref)] // on purpose: see the module docs
    async fn ask_guided<E: Embedder>(
        &self,
        question: &str,
        options: &AskOptions,
        model: Answering<'_>,
        embedder: &RefCell<E>,
        on_event: &mut dyn FnMut(AskEvent<'_>) -> ControlFlow<()>,
    ) -> Result<Answer, Error> {
        let Answering { answerer, mut writer, name } = model;
        let (params, settings) = (&options.params, &options.guide);
        let embedder_cell = embedder;
        let mut library = self.library_mut()?;
        let mut embedder = take(embedder_cell, "the embedder")?;
        let global = if settings.clues != CluesMode::Off && settings.route.is_none() {
            Some(global_memory(&mut library, &mut *writer, name, &GlobalMemorySettings::default()).await?)
        } else {
            None
        };
        // The routing memory only when routing; one that does not decode (damaged, or from
        // a newer docmem) is started afresh rather than failing every routed question: it
        // holds what was learned about searches, never the library's documents.
        let mut memory = SymbolicMemory::default();
        if settings.route.is_some() {
            memory = match library.routing_memory() {
                Ok(Some(m)) if m.version == SYMBOLIC_MEMORY_VERSION => m,
                _ => SymbolicMemory::default(),
            };
            if refresh_descriptors(&library, &mut memory)? {
                library.save_routing_memory(&memory)?;
            }
        }
        let guided = prepare_guided(&library, &mut *embedder, &mut *writer, global.as_ref(), &memory, question, params, settings).await?;
        // Free while the passages are reported (the callback may read the library) and the
        // answer is written, as in a plain ask; taken again to learn.
        drop((library, embedder));
        let passages = AskEvent::Passages { sources: &guided.prompt.sources, clues: guided.clues.as_ref(), route: guided.route.as_ref() };
        if on_event(passages).is_break() {
            return Err(Error::Cancelled);
        }
        let mut answer = answer_streaming(guided.prompt, answerer, params.max_tokens, on_event).await?;
        // Only the memory controller learns (static and random are the ablations that do
        // not).
        if settings.route.is_some() && settings.route_settings.controller == Controller::Memory {
            let (mut library, mut embedder) = (self.library_mut()?, take(embedder_cell, "the embedder")?);
            let update = guided.update.as_ref();
            learn_after_answer(&mut library, &mut *embedder, Some(&mut *writer), &mut memory, update, &options.explore, params.k).await?;
        }
        answer.clues = guided.clues;
        answer.route = guided.route;
        Ok(answer)
    }
}

/// [`qa::answer`], reporting each piece of text and the parts it completes.
async fn answer_streaming(
    prompt: qa::AnswerPrompt,
    answerer: &dyn Answerer,
    max_tokens: usize,
    on_event: &mut dyn FnMut(AskEvent<'_>) -> ControlFlow<()>,
) -> Result<Answer, Error> {
    let mut parts = PartStream::new(prompt.sources.len());
    let answer = qa::answer(prompt, answerer, max_tokens, |piece| {
        let flow = on_event(AskEvent::Text(piece));
        for part in parts.push(piece) {
            if on_event(AskEvent::Part(&part)).is_break() {
                return ControlFlow::Break(());
            }
        }
        flow
    })
    .await?;
    for part in parts.finish() {
        let _ = on_event(AskEvent::Part(&part));
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answerer::testing::Scripted;
    use crate::lm::Finish;
    use docmem_core::chunk::ChunkerKind;
    use docmem_core::embed::EmbedRole;
    use docmem_core::library::{LibrarySettings, MemStore};
    use docmem_core::local_future::{boxed, LocalBoxFuture};
    use docmem_core::HashingEmbedder;

    const PRINTING: &str = "Printing came late to England. William Caxton set up a press at Westminster in 1476. \
                            He printed Chaucer. Rivers flow into the sea. Mountains are tall.";

    /// Replies "Caxton" to every short request (clues, the global memory's notes).
    struct Writer;

    impl TextModel for Writer {
        fn context_tokens(&self) -> usize {
            2048
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
            Ok(text.len().div_ceil(4))
        }
        fn complete<'a>(&'a mut self, _: &'a str, _: &'a str, _: usize) -> LocalBoxFuture<'a, Result<String, docmem_core::Error>> {
            boxed(async { Ok("Caxton".to_string()) })
        }
    }

    fn answering(text: &'static str) -> Answering<'static> {
        Answering { answerer: Box::leak(Box::new(Scripted { text, probabilities: None })), writer: Box::new(Writer), name: "scripted" }
    }

    fn session() -> (Session<MemStore>, RefCell<HashingEmbedder>) {
        let embedder = RefCell::new(HashingEmbedder::new(64));
        let library = Library::open(MemStore::default(), &LibrarySettings::new("hashing-64".into(), 64)).unwrap();
        let session = Session::new(library);
        let doc = Document::new("press.txt", PRINTING);
        let mut method = MemoryMethod::chunker(ChunkerKind::Sentence);
        let added = crate::block_on(session.add(&doc, &mut method, &embedder, &AddOptions::default(), &mut |_| true)).unwrap();
        assert!(added.added && !added.memory.scenarios.is_empty());
        (session, embedder)
    }

    fn plain() -> AskOptions {
        AskOptions { params: AskParams { k: 3, check_answerability: false, ..AskParams::default() }, ..AskOptions::default() }
    }

    #[test]
    fn an_ask_reports_the_passages_then_the_answer_and_resolves_to_the_same_data() {
        let (session, embedder) = session();
        let mut events: Vec<String> = Vec::new();
        let mut shown = Vec::new();
        let answer = crate::block_on(session.ask(
            "Who set up a press at Westminster?",
            &plain(),
            answering("William Caxton [1]"),
            &embedder,
            &mut |event| {
                match event {
                    AskEvent::Passages { sources, clues, route } => {
                        assert!(clues.is_none() && route.is_none());
                        shown = sources.iter().map(|s| s.text.clone()).collect();
                        // A plain ask holds nothing while the answerer writes: the
                        // callback may read the library.
                        assert!(session.library().is_ok());
                        events.push("passages".into());
                    }
                    AskEvent::Text(piece) => events.push(piece.to_string()),
                    AskEvent::Part(AnswerPart::Text(t)) => events.push(format!("text {t:?}")),
                    AskEvent::Part(AnswerPart::Cite(ns)) => events.push(format!("cite {ns:?}")),
                }
                ControlFlow::Continue(())
            },
        ))
        .unwrap();
        // Each piece, then the parts it completes: "[1]" is read as a citation.
        assert_eq!(events, ["passages", "William ", "text \"William \"", "Caxton ", "text \"Caxton \"", "[1]", "cite [1]"]);
        assert_eq!(answer.parts, [AnswerPart::Text("William Caxton ".into()), AnswerPart::Cite(vec![1])]);
        assert_eq!(answer.sources.iter().map(|s| s.text.clone()).collect::<Vec<_>>(), shown);
        assert!(answer.sources[0].text.contains("Caxton"), "{:?}", answer.sources);
        assert_eq!((answer.answer.as_str(), answer.cited.as_slice(), answer.not_in_documents), ("William Caxton [1]", &[1][..], false));
        assert!(answer.clues.is_none() && answer.route.is_none());
    }

    #[test]
    fn a_break_at_the_passages_cancels_and_one_during_the_answer_stops_it() {
        let (session, embedder) = session();
        let stop_at_passages =
            |e: AskEvent<'_>| if matches!(e, AskEvent::Passages { .. }) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) };
        let q = "Who set up a press at Westminster?";
        let r = crate::block_on(session.ask(q, &plain(), answering("William Caxton [1]"), &embedder, &mut { stop_at_passages }));
        assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
        let mut pieces = 0;
        let stop_after_one = &mut |e: AskEvent<'_>| {
            pieces += usize::from(matches!(e, AskEvent::Text(_)));
            if pieces == 1 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let a = crate::block_on(session.ask(q, &plain(), answering("William Caxton [1]"), &embedder, stop_after_one)).unwrap();
        assert_eq!((a.finish, a.answer.as_str()), (Finish::Cancelled, "William"));
    }

    #[test]
    fn a_guided_ask_traces_its_clues_and_lets_go_of_the_library_while_it_answers() {
        let (session, embedder) = session();
        let options = AskOptions { guide: GuideSettings { clues: CluesMode::On, ..GuideSettings::default() }, ..plain() };
        let mut saw_passages = false;
        let answer = crate::block_on(session.ask("Who printed Chaucer?", &options, answering("Caxton [1]"), &embedder, &mut |event| {
            if let AskEvent::Passages { clues, .. } = event {
                saw_passages = true;
                assert!(clues.is_some_and(|c| c.queries[0].text == "Who printed Chaucer?"));
                // Free while the answer is written, as in a plain ask.
                assert!(session.library().is_ok());
            }
            ControlFlow::Continue(())
        }))
        .unwrap();
        assert!(saw_passages && answer.clues.is_some());
        // The global memory the clues were written from is kept for the next question.
        assert!(session.library_mut().unwrap().cached_global_memory("scripted").is_some());
    }

    #[test]
    fn a_routed_ask_traces_its_segments_and_keeps_what_it_learned() {
        use docmem_core::route::{JudgeKind, RouteSettings, RouteTarget};
        let (session, embedder) = session();
        let route_settings = RouteSettings { judge: JudgeKind::Overlap, ..RouteSettings::default() };
        let guide = GuideSettings { route: Some(RouteTarget::Auto), route_settings, ..GuideSettings::default() };
        let options = AskOptions { guide, ..plain() };
        let mut traced = None;
        let answer = crate::block_on(session.ask("Who printed Chaucer?", &options, answering("Caxton [1]"), &embedder, &mut |event| {
            if let AskEvent::Passages { route, sources, .. } = event {
                traced = route.map(|r| (r.segments.len(), sources.len()));
            }
            ControlFlow::Continue(())
        }))
        .unwrap();
        let (segments, sources) = traced.expect("the passages came with the router's trace");
        assert!(segments >= 1 && sources >= 1, "{segments} segments, {sources} passages");
        assert_eq!(answer.route.as_ref().map(|r| r.segments.len()), Some(segments));
        assert_eq!(answer.route.unwrap().collection.as_deref(), Some(DEFAULT_COLLECTION));
        // What routing learned is kept with the library.
        let memory = session.library_mut().unwrap().routing_memory().unwrap().expect("a routing memory saved");
        assert!(memory.descriptor(DEFAULT_COLLECTION).is_some());
    }

    /// The hashing embedder, as one on WebGPU: its vectors can only be awaited.
    struct Awaited(HashingEmbedder);

    impl Embedder for Awaited {
        fn dim(&self) -> usize {
            self.0.dim()
        }
        fn embed(&mut self, _: &[&str], _: EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
            Err(docmem_core::Error::EmbedderFailed { message: "asked synchronously".into() })
        }
        fn needs_await(&self) -> bool {
            true
        }
        fn embed_async<'a>(
            &'a mut self,
            texts: &'a [&'a str],
            role: EmbedRole,
        ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
            boxed(async move { self.0.embed(texts, role) })
        }
        fn name(&self) -> String {
            self.0.name()
        }
    }

    /// An embedder whose vectors can only be awaited (one on WebGPU) answers every kind of
    /// ask, and finds what the same embedder answering at once finds: the clues' searches
    /// and the router's await the vectors ahead of searching.
    #[test]
    fn an_awaited_embedder_answers_plain_clue_guided_and_routed_asks_as_a_synchronous_one_does() {
        let q = "Who set up a press at Westminster?";
        let clues = AskOptions { guide: GuideSettings { clues: CluesMode::On, ..GuideSettings::default() }, ..plain() };
        let routed = AskOptions {
            guide: GuideSettings { route: Some(docmem_core::route::RouteTarget::Auto), ..GuideSettings::default() },
            ..plain()
        };
        for options in [plain(), clues, routed] {
            let (first, at_once) = session();
            let plain_answer =
                crate::block_on(first.ask(q, &options, answering("William Caxton [1]"), &at_once, &mut |_| ControlFlow::Continue(())))
                    .unwrap();
            let (second, _) = session();
            let awaited = RefCell::new(Awaited(HashingEmbedder::new(64)));
            let a = crate::block_on(second.ask(q, &options, answering("William Caxton [1]"), &awaited, &mut |_| ControlFlow::Continue(())))
                .unwrap();
            assert!(a.sources[0].text.contains("Caxton"), "{:?}", options.guide);
            let texts = |a: &Answer| a.sources.iter().map(|s| s.text.clone()).collect::<Vec<_>>();
            assert_eq!(texts(&a), texts(&plain_answer), "{:?}", options.guide);
            assert_eq!(a.clues.is_some(), options.guide.clues == CluesMode::On);
            assert_eq!(a.route.is_some(), options.guide.route.is_some());
        }
    }

    #[test]
    fn a_held_embedder_or_library_is_busy_and_nothing_changes() {
        let (session, embedder) = session();
        let held = embedder.borrow_mut();
        let doc = Document::new("rivers.txt", "Rivers flow into the sea.");
        let r = crate::block_on(session.add(
            &doc,
            &mut MemoryMethod::chunker(ChunkerKind::Sentence),
            &embedder,
            &AddOptions::default(),
            &mut |_| true,
        ));
        assert!(matches!(r, Err(Error::Busy { what: "the embedder" })), "{r:?}");
        drop(held);
        assert_eq!(session.library().unwrap().documents().len(), 1);
        let reading = session.library().unwrap();
        assert!(matches!(session.remove(doc.id), Err(Error::Busy { what: "the library" })));
        assert_eq!(Error::Busy { what: "the library" }.code(), docmem_core::ErrorCode::Busy);
        drop(reading);
        let id = session.library().unwrap().documents()[0].id;
        assert!(session.remove(id).unwrap());
        assert!(session.library().unwrap().documents().is_empty());
    }

    #[test]
    fn a_search_finds_what_an_ask_shows() {
        let (session, embedder) = session();
        let found =
            crate::block_on(session.search("Who printed Chaucer?", &SearchParams { k: 2, ..SearchParams::default() }, 0, &embedder))
                .unwrap();
        assert!(found.iter().any(|s| s.text.contains("Chaucer")), "{found:?}");
        let empty = crate::block_on(session.search("  ", &SearchParams::default(), 0, &embedder));
        assert!(matches!(empty, Err(Error::EmptyQuestion)));
    }
}
