//! [`WasmLibrary`]: a document library in wasm memory whose changes the JavaScript side
//! persists.
//!
//! Browsers' storage (IndexedDB, OPFS) is asynchronous and the library is synchronous, so
//! the library runs on a [`JournalStore`] in memory: JavaScript opens it with the entries
//! its storage holds, and after each call takes the journal (`takeWrites`) and applies it
//! in one transaction (a tab closed midway leaves the stored library as it was). In Node
//! the same journal goes to files. Ingest, search and answers are the runtime's
//! (`docmem_runtime::ingest`, `docmem_runtime::qa`); this file only translates.
//!
//! The library sits in an `Rc<RefCell<…>>` because an ingest on WebGPU (`crate::gpu`) is
//! a Promise that holds it across the event loop; a call made meanwhile gets a `BUSY`
//! error rather than a half-written library (the npm package's worker queues its
//! requests, so it never sees one).

use std::cell::{Ref, RefCell, RefMut};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::rc::Rc;

use docmem_core::chunk::{passage_sizes, ChunkOptions, ChunkerKind};
use docmem_core::clues::CluesMode;
use docmem_core::library::DEFAULT_COLLECTION;
use docmem_core::library::{archive, unarchive, JournalStore, Library, LibrarySettings};
use docmem_core::reader::{ExtractSettings, Progress, Stage};
use docmem_core::retrieve::SearchParams;
use docmem_core::route::{ExploreSettings, RouteTarget};
use docmem_core::{DocId, Document, Embedder, ErrorCode};
use docmem_runtime::guided::{ask_guided, GuideSettings};
use docmem_runtime::ingest::{ingest_into, IngestLimits, Ingested, MemoryMethod};
use docmem_runtime::lm::{LmReader, LmText};
use docmem_runtime::qa::{ask, read_ahead, retrieve, AskParams};
use wasm_bindgen::prelude::*;

use crate::boundary::{self, count, string};
use crate::{busy, coded, error_with, to_json, WasmEmbedder, WasmLm};

/// Most sampled candidates per window: each is decoded with its own KV cache, and wasm32
/// memory is 4 GiB at most.
pub(crate) const MAX_SAMPLES: u32 = 16;

/// A library (documents, memories, the three layers' indexes) held in wasm memory.
#[wasm_bindgen(js_name = Library)]
pub struct WasmLibrary {
    pub(crate) library: Rc<RefCell<Library<JournalStore>>>,
}

/// `{key: Uint8Array}` → entries.
fn entries_from(object: &JsValue) -> Result<BTreeMap<String, Vec<u8>>, JsValue> {
    let mut map = BTreeMap::new();
    for (key, value) in boundary::entries(object, "the library's entries")? {
        let bytes = boundary::bytes(&value, &format!("library entry '{key}'"), ErrorCode::BadLibrary)?;
        map.insert(key, bytes);
    }
    Ok(map)
}

/// A library indexed with `embedder`'s vectors.
fn settings(embedder: &WasmEmbedder) -> Result<LibrarySettings, JsValue> {
    let e = embedder.read()?;
    Ok(LibrarySettings::new(Embedder::name(&*e), Embedder::dim(&*e)))
}

/// `progress` (a JS function given `{stage, …, fraction}` that returns `false` to cancel)
/// as ingest's progress callback.
pub(crate) fn progress_reporter(progress: Option<js_sys::Function>) -> impl FnMut(&Progress) -> bool {
    move |p: &Progress| match &progress {
        Some(f) => !matches!(f.call1(&JsValue::NULL, &progress_object(p)), Ok(v) if v == JsValue::FALSE),
        None => true,
    }
}

/// `onToken` (a JS function given each piece of text that returns `false` to stop) as the
/// answer's text callback.
pub(crate) fn token_sink(on_token: Option<js_sys::Function>) -> impl FnMut(&str) -> ControlFlow<()> {
    move |piece: &str| match &on_token {
        Some(f) if matches!(f.call1(&JsValue::NULL, &piece.into()), Ok(v) if v == JsValue::FALSE) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    }
}

/// What `addDocument` and its variants return: JSON `{id, added, chunks, outline, fallback}`.
pub(crate) fn added_json(doc: &Document, done: &Ingested) -> Result<String, JsValue> {
    to_json(&serde_json::json!({
        "id": doc.id.to_string(),
        "added": done.added,
        "chunks": done.memory.scenarios.len(),
        "outline": done.memory.outline.len(),
        "fallback": done.memory.provenance.fallback,
    }))
}

