//! WebGPU from JavaScript (the `gpu` feature): the kernel checks on the browser's adapter,
//! and the decoder and the embedder on it. Everything async here is async because a browser reads GPU
//! buffers back only through its event loop; the work is the runtime's
//! (`docmem_runtime::gpu`).

use std::rc::Rc;

use docmem_core::ErrorCode;
use docmem_runtime::gpu::GpuTransformer;
use docmem_runtime::lm::Logits;
use docmem_runtime::lm::{Lm, LmContext};
use wasm_bindgen::prelude::*;

use crate::handles::Registration;
use crate::{boundary, coded, error_with, WasmEmbedder};

/// A GGUF model on the browser's WebGPU adapter: the decoder runs there, the tokenizer and
/// the token embeddings stay in wasm memory.
#[wasm_bindgen(js_name = GpuLm)]
pub struct WasmGpuLm {
    /// Shared with the registry's handle and the Promises of calls still running.
    context: Rc<LmContext<GpuTransformer>>,
    /// Where `options.reader`/`options.answerer` find it (see `crate::handles`).
    registration: Registration,
}

impl WasmGpuLm {
    pub(crate) fn wrap(lm: Lm<GpuTransformer>, name: String) -> WasmGpuLm {
        let context = Rc::new(LmContext::new(lm));
        let registration = Registration::model(crate::handles::Model::on_gpu(context.clone(), name));
        WasmGpuLm { context, registration }
    }
}

#[wasm_bindgen(js_class = GpuLm)]
impl WasmGpuLm {
    /// Drop the background work this model stopped to give way (a memory's window, kept
    /// so that it goes on where it stopped) and its finished results, freeing their
    /// caches: for when that work is cancelled.
    #[wasm_bindgen(js_name = forgetSuspended)]
    pub fn forget_suspended(&self) -> Result<(), JsValue> {
        boundary::ready()?;
        self.context.forget_suspended();
        Ok(())
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
        Ok(self.context.model().backend.gpu().describe())
    }

    /// Token ids of `text` (no BOS).
    pub fn tokenize(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> Result<Vec<u32>, JsValue> {
        boundary::ready()?;
        let text = boundary::string(&text, "text")?;
        self.context.model().tokenizer.encode(&text).map_err(|e| error_with(ErrorCode::ModelFailed, e))
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
        let lm = self.context.shared_model();
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
        let lm = self.context.shared_model();
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
    /// Whether this embedder runs on WebGPU (its vectors can only be awaited).
    #[wasm_bindgen(js_name = onWebGpu)]
    pub fn on_web_gpu(&self) -> Result<bool, JsValue> {
        boundary::ready()?;
        Ok(docmem_core::Embedder::needs_await(&*self.read()?))
    }
}
