//! The models and embedders JavaScript holds, found again from an options object.
//!
//! `addDocument(doc, options)`, `ask(question, options)`, `readAhead(question, options)`,
//! `draftMemory(id, options)` and `MemoryDraft.step(options)` take their models in a plain
//! object (`{reader, embedder}`, `{answerer, embedder}`),
//! whatever runs them. wasm-bindgen hands an exported class's instance to Rust only as a
//! positional argument, so each `Lm`, `RemoteModel` and `Embedder` registers its
//! runtime handle ([`ModelHandle`], [`EmbedderHandle`]) here when it is made, under the
//! number its `handleId` getter shows, and leaves when JavaScript frees it. A call reads
//! `options.reader.handleId` and takes a clone of the handle, which shares the model.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use docmem_core::ErrorCode;
use docmem_runtime::handle::{EmbedderHandle, ModelHandle};
use wasm_bindgen::prelude::*;

use crate::boundary::Options;
use crate::error_with;
use crate::remote::JsTransport;

// The options' TypeScript types (the entry points name them in `unchecked_param_type`).
#[wasm_bindgen(typescript_custom_section)]
const ANY_MODEL_TS: &str = "/** A language model wherever it runs. */\nexport type AnyModel = Lm | RemoteModel;\n/** A language model on this device. */\nexport type LocalModel = Lm;";
#[wasm_bindgen(typescript_custom_section)]
const OPTIONS_TS: &str = r#"
/** `Library.addDocument`'s options. */
export interface AddOptions {
  embedder: Embedder;
  chunker?: string;
  reader?: AnyModel;
  scorer?: AnyModel;
  samples?: number;
  progress?: (progress: any) => boolean | void;
  collection?: string;
}
/** `Library.ask`'s options. */
export interface AskOptions {
  embedder: Embedder;
  answerer: AnyModel;
  k?: number;
  maxTokens?: number;
  onToken?: (piece: string) => boolean | void;
  onPart?: (part: {text: string} | {cite: number[]}) => void;
  onRead?: (passages: any[]) => boolean | void;
  clues?: string;
  route?: string;
}
/** `Library.draftMemory`'s options. */
export interface DraftOptions {
  reader: LocalModel;
  samples?: number;
  maxNewTokens?: number;
  maxWindowTokens?: number;
}
/** `MemoryDraft.step`'s options. */
export interface StepOptions {
  reader: LocalModel;
  progress?: (progress: any) => boolean | void;
  interrupt?: () => boolean;
}
/** `Library.readAhead`'s options. */
export interface ReadAheadOptions {
  embedder: Embedder;
  answerer: AnyModel;
  k?: number;
  interrupt?: () => boolean;
}
/** `Library.search`'s options. */
export interface SearchOptions {
  embedder: Embedder;
  k?: number;
}
"#;

/// A language model as the bindings hold it.
pub(crate) type Model = ModelHandle<Rc<JsTransport>>;
/// An embedder as the bindings hold it: shared with calls still running (an ingest on
/// WebGPU, or with a hosted model, holds it across the event loop).
pub(crate) type SharedEmbedder = Rc<RefCell<EmbedderHandle<Rc<JsTransport>>>>;

enum Entry {
    Model(Model),
    Embedder(SharedEmbedder),
}

thread_local! {
    static ENTRIES: RefCell<BTreeMap<u32, Entry>> = const { RefCell::new(BTreeMap::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(1) };
}

/// A class instance's place in the registry: removed when the instance is freed.
pub(crate) struct Registration(u32);

impl Registration {
    fn new(entry: Entry) -> Registration {
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1).max(1));
            id
        });
        ENTRIES.with(|e| e.borrow_mut().insert(id, entry));
        Registration(id)
    }

    /// Register a model.
    pub(crate) fn model(model: Model) -> Registration {
        Registration::new(Entry::Model(model))
    }

    /// Register an embedder.
    pub(crate) fn embedder(embedder: SharedEmbedder) -> Registration {
        Registration::new(Entry::Embedder(embedder))
    }

    /// The number `handleId` shows.
    pub(crate) fn id(&self) -> u32 {
        self.0
    }

    /// Put `model` in this place (the model renamed, say).
    pub(crate) fn replace(&self, model: Model) {
        ENTRIES.with(|e| e.borrow_mut().insert(self.0, Entry::Model(model)));
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // A registry being torn down (the thread ending) has nothing left to remove.
        let _ = ENTRIES.try_with(|e| e.borrow_mut().remove(&self.0));
    }
}

/// The registry number of the instance in field `key` of `options`, `None` when the field
/// is not there.
fn id_in(options: &Options, key: &str, what: &str) -> Result<Option<u32>, JsValue> {
    let value = options.value(key)?;
    if value.is_undefined() {
        return Ok(None);
    }
    let not_one = || error_with(ErrorCode::BadArgument, format!("{} must be {what}", options.name(key)));
    if !value.is_object() {
        return Err(not_one());
    }
    // A freed instance's getter throws (its pointer is gone), as does a bare prototype's.
    let id = js_sys::Reflect::get(&value, &"handleId".into())
        .map_err(|_| error_with(ErrorCode::BadArgument, format!("{} is not a live object (was it freed?)", options.name(key))))?;
    let id = id.as_f64().filter(|n| n.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(n)).ok_or_else(not_one)?;
    Ok(Some(id as u32))
}

const A_MODEL: &str = "a model (an Lm or a RemoteModel)";

/// The model in field `key` of `options` (`reader`, `scorer`, `answerer`), when there.
pub(crate) fn model_in(options: &Options, key: &str) -> Result<Option<Model>, JsValue> {
    let Some(id) = id_in(options, key, A_MODEL)? else { return Ok(None) };
    ENTRIES.with(|e| match e.borrow().get(&id) {
        Some(Entry::Model(m)) => Ok(Some(m.clone())),
        Some(Entry::Embedder(_)) => {
            Err(error_with(ErrorCode::BadArgument, format!("{} is an Embedder; it must be {A_MODEL}", options.name(key))))
        }
        None => Err(error_with(ErrorCode::BadArgument, format!("{} was freed", options.name(key)))),
    })
}

/// The model in field `key` of `options`, which must be there.
pub(crate) fn required_model(options: &Options, key: &str) -> Result<Model, JsValue> {
    model_in(options, key)?.ok_or_else(|| error_with(ErrorCode::BadArgument, format!("{} must be {A_MODEL}", options.name(key))))
}

/// The embedder in `options.embedder`, which must be there.
pub(crate) fn embedder_in(options: &Options) -> Result<SharedEmbedder, JsValue> {
    const AN_EMBEDDER: &str = "an Embedder";
    let Some(id) = id_in(options, "embedder", AN_EMBEDDER)? else {
        return Err(error_with(ErrorCode::BadArgument, format!("{} must be {AN_EMBEDDER}", options.name("embedder"))));
    };
    ENTRIES.with(|e| match e.borrow().get(&id) {
        Some(Entry::Embedder(x)) => Ok(x.clone()),
        Some(Entry::Model(_)) => {
            Err(error_with(ErrorCode::BadArgument, format!("{} is a model; it must be {AN_EMBEDDER}", options.name("embedder"))))
        }
        None => Err(error_with(ErrorCode::BadArgument, format!("{} was freed", options.name("embedder")))),
    })
}
