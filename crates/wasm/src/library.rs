//! [`WasmLibrary`]: a document library in wasm memory whose changes the JavaScript side
//! persists.
//!
//! Browsers' storage (IndexedDB, OPFS) is asynchronous and the library is synchronous, so
//! the library runs on a [`JournalStore`] in memory: JavaScript opens it with the entries
//! its storage holds, and after each call takes the journal (`takeWrites`) and applies it
//! in one transaction (a tab closed midway leaves the stored library as it was). In Node
//! the same journal goes to files. Adding, searching and answering are the runtime's
//! [`Session`]'s; this file only translates options and results.
//!
//! Two entry points do the work, whatever runs the models: `addDocument(doc, options)` and
//! `ask(question, options)` (with `readAhead` beside it), each a Promise. The options carry
//! the models (`crate::handles` finds them); on the CPU the runtime's futures are ready
//! when first polled, on WebGPU or with a hosted model they wait on the event loop.
//!
//! The session sits in an `Rc` because such a Promise holds it across the event loop; it
//! lends its library out one call at a time, so a call made meanwhile gets a `BUSY` error
//! rather than a half-written library (the npm package's worker queues its requests, so
//! it never sees one).

use std::cell::{Ref, RefCell, RefMut};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::rc::Rc;

use docmem_core::answer::AnswerPart;
use docmem_core::chunk::ChunkerKind;
use docmem_core::clues::CluesMode;
use docmem_core::library::DEFAULT_COLLECTION;
use docmem_core::library::{archive, read_only_at_open, unarchive, JournalStore, Library, LibrarySettings};
use docmem_core::reader::{ExtractSettings, Progress, Stage};
use docmem_core::retrieve::{MergeJob, SearchParams};
use docmem_core::route::RouteTarget;
use docmem_core::{DocId, Document, Embedder, ErrorCode};
use docmem_runtime::pipeline::guided::GuideSettings;
use docmem_runtime::pipeline::ingest::MemoryMethod;
use docmem_runtime::pipeline::qa::AskParams;
use docmem_runtime::session::{AddOptions, AskEvent, AskOptions, Session};
use wasm_bindgen::prelude::*;

use crate::boundary::{self, string, Options};
use crate::{coded, error_with, handles, shapes, WasmEmbedder};

/// Most sampled candidates per window: each is decoded with its own KV cache, and wasm32
/// memory is 4 GiB at most.
pub(crate) const MAX_SAMPLES: u32 = 16;

