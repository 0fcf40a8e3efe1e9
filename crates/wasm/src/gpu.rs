//! WebGPU from JavaScript (the `gpu` feature): the kernel checks on the browser's adapter
//! and the decoder on it. Everything async here is async because a browser reads GPU
//! buffers back only through its event loop; the work is the runtime's
//! (`docmem_runtime::gpu`).

use std::rc::Rc;

use docmem_core::ErrorCode;
use docmem_runtime::cpu::transformer::Logits;
use docmem_runtime::gpu::{checks, Gpu, GpuOptions, GpuTransformer};
use docmem_runtime::tokenizer::Tokenizer;
use wasm_bindgen::prelude::*;

use crate::{boundary, coded, error_with, WasmLm};

/// wgpu reaches WebGPU only from a page or a dedicated worker, and panics elsewhere (Node,
/// shared and service workers): refuse first, with the reason.
fn webgpu_reachable() -> Result<(), JsValue> {
    let global = js_sys::global();
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
    let gpu = get(&get(&global, "navigator"), "gpu");
    if gpu.is_undefined() || gpu.is_null() {
        return Err(error_with(ErrorCode::WebgpuUnavailable, "no WebGPU here (navigator.gpu is missing)"));
    }
    let scope = get(&get(&global, "constructor"), "name").as_string().unwrap_or_default();
    if scope != "Window" && scope != "DedicatedWorkerGlobalScope" {
        return Err(error_with(
            ErrorCode::WebgpuUnavailable,
            format!("WebGPU is reachable only from a page or a dedicated worker, not from {scope:?}"),
        ));
    }
    Ok(())
}

async fn device(allow_cpu_adapter: bool) -> Result<Gpu, JsValue> {
    boundary::ready()?;
    webgpu_reachable()?;
    Gpu::new(&GpuOptions { allow_cpu_adapter, ..GpuOptions::default() }).await.map_err(coded)
}

/// Run every kernel check (`docmem_runtime::gpu::checks`) on this browser's WebGPU adapter.
/// Resolves to `{adapter, checks}` (the adapter's name, the number of checks passed);
/// rejects with a `WEBGPU_UNAVAILABLE` error naming the check, the element and both values
/// when the adapter computes a kernel wrongly, or when there is no usable adapter.
/// `allowCpuAdapter` accepts a software adapter (SwiftShader), as tests do.
#[wasm_bindgen(js_name = webgpuCheck)]
pub async fn webgpu_check(allow_cpu_adapter: bool) -> Result<JsValue, JsValue> {
    let gpu = device(allow_cpu_adapter).await?;
    let passed = checks::run_all(&gpu).await.map_err(coded)?;
    let out = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&out, &"adapter".into(), &gpu.describe().into());
    let _ = js_sys::Reflect::set(&out, &"checks".into(), &(passed as f64).into());
    Ok(out.into())
}

struct Model {
    tokenizer: Tokenizer,
    decoder: GpuTransformer,
}

/// A GGUF decoder on the browser's WebGPU adapter.
#[wasm_bindgen(js_name = GpuLm)]
pub struct WasmGpuLm {
    model: Rc<Model>,
}

#[wasm_bindgen(js_class = GpuLm)]
impl WasmGpuLm {
    /// Move a loaded model (`Lm`, which this consumes) onto the GPU.
    #[wasm_bindgen(js_name = fromLm)]
    pub async fn from_lm(lm: WasmLm, allow_cpu_adapter: bool) -> Result<WasmGpuLm, JsValue> {
        let gpu = device(allow_cpu_adapter).await?;
        let (tokenizer, cpu) = lm.lm.into_parts();
        let decoder = GpuTransformer::from_cpu(gpu, cpu).map_err(coded)?;
        Ok(WasmGpuLm { model: Rc::new(Model { tokenizer, decoder }) })
    }

    /// The adapter's name and backend.
    pub fn adapter(&self) -> Result<String, JsValue> {
        boundary::ready()?;
        Ok(self.model.decoder.gpu().describe())
    }

    /// Token ids of `text` (no BOS).
    pub fn tokenize(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> Result<Vec<u32>, JsValue> {
        boundary::ready()?;
        let text = boundary::string(&text, "text")?;
        self.model.tokenizer.encode(&text).map_err(|e| error_with(ErrorCode::ModelFailed, e))
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
        let model = self.model.clone();
        let tokens = self.tokens(&tokens);
        wasm_bindgen_futures::future_to_promise(async move {
            let tokens = tokens?;
            let mut cache = model.decoder.new_cache();
            let rows = model.decoder.forward_async(&mut cache, &tokens, Logits::All).await.map_err(coded)?;
            Ok(js_sys::Float32Array::from(rows.as_slice()).into())
        })
    }

    /// The greedy continuation of `tokens`: `n` token ids (a `Uint32Array`).
    pub fn greedy(&self, #[wasm_bindgen(unchecked_param_type = "number[] | Uint32Array")] tokens: JsValue, n: f64) -> js_sys::Promise {
        let model = self.model.clone();
        let args = self.tokens(&tokens).and_then(|t| Ok((t, boundary::count(n, "n", 4096)?)));
        wasm_bindgen_futures::future_to_promise(async move {
            let (tokens, n) = args?;
            let ids = model.decoder.greedy_async(&tokens, n as usize).await.map_err(coded)?;
            Ok(js_sys::Uint32Array::from(ids.as_slice()).into())
        })
    }
}