/// The collection a document goes into: `undefined` or `null` for the default one.
pub(crate) fn collection_name(value: &JsValue) -> Result<String, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(DEFAULT_COLLECTION.into());
    }
    string(value, "collection")
}

/// The sampled candidates per window asked for, checked.
pub(crate) fn extract_settings(samples: f64) -> Result<ExtractSettings, JsValue> {
    let samples = count(samples, "samples", MAX_SAMPLES)?;
    Ok(ExtractSettings { samples: samples as usize, ..ExtractSettings::default() })
}

/// The clue mode (`off`, `on`, `auto`) and route (`undefined`: none; `auto` or a
/// collection's name) of a guided question.
pub(crate) fn guide_settings(clues: &JsValue, route: &JsValue) -> Result<GuideSettings, JsValue> {
    let clues: CluesMode = string(clues, "clues")?.parse().map_err(|e| error_with(ErrorCode::BadArgument, format!("{e}")))?;
    let route = match route.is_undefined() || route.is_null() {
        true => None,
        false => Some(RouteTarget::from_setting(&string(route, "route")?)),
    };
    Ok(GuideSettings { clues, route, ..GuideSettings::default() })
}

/// The checked arguments of an ingest a Promise runs later: title, text, extraction
/// settings and collection.
pub(crate) fn ingest_args(
    title: &JsValue,
    text: &JsValue,
    samples: f64,
    collection: &JsValue,
) -> Result<(String, String, ExtractSettings, String), JsValue> {
    boundary::ready()?;
    Ok((string(title, "title")?, string(text, "text")?, extract_settings(samples)?, collection_name(collection)?))
}

/// Ingest `doc` with a reader whose answers come through the event loop (on WebGPU, or a
/// hosted one), holding the library and the embedder across its awaits on purpose: every
/// other entry point borrows them with `try_borrow*` and answers BUSY meanwhile. Resolves
/// to `addDocumentWithReader`'s JSON.
#[allow(clippy::await_holding_refcell_ref)]
pub(crate) async fn ingest_holding(
    library: &RefCell<Library<JournalStore>>,
    embedder: &RefCell<crate::remote::AnyEmbedder>,
    doc: &Document,
    collection: &str,
    method: &mut MemoryMethod<'_>,
    progress: Option<js_sys::Function>,
) -> Result<JsValue, JsValue> {
    let mut library = library.try_borrow_mut().map_err(|_| busy("the library"))?;
    let mut embedder = embedder.try_borrow_mut().map_err(|_| busy("the embedder"))?;
    let mut report = progress_reporter(progress);
    let done =
        ingest_into(&mut library, collection, doc, method, &mut *embedder, &mut report, &IngestLimits::default()).await.map_err(coded)?;
    Ok(added_json(doc, &done)?.into())
}

/// `addDocument`'s arguments, checked: title, text, the chunker as a method, collection.
pub(crate) fn chunker_args(
    title: &JsValue,
    text: &JsValue,
    chunker: &JsValue,
    collection: &JsValue,
) -> Result<(String, String, MemoryMethod<'static>, String), JsValue> {
    boundary::ready()?;
    let (title, text) = (string(title, "title")?, string(text, "text")?);
    let kind: ChunkerKind = string(chunker, "chunker")?.parse().map_err(coded)?;
    let (size, overlap) = passage_sizes(kind, None, None);
    Ok((title, text, MemoryMethod::Chunker { kind, options: ChunkOptions { size, overlap } }, collection_name(collection)?))
}

/// The answer prompt for `question`, its vector awaited where the embedder runs on WebGPU,
/// holding the library and the embedder until then (other calls answer BUSY meanwhile).
#[allow(clippy::await_holding_refcell_ref)]
pub(crate) async fn prepare_holding(
    library: &RefCell<Library<JournalStore>>,
    embedder: &RefCell<crate::remote::AnyEmbedder>,
    question: &str,
    params: &AskParams,
) -> Result<docmem_runtime::qa::AnswerPrompt, JsValue> {
    let library = library.try_borrow().map_err(|_| busy("the library"))?;
    let mut embedder = embedder.try_borrow_mut().map_err(|_| busy("the embedder"))?;
    docmem_runtime::qa::prepare_async(&library, &mut *embedder, question, params).await.map_err(coded)
}

/// `k` and `maxTokens` of an answer, checked.
pub(crate) fn ask_params(k: f64, max_tokens: f64) -> Result<AskParams, JsValue> {
    let (k, max_tokens) = (count(k, "k", u32::MAX)?, count(max_tokens, "max_tokens", u32::MAX)?);
    Ok(AskParams { k: k.max(1) as usize, max_tokens: max_tokens.max(1) as usize, ..AskParams::default() })
}

