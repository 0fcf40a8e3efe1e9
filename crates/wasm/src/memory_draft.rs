//! [`WasmMemoryDraft`]: a reader's memory of a document already in the library, written
//! one window per call so that the page can write memories in the background and still
//! answer at once.
//!
//! A document goes into the library with sentence chunks (searchable in seconds); then
//! `Library.draftMemory` plans its windows, each `step` reads one window (and may be
//! interrupted between two prompt pieces or decoding steps, when a question arrives: the
//! model keeps what it read and wrote of that window, and the next step goes on from
//! there), and `Library.replaceMemory` swaps the finished
//! memory in for the chunks in one commit (core's `Library::replace_memory`). The window
//! logic is core's [`MemoryDraft`]; this file only translates.

use std::cell::RefCell;
use std::rc::Rc;

use docmem_core::reader::{ExtractSettings, MemoryDraft};
use docmem_core::{Document, ErrorCode};
use docmem_runtime::lm::WorkDone;
use wasm_bindgen::prelude::*;

use crate::boundary::Options;
use crate::library::{progress_object, progress_reporter, MAX_SAMPLES};
use crate::{boundary, coded, error_with, handles, shapes, WasmEmbedder, WasmLibrary};

/// What a draft holds between its steps.
pub(crate) struct DraftState {
    doc: Document,
    /// The name of the reader the windows were planned for: each step must use it.
    reader: String,
    settings: ExtractSettings,
    draft: MemoryDraft,
}

/// A document's memory being written, one window per [`WasmMemoryDraft::step`].
#[wasm_bindgen(js_name = MemoryDraft)]
pub struct WasmMemoryDraft {
    /// Shared with a step still running (a Promise).
    pub(crate) state: Rc<RefCell<DraftState>>,
}

/// `interrupt` (a JS function asked before each prompt piece and decoding step; `true` stops) as the
/// reader's interrupt.
pub(crate) fn interrupt_fn(interrupt: Option<js_sys::Function>) -> impl Fn() -> bool {
    move || matches!(&interrupt, Some(f) if f.call0(&JsValue::NULL).is_ok_and(|v| v.is_truthy()))
}

/// A step's outcome for JavaScript: `true` when every window is read, `false` when more
/// remain; an interrupt or a cancel is an `ABORTED` error (the draft keeps what it had).
fn step_result(result: Result<(), docmem_core::Error>, state: &DraftState) -> Result<bool, JsValue> {
    match result {
        Ok(()) => Ok(state.draft.is_complete()),
        Err(docmem_core::Error::Cancelled) => {
            Err(error_with(ErrorCode::Aborted, "the memory's window was stopped; the next step goes on where it stopped"))
        }
        Err(e) => Err(coded(e)),
    }
}

/// The draft's progress (`before` the window, `window` its number) with how far the
/// window has got: `windowRead` of `windowPrompt` prompt tokens read, `windowWritten` tokens
/// written, and `fraction` moved by the window's share done (it expects to write about
/// `expected` tokens).
fn progress_within(before: &docmem_core::reader::Progress, expected: usize, work: &WorkDone) -> JsValue {
    let o = progress_object(before);
    let share = before.fraction_within(work.share(expected));
    let fields = [
        ("windowRead", work.read as f64),
        ("windowPrompt", work.prompt as f64),
        ("windowWritten", work.written as f64),
        ("fraction", share),
    ];
    for (k, v) in fields {
        let _ = js_sys::Reflect::set(&o, &k.into(), &v.into());
    }
    o
}

