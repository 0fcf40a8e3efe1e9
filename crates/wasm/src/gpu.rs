//! WebGPU from JavaScript (the `gpu` feature): the kernel checks on the browser's adapter,
//! and the decoder and the embedder on it. Everything async here is async because a browser reads GPU
//! buffers back only through its event loop; the work is the runtime's
//! (`docmem_runtime::gpu`).

use std::rc::Rc;

use docmem_core::ErrorCode;
use docmem_runtime::gpu::GpuTransformer;
use docmem_runtime::lm::Lm;
use docmem_runtime::lm::Logits;
use wasm_bindgen::prelude::*;

use crate::device::WasmDevice;
use crate::handles::Registration;
use crate::{boundary, coded, error_with, WasmEmbedder, WasmLm};

/// A GGUF model on the browser's WebGPU adapter: the decoder runs there, the tokenizer and
/// the token embeddings stay in wasm memory.
#[wasm_bindgen(js_name = GpuLm)]
pub struct WasmGpuLm {
    /// Shared with the registry's handle and the Promises of calls still running.
    lm: Rc<Lm<GpuTransformer>>,
    /// Where `options.reader`/`options.answerer` find it (see `crate::handles`).
    registration: Registration,
}

impl WasmGpuLm {
    fn wrap(lm: Lm<GpuTransformer>, name: String) -> WasmGpuLm {
        let lm = Rc::new(lm);
        let registration = Registration::model(crate::handles::Model::on_gpu(lm.clone(), name));
        WasmGpuLm { lm, registration }
    }
}

#[wasm_bindgen(js_class = GpuLm)]
impl WasmGpuLm {
    /// Move a loaded model (`Lm`, which this consumes) onto `device` (a `Device` chosen
    /// on WebGPU). Await every call given the `Lm` first: a model a call still holds
    /// cannot move (and the `Lm` is consumed all the same, as JavaScript hands it over).
    #[wasm_bindgen(js_name = fromLm)]
    pub fn from_lm(lm: WasmLm, device: &WasmDevice) -> Result<WasmGpuLm, JsValue> {
        boundary::ready()?;
        let gpu = device.gpu()?;
        let WasmLm { lm, name, registration } = lm;
        // The registry's handle shares the model: let it go, so that the model moves.
        drop(registration);
        let lm = Rc::try_unwrap(lm).map_err(|_| {
            error_with(ErrorCode::Busy, "the Lm is in use by a call still running, so it cannot move to the GPU (and it was consumed): load it again once that call has settled")
        })?;
        let lm = lm.map_backend(|cpu| GpuTransformer::from_cpu(gpu, cpu)).map_err(coded)?;
        Ok(WasmGpuLm::wrap(lm, name))
    }

    /// Drop the background work this model stopped to give way (a memory's window, kept
    /// so that it goes on where it stopped) and its finished results, freeing their
    /// caches: for when that work is cancelled.
    #[wasm_bindgen(js_name = forgetSuspended)]
    pub fn forget_suspended(&self) -> Result<(), JsValue> {
        boundary::ready()?;
        self.lm.forget_suspended();
        Ok(())
    }

    /// Load a GGUF model of `length` bytes straight onto the GPU through `read(offset,
    /// length) → Uint8Array` (a synchronous reader, as `Lm.fromReader` takes), one block's
    /// tensors at a time: the file is never whole in wasm memory. `name` is what the model
    /// is known by (as `Lm.setName` sets it); `device`, a `Device` chosen on WebGPU.
    #[wasm_bindgen(js_name = fromReader)]
    pub fn from_reader(
        length: f64,
        read: js_sys::Function,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        device: &WasmDevice,
    ) -> Result<WasmGpuLm, JsValue> {
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let src = crate::js_range_source(length, read)?;
        let lm = Lm::load_onto_gpu(&src, &crate::load_options(), device.gpu()?).map_err(coded)?;
        Ok(WasmGpuLm::wrap(lm, name))
    }

    /// Load a Hugging Face checkpoint (as `Lm.fromHuggingFace` takes it) onto the GPU: its
    /// tensors are read one at a time and quantized to 8-bit blocks in wasm memory, then the
    /// model is uploaded (a GGUF file goes straight to the GPU a block at a time instead).
    #[wasm_bindgen(js_name = fromHuggingFace)]
    pub fn from_hugging_face(
        #[wasm_bindgen(unchecked_param_type = "{config: Uint8Array, tokenizer: Uint8Array, tokenizerConfig?: Uint8Array | null}")]
        parts: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Array<{length: number, read: (offset: number, length: number) => Uint8Array}>")]
        shards: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        device: &WasmDevice,
    ) -> Result<WasmGpuLm, JsValue> {
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let files = crate::HfFiles::from_js(&parts, &shards)?;
        let gpu = device.gpu()?;
        let lm =
            files.load()?.map_backend(|cpu| GpuTransformer::from_cpu(gpu, cpu)).map_err(|e| error_with(ErrorCode::ModelLoadFailed, e))?;
        Ok(WasmGpuLm::wrap(lm, name))
    }