/// A library (documents, memories, the three layers' indexes) held in wasm memory.
#[wasm_bindgen(js_name = Library)]
pub struct WasmLibrary {
    pub(crate) session: Rc<Session<JournalStore>>,
    /// The merge of the index's parts being built a slice at a time (`mergeStep`).
    merge: RefCell<Option<MergeJob>>,
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

/// How `addDocument` makes a document's memory.
#[allow(clippy::large_enum_variant)] // one per call, gone when it settles
enum Method {
    /// A baseline chunker.
    Chunker(ChunkerKind),
    /// MoM with a reader (and a scorer).
    Mom { reader: handles::Model, scorer: Option<handles::Model>, settings: ExtractSettings },
}

/// `addDocument`'s arguments, checked.
struct AddArgs {
    doc: Document,
    embedder: handles::SharedEmbedder,
    collection: String,
    method: Method,
    progress: Option<js_sys::Function>,
}

fn add_args(doc: &JsValue, options: &JsValue) -> Result<AddArgs, JsValue> {
    boundary::ready()?;
    let d = Options::new(doc, "doc", &["title", "text"])?;
    let doc = Document::new(&d.string("title")?, &d.string("text")?);
    let o = Options::new(options, "options", &["embedder", "chunker", "reader", "scorer", "samples", "progress", "collection"])?;
    let embedder = handles::embedder_in(&o)?;
    let (reader, scorer) = (handles::model_in(&o, "reader")?, handles::model_in(&o, "scorer")?);
    let chunker = o.optional_string("chunker")?.unwrap_or_else(|| if reader.is_some() { "mom" } else { "sentence" }.to_owned());
    let method = if chunker == "mom" {
        let reader = reader.ok_or_else(|| error_with(ErrorCode::BadArgument, "options.reader: chunker 'mom' needs a reader model"))?;
        let samples = o.count_or("samples", 0, MAX_SAMPLES)?;
        Method::Mom { reader, scorer, settings: ExtractSettings { samples: samples as usize, ..ExtractSettings::default() } }
    } else {
        // What only MoM takes, given to a baseline chunker, is a mistake to name.
        let given = [("reader", reader.is_some()), ("scorer", scorer.is_some()), ("samples", !o.value("samples")?.is_undefined())];
        if let Some((field, _)) = given.iter().find(|(_, given)| *given) {
            return Err(error_with(
                ErrorCode::BadArgument,
                format!("options.{field}: chunker '{chunker}' writes plain chunks with no model (use chunker 'mom')"),
            ));
        }
        Method::Chunker(chunker.parse().map_err(coded)?)
    };
    let collection = o.optional_string("collection")?.unwrap_or_else(|| DEFAULT_COLLECTION.into());
    Ok(AddArgs { doc, embedder, collection, method, progress: o.function("progress")? })
}

/// `ask`'s arguments, checked.
struct AskArgs {
    question: String,
    /// The answer's settings, with clues or routing when asked for.
    options: AskOptions,
    answerer: handles::Model,
    embedder: handles::SharedEmbedder,
    on_token: Option<js_sys::Function>,
    on_part: Option<js_sys::Function>,
    on_read: Option<js_sys::Function>,
}

fn ask_args(question: &JsValue, options: &JsValue) -> Result<AskArgs, JsValue> {
    boundary::ready()?;
    let question = string(question, "question")?;
    let o = Options::new(options, "options", &["embedder", "answerer", "k", "maxTokens", "onToken", "onPart", "onRead", "clues", "route"])?;
    let defaults = AskParams::default();
    let k = o.count_or("k", defaults.k as u32, u32::MAX)?.max(1) as usize;
    let max_tokens = o.count_or("maxTokens", defaults.max_tokens as u32, u32::MAX)?.max(1) as usize;
    let clues: CluesMode = match o.optional_string("clues")? {
        Some(c) => c.parse().map_err(|e| error_with(ErrorCode::BadArgument, format!("options.clues: {e}")))?,
        None => CluesMode::Off,
    };
    let route = o.optional_string("route")?.map(|r| RouteTarget::from_setting(&r));
    let options = AskOptions {
        params: AskParams { k, max_tokens, ..defaults },
        guide: GuideSettings { clues, route, ..GuideSettings::default() },
        ..AskOptions::default()
    };
    Ok(AskArgs {
        question,
        options,
        answerer: handles::required_model(&o, "answerer")?,
        embedder: handles::embedder_in(&o)?,
        on_token: o.function("onToken")?,
        on_part: o.function("onPart")?,
        on_read: o.function("onRead")?,
    })
}

/// An answer's part as JavaScript: `{text}` or `{cite: [n, …]}`.
fn part_object(part: &AnswerPart) -> JsValue {
    let o = js_sys::Object::new();
    let (key, value): (&str, JsValue) = match part {
        AnswerPart::Text(t) => ("text", t.as_str().into()),
        AnswerPart::Cite(ns) => ("cite", ns.iter().map(|&n| JsValue::from(n as f64)).collect::<js_sys::Array>().into()),
    };
    let _ = js_sys::Reflect::set(&o, &key.into(), &value);
    o.into()
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
        WasmLibrary { session: Rc::new(Session::new(library)), merge: RefCell::new(None) }
    }

