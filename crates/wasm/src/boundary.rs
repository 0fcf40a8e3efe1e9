//! The boundary with JavaScript: the panic hook, and the arguments of the exports, read
//! and checked here (hostile input gets a JS `Error`, never a trap).
//!
//! wasm-bindgen's glue converts a `&str`, `Vec<u8>` or `Vec<String>` parameter without
//! looking at what it was given: a number where a string is wanted reaches the allocator
//! with a length of `undefined` (a realloc of a pointer never allocated: memory access out
//! of bounds), an object whose `length` is 1e12 asks the allocator for that much (an
//! abort), and a Uint8Array larger than wasm memory aborts the same way. So the exports
//! take such arguments as `JsValue` (typed for TypeScript with `unchecked_param_type`)
//! and read them through these functions, which accept only the JS type wanted, allocate
//! fallibly, and read objects through `Reflect` (whose exceptions, a hostile Proxy's
//! say, come back as errors instead of unwinding through Rust). A bad argument is a
//! `BAD_ARGUMENT` error naming it.
//!
//! A panic in wasm32 aborts: JavaScript gets a `WebAssembly.RuntimeError` ("unreachable")
//! that says nothing of why. The hook installed at start writes the panic's message and
//! location to `console.error` and keeps it; every later call then throws it (or a
//! Promise it returns rejects with it) as an `INTERNAL` error (an abort can leave the module's memory half-updated, so it is not
//! used again: load the module again), and `lastPanic()` returns it to whoever caught the
//! `RuntimeError`.

use std::fmt::Display;
use std::sync::{Mutex, Once};

use docmem_core::ErrorCode;
use wasm_bindgen::prelude::*;

use crate::error_with;

/// The last panic's message and location.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// Runs once, when the module is instantiated (`private`: not an export of its own).
#[wasm_bindgen(start, private)]
fn start() {
    install_panic_hook();
}

/// Install the panic hook (once; later calls do nothing).
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = info.payload_as_str().unwrap_or("(a panic without a message)");
            let at = info.location().map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column())).unwrap_or_default();
            let text = format!("docmem's wasm module panicked{at}: {message}");
            console_error(&text);
            // `try_lock`: a panic while the message is being read must not deadlock.
            if let Ok(mut last) = PANIC.try_lock() {
                *last = Some(text);
            }
            // A panic aborts the thread it happens on: if that is a helper worker, the
            // thread waiting for it must stop waiting (and panic in turn, so its caller
            // gets this error) rather than spin forever.
            docmem_runtime::cpu::threads::Threads::note_panic();
        }));
    });
}

/// The message and location of the panic that stopped the module, or `undefined` when
/// there was none: for whoever caught the `WebAssembly.RuntimeError` it ended in.
#[wasm_bindgen(js_name = lastPanic)]
pub fn last_panic() -> Option<String> {
    PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `Ok` unless the module panicked earlier; then an `INTERNAL` error naming the panic.
/// Every export calls this first.
pub(crate) fn ready() -> Result<(), JsValue> {
    match &*PANIC.lock().unwrap_or_else(|e| e.into_inner()) {
        None => Ok(()),
        Some(panic) => Err(error_with(ErrorCode::Internal, format!("{panic} (the module cannot be used after a panic: load it again)"))),
    }
}

fn bad(message: impl Display) -> JsValue {
    error_with(ErrorCode::BadArgument, message)
}

/// What `value` is, for an error message.
fn kind(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else if js_sys::Array::is_array(value) {
        "an array".into()
    } else if value.is_instance_of::<js_sys::Uint8Array>() {
        "a Uint8Array".into()
    } else {
        value.js_typeof().as_string().map_or_else(|| "a value of no known type".into(), |t| format!("a value of type {t}"))
    }
}

/// An exception thrown while reading `what` (by a Proxy's trap, a getter) as an error.
fn thrown(what: &str, e: &JsValue) -> JsValue {
    let message = e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())).or_else(|| e.as_string()).unwrap_or_default();
    bad(format!("{what} could not be read: {message}"))
}

/// `value` as a string (only a string: no conversion).
pub(crate) fn string(value: &JsValue, what: &str) -> Result<String, JsValue> {
    value.as_string().ok_or_else(|| bad(format!("{what} must be a string, not {}", kind(value))))
}