    /// This model's number among the handles `addDocument`, `ask` and `readAhead` find in
    /// their options (`{answerer: gpuLm}`): not needed by callers.
    #[wasm_bindgen(getter, js_name = handleId)]
    pub fn handle_id(&self) -> u32 {
        self.registration.id()
    }

    /// The adapter's name and backend.
    pub fn adapter(&self) -> Result<String, JsValue> {
        boundary::ready()?;
        Ok(self.lm.backend.gpu().describe())
    }

    /// Token ids of `text` (no BOS).
    pub fn tokenize(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> Result<Vec<u32>, JsValue> {
        boundary::ready()?;
        let text = boundary::string(&text, "text")?;
        self.lm.tokenizer.encode(&text).map_err(|e| error_with(ErrorCode::ModelFailed, e))
    }

    /// `tokens` read from JavaScript: ids of this model's vocabulary, at least one.
    fn tokens(&self, tokens: &JsValue) -> Result<Vec<u32>, JsValue> {
        boundary::ready()?;
        let tokens = boundary::token_ids(tokens, "tokens")?;
        if tokens.is_empty() {
            return Err(error_with(ErrorCode::BadArgument, "no tokens"));
        }
        Ok(tokens)
    }

    /// Logits of every position of `tokens` (a `Float32Array`, one vocabulary-sized row per
    /// token).
    pub fn logits(&self, #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] tokens: JsValue) -> js_sys::Promise {
        let lm = self.lm.clone();
        let tokens = self.tokens(&tokens);
        wasm_bindgen_futures::future_to_promise(async move {
            let tokens = tokens?;
            let mut cache = lm.backend.new_cache();
            let rows = lm.backend.forward_async(&mut cache, &tokens, Logits::All).await.map_err(coded)?;
            Ok(js_sys::Float32Array::from(rows.as_slice()).into())
        })
    }

    /// The greedy continuation of `tokens`: `n` token ids (a `Uint32Array`).
    pub fn greedy(&self, #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] tokens: JsValue, n: f64) -> js_sys::Promise {
        let lm = self.lm.clone();
        let args = self.tokens(&tokens).and_then(|t| Ok((t, boundary::count(n, "n", 4096)?)));
        wasm_bindgen_futures::future_to_promise(async move {
            let (tokens, n) = args?;
            let ids = lm.backend.greedy_async(&tokens, n as usize).await.map_err(coded)?;
            Ok(js_sys::Uint32Array::from(ids.as_slice()).into())
        })
    }
}

/// The sentence embedder on WebGPU.
#[wasm_bindgen(js_class = Embedder)]
impl WasmEmbedder {
    /// Load from a model's files (as `new Embedder` takes them) onto `device` (a `Device`
    /// chosen on WebGPU), which it shares with the models loaded there. Its vectors can
    /// only be awaited: `embedAsync`, `addDocument`, `search`, `ask` and `readAhead` take
    /// it; clues and routing inside `ask`, which embed between the answerer's steps
    /// synchronously, refuse it.
    #[wasm_bindgen(js_name = onGpu)]
    pub fn on_gpu(
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] files: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        device: &WasmDevice,
    ) -> Result<WasmEmbedder, JsValue> {
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let gpu = device.gpu()?;
        let embedder =
            docmem_runtime::embed::SentenceEmbedder::from_files_onto_gpu(crate::model_files(&files)?, &name, gpu).map_err(coded)?;
        Ok(WasmEmbedder::wrap(embedder))
    }

    /// Whether this embedder runs on WebGPU (its vectors can only be awaited).
    #[wasm_bindgen(js_name = onWebGpu)]
    pub fn on_web_gpu(&self) -> Result<bool, JsValue> {
        boundary::ready()?;
        Ok(docmem_core::Embedder::needs_await(&*self.read()?))
    }

    /// `embed`, awaited: a Promise of the same `{vectors, truncated}`, for an embedder of
    /// any kind (one on WebGPU included).
    #[wasm_bindgen(js_name = embedAsync)]
    pub fn embed_async(&self, #[wasm_bindgen(unchecked_param_type = "string[]")] texts: JsValue, query: bool) -> js_sys::Promise {
        let texts = boundary::ready().and_then(|()| boundary::strings(&texts, "texts"));
        let embedder = self.embedder.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let texts = texts?;
            crate::embed_holding(&embedder, &texts, query).await
        })
    }
}