pub(crate) fn progress_object(p: &Progress) -> JsValue {
    let o = js_sys::Object::new();
    let stage = match p.stage {
        Stage::Reading => "reading",
        Stage::Scoring => "scoring",
        Stage::Fallback => "fallback",
        Stage::Done => "done",
    };
    let fields: [(&str, JsValue); 8] = [
        ("stage", stage.into()),
        ("window", (p.window as f64).into()),
        ("windows", (p.windows as f64).into()),
        ("tokensDone", (p.tokens_done as f64).into()),
        ("tokensTotal", (p.tokens_total as f64).into()),
        ("candidatesDone", (p.candidates_done as f64).into()),
        ("candidatesTotal", (p.candidates_total as f64).into()),
        ("fraction", p.fraction().into()),
    ];
    for (k, v) in fields {
        let _ = js_sys::Reflect::set(&o, &k.into(), &v);
    }
    o.into()
}

impl WasmLibrary {
    fn wrap(library: Library<JournalStore>) -> Self {
        WasmLibrary { library: Rc::new(RefCell::new(library)) }
    }

    /// The library, unless a call still running holds it.
    pub(crate) fn get(&self) -> Result<Ref<'_, Library<JournalStore>>, JsValue> {
        self.library.try_borrow().map_err(|_| busy("the library"))
    }

    /// The library to change, unless a call still running holds it.
    pub(crate) fn get_mut(&self) -> Result<RefMut<'_, Library<JournalStore>>, JsValue> {
        self.library.try_borrow_mut().map_err(|_| busy("the library"))
    }

    /// The document whose id prints as `s` (as `documents()` lists them).
    pub(crate) fn doc_id(&self, s: &str) -> Result<DocId, JsValue> {
        self.get()?
            .documents()
            .iter()
            .map(|d| d.id)
            .find(|id| id.to_string() == s)
            .ok_or_else(|| error_with(ErrorCode::NotFound, format!("no document '{s}' in the library")))
    }
}