/// `value` as a whole number from 0 to `max`. JavaScript numbers are doubles; NaN,
/// fractions, negative and larger numbers are refused rather than wrapped to 32 bits.
pub(crate) fn count(value: f64, what: &str, max: u32) -> Result<u32, JsValue> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= f64::from(max) {
        Ok(value as u32)
    } else {
        Err(bad(format!("{what} must be a whole number from 0 to {max}, not {value}")))
    }
}

/// The `length` of array-like `value` when it is a whole number below `max`.
fn length(value: &JsValue, what: &str, max: f64) -> Result<usize, JsValue> {
    let length = js_sys::Reflect::get(value, &"length".into()).map_err(|e| thrown(what, &e))?;
    match length.as_f64() {
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= max => Ok(n as usize),
        _ => Err(bad(format!("{what} has a length of {length:?}, more than can be read"))),
    }
}

/// `value` as bytes: a `Uint8Array`, copied into wasm memory. One that does not fit there
/// is an error with `code` (what the bytes are for says which) rather than an abort.
pub(crate) fn bytes(value: &JsValue, what: &str, code: ErrorCode) -> Result<Vec<u8>, JsValue> {
    let array = value.dyn_ref::<js_sys::Uint8Array>().ok_or_else(|| bad(format!("{what} must be a Uint8Array, not {}", kind(value))))?;
    let len = length(value, what, f64::from(u32::MAX))?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| error_with(code, format!("{what} ({len} bytes) does not fit in wasm memory")))?;
    out.resize(len, 0);
    if array.length() as usize != len {
        return Err(bad(format!("{what} changed its length while being read")));
    }
    array.copy_to(&mut out);
    Ok(out)
}

/// `value` as strings: an array of strings.
pub(crate) fn strings(value: &JsValue, what: &str) -> Result<Vec<String>, JsValue> {
    if !js_sys::Array::is_array(value) {
        return Err(bad(format!("{what} must be an array of strings, not {}", kind(value))));
    }
    // A real array has at most 2^32 − 1 elements; a Proxy may claim any length.
    let len = length(value, what, f64::from(u32::MAX))?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| bad(format!("{what} ({len} strings) does not fit in wasm memory")))?;
    for i in 0..len as u32 {
        let item = js_sys::Reflect::get_u32(value, i).map_err(|e| thrown(what, &e))?;
        out.push(string(&item, &format!("{what}[{i}]"))?);
    }
    Ok(out)
}

/// `value` as token ids: an array (or `Uint32Array`) of whole numbers below 2^32.
pub(crate) fn token_ids(value: &JsValue, what: &str) -> Result<Vec<u32>, JsValue> {
    if !js_sys::Array::is_array(value) && !value.is_instance_of::<js_sys::Uint32Array>() {
        return Err(bad(format!("{what} must be an array of token ids, not {}", kind(value))));
    }
    let len = length(value, what, f64::from(u32::MAX))?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| bad(format!("{what} ({len} ids) does not fit in wasm memory")))?;
    for i in 0..len as u32 {
        let item = js_sys::Reflect::get_u32(value, i).map_err(|e| thrown(what, &e))?;
        let id = item.as_f64().ok_or_else(|| bad(format!("{what}[{i}] must be a number, not {}", kind(&item))))?;
        out.push(count(id, &format!("{what}[{i}]"), u32::MAX)?);
    }
    Ok(out)
}

/// An options object (`{k: 4, onToken}`): its fields read by name, each checked as the
/// positional arguments are, and named in errors as `options.k`. `undefined` or `null` is
/// an object with no fields. A field the call does not take is an error (a misspelt
/// `maxtokens` or another call's `onProgress` would otherwise do nothing, silently).
pub(crate) struct Options {
    object: JsValue,
    what: &'static str,
}

impl Options {
    /// `value` as the options object called `what` in errors, whose fields may be `allowed`.
    pub(crate) fn new(value: &JsValue, what: &'static str, allowed: &[&str]) -> Result<Options, JsValue> {
        if value.is_undefined() || value.is_null() {
            return Ok(Options { object: value.clone(), what });
        }
        if !value.is_object() {
            return Err(bad(format!("{what} must be an object, not {}", kind(value))));
        }
        for (key, _) in entries(value, what)? {
            if !allowed.contains(&key.as_str()) {
                return Err(bad(format!("{what}.{key} is not an option here (the options are {})", allowed.join(", "))));
            }
        }
        Ok(Options { object: value.clone(), what })
    }

