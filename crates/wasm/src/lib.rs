//! # docmem-wasm
//!
//! The wasm-bindgen layer: it translates between JavaScript and the Rust crates and holds
//! no logic of its own. Inputs arrive as strings and numbers, outputs leave as JSON strings
//! (parsed by the TypeScript wrapper the npm package ships in a later issue), and every
//! failure becomes a JS `Error` whose message names what was wrong. Nothing here panics on
//! user input.
//!
//! What it exposes now: the MemReader output parser, the [MASK] aligner and the baseline
//! chunkers. The `DocMem` class (libraries, models, workers) comes with the browser issue.

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
