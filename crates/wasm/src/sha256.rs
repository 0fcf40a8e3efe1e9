//! An incremental SHA-256 for JavaScript: WebCrypto's `digest` takes the whole input at
//! once, so a model file checked against its pinned hash would have to sit in memory whole
//! (2–3× its size at the peak). This hashes each downloaded piece as it arrives and keeps
//! nothing but the hash state.

use docmem_core::ErrorCode;
use sha2::{Digest, Sha256};
use wasm_bindgen::prelude::*;

use crate::boundary;

/// A running SHA-256.
#[wasm_bindgen(js_name = Sha256)]
#[derive(Default)]
pub struct WasmSha256(Sha256);

#[wasm_bindgen(js_class = Sha256)]
impl WasmSha256 {
    /// A hash of nothing yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmSha256 {
        WasmSha256::default()
    }

    /// Add `bytes` (a `Uint8Array`) to what is hashed.
    pub fn update(&mut self, #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue) -> Result<(), JsValue> {
        boundary::ready()?;
        self.0.update(boundary::bytes(&bytes, "bytes", ErrorCode::ModelLoadFailed)?);
        Ok(())
    }

    /// The hash of everything added, as 64 lower-case hex digits (the hasher is reset).
    pub fn finish(&mut self) -> Result<String, JsValue> {
        boundary::ready()?;
        let digest = std::mem::take(&mut self.0).finalize();
        Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
    }
}