/// Read the draft's next window with `reader` (a future that is ready at once on the CPU).
#[allow(clippy::await_holding_refcell_ref)] // a step holds its draft on purpose: a second one answers BUSY
async fn step_with(
    state: &RefCell<DraftState>,
    reader: &handles::Model,
    progress: Option<js_sys::Function>,
    interrupt: Option<js_sys::Function>,
) -> Result<bool, JsValue> {
    let mut guard = state.try_borrow_mut().map_err(|_| crate::busy("the memory draft"))?;
    let s = &mut *guard;
    if reader.name() != s.reader {
        return Err(error_with(
            ErrorCode::BadArgument,
            format!(
                "options.reader: this draft was planned for '{}', not '{}' (its windows are counted in that model's tokens)",
                s.reader,
                reader.name()
            ),
        ));
    }
    let stop = interrupt_fn(interrupt);
    // Within the window, `progress` also hears how far it has got (prompt tokens read,
    // tokens written): the core's progress moves only when a candidate ends, minutes apart
    // on a CPU.
    let before = s.draft.progress_of_next();
    let expected = s.draft.next_window_tokens().unwrap_or(0);
    let within = progress.clone();
    let tell = move |work: &WorkDone| {
        if let Some(f) = &within {
            let _ = f.call1(&JsValue::NULL, &progress_within(&before, expected, work));
        }
    };
    let mut reader = reader.interruptible_reader(&stop, &tell).ok_or_else(hosted_reader)?;
    let mut report = progress_reporter(progress);
    let result = s.draft.read_next(&s.doc, &mut *reader, None, &s.settings, &mut report).await;
    step_result(result, s)
}

/// The error for a hosted reader, which a background memory cannot use.
fn hosted_reader() -> JsValue {
    error_with(
        ErrorCode::BadArgument,
        "options.reader: a memory written in the background needs a model on this device (this one is hosted)",
    )
}

#[wasm_bindgen(js_class = MemoryDraft)]
impl WasmMemoryDraft {
    /// Read the next window; resolves to `true` once every window is read. `options`:
    /// `reader`, a model on this device (an `Lm`, the one the draft was planned
    /// with); `progress`, called as `addDocument`'s is (returning `false` cancels);
    /// `interrupt()`, asked before every prompt piece and decoding step, which stops the
    /// window when it returns `true`. A stopped window rejects with `ABORTED`; the reader
    /// keeps its work, and the next step goes on where it stopped.
    #[wasm_bindgen(unchecked_return_type = "Promise<boolean>")]
    pub fn step(&self, #[wasm_bindgen(unchecked_param_type = "StepOptions")] options: JsValue) -> js_sys::Promise {
        let args = boundary::ready().and_then(|()| {
            let o = Options::new(&options, "options", &["reader", "progress", "interrupt"])?;
            Ok((handles::required_model(&o, "reader")?, o.function("progress")?, o.function("interrupt")?))
        });
        let state = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (reader, progress, interrupt) = args?;
            Ok(step_with(&state, &reader, progress, interrupt).await?.into())
        })
    }

    /// Where the work stands: `{stage, window, windows, tokensDone, tokensTotal, …, fraction}`,
    /// `window` the one to be read next (from 1; the last once every one is read).
    pub fn progress(&self) -> Result<JsValue, JsValue> {
        boundary::ready()?;
        let state = self.state.try_borrow().map_err(|_| crate::busy("the memory draft"))?;
        Ok(progress_object(&state.draft.progress_of_next()))
    }

    /// Whether every window is read (then `Library.replaceMemory`).
    #[wasm_bindgen(js_name = isComplete)]
    pub fn is_complete(&self) -> Result<bool, JsValue> {
        boundary::ready()?;
        Ok(self.state.try_borrow().map_err(|_| crate::busy("the memory draft"))?.draft.is_complete())
    }
}