    /// The library, unless a call still running holds it.
    pub(crate) fn get(&self) -> Result<Ref<'_, Library<JournalStore>>, JsValue> {
        self.session.library().map_err(coded)
    }

    /// The library to change, unless a call still running holds it.
    pub(crate) fn get_mut(&self) -> Result<RefMut<'_, Library<JournalStore>>, JsValue> {
        self.session.library_mut().map_err(coded)
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
    /// embedder, or by a newer docmem, is an error. `options.partVectors`: seal the newest
    /// documents into a part every this many vectors (default 4,096; smaller makes parts
    /// and merges with few documents, for tests). `options.releaseIndex`: the index's
    /// entries, read only while the library opens, are given up as they are read, and
    /// those written later are not kept (the storage the caller applies `takeWrites` to
    /// holds them), so the library never holds two copies of its index; as
    /// `releaseIndex()` does after the open.
    pub fn open(
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] entries: JsValue,
        embedder: &WasmEmbedder,
        #[wasm_bindgen(unchecked_param_type = "{partVectors?: number, releaseIndex?: boolean}")] options: Option<js_sys::Object>,
    ) -> Result<WasmLibrary, JsValue> {
        boundary::ready()?;
        let options = options.map_or(JsValue::UNDEFINED, JsValue::from);
        let o = Options::new(&options, "options", &["partVectors", "releaseIndex"])?;
        let mut settings = settings(embedder)?;
        settings.part_vectors = o.count_or("partVectors", settings.part_vectors as u32, u32::MAX)?.max(1) as usize;
        let mut store = JournalStore::from_entries(entries_from(&entries)?);
        if o.flag("releaseIndex")? {
            store = store.releasing(read_only_at_open);
        }
        let library = Library::open(store, &settings).map_err(coded)?;
        Ok(WasmLibrary::wrap(library))
    }

    /// What can still be read from entries that `open` refused (see
    /// `docmem_core::library::salvage`): `{documents: [{title, text, language,
    /// collection}], unreadable: [[key, reason]]}`. Reads only; never fails on damage.
    pub fn salvage(#[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] entries: JsValue) -> Result<JsValue, JsValue> {
        let mut store = JournalStore::from_entries(entries_from(&entries)?);
        shapes::to_js(&docmem_core::library::salvage(&mut store))
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

    /// Add document `doc` (`{title, text}`) to the library; resolves to `{id, title, added,
    /// chunks, outline, fallback, document}` (`added` is false when the same content was
    /// already there; `document`: its entry as `documents()` lists it). `options`:
    /// - `embedder` (an `Embedder`, on any backend), whose vectors the library indexes;
    /// - `chunker`: `mom` (a reader writes the memory: outline, cores, chunks) or a
    ///   baseline (`sentence`, `fixed`, `recursive`, `semantic`: plain chunks); the
    ///   default is `mom` when a reader is given, else `sentence`;
    /// - `reader`, for `mom`: a model (`Lm` or `RemoteModel`) that writes the
    ///   memory, the best of a greedy and `samples` (default 0) sampled candidates;
    ///   `scorer`: another model to score them (default: the reader);
    /// - `progress`: called with `{stage, window, windows, tokensDone, tokensTotal,
    ///   candidatesDone, candidatesTotal, fraction}`; returning `false` cancels, and the
    ///   library is unchanged;
    /// - `collection`: the collection it goes into (default: `default`).
    ///
    /// The library and the embedder are held until it settles: a call on them meanwhile
    /// gets a `BUSY` error.
    #[wasm_bindgen(js_name = addDocument, unchecked_return_type = "Promise<any>")]
    pub fn add_document(
        &self,
        #[wasm_bindgen(unchecked_param_type = "{title: string, text: string}")] doc: JsValue,
        #[wasm_bindgen(unchecked_param_type = "AddOptions")] options: JsValue,
    ) -> js_sys::Promise {
        let args = add_args(&doc, &options);
        let session = self.session.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let AddArgs { doc, embedder, collection, method, progress } = args?;
            let mut method = match &method {
                Method::Chunker(kind) => MemoryMethod::chunker(*kind),
                Method::Mom { reader, scorer, settings } => reader.memory_method(scorer.as_ref(), settings.clone()),
            };
            let options = AddOptions { collection, ..AddOptions::default() };
            let mut report = progress_reporter(progress);
            let done = session.add(&doc, &mut method, &*embedder, &options, &mut report).await.map_err(coded)?;
            let library = session.library().map_err(coded)?;
            shapes::to_js(&serde_json::json!({
                "id": doc.id.to_string(),
                "title": doc.title,
                "added": done.added,
                "chunks": done.memory.scenarios.len(),
                "outline": done.memory.outline.len(),
                "fallback": done.memory.provenance.fallback,
                "document": shapes::document_info(&library, doc.id),
            }))
        })
    }

    /// Retrieval without an answer: the best passages through the three layers. `options`:
    /// `embedder` (an `Embedder`, on the CPU or WebGPU) and `k` (passages; default 8).
    /// Resolves to the passages found (`Passage[]`, as an answer's `sources`).
    #[wasm_bindgen(unchecked_return_type = "Promise<any[]>")]
    pub fn search(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        #[wasm_bindgen(unchecked_param_type = "SearchOptions")] options: JsValue,
    ) -> js_sys::Promise {
        let args = boundary::ready().and_then(|()| {
            let o = Options::new(&options, "options", &["embedder", "k"])?;
            let question = string(&question, "question")?;
            let k = o.count_or("k", SearchParams::default().k as u32, u32::MAX)?.max(1) as usize;
            Ok((question, SearchParams { k, ..SearchParams::default() }, handles::embedder_in(&o)?))
        });
        let session = self.session.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (question, params, embedder) = args?;
            let found = session.search(&question, &params, 0, &*embedder).await.map_err(coded)?;
            shapes::to_js(&shapes::passages(Some(&*session.library().map_err(coded)?), &found))
        })
    }

    /// Read ahead the answer prompt of a question still being typed (`question`: what
    /// there is so far; empty: the instructions alone), so that an `ask` whose passages
    /// start the same way runs only what differs (`docmem_runtime::session::Session::read_ahead`).
    /// `options`: `embedder`, `answerer` and `k` as `ask` takes them, and `interrupt()`,
    /// asked before each piece of 16 tokens (`true` stops, keeping what was read). Resolves
    /// to the prompt tokens the answerer keeps (0 for a hosted one, which reads nothing
    /// ahead).
    #[wasm_bindgen(js_name = readAhead, unchecked_return_type = "Promise<number>")]
    pub fn read_ahead(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ReadAheadOptions")] options: JsValue,
    ) -> js_sys::Promise {
        let args = boundary::ready().and_then(|()| {
            let o = Options::new(&options, "options", &["embedder", "answerer", "k", "interrupt"])?;
            let question = string(&question, "question")?;
            let params = AskParams { k: o.count_or("k", AskParams::default().k as u32, u32::MAX)?.max(1) as usize, ..AskParams::default() };
            Ok((question, params, handles::required_model(&o, "answerer")?, handles::embedder_in(&o)?, o.function("interrupt")?))
        });
        let session = self.session.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (question, params, answerer, embedder, interrupt) = args?;
            let stop = crate::memory_draft::interrupt_fn(interrupt);
            let kept = session.read_ahead(&question, &params, answerer.answerer(), &*embedder, &stop).await.map_err(coded)?;
            Ok((kept as f64).into())
        })
    }

    /// Answer `question` from the library; resolves to the npm package's `Answer`
    /// (`{answer, parts, notInDocuments, citations, citationsFrom, sources, finish, …}`,
    /// spans in UTF-16 units: `crate::shapes`). `options`:
    /// - `embedder` (an `Embedder`) and `answerer` (a model: `Lm` or
    ///   `RemoteModel`), whatever each runs on;
    /// - `k`: passages to find, and `maxTokens`: the answer's length at most (defaults:
    ///   the runtime's `AskParams`, chosen on the dev split: 6 and 160);
    /// - `onToken`: given each piece of the answer as it is written; returning `false`
    ///   stops it;
    /// - `onPart`: given each part of the answer those pieces complete, `{text}` or
    ///   `{cite: [n, …]}` (a citation once its bracket closes), for a page to draw
    ///   without parsing the text; the answer's `parts` are the final word;
    /// - `onRead`: given the passages the answerer reads (`Passage[]`, as the answer's `sources`)
    ///   once they are found, before it reads them (with clues or routing too, once they
    ///   have found them); returning `false` stops the answer there (an `ABORTED`
    ///   error). As with `onToken`, an exception it throws is ignored;
    /// - `clues` (`off`, `on`, `auto`) and `route` (`auto` or a collection's name): the
    ///   answer guided by clues from the library's global memory, or routed across
    ///   collections (the answerer writes them too). The answer then has `clues` (`{scope,
    ///   queries, foundBy, overview}`) and `route` (`{segments, scores, collection}`);
    ///   what routing learned, and a global memory made for clues, are saved in the
    ///   library (take the writes). Their searches await the embedder as a plain ask's
    ///   does, wherever it runs.
    ///
    /// The runtime's `Session::ask` does the work. It holds the library and the embedder
    /// while it searches (a call on them meanwhile gets a `BUSY` error), then neither while
    /// `onRead` is called and the answer is written; a routed answer takes them again to
    /// save what it learned.
    #[wasm_bindgen(unchecked_return_type = "Promise<any>")]
    pub fn ask(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] question: JsValue,
        #[wasm_bindgen(unchecked_param_type = "AskOptions")] options: JsValue,
    ) -> js_sys::Promise {
        let args = ask_args(&question, &options);
        let session = self.session.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let AskArgs { question, options, answerer, embedder, on_token, on_part, on_read } = args?;
            let mut on_token = token_sink(on_token);
            let mut tokens = 0;
            // The passages shaped when they are found, while the ask holds no borrow of the
            // library: the answer gives them again, whatever holds the library by then.
            let mut shown: Option<Vec<shapes::Passage>> = None;
            let mut on_event = |event: AskEvent<'_>| match event {
                AskEvent::Passages { sources, .. } => {
                    let passages = shapes::passages(session.library().ok().as_deref(), sources);
                    // Crossed into JavaScript only for a caller that reads them now.
                    let js = on_read.as_ref().and_then(|f| Some((f, shapes::to_js(&passages).ok()?)));
                    let flow = match js.map(|(f, js)| f.call1(&JsValue::NULL, &js)) {
                        Some(Ok(v)) if v == JsValue::FALSE => ControlFlow::Break(()),
                        _ => ControlFlow::Continue(()),
                    };
                    shown = Some(passages);
                    flow
                }
                AskEvent::Text(piece) => {
                    tokens += 1;
                    on_token(piece)
                }
                AskEvent::Part(part) => {
                    if let Some(f) = &on_part {
                        let _ = f.call1(&JsValue::NULL, &part_object(part));
                    }
                    ControlFlow::Continue(())
                }
                _ => ControlFlow::Continue(()),
            };
            let answer = session.ask(&question, &options, answerer.answering(), &*embedder, &mut on_event).await.map_err(coded)?;
            let passages = match shown {
                Some(p) if p.len() == answer.sources.len() => p,
                _ => shapes::passages(session.library().ok().as_deref(), &answer.sources),
            };
            shapes::answer(&answer, &passages, tokens)
        })
    }

    /// The collections: `[{name, documents}]`, in the order each first appeared.
    #[wasm_bindgen(unchecked_return_type = "{name: string, documents: number}[]")]
    pub fn collections(&self) -> Result<JsValue, JsValue> {
        boundary::ready()?;
        let library = self.get()?;
        let list: Vec<serde_json::Value> = library
            .collections()
            .into_iter()
            .map(|c| serde_json::json!({"name": c, "documents": library.collection_documents(c).count()}))
            .collect();
        shapes::to_js(&list)
    }

    /// The documents, in the order they were added.
    #[wasm_bindgen(unchecked_return_type = "any[]")]
    pub fn documents(&self) -> Result<JsValue, JsValue> {
        boundary::ready()?;
        let library = self.get()?;
        shapes::to_js(&library.documents().iter().map(shapes::DocumentInfo::from).collect::<Vec<_>>())
    }

    /// A document's text and memory: `{id, title, text, outline, scenarios: [{span,
    /// byteSpan, core, outlineItem}], provenance}` (`span` in UTF-16 units of `text`).
    pub fn memory(&self, #[wasm_bindgen(unchecked_param_type = "string")] doc: JsValue) -> Result<JsValue, JsValue> {
        boundary::ready()?;
        let id = self.doc_id(&string(&doc, "document id")?)?;
        let library = self.get()?;
        let (document, memory) = library.get(id).map_err(coded)?;
        shapes::to_js(&shapes::memory(document, memory))
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

    /// Leave the merges of the index's parts to `mergeStep` (`true`) rather than making
    /// them inside the change that makes them due (`false`, the default): a merge links
    /// tens of thousands of vectors into graphs, seconds of work that an add should not
    /// wait for. The npm package's worker turns this on and merges when its queue is idle.
    #[wasm_bindgen(js_name = setBackgroundMerges)]
    pub fn set_background_merges(&self, on: bool) -> Result<(), JsValue> {
        boundary::ready()?;
        self.get_mut()?.set_background_merges(on);
        Ok(())
    }

    /// Stop holding the bytes of the index's keys (its parts and fresh documents' entries),
    /// which the library read when it opened and now only writes: the caller's storage,
    /// to which it applies `takeWrites`, holds them. On a library of thousands of
    /// documents this is most of what the library kept in memory besides the index
    /// itself. Afterwards `exportLibrary` is refused: archive the storage's entries with
    /// `Library.archive` instead.
    #[wasm_bindgen(js_name = releaseIndex)]
    pub fn release_index(&self) -> Result<(), JsValue> {
        boundary::ready()?;
        self.get_mut()?.store_mut().release(read_only_at_open);
        Ok(())
    }

    /// Work on the merge due for about `budgetMs` milliseconds (at least one small slice),
    /// then return `{merging, applied, left}`. `merging`: a merge is under way and
    /// not finished; `applied`: one finished in this call and was committed (take the
    /// writes); `left`: vectors it has still to link. Neither when no merge is due.
    #[wasm_bindgen(js_name = mergeStep, unchecked_return_type = "{merging: boolean, applied: boolean, left: number}")]
    pub fn merge_step(&self, #[wasm_bindgen(js_name = budgetMs)] budget_ms: f64) -> Result<JsValue, JsValue> {
        boundary::ready()?;
        let mut slot = self.merge.try_borrow_mut().map_err(|_| crate::busy("the merge"))?;
        if slot.is_none() {
            *slot = self.get_mut()?.merge_job();
        }
        let step = |merging: bool, applied: bool, left: usize| {
            shapes::to_js(&serde_json::json!({"merging": merging, "applied": applied, "left": left}))
        };
        let Some(job) = slot.as_mut() else { return step(false, false, 0) };
        // Four vectors at a time (about a millisecond each in wasm) until the budget is
        // spent.
        let deadline = js_sys::Date::now() + budget_ms.max(0.0);
        let mut done = job.step(4);
        while !done && js_sys::Date::now() < deadline {
            done = job.step(4);
        }
        if !done {
            return step(true, false, job.vectors());
        }
        let Some(job) = slot.take() else { return Err(error_with(ErrorCode::Internal, "the merge went missing")) };
        let applied = self.get_mut()?.apply_merge(job.run()).map_err(coded)?;
        step(false, applied, 0)
    }

    /// The whole library as one byte string (see `docmem_core::library::archive`). Refused
    /// after `releaseIndex`, when the library no longer holds every entry.
    #[wasm_bindgen(js_name = exportLibrary)]
    pub fn export_library(&mut self) -> Result<Vec<u8>, JsValue> {
        boundary::ready()?;
        let mut library = self.get_mut()?;
        if library.store_mut().has_released() {
            return Err(error_with(
                ErrorCode::BadArgument,
                "this library released its index to the caller's storage (releaseIndex): archive the storage's entries with Library.archive",
            ));
        }
        Ok(archive(library.store_mut().entries()))
    }

    /// A stored library's entries (`Record<string, Uint8Array>`, as `open` takes them) as
    /// one byte string, the form `exportLibrary` gives and `importLibrary` reads.
    pub fn archive(#[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] entries: JsValue) -> Result<Vec<u8>, JsValue> {
        boundary::ready()?;
        Ok(archive(&entries_from(&entries)?))
    }
}
