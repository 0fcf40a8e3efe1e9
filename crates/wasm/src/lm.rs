//! `Lm`: a language model on this device, one JavaScript class wherever it runs (wasm on
//! the CPU, or WebGPU with the `gpu` feature), as `Device.loadLm` gives it. It holds the
//! runtime's `LmContext` (the model and what it keeps between calls), shared with the
//! handle `addDocument` and `ask` find. The calls that
//! run the model return Promises on either: a browser reads GPU results only through its
//! event loop, and on the CPU the runtime's futures are ready at once, so one signature
//! serves both and a caller never asks where the model is before calling it.

use std::rc::Rc;

use docmem_core::ErrorCode;
use docmem_runtime::lm::{Backend, Lm, LmContext, Logits, Prompt, SamplingParams};
use wasm_bindgen::prelude::*;

use crate::handles::{self, Registration};
use crate::{boundary, coded, error_with, js_range_source, load_options, to_json};

/// The model and what it keeps, on the backend it was loaded onto.
enum Local {
    Cpu(Rc<LmContext>),
    #[cfg(feature = "gpu")]
    Gpu(Rc<LmContext<docmem_runtime::gpu::GpuTransformer>>),
}

/// `$body` with `$context` bound to the model's context, whichever backend it is on.
macro_rules! with_context {
    ($local:expr, $context:ident => $body:expr) => {
        match $local {
            Local::Cpu($context) => $body,
            #[cfg(feature = "gpu")]
            Local::Gpu($context) => $body,
        }
    };
}

/// A GGUF language model (or a Hugging Face checkpoint) on this device.
#[wasm_bindgen(js_name = Lm)]
pub struct WasmLm {
    /// Shared with the registry's handle and with calls still running.
    local: Local,
    /// The name the model is known by (provenance, prompt choice).
    name: String,
    /// Where `options.reader`/`options.answerer` find it (see `handles`).
    registration: Registration,
}

impl WasmLm {
    /// A model loaded on the CPU, known as `name`.
    pub(crate) fn on_cpu(lm: Lm, name: &str) -> WasmLm {
        WasmLm::wrap(Local::Cpu(Rc::new(LmContext::new(lm))), name)
    }

    /// A model loaded on WebGPU, known as `name`.
    #[cfg(feature = "gpu")]
    pub(crate) fn on_gpu(lm: Lm<docmem_runtime::gpu::GpuTransformer>, name: &str) -> WasmLm {
        WasmLm::wrap(Local::Gpu(Rc::new(LmContext::new(lm))), name)
    }

    fn wrap(local: Local, name: &str) -> WasmLm {
        let registration = Registration::model(handle(&local, name));
        WasmLm { local, name: name.into(), registration }
    }

    /// `tokens` read from JavaScript: ids of the model's vocabulary, at least one, no more
    /// than its context window.
    fn tokens(&self, tokens: &JsValue) -> Result<Vec<u32>, JsValue> {
        let tokens = boundary::token_ids(tokens, "tokens")?;
        let window = with_context!(&self.local, c => c.model().context_window());
        if tokens.is_empty() {
            return Err(error_with(ErrorCode::BadArgument, "no tokens"));
        }
        if tokens.len() > window {
            return Err(error_with(ErrorCode::BadArgument, format!("{} tokens, more than the context of {window}", tokens.len())));
        }
        Ok(tokens)
    }
}

/// The registry's handle of the model on `local`, named `name`.
fn handle(local: &Local, name: &str) -> handles::Model {
    match local {
        Local::Cpu(c) => handles::Model::on_cpu(c.clone(), name),
        #[cfg(feature = "gpu")]
        Local::Gpu(c) => handles::Model::on_gpu(c.clone(), name),
    }
}

/// A Promise of `work`'s result; an error before it (a bad argument) rejects it.
fn promise<F>(work: Result<F, JsValue>) -> js_sys::Promise
where
    F: std::future::Future<Output = Result<JsValue, JsValue>> + 'static,
{
    wasm_bindgen_futures::future_to_promise(async move { work?.await })
}

/// Logits of every position of `tokens`.
async fn logits<B: Backend>(lm: Rc<Lm<B>>, tokens: Vec<u32>) -> Result<JsValue, JsValue> {
    let mut cache = lm.backend.new_cache();
    let rows = lm.backend.forward(&mut cache, &tokens, Logits::All).await.map_err(coded)?;
    Ok(js_sys::Float32Array::from(rows.as_slice()).into())
}

/// The `n` most likely tokens after `tokens` ([`Lm::greedy`]).
async fn greedy<B: Backend>(lm: Rc<Lm<B>>, tokens: Vec<u32>, n: usize) -> Result<JsValue, JsValue> {
    let out = lm.greedy(&tokens, n).await.map_err(coded)?;
    Ok(js_sys::Uint32Array::from(out.as_slice()).into())
}

/// What `generate` writes for `prompt`, as JSON.
async fn generate<B: Backend>(lm: Rc<Lm<B>>, prompt: String, params: SamplingParams) -> Result<JsValue, JsValue> {
    let g = lm.generate(Prompt::Text(&prompt), &params, |_| std::ops::ControlFlow::Continue(())).await.map_err(coded)?;
    Ok(to_json(&g)?.into())
}

