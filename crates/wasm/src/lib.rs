//! # docmem-wasm
//!
//! The wasm-bindgen layer: it translates between JavaScript and the Rust crates and holds
//! no logic of its own. Inputs arrive as strings, numbers and option objects; the library's
//! results leave in the npm package's own shapes (`shapes`: camelCase, spans in UTF-16
//! units), and every failure becomes a JS `Error` whose message names
//! what was wrong and whose `code` is the error's stable [`ErrorCode`] (`BAD_DOCUMENT`,
//! `QUOTA_EXCEEDED`, …; the mapping is core's [`HasErrorCode`]). Nothing here panics on
//! user input: arguments are read and type-checked in `boundary`, not by wasm-bindgen's
//! glue, and a panic all the same (a bug) is reported by the hook there (its message and
//! location go to `console.error`, and every later call throws it, or rejects with it, as
//! `INTERNAL`).
//!
//! What it exposes: the MemReader output parser, the [MASK] aligner, the baseline
//! chunkers, [`WasmLm`], a language model on the CPU backend (in linear memory; on Web
//! Workers in the threads build, see `threads`) or on WebGPU, [`WasmEmbedder`], a BERT-family
//! sentence embedder on the same kernels, `RemoteModel` and `Embedder.remote` (hosted
//! models), and [`WasmLibrary`], a document library whose changes the JavaScript side
//! persists. [`WasmDevice`] is where local models run, by the runtime's one rule, and what
//! loads them (`load`: `device.loadLm`, `device.loadEmbedder`): an `Lm` and an embedder
//! in wasm on the CPU or (with the `gpu` feature) on WebGPU. The library's work goes through two
//! entry points whatever runs the models, `addDocument(doc, options)` and `ask(question,
//! options)`, Promises that take the models in their options (`handles`): a page reads
//! GPU results and a host's replies only through its event loop, and on the CPU the same
//! runtime futures are ready at once. The `DocMem` client (worker, model cache,
//! IndexedDB) is in `js/`.

use docmem_core::chunk::{chunk_with, ChunkOptions, ChunkerKind};
use docmem_core::{align_memory, parse_memreader_output, AlignParams, ErrorCode, HasErrorCode, HashingEmbedder};
use wasm_bindgen::prelude::*;

mod boundary;
mod device;
mod handles;
mod library;
mod lm;
mod load;
mod memory_draft;
mod remote;
mod sha256;
mod shapes;
mod threads;
pub use device::WasmDevice;
pub use library::WasmLibrary;
pub use lm::WasmLm;
pub use memory_draft::WasmMemoryDraft;
pub use sha256::WasmSha256;

/// A JS `Error` with `message` and `code`.
fn error_with(code: ErrorCode, message: impl std::fmt::Display) -> JsValue {
    let error = js_sys::Error::new(&message.to_string());
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &JsValue::from_str("code"), &JsValue::from_str(code.as_str()));
    error.into()
}