    /// How errors name field `key`.
    pub(crate) fn name(&self, key: &str) -> String {
        format!("{}.{key}", self.what)
    }

    /// Field `key`: `undefined` when it is not there (or is `null`).
    pub(crate) fn value(&self, key: &str) -> Result<JsValue, JsValue> {
        if !self.object.is_object() {
            return Ok(JsValue::UNDEFINED);
        }
        let v = js_sys::Reflect::get(&self.object, &key.into()).map_err(|e| thrown(&self.name(key), &e))?;
        Ok(if v.is_null() { JsValue::UNDEFINED } else { v })
    }

    /// String field `key`, which must be there.
    pub(crate) fn string(&self, key: &str) -> Result<String, JsValue> {
        string(&self.value(key)?, &self.name(key))
    }

    /// String field `key`, when it is there.
    pub(crate) fn optional_string(&self, key: &str) -> Result<Option<String>, JsValue> {
        let v = self.value(key)?;
        if v.is_undefined() {
            return Ok(None);
        }
        string(&v, &self.name(key)).map(Some)
    }

    /// Whole-number field `key` from 0 to `max`; `default` when it is not there.
    pub(crate) fn count_or(&self, key: &str, default: u32, max: u32) -> Result<u32, JsValue> {
        let v = self.value(key)?;
        if v.is_undefined() {
            return Ok(default);
        }
        let n = v.as_f64().ok_or_else(|| bad(format!("{} must be a number, not {}", self.name(key), kind(&v))))?;
        count(n, &self.name(key), max)
    }

    /// Boolean field `key`; false when it is not there.
    pub(crate) fn flag(&self, key: &str) -> Result<bool, JsValue> {
        let v = self.value(key)?;
        if v.is_undefined() {
            return Ok(false);
        }
        v.as_bool().ok_or_else(|| bad(format!("{} must be true or false, not {}", self.name(key), kind(&v))))
    }

    /// Function field `key`, when it is there.
    pub(crate) fn function(&self, key: &str) -> Result<Option<js_sys::Function>, JsValue> {
        let v = self.value(key)?;
        if v.is_undefined() {
            return Ok(None);
        }
        v.dyn_into::<js_sys::Function>().map(Some).map_err(|v| bad(format!("{} must be a function, not {}", self.name(key), kind(&v))))
    }
}

/// The enumerable own properties of object `value` with string keys, as `(key, value)`.
/// Read through `Reflect`, so a Proxy's or getter's exception is an error here.
pub(crate) fn entries(value: &JsValue, what: &str) -> Result<Vec<(String, JsValue)>, JsValue> {
    if !value.is_object() {
        return Err(bad(format!("{what} must be an object, not {}", kind(value))));
    }
    let object: &js_sys::Object = value.unchecked_ref();
    let mut out = Vec::new();
    for key in js_sys::Reflect::own_keys(value).map_err(|e| thrown(what, &e))?.iter() {
        let Some(name) = key.as_string() else { continue }; // a symbol
        let descriptor = js_sys::Reflect::get_own_property_descriptor(object, &key).map_err(|e| thrown(what, &e))?;
        let enumerable =
            descriptor.is_object() && js_sys::Reflect::get(&descriptor, &"enumerable".into()).map_err(|e| thrown(what, &e))?.is_truthy();
        if enumerable {
            out.push((name, js_sys::Reflect::get(value, &key).map_err(|e| thrown(what, &e))?));
        }
    }
    Ok(out)
}

/// Panic on purpose: how `tests/wasm/bad-arguments.cjs` checks the hook (the message and
/// location reach `console.error` and `lastPanic()`, and later calls throw `INTERNAL`).
/// Not part of the API (no TypeScript type); it leaves the module unusable, as any panic
/// does.
#[wasm_bindgen(js_name = __panicForTests, skip_typescript)]
pub fn panic_for_tests() {
    panic!("a panic on purpose, for the tests");
}