#[wasm_bindgen(js_class = Library)]
impl WasmLibrary {
    /// Open a library from the entries its storage holds (`{key: Uint8Array}`; empty for
    /// a new one) for `embedder`, whose vectors it indexes. A library built with another
    /// embedder, or by a newer docmem, is an error.
    pub fn open(
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] entries: JsValue,
        embedder: &WasmEmbedder,
    ) -> Result<WasmLibrary, JsValue> {
        boundary::ready()?;
        let library = Library::open(JournalStore::from_entries(entries_from(&entries)?), &settings(embedder)?).map_err(coded)?;
        Ok(WasmLibrary::wrap(library))
    }

    /// What can still be read from entries that `open` refused (see
    /// `docmem_core::library::salvage`): JSON `{documents: [{title, text, language,
    /// collection}], unreadable: [[key, reason]]}`. Reads only; never fails on damage.
    pub fn salvage(#[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] entries: JsValue) -> Result<String, JsValue> {
        let mut store = JournalStore::from_entries(entries_from(&entries)?);
        to_json(&docmem_core::library::salvage(&mut store))
    }

    /// Open an exported library (`exportLibrary`'s bytes). Its entries are all in the
    /// journal, so `takeWrites` gives the storage everything to store.
    #[wasm_bindgen(js_name = importLibrary)]
    pub fn import_library(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
        embedder: &WasmEmbedder,
    ) -> Result<WasmLibrary, JsValue> {
        boundary::ready()?;
        let bytes = boundary::bytes(&bytes, "the exported library", ErrorCode::BadLibrary)?;
        let entries = unarchive(&bytes).map_err(coded)?;
        let mut store = JournalStore::default();
        for (k, v) in &entries {
            docmem_core::library::Store::write(&mut store, k, v).map_err(coded)?;
        }
        let library = Library::open(store, &settings(embedder)?).map_err(coded)?;
        Ok(WasmLibrary::wrap(library))
    }

    /// Add a document with a baseline chunker (`sentence`, `fixed`, `recursive`,
    /// `semantic`): plain chunks, no outline or cores. Returns JSON `{id, added, chunks,
    /// outline, fallback}`; `added` is false when the same content was already there.
    /// `collection` names the collection it goes into (`undefined`: `default`).
    #[wasm_bindgen(js_name = addDocument)]
    pub fn add_document(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] title: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] chunker: JsValue,
        embedder: &mut WasmEmbedder,
        #[wasm_bindgen(unchecked_param_type = "string | undefined")] collection: JsValue,
    ) -> Result<String, JsValue> {
        let (title, text, mut method, collection) = chunker_args(&title, &text, &chunker, &collection)?;
        self.add(&collection, &title, &text, &mut method, embedder, None)
    }

    /// Add a document whose memory `reader` writes (MoM: outline, cores, chunks; the best
    /// of a greedy and `samples` sampled candidates). `progress` is called with `{stage,
    /// window, windows, tokensDone, tokensTotal, candidatesDone, candidatesTotal,
    /// fraction}`; returning `false` cancels (the library is unchanged). Returns JSON as
    /// `addDocument` does. `collection`: as for `addDocument`.
    #[wasm_bindgen(js_name = addDocumentWithReader)]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's positional arguments
    pub fn add_document_with_reader(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "string")] title: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
        embedder: &mut WasmEmbedder,
        reader: &WasmLm,
        samples: f64,
        progress: Option<js_sys::Function>,
        #[wasm_bindgen(unchecked_param_type = "string | undefined")] collection: JsValue,
    ) -> Result<String, JsValue> {
        boundary::ready()?;
        let (title, text) = (string(&title, "title")?, string(&text, "text")?);
        let collection = collection_name(&collection)?;
        let mut method = MemoryMethod::Mom {
            reader: Box::new(LmReader::new(&reader.lm, reader.name.clone())),
            scorer: None,
            settings: extract_settings(samples)?,
        };
        self.add(&collection, &title, &text, &mut method, embedder, progress)
    }

    /// Ingest on the CPU backend, whose futures are ready when first polled.
    fn add(
        &mut self,
        collection: &str,
        title: &str,
        text: &str,
        method: &mut MemoryMethod<'_>,
        embedder: &mut WasmEmbedder,
        progress: Option<js_sys::Function>,
    ) -> Result<String, JsValue> {
        let doc = Document::new(title, text);
        let (mut library, mut embedder) = (self.get_mut()?, embedder.get()?);
        let mut report = progress_reporter(progress);
        let limits = IngestLimits::default();
        let done = docmem_runtime::block_on(ingest_into(&mut library, collection, &doc, method, &mut *embedder, &mut report, &limits))
            .map_err(coded)?;
        added_json(&doc, &done)
    }

    /// Retrieval without an answer: the `k` best passages through the three layers, JSON
    /// `[{n, doc_id, title, span, text, core, outline, ranks, score}, …]`.
    pub fn search(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        k: f64,
        embedder: &mut WasmEmbedder,
    ) -> Result<String, JsValue> {
        boundary::ready()?;
        let (question, k) = (string(&question, "question")?, count(k, "k", u32::MAX)?);
        let params = SearchParams { k: k.max(1) as usize, ..SearchParams::default() };
        to_json(&retrieve(&*self.get()?, &mut *embedder.get()?, &question, &params, 0).map_err(coded)?)
    }

    /// Read ahead the answer prompt of a question still being typed (`question`: what
    /// there is so far; empty: the instructions alone), so that an `ask` whose passages
    /// start the same way runs only what differs ([`docmem_runtime::qa::read_ahead`]).
    /// `interrupt()` is asked before each piece of 16 tokens; `true` stops, keeping what
    /// was read. Returns the prompt tokens the answerer keeps.
    #[wasm_bindgen(js_name = readAhead)]
    pub fn read_ahead(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        k: f64,
        embedder: &mut WasmEmbedder,
        answerer: &WasmLm,
        interrupt: Option<js_sys::Function>,
    ) -> Result<f64, JsValue> {
        boundary::ready()?;
        let (question, params) = (string(&question, "question")?, ask_params(k, 1.0)?);
        let stop = crate::memory_draft::interrupt_fn(interrupt);
        let (library, mut embedder) = (self.get()?, embedder.get()?);
        let kept =
            docmem_runtime::block_on(read_ahead(&library, &mut *embedder, &answerer.lm, &question, &params, &stop)).map_err(coded)?;
        Ok(kept as f64)
    }

    /// Answer `question` from the library with `answerer`, streaming text pieces to
    /// `onToken` (returning `false` stops). JSON `{answer, not_in_documents, cited,
    /// citations_from, sources, …}`.
    pub fn ask(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        k: f64,
        max_tokens: f64,
        embedder: &mut WasmEmbedder,
        answerer: &WasmLm,
        on_token: Option<js_sys::Function>,
    ) -> Result<String, JsValue> {
        boundary::ready()?;
        let (question, params) = (string(&question, "question")?, ask_params(k, max_tokens)?);
        let (library, mut embedder) = (self.get()?, embedder.get()?);
        let answer = docmem_runtime::block_on(ask(&library, &mut *embedder, &answerer.lm, &question, &params, token_sink(on_token)))
            .map_err(coded)?;
        to_json(&answer)
    }

    /// [`Library::ask`] guided by clues (`clues`: `off`, `on` or `auto`) or by routing
    /// across collections (`route`: `auto` or a collection's name; `undefined`: every
    /// collection at once). JSON as `ask`, plus `clues` (`{scope, queries, found_by,
    /// overview}`) and `route` (`{segments, scores, collection}`) when they ran. With
    /// routing, what the router learned is saved in the library after the answer (take the
    /// writes); with clues, the library's global memory is made once and saved.
    #[wasm_bindgen(js_name = askGuided)]
    #[allow(clippy::too_many_arguments)] // the JavaScript call's positional arguments
    pub fn ask_guided(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        k: f64,
        max_tokens: f64,
        embedder: &mut WasmEmbedder,
        answerer: &WasmLm,
        #[wasm_bindgen(unchecked_param_type = "string")] clues: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string | undefined")] route: JsValue,
        on_token: Option<js_sys::Function>,
    ) -> Result<String, JsValue> {
        boundary::ready()?;
        let (question, params) = (string(&question, "question")?, ask_params(k, max_tokens)?);
        let settings = guide_settings(&clues, &route)?;
        let (mut library, mut embedder) = (self.get_mut()?, embedder.get()?);
        let answer = docmem_runtime::block_on(ask_guided(
            &mut library,
            &mut *embedder,
            &answerer.lm,
            &mut LmText::new(&answerer.lm),
            &answerer.name,
            &question,
            &params,
            &settings,
            &ExploreSettings::default(),
            &mut |_| {},
            token_sink(on_token),
        ))
        .map_err(coded)?;
        to_json(&answer)
    }

    /// The collections: JSON `[{name, documents}]`, in the order each first appeared.
    pub fn collections(&self) -> Result<String, JsValue> {
        boundary::ready()?;
        let library = self.get()?;
        let list: Vec<serde_json::Value> = library
            .collections()
            .into_iter()
            .map(|c| serde_json::json!({"name": c, "documents": library.collection_documents(c).count()}))
            .collect();
        to_json(&list)
    }

    /// The manifest: JSON `{format_version, embedder, dim, mode, documents: […]}`.
    pub fn documents(&self) -> Result<String, JsValue> {
        boundary::ready()?;
        to_json(self.get()?.manifest())
    }

    /// A document's memory (outline, scenarios with spans and cores, provenance) as JSON.
    pub fn memory(&self, #[wasm_bindgen(unchecked_param_type = "string")] doc: JsValue) -> Result<String, JsValue> {
        boundary::ready()?;
        let id = self.doc_id(&string(&doc, "document id")?)?;
        let library = self.get()?;
        let (_, memory) = library.get(id).map_err(coded)?;
        to_json(memory)
    }

    /// A document's text, into which its memory's spans (UTF-8 byte offsets) point.
    pub fn text(&self, #[wasm_bindgen(unchecked_param_type = "string")] doc: JsValue) -> Result<String, JsValue> {
        boundary::ready()?;
        let id = self.doc_id(&string(&doc, "document id")?)?;
        let library = self.get()?;
        let (document, _) = library.get(id).map_err(coded)?;
        Ok(document.text.clone())
    }

    /// Remove a document from every layer. False when it was not there.
    #[wasm_bindgen(js_name = removeDocument)]
    pub fn remove_document(&mut self, #[wasm_bindgen(unchecked_param_type = "string")] doc: JsValue) -> Result<bool, JsValue> {
        boundary::ready()?;
        let id = self.doc_id(&string(&doc, "document id")?)?;
        self.get_mut()?.remove(id).map_err(coded)
    }

    /// The changes since the last call, in order, for the storage to apply in one
    /// transaction: an array of `[key, Uint8Array]` (write) and `[key, null]` (delete).
    #[wasm_bindgen(js_name = takeWrites)]
    pub fn take_writes(&mut self) -> Result<js_sys::Array, JsValue> {
        boundary::ready()?;
        let out = js_sys::Array::new();
        for (key, value) in self.get_mut()?.store_mut().take_journal() {
            let v = value.map_or(JsValue::NULL, |b| js_sys::Uint8Array::from(b.as_slice()).into());
            out.push(&js_sys::Array::of2(&key.into(), &v));
        }
        Ok(out)
    }

    /// The whole library as one byte string (see `docmem_core::library::archive`).
    #[wasm_bindgen(js_name = exportLibrary)]
    pub fn export_library(&mut self) -> Result<Vec<u8>, JsValue> {
        boundary::ready()?;
        Ok(archive(self.get_mut()?.store_mut().entries()))
    }
}