/// `e` as a JS `Error` carrying its code.
fn coded(e: impl std::fmt::Display + HasErrorCode) -> JsValue {
    error_with(e.code(), e)
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, JsValue> {
    serde_json::to_string(value).map_err(|e| error_with(ErrorCode::Internal, format!("cannot encode result: {e}")))
}

/// Chunk `text` with `chunker` (`fixed`, `sentence`, `recursive` or `semantic`); `size` and
/// `overlap` of 0 mean the chunker's default. Returns JSON `[{"start":…,"end":…}, …]`
/// (UTF-8 byte offsets).
#[wasm_bindgen(js_name = chunkText)]
pub fn chunk_text(
    #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] chunker: JsValue,
    size: f64,
    overlap: f64,
) -> Result<String, JsValue> {
    boundary::ready()?;
    let (text, chunker) = (boundary::string(&text, "text")?, boundary::string(&chunker, "chunker")?);
    let (size, overlap) = (boundary::count(size, "size", u32::MAX)?, boundary::count(overlap, "overlap", u32::MAX)?);
    let kind: ChunkerKind = chunker.parse().map_err(coded)?;
    let options = ChunkOptions { size: (size > 0).then_some(size as usize), overlap: (overlap > 0).then_some(overlap as usize) };
    let mut embedder = HashingEmbedder::new(384);
    let spans = chunk_with(kind, &text, options, Some(&mut embedder)).map_err(coded)?;
    to_json(&spans)
}

/// The readable text of an HTML document, as the CLI reads `.html` files (for a host
/// without an HTML parser, such as a worker or Node).
#[wasm_bindgen(js_name = htmlToText)]
pub fn html_to_text(#[wasm_bindgen(unchecked_param_type = "string")] html: JsValue) -> Result<String, JsValue> {
    boundary::ready()?;
    Ok(docmem_core::html::html_to_text(&boundary::string(&html, "html")?))
}

/// Parse a MemReader's raw output and align its chunks to `document`. Returns JSON
/// `{"parse": {…}, "scenarios": […], "stats": {…}}`.
#[wasm_bindgen(js_name = parseAndAlign)]
pub fn parse_and_align(
    #[wasm_bindgen(unchecked_param_type = "string")] document: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] reader_output: JsValue,
) -> Result<String, JsValue> {
    boundary::ready()?;
    let (document, reader_output) = (boundary::string(&document, "document")?, boundary::string(&reader_output, "reader output")?);
    let parsed = parse_memreader_output(&reader_output);
    let aligned = align_memory(&document, &parsed, &AlignParams::default());
    to_json(&serde_json::json!({ "parse": parsed, "scenarios": aligned.scenarios, "stats": aligned.stats }))
}

/// Threads a model loaded in wasm runs on: 0, "all there are", which is one in the plain
/// build and, in the threads build, the helpers `js/threads.js` started (see `threads`).
const WASM_THREADS: usize = 0;

/// How models load in wasm: on [`WASM_THREADS`], with a context of 2,048 tokens (the K/V
/// cache lives in linear memory).
fn load_options() -> docmem_runtime::lm::LoadOptions {
    docmem_runtime::lm::LoadOptions { threads: WASM_THREADS, context: 2048, ..Default::default() }
}

/// A file of `length` bytes read through `read(offset, length) → Uint8Array`, a synchronous
/// reader (Node's `fs.readSync`; in a browser worker `FileReaderSync` over `File.slice`),
/// in reads of 1 MiB.
fn js_range_source(length: f64, read: js_sys::Function) -> Result<docmem_runtime::source::RangeSource, JsValue> {
    use docmem_runtime::source::RangeSource;
    if !(0.0..=9.0e15).contains(&length) {
        return Err(error_with(ErrorCode::BadArgument, format!("model length {length} is not a byte count")));
    }
    let fail = |msg: String| docmem_runtime::Error::Io { what: "the model reader".into(), source: std::io::Error::other(msg) };
    let reader = move |offset: u64, buf: &mut [u8]| -> Result<(), docmem_runtime::Error> {
        let got = read
            .call2(&JsValue::NULL, &JsValue::from_f64(offset as f64), &JsValue::from_f64(buf.len() as f64))
            .map_err(|e| fail(format!("read({offset}, {}) threw {e:?}", buf.len())))?;
        let bytes =
            got.dyn_into::<js_sys::Uint8Array>().map_err(|_| fail(format!("read({offset}, {}) did not return a Uint8Array", buf.len())))?;
        if bytes.length() as usize != buf.len() {
            return Err(fail(format!("read({offset}, {}) returned {} bytes", buf.len(), bytes.length())));
        }
        bytes.copy_to(buf);
        Ok(())
    };
    Ok(RangeSource::new(length as u64, 1 << 20, Box::new(reader)))
}

/// `f32`, `f16`, `q8_0`, `bf16`, or empty for the default.
fn parse_precision(p: &str) -> Result<docmem_runtime::embed::Precision, JsValue> {
    use docmem_runtime::embed::Precision;
    match p {
        "" => Ok(Precision::DEFAULT),
        p => Precision::parse(p)
            .ok_or_else(|| error_with(ErrorCode::BadArgument, format!("precision '{p}' is not one of {}", Precision::NAMES))),
    }
}

/// A BERT-family sentence embedder (all-MiniLM-L6-v2, bge, e5, multilingual XLM-RoBERTa
/// models) on the CPU backend inside WebAssembly, on WebGPU (`device.loadEmbedder` on a WebGPU device: awaited
/// only), or hosted (`Embedder.remote`).
#[wasm_bindgen(js_name = Embedder)]
pub struct WasmEmbedder {
    /// Shared with calls still running: an ingest or answer on the GPU, or with a hosted
    /// model, holds it across the event loop (see [`WasmEmbedder::get`]).
    embedder: handles::SharedEmbedder,
    /// Where `options.embedder` finds it (see `handles`).
    registration: handles::Registration,
}

/// The embedder as the bindings hold it.
type AnyEmbedder = docmem_runtime::handle::EmbedderHandle<std::rc::Rc<remote::JsTransport>>;

impl WasmEmbedder {
    fn wrap(embedder: impl Into<AnyEmbedder>) -> Self {
        let embedder = std::rc::Rc::new(std::cell::RefCell::new(embedder.into()));
        WasmEmbedder { registration: handles::Registration::embedder(embedder.clone()), embedder }
    }

    /// The embedder for a call that only reads it (its name, width, precision),
    /// unless a call still running holds it.
    fn read(&self) -> Result<std::cell::Ref<'_, AnyEmbedder>, JsValue> {
        self.embedder.try_borrow().map_err(|_| busy("the embedder"))
    }
}