#[wasm_bindgen(js_class = Library)]
impl WasmLibrary {
    /// Plan the reader's memory of document `id` (in the library already, with chunks):
    /// its windows for `options.reader` (a model on this device: an `Lm`),
    /// `options.samples` (default 0) sampled candidates per window beside the greedy one,
    /// each at most `options.maxNewTokens` long (default 0: the window's length and 512
    /// more), windows of at most `options.maxWindowTokens` document tokens (default 0:
    /// half the reader's context). Nothing is generated yet: `step` reads a window at a
    /// time. The windows a draft of the same document, reader and options read before
    /// and `saveDraft` stored are taken up: `progress()` then starts after them.
    #[wasm_bindgen(js_name = draftMemory)]
    pub fn draft_memory(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "DraftOptions")] options: JsValue,
    ) -> Result<WasmMemoryDraft, JsValue> {
        boundary::ready()?;
        let id = self.doc_id(&boundary::string(&id, "document id")?)?;
        let o = Options::new(&options, "options", &["reader", "samples", "maxNewTokens", "maxWindowTokens"])?;
        let model = handles::required_model(&o, "reader")?;
        if model.backend() == docmem_runtime::handle::ModelBackend::Hosted {
            return Err(hosted_reader());
        }
        let mut settings = ExtractSettings { samples: o.count_or("samples", 0, MAX_SAMPLES)? as usize, ..ExtractSettings::default() };
        settings.max_new_tokens = o.count_or("maxNewTokens", 0, 1 << 20)? as usize;
        settings.max_window_tokens = o.count_or("maxWindowTokens", 0, 1 << 20)? as usize;
        let doc = self.get()?.get(id).map_err(coded)?.0.clone();
        let mut draft = MemoryDraft::plan(&doc, &mut *model.reader(), &settings).map_err(coded)?;
        if let Some(stored) = self.get_mut()?.stored_draft(id).map_err(coded)? {
            draft.resume(&stored, &doc, &settings);
        }
        Ok(WasmMemoryDraft { state: Rc::new(RefCell::new(DraftState { doc, reader: model.name().to_owned(), settings, draft })) })
    }

    /// Store the windows `draft` has read (take the writes after), so that a later
    /// `draftMemory` of its document, after a reload or a crash, goes on from there. The
    /// stored draft goes when its memory lands (`replaceMemory`) or the document is removed.
    #[wasm_bindgen(js_name = saveDraft)]
    pub fn save_draft(&self, draft: &WasmMemoryDraft) -> Result<(), JsValue> {
        boundary::ready()?;
        let s = draft.state.try_borrow().map_err(|_| crate::busy("the memory draft"))?;
        let bytes = s.draft.to_bytes(&s.doc, &s.settings);
        self.get_mut()?.save_draft(s.doc.id, &bytes).map_err(coded)
    }

    /// Swap a finished draft's memory in for the memory its document has, in one commit
    /// (searches see the chunks until it lands). Resolves to `{id, replaced, chunks,
    /// outline, fallback, reader, document}`; `replaced` is false when the document was
    /// removed meanwhile (nothing is stored then, and `document` is null). A Promise: an embedder on WebGPU is awaited.
    #[wasm_bindgen(js_name = replaceMemory)]
    pub fn replace_memory(&self, draft: &WasmMemoryDraft, embedder: &WasmEmbedder) -> js_sys::Promise {
        let (session, embedder, state) = (self.session.clone(), embedder.embedder.clone(), draft.state.clone());
        wasm_bindgen_futures::future_to_promise(async move {
            boundary::ready()?;
            let memory = {
                let mut s = state.try_borrow_mut().map_err(|_| crate::busy("the memory draft"))?;
                if !s.draft.is_complete() {
                    let p = s.draft.progress();
                    return Err(error_with(
                        ErrorCode::BadArgument,
                        format!("the memory of '{}' is not finished: {} of {} windows read", s.doc.title, p.window, p.windows),
                    ));
                }
                let DraftState { doc, settings, draft, .. } = &mut *s;
                draft.finish(doc, settings)
            };
            let replaced = session.replace_memory(&memory, &*embedder).await.map_err(coded)?;
            let library = session.library().map_err(coded)?;
            shapes::to_js(&serde_json::json!({
                "id": memory.doc_id.to_string(),
                "replaced": replaced,
                "chunks": memory.scenarios.len(),
                "outline": memory.outline.len(),
                "fallback": memory.provenance.fallback,
                "reader": memory.provenance.reader,
                "document": shapes::document_info(&library, memory.doc_id),
            }))
        })
    }
}
