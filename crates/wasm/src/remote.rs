//! Hosted models from JavaScript: the transport is JavaScript's (`fetch`, handed in as an
//! object), the protocol and every role are the runtime's (`docmem_runtime::remote`).
//!
//! The transport object has three methods, each given an API path (`/v1/...`) and a JSON
//! body and each giving back `{status, body}`:
//! - `post(path, body)`: a Promise of the whole reply;
//! - `postStream(path, body)`: a Promise of `{status, body, next, cancel}` once the reply's
//!   headers are in: `next()` gives a Promise of the body's next piece (a `Uint8Array`, or
//!   `null` at the end) and `cancel()` aborts the request (a failing status comes with the
//!   whole `body` instead, and no pieces);
//! - `postSync(path, body)`: the whole reply, synchronously. Only the embedder uses it,
//!   as the library embeds inside synchronous calls; the package runs it in its worker
//!   (a synchronous XMLHttpRequest in a browser's worker, a blocked worker thread in Node).

use std::ops::ControlFlow;
use std::rc::Rc;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::ErrorCode;
use docmem_runtime::remote::{HttpReply, RemoteModel, Transport};
use docmem_runtime::Error;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::{boundary, coded, error_with, WasmEmbedder};

/// The JavaScript transport (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct JsTransport {
    object: JsValue,
}

fn method(object: &JsValue, name: &str) -> Result<js_sys::Function, Error> {
    js_sys::Reflect::get(object, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| Error::RemoteTransport { message: format!("the transport has no {name}() method") })
}

fn thrown(e: JsValue) -> Error {
    let message = js_sys::Reflect::get(&e, &JsValue::from_str("message"))
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "the transport failed".into());
    Error::RemoteTransport { message }
}

/// `{status, body}` from JavaScript.
fn http_reply(value: &JsValue) -> Result<HttpReply, Error> {
    let get = |k: &str| js_sys::Reflect::get(value, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
    let status = get("status")
        .as_f64()
        .filter(|s| (100.0..600.0).contains(s))
        .ok_or_else(|| Error::RemoteTransport { message: "the transport's reply has no HTTP status".into() })?;
    Ok(HttpReply { status: status as u16, body: get("body").as_string().unwrap_or_default() })
}

impl JsTransport {
    fn new(object: JsValue) -> Result<Self, JsValue> {
        for name in ["post", "postStream", "postSync"] {
            method(&object, name).map_err(|e| error_with(ErrorCode::BadArgument, e))?;
        }
        Ok(JsTransport { object })
    }

    async fn call(&self, name: &str, args: &[JsValue]) -> Result<JsValue, Error> {
        let f = method(&self.object, name)?;
        let array: js_sys::Array = args.iter().collect();
        let promise = f.apply(&self.object, &array).map_err(thrown)?;
        wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&promise)).await.map_err(thrown)
    }
}

impl Transport for JsTransport {
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        boxed(async move { http_reply(&self.call("post", &[path.into(), body.into()]).await?) })
    }

    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        boxed(async move {
            // Pulled, not pushed: Rust asks for each piece, so no Rust closure has to
            // outlive this call inside JavaScript.
            let stream = self.call("postStream", &[path.into(), body.into()]).await?;
            let reply = http_reply(&stream)?;
            if !(200..300).contains(&reply.status) {
                return Ok(reply);
            }
            let next = method(&stream, "next")?;
            loop {
                let piece = next.call0(&stream).map_err(thrown)?;
                let piece = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&piece)).await.map_err(thrown)?;
                if piece.is_null() || piece.is_undefined() {
                    break;
                }
                let Ok(bytes) = piece.dyn_into::<js_sys::Uint8Array>() else {
                    // Close the request before giving up on it.
                    let _ = method(&stream, "cancel").map(|cancel| cancel.call0(&stream));
                    return Err(Error::RemoteTransport { message: "the transport's stream gave something other than a Uint8Array".into() });
                };
                if on_bytes(&bytes.to_vec()).is_break() {
                    // Aborting the fetch closes the connection: the host stops generating.
                    let cancel = method(&stream, "cancel")?;
                    let _ = cancel.call0(&stream);
                    break;
                }
            }
            Ok(HttpReply { status: reply.status, body: String::new() })
        })
    }

    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, Error> {
        let f = method(&self.object, "postSync")?;
        http_reply(&f.call2(&self.object, &path.into(), &body.into()).map_err(thrown)?)
    }
}

#[wasm_bindgen(js_class = Embedder)]
impl WasmEmbedder {
    /// A hosted embedding model `model` through `transport` (see the module docs: it uses
    /// `postSync`). Asks for one vector at once, to learn the width.
    pub fn remote(transport: JsValue, #[wasm_bindgen(unchecked_param_type = "string")] model: JsValue) -> Result<WasmEmbedder, JsValue> {
        boundary::ready()?;
        let model = boundary::string(&model, "model")?;
        let transport = Rc::new(JsTransport::new(transport)?);
        let embedder = docmem_runtime::remote::RemoteEmbedder::connect(transport, model).map_err(coded)?;
        Ok(WasmEmbedder::wrap(docmem_runtime::handle::EmbedderHandle::Hosted(embedder)))
    }
}

/// A hosted chat model, for the reader (and its scorer) and the answerer roles.
#[wasm_bindgen(js_name = RemoteModel)]
pub struct WasmRemoteModel {
    /// `remote:` and its name on the host.
    name: String,
    /// Where `options.reader`/`options.answerer` find it (see `crate::handles`).
    registration: crate::handles::Registration,
}

#[wasm_bindgen(js_class = RemoteModel)]
impl WasmRemoteModel {
    /// `model` (as the host lists it) through `transport`, with a context window of
    /// `context` tokens (0: docmem's default for hosted models, 8,192).
    #[wasm_bindgen(constructor)]
    pub fn new(
        transport: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] model: JsValue,
        context: f64,
    ) -> Result<WasmRemoteModel, JsValue> {
        boundary::ready()?;
        let model = boundary::string(&model, "model")?;
        if model.trim().is_empty() {
            return Err(error_with(ErrorCode::BadArgument, "model: a hosted model needs a name"));
        }
        let context = boundary::count(context, "context", 1 << 22)? as usize;
        let handle = crate::handles::Model::hosted(RemoteModel::new(Rc::new(JsTransport::new(transport)?), model).with_context(context));
        Ok(WasmRemoteModel { name: handle.name().to_owned(), registration: crate::handles::Registration::model(handle) })
    }

    /// `remote:` and the model's name (as libraries and answers record it).
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// This model's number among the handles `addDocument`, `ask` and `readAhead` find in
    /// their options (`{answerer}`): not needed by callers.
    #[wasm_bindgen(getter, js_name = handleId)]
    pub fn handle_id(&self) -> u32 {
        self.registration.id()
    }
}