/// A model's files, `{name: Uint8Array}`, as a map.
fn model_files(files: &JsValue) -> Result<std::collections::BTreeMap<String, Vec<u8>>, JsValue> {
    let mut map = std::collections::BTreeMap::new();
    for (key, value) in boundary::entries(files, "the model's files")? {
        let bytes = boundary::bytes(&value, &format!("file '{key}'"), ErrorCode::ModelLoadFailed)?;
        map.insert(key, bytes);
    }
    Ok(map)
}

/// The `BUSY` error for `what`, held by a call still running.
fn busy(what: &str) -> JsValue {
    error_with(ErrorCode::Busy, format!("{what} is in use by a call still running: await it first"))
}

#[wasm_bindgen(js_class = Embedder)]
impl WasmEmbedder {
    /// This embedder's number among the handles `addDocument`, `ask` and `readAhead` find in
    /// their options (`{embedder}`): not needed by callers.
    #[wasm_bindgen(getter, js_name = handleId)]
    pub fn handle_id(&self) -> u32 {
        self.registration.id()
    }

    /// Load from a model's files: `files` maps each file name (`config.json`,
    /// `model.safetensors`, `tokenizer.json`, and where the model has them `modules.json`,
    /// `1_Pooling/config.json`, `sentence_bert_config.json`,
    /// `config_sentence_transformers.json`, `tokenizer_config.json`) to its bytes as a
    /// `Uint8Array`. `precision` is `f32`, `f16`, `q8_0`, `bf16`, or empty for the default.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] files: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] precision: JsValue,
    ) -> Result<WasmEmbedder, JsValue> {
        use docmem_runtime::embed::{EmbedderOptions, SentenceEmbedder};
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let precision = parse_precision(&boundary::string(&precision, "precision")?)?;
        let embedder = SentenceEmbedder::from_files(model_files(&files)?, &name, EmbedderOptions { precision, threads: WASM_THREADS })
            .map_err(coded)?;
        Ok(WasmEmbedder::wrap(embedder))
    }

    /// Load from the bytes of a GGUF file in llama.cpp's `bert` layout.
    #[wasm_bindgen(js_name = fromGguf)]
    pub fn from_gguf(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] gguf: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] precision: JsValue,
    ) -> Result<WasmEmbedder, JsValue> {
        use docmem_runtime::embed::{EmbedderOptions, SentenceEmbedder};
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let options = EmbedderOptions { precision: parse_precision(&boundary::string(&precision, "precision")?)?, threads: WASM_THREADS };
        let src = docmem_runtime::source::MemorySource::new(boundary::bytes(&gguf, "the GGUF file", ErrorCode::ModelLoadFailed)?);
        let embedder = SentenceEmbedder::from_gguf(&src, name, options).map_err(coded)?;
        Ok(WasmEmbedder::wrap(embedder))
    }

    /// No model: words hashed into `dim` buckets (`docmem --embedder hashing`). For
    /// tests and benchmarks that time a library's own work, not a model's; its vectors
    /// match words, not meanings.
    pub fn hashing(dim: usize) -> Result<WasmEmbedder, JsValue> {
        boundary::ready()?;
        if dim == 0 || dim > 4096 {
            return Err(error_with(ErrorCode::BadArgument, format!("dim: {dim} is not between 1 and 4096")));
        }
        Ok(WasmEmbedder::wrap(AnyEmbedder::Hashing(docmem_core::HashingEmbedder::new(dim))))
    }

    /// The vector dimension.
    pub fn dim(&self) -> Result<usize, JsValue> {
        boundary::ready()?;
        Ok(docmem_core::Embedder::dim(&*self.read()?))
    }

    /// The precision the weights are held in (`f32`, `f16`, `q8_0`, `bf16`; `remote` for a
    /// hosted model).
    pub fn precision(&self) -> Result<String, JsValue> {
        boundary::ready()?;
        Ok(match &*self.read()? {
            AnyEmbedder::Local(e) => e.precision().name().to_owned(),
            AnyEmbedder::Hosted(_) => "remote".to_owned(),
            AnyEmbedder::Hashing(_) => "none".to_owned(),
        })
    }

    /// Whether this embedder runs on WebGPU (its vectors can only be awaited).
    #[wasm_bindgen(js_name = onWebGpu)]
    pub fn on_web_gpu(&self) -> Result<bool, JsValue> {
        boundary::ready()?;
        Ok(docmem_core::Embedder::needs_await(&*self.read()?))
    }

    /// Embed `texts` (as queries when `query`, else as passages): a Promise of `{vectors:
    /// Float32Array (texts × dim, row by row), truncated: number}`, whatever the embedder
    /// runs on (ready at once in wasm; awaited on WebGPU or from a host). The embedder is
    /// held until it settles: a call on it meanwhile gets a `BUSY` error.
    pub fn embed(&self, #[wasm_bindgen(unchecked_param_type = "string[]")] texts: JsValue, query: bool) -> js_sys::Promise {
        let texts = boundary::ready().and_then(|()| boundary::strings(&texts, "texts"));
        let embedder = self.embedder.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let texts = texts?;
            embed_holding(&embedder, &texts, query).await
        })
    }
}