#[wasm_bindgen(js_class = Lm)]
impl WasmLm {
    /// Load a model from the bytes of a GGUF file, on the CPU (`Device.loadLm` loads onto
    /// whatever the device is).
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(unchecked_param_type = "Uint8Array")] gguf: JsValue) -> Result<WasmLm, JsValue> {
        boundary::ready()?;
        let src = docmem_runtime::source::MemorySource::new(boundary::bytes(&gguf, "the GGUF file", ErrorCode::ModelLoadFailed)?);
        let lm = Lm::load_from(&src, &load_options()).map_err(coded)?;
        Ok(WasmLm::on_cpu(lm, "model.gguf"))
    }

    /// Load a model of `length` bytes on the CPU through `read(offset, length) →
    /// Uint8Array`, a synchronous reader (Node's `fs.readSync`; in a browser worker
    /// `FileReaderSync` over `File.slice`), so the file is never whole in memory.
    #[wasm_bindgen(js_name = fromReader)]
    pub fn from_reader(length: f64, read: js_sys::Function) -> Result<WasmLm, JsValue> {
        boundary::ready()?;
        let src = js_range_source(length, read)?;
        let lm = Lm::load_from(&src, &load_options()).map_err(coded)?;
        Ok(WasmLm::on_cpu(lm, "model.gguf"))
    }

    /// Name the model (its file name, say): memories record it, and the reader prompt is
    /// chosen by it (MemReader checkpoints get their own variant).
    #[wasm_bindgen(js_name = setName)]
    pub fn set_name(&mut self, #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue) -> Result<(), JsValue> {
        boundary::ready()?;
        self.name = boundary::string(&name, "name")?;
        self.registration.replace(handle(&self.local, &self.name));
        Ok(())
    }

    /// This model's number among the handles `addDocument`, `ask` and `readAhead` find in
    /// their options (`{reader: lm}`): not needed by callers.
    #[wasm_bindgen(getter, js_name = handleId)]
    pub fn handle_id(&self) -> u32 {
        self.registration.id()
    }

    /// Whether the model runs on WebGPU (else in wasm on the CPU).
    #[wasm_bindgen(js_name = onWebGpu)]
    pub fn on_web_gpu(&self) -> Result<bool, JsValue> {
        boundary::ready()?;
        Ok(!matches!(self.local, Local::Cpu(_)))
    }

    /// The WebGPU adapter's name and backend; `undefined` on the CPU.
    pub fn adapter(&self) -> Result<Option<String>, JsValue> {
        boundary::ready()?;
        Ok(match &self.local {
            Local::Cpu(_) => None,
            #[cfg(feature = "gpu")]
            Local::Gpu(c) => Some(c.model().backend.gpu().describe()),
        })
    }

    /// Token ids of `text` (no BOS).
    pub fn tokenize(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> Result<Vec<u32>, JsValue> {
        boundary::ready()?;
        let text = boundary::string(&text, "text")?;
        with_context!(&self.local, c => c.model().tokenizer.encode(&text)).map_err(|e| error_with(ErrorCode::ModelFailed, e))
    }

    /// Logits of every position of `tokens` (a `Float32Array`, one vocabulary-sized row per
    /// token), for comparing backends.
    #[wasm_bindgen(unchecked_return_type = "Promise<Float32Array>")]
    pub fn logits(&self, #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] tokens: JsValue) -> js_sys::Promise {
        let tokens = boundary::ready().and_then(|()| self.tokens(&tokens));
        with_context!(&self.local, c => promise(tokens.map(|t| logits(c.shared_model(), t))))
    }

    /// The greedy continuation of `tokens`: `n` token ids (a `Uint32Array`; fewer where the
    /// context window ends), end-of-text tokens included.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint32Array>")]
    pub fn greedy(&self, #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] tokens: JsValue, n: f64) -> js_sys::Promise {
        let args = boundary::ready().and_then(|()| Ok((self.tokens(&tokens)?, boundary::count(n, "n", 4096)? as usize)));
        with_context!(&self.local, c => promise(args.map(|(t, n)| greedy(c.shared_model(), t, n))))
    }

    /// Generate from a raw prompt. `params` is JSON `SamplingParams` (temperature, top_p,
    /// top_k, repetition_penalty, seed, max_tokens, stop; all optional). Resolves to JSON
    /// `{"text", "tokens", "prompt_tokens", "finish", "prefill_seconds", "decode_seconds"}`.
    #[wasm_bindgen(unchecked_return_type = "Promise<string>")]
    pub fn generate(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] prompt: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] params: JsValue,
    ) -> js_sys::Promise {
        let args = boundary::ready().and_then(|()| {
            let (prompt, params) = (boundary::string(&prompt, "prompt")?, boundary::string(&params, "sampling parameters")?);
            let params: SamplingParams =
                serde_json::from_str(&params).map_err(|e| error_with(ErrorCode::BadArgument, format!("sampling parameters: {e}")))?;
            Ok((prompt, params))
        });
        with_context!(&self.local, c => promise(args.map(|(p, s)| generate(c.shared_model(), p, s))))
    }

    /// Drop the background work this model stopped to give way (a memory's window, kept
    /// so that it goes on where it stopped) and its finished results, freeing their
    /// caches: for when that work is cancelled.
    #[wasm_bindgen(js_name = forgetSuspended)]
    pub fn forget_suspended(&self) -> Result<(), JsValue> {
        boundary::ready()?;
        with_context!(&self.local, c => c.forget_suspended());
        Ok(())
    }
}
