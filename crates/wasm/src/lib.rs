//! # docmem-wasm
//!
//! The wasm-bindgen layer: it translates between JavaScript and the Rust crates and holds
//! no logic of its own. Inputs arrive as strings and numbers, outputs leave as JSON strings
//! (parsed by the TypeScript wrapper the npm package ships in a later issue), and every
//! failure becomes a JS `Error` whose message names what was wrong. Nothing here panics on
//! user input.
//!
//! What it exposes now: the MemReader output parser, the [MASK] aligner, the baseline
//! chunkers, and [`WasmLm`], a GGUF language model on the CPU backend (one thread, in
//! linear memory). The `DocMem` class (libraries, models, workers) comes with the browser
//! issue.

use docmem_core::chunk::{chunk_with, ChunkOptions, ChunkerKind};
use docmem_core::{align_memory, parse_memreader_output, AlignParams, HashingEmbedder};
use wasm_bindgen::prelude::*;

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, JsError> {
    serde_json::to_string(value).map_err(|e| JsError::new(&format!("cannot encode result: {e}")))
}

/// Chunk `text` with `chunker` (`fixed`, `sentence`, `recursive` or `semantic`); `size` and
/// `overlap` of 0 mean the chunker's default. Returns JSON `[{"start":…,"end":…}, …]`
/// (UTF-8 byte offsets).
#[wasm_bindgen(js_name = chunkText)]
pub fn chunk_text(text: &str, chunker: &str, size: u32, overlap: u32) -> Result<String, JsError> {
    let kind: ChunkerKind = chunker.parse().map_err(|e: docmem_core::chunk::UnknownChunker| JsError::new(&e.to_string()))?;
    let options = ChunkOptions { size: (size > 0).then_some(size as usize), overlap: (overlap > 0).then_some(overlap as usize) };
    let mut embedder = HashingEmbedder::new(384);
    let spans = chunk_with(kind, text, options, Some(&mut embedder)).map_err(|e| JsError::new(&e.to_string()))?;
    to_json(&spans)
}

/// Parse a MemReader's raw output and align its chunks to `document`. Returns JSON
/// `{"parse": {…}, "scenarios": […], "stats": {…}}`.
#[wasm_bindgen(js_name = parseAndAlign)]
pub fn parse_and_align(document: &str, reader_output: &str) -> Result<String, JsError> {
    let parsed = parse_memreader_output(reader_output);
    let aligned = align_memory(document, &parsed, &AlignParams::default());
    to_json(&serde_json::json!({ "parse": parsed, "scenarios": aligned.scenarios, "stats": aligned.stats }))
}

/// A GGUF language model running on the CPU backend inside WebAssembly.
#[wasm_bindgen(js_name = Lm)]
pub struct WasmLm {
    lm: docmem_runtime::lm::Lm,
}

#[wasm_bindgen(js_class = Lm)]
impl WasmLm {
    /// Load a model from the bytes of a GGUF file.
    #[wasm_bindgen(constructor)]
    pub fn new(gguf: Vec<u8>) -> Result<WasmLm, JsError> {
        let src = docmem_runtime::source::MemorySource::new(gguf);
        let lm =
            docmem_runtime::lm::Lm::load_from(&src, &docmem_runtime::lm::LoadOptions { threads: 1, context: 2048, ..Default::default() })
                .map_err(|e| JsError::new(&e.to_string()))?;
        Ok(WasmLm { lm })
    }

    /// Token ids of `text` (no BOS), as JSON.
    pub fn tokenize(&self, text: &str) -> Result<String, JsError> {
        let ids = self.lm.tokenizer.encode(text).map_err(|e| JsError::new(&e.to_string()))?;
        to_json(&ids)
    }

    /// Generate from a raw prompt. `params` is JSON `SamplingParams` (temperature, top_p,
    /// top_k, repetition_penalty, seed, max_tokens, stop; all optional). Returns JSON
    /// `{"text", "tokens", "prompt_tokens", "finish", "prefill_seconds", "decode_seconds"}`.
    pub fn generate(&self, prompt: &str, params: &str) -> Result<String, JsError> {
        let params: docmem_runtime::lm::SamplingParams =
            serde_json::from_str(params).map_err(|e| JsError::new(&format!("sampling parameters: {e}")))?;
        let g = self
            .lm
            .generate(docmem_runtime::lm::Prompt::Text(prompt), &params, |_| std::ops::ControlFlow::Continue(()))
            .map_err(|e| JsError::new(&e.to_string()))?;
        to_json(&g)
    }
}