/// `embed`'s result: `{vectors: Float32Array (texts × dim, row by row), truncated}`.
fn embedded_object(vectors: &[Vec<f32>], truncated: usize) -> Result<js_sys::Object, JsValue> {
    let flat: Vec<f32> = vectors.concat();
    let result = js_sys::Object::new();
    let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&result, &JsValue::from_str(k), v).map(|_| ());
    set("vectors", &js_sys::Float32Array::from(flat.as_slice())).map_err(|_| error_with(ErrorCode::Internal, "cannot build the result"))?;
    set("truncated", &JsValue::from_f64(truncated as f64)).map_err(|_| error_with(ErrorCode::Internal, "cannot build the result"))?;
    Ok(result)
}

/// `embed`: `texts` embedded by `embedder` (held until they are), awaited where it runs on
/// WebGPU or a host.
#[allow(clippy::await_holding_refcell_ref)] // held on purpose: other calls answer BUSY meanwhile
async fn embed_holding(embedder: &std::cell::RefCell<AnyEmbedder>, texts: &[String], query: bool) -> Result<JsValue, JsValue> {
    let mut embedder = embedder.try_borrow_mut().map_err(|_| busy("the embedder"))?;
    Ok(embedded(&mut embedder, texts, query).await?.into())
}

/// `embed`'s work: `texts` embedded, as `{vectors, truncated}`. Loading
/// is over, so a failure is the running model's (or the host's).
async fn embedded(embedder: &mut AnyEmbedder, texts: &[String], query: bool) -> Result<js_sys::Object, JsValue> {
    use docmem_runtime::embed::EmbedRole;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let role = if query { EmbedRole::Query } else { EmbedRole::Passage };
    let (vectors, truncated) = match embedder {
        AnyEmbedder::Local(e) => {
            let out = e.embed_async(&refs, role).await.map_err(|e| error_with(ErrorCode::ModelFailed, e))?;
            (out.vectors, out.truncated)
        }
        AnyEmbedder::Hosted(e) => {
            let vectors = docmem_core::Embedder::embed(e, &refs, role).map_err(|e| error_with(ErrorCode::RemoteFailed, e))?;
            (vectors, 0)
        }
        AnyEmbedder::Hashing(e) => (docmem_core::Embedder::embed(e, &refs, role).map_err(coded)?, 0),
    };
    embedded_object(&vectors, truncated)
}

/// A Hugging Face checkpoint's files (`crate::load` tells them apart): `config.json`,
/// `tokenizer.json` and `tokenizer_config.json` read whole, and the `.safetensors` shards,
/// read a tensor at a time (quantized to 8-bit blocks as they load).
pub(crate) struct HfFiles {
    pub(crate) config: Vec<u8>,
    pub(crate) tokenizer: Vec<u8>,
    pub(crate) tokenizer_config: Option<Vec<u8>>,
    pub(crate) shards: Vec<Box<dyn docmem_runtime::source::ByteSource>>,
}

impl HfFiles {
    /// Load the checkpoint for the CPU backend.
    pub(crate) fn load(self) -> Result<docmem_runtime::lm::Lm, JsValue> {
        let parts = docmem_runtime::lm::HfParts {
            config: &self.config,
            tokenizer: &self.tokenizer,
            tokenizer_config: self.tokenizer_config.as_deref(),
        };
        docmem_runtime::lm::Lm::load_hf_sources(&parts, self.shards, &load_options()).map_err(coded)
    }
}
