//! Loading a model's files onto a [`WasmDevice`]: the one place that tells a GGUF file from
//! a Hugging Face checkpoint, describes a file the user chose before its weights are read,
//! and puts the model where the device is (an `Lm` or an embedder, on the CPU or on
//! WebGPU). The npm package's worker fetches and stores the files (that is
//! storage, the platform's); what they are and where they run is decided here.
//!
//! Files arrive as `{path, size, read(offset, length) → Uint8Array}` with a synchronous
//! `read` (Node's `fs.readSync`; in a browser worker `FileReaderSync` over an OPFS file or
//! a file the user chose), so a model's weights are read a block at a time and never held
//! whole in JavaScript.

use docmem_core::{ErrorCode, HasErrorCode};
use docmem_runtime::model::ModelFacts;
use docmem_runtime::source::{ByteSource, RangeSource};
use wasm_bindgen::prelude::*;

use crate::boundary::{self, Options};
use crate::{error_with, js_range_source, load_options, HfFiles, WasmDevice, WasmEmbedder, WasmLm};

/// One file of a model.
struct ModelFile {
    /// Its path in the model (`model.gguf`, `config.json`, `1_Pooling/config.json`, …).
    path: String,
    source: RangeSource,
}

impl ModelFile {
    /// The file's name, without its folders.
    fn base_name(&self) -> &str {
        self.path.rsplit(['/', '\\']).next().unwrap_or(&self.path)
    }

    /// The whole file (a small one: a config, a tokenizer, an embedder's weights); a size
    /// this memory cannot hold is an error naming the file, never a failed allocation.
    fn bytes(&self) -> Result<Vec<u8>, String> {
        let size = self.source.len();
        let too_big = || format!("{}: its {size} bytes do not fit in this module's memory", self.path);
        let len = usize::try_from(size).ok().filter(|&n| n <= isize::MAX as usize).ok_or_else(too_big)?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).map_err(|_| too_big())?;
        buf.resize(len, 0);
        self.source.read_at(0, &mut buf).map_err(|e| e.to_string())?;
        Ok(buf)
    }
}

/// `files`, an array of `{path, size, read}`.
fn files_from(files: &JsValue) -> Result<Vec<ModelFile>, JsValue> {
    let list = files
        .dyn_ref::<js_sys::Array>()
        .ok_or_else(|| error_with(ErrorCode::BadArgument, "files must be an array of {path, size, read}"))?;
    let mut out = Vec::new();
    for (i, file) in list.iter().enumerate() {
        let f = Options::new(&file, "file", &["path", "size", "read"])?;
        let path = f.string("path")?;
        let size = f
            .value("size")?
            .as_f64()
            .ok_or_else(|| error_with(ErrorCode::BadArgument, format!("file {i} ('{path}'): size must be a number")))?;
        let read = f
            .function("read")?
            .ok_or_else(|| error_with(ErrorCode::BadArgument, format!("file {i} ('{path}'): read must be a function")))?;
        out.push(ModelFile { source: js_range_source(size, read)?, path });
    }
    if out.is_empty() {
        return Err(error_with(ErrorCode::BadArgument, "files is empty: a model has at least one file"));
    }
    Ok(out)
}

/// `e` with its message prefixed by the model's name (its code kept; `MODEL_LOAD_FAILED`
/// where it had none).
fn named(name: &str, e: JsValue) -> JsValue {
    match e.dyn_ref::<js_sys::Error>() {
        Some(error) => {
            error.set_message(&format!("{name}: {}", error.message()));
            if js_sys::Reflect::get(error, &"code".into()).map_or(true, |c| c.is_undefined()) {
                let _ = js_sys::Reflect::set(error, &"code".into(), &ErrorCode::ModelLoadFailed.as_str().into());
            }
            e
        }
        None => load_failed(name, format_args!("{e:?}")),
    }
}

/// `MODEL_LOAD_FAILED` naming the model: `why` it could not be loaded.
fn load_failed(name: &str, why: impl std::fmt::Display) -> JsValue {
    error_with(ErrorCode::ModelLoadFailed, format!("{name}: {why}"))
}

/// A runtime error as a JS error naming the model.
fn failed(name: &str, e: impl std::fmt::Display + HasErrorCode) -> JsValue {
    error_with(e.code(), format!("{name}: {e}"))
}

/// A language model's files, told apart by their names.
enum LmFiles {
    /// One GGUF file.
    Gguf(ModelFile),
    /// A Hugging Face checkpoint: its small files read whole, its shards a tensor at a time.
    Checkpoint(HfFiles),
}

impl LmFiles {
    fn from(files: Vec<ModelFile>) -> Result<LmFiles, String> {
        let is_shard = |f: &ModelFile| f.base_name().to_ascii_lowercase().ends_with(".safetensors");
        if !files.iter().any(is_shard) {
            let mut files = files;
            return match files.len() {
                1 => Ok(LmFiles::Gguf(files.remove(0))),
                n => {
                    Err(format!("{n} files and no .safetensors among them: a language model is one GGUF file or a Hugging Face checkpoint"))
                }
            };
        }
        let find = |name: &str| files.iter().find(|f| f.base_name() == name);
        let read = |name: &str| find(name).map(ModelFile::bytes).transpose();
        let needed =
            |name: &str| read(name)?.ok_or_else(|| format!("a Hugging Face checkpoint needs {name} beside its .safetensors files"));
        let (config, tokenizer, tokenizer_config) = (needed("config.json")?, needed("tokenizer.json")?, read("tokenizer_config.json")?);
        let shards = files.into_iter().filter(is_shard).map(|f| Box::new(f.source) as Box<dyn ByteSource>).collect();
        Ok(LmFiles::Checkpoint(HfFiles { config, tokenizer, tokenizer_config, shards }))
    }
}

#[wasm_bindgen(js_class = Device)]
impl WasmDevice {
    /// Load the language model `name` from `files` (`[{path, size, read}]`: one GGUF file,
    /// or a Hugging Face checkpoint's `config.json`, `tokenizer.json`, optional
    /// `tokenizer_config.json` and `.safetensors` shards) onto this device (the CPU or
    /// WebGPU), an `Lm` that `addDocument`, `ask` and `draftMemory` take alike. `options.describe`, for a file the user chose: called with `{line, facts}`
    /// (one line for a person; the runtime's `ModelFacts`) from a GGUF file's header
    /// before its weights are read; the model is then refused (`MODEL_LOAD_FAILED`) when
    /// docmem cannot run it, or when on the CPU its weights and cache would not fit in a
    /// page's wasm memory. Errors name the model.
    #[wasm_bindgen(js_name = loadLm)]
    pub fn load_lm(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Array<{path: string, size: number, read: (offset: number, length: number) => Uint8Array}>")]
        files: JsValue,
        #[wasm_bindgen(unchecked_param_type = "{describe?: (about: {line: string, facts: any}) => void}")] options: JsValue,
    ) -> Result<WasmLm, JsValue> {
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let describe = Options::new(&options, "options", &["describe"])?.function("describe")?;
        let files = LmFiles::from(files_from(&files).map_err(|e| named(&name, e))?).map_err(|e| load_failed(&name, e))?;
        if let (Some(describe), LmFiles::Gguf(file)) = (&describe, &files) {
            self.describe(&name, file, describe)?;
        }
        self.load_lm_files(&name, files)
    }

    /// Load the sentence embedder `name` from `files` (`[{path, size, read}]`: the files
    /// `new Embedder` takes) onto this device (on WebGPU its vectors are awaited, as every
    /// call that embeds does); `onCpu` keeps it in wasm on any device. Errors name the
    /// model.
    #[wasm_bindgen(js_name = loadEmbedder)]
    pub fn load_embedder(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Array<{path: string, size: number, read: (offset: number, length: number) => Uint8Array}>")]
        files: JsValue,
        #[wasm_bindgen(unchecked_param_type = "{onCpu?: boolean}")] options: JsValue,
    ) -> Result<WasmEmbedder, JsValue> {
        use docmem_runtime::embed::{EmbedderOptions, Precision, SentenceEmbedder};
        boundary::ready()?;
        let name = boundary::string(&name, "name")?;
        let on_cpu = Options::new(&options, "options", &["onCpu"])?.flag("onCpu")?;
        let mut bytes = std::collections::BTreeMap::new();
        for file in files_from(&files).map_err(|e| named(&name, e))? {
            bytes.insert(file.path.clone(), file.bytes().map_err(|e| load_failed(&name, e))?);
        }
        #[cfg(feature = "gpu")]
        if let (false, docmem_runtime::device::Device::Gpu(gpu)) = (on_cpu, &self.chosen().device) {
            return Ok(WasmEmbedder::wrap(SentenceEmbedder::from_files_onto_gpu(bytes, &name, gpu.clone()).map_err(|e| failed(&name, e))?));
        }
        let _ = on_cpu;
        let options = EmbedderOptions { precision: Precision::DEFAULT, threads: crate::WASM_THREADS };
        Ok(WasmEmbedder::wrap(SentenceEmbedder::from_files(bytes, &name, options).map_err(|e| failed(&name, e))?))
    }
}

impl WasmDevice {
    /// Tell `describe` what the GGUF `file` is; refuse what cannot run here.
    fn describe(&self, name: &str, file: &ModelFile, describe: &js_sys::Function) -> Result<(), JsValue> {
        let gguf = docmem_runtime::gguf::GgufFile::read(&file.source).map_err(|e| failed(name, e))?;
        let facts = ModelFacts::of_gguf(&gguf);
        let context = load_options().context;
        let line = facts.describe(context);
        let about = crate::shapes::to_js(&serde_json::json!({ "line": line, "facts": facts }))?;
        // What the page does with the description is its own affair.
        let _ = describe.call1(&JsValue::NULL, &about);
        let refusal = match &facts.refusal {
            Some(_) => Some(line),
            None if !self.chosen().on_gpu() => facts.too_big_for_wasm_cpu(context),
            None => None,
        };
        match refusal {
            Some(why) => Err(load_failed(name, why)),
            None => Ok(()),
        }
    }

    fn load_lm_files(&self, name: &str, files: LmFiles) -> Result<WasmLm, JsValue> {
        use docmem_runtime::lm::Lm;
        #[cfg(feature = "gpu")]
        if let docmem_runtime::device::Device::Gpu(gpu) = &self.chosen().device {
            use docmem_runtime::gpu::GpuTransformer;
            let lm = match files {
                LmFiles::Gguf(file) => Lm::load_onto_gpu(&file.source, &load_options(), gpu.clone()).map_err(|e| failed(name, e))?,
                // An upload that fails is the model's load failing, as for the CPU.
                LmFiles::Checkpoint(files) => files
                    .load()
                    .map_err(|e| named(name, e))?
                    .map_backend(|cpu| GpuTransformer::from_cpu(gpu.clone(), cpu))
                    .map_err(|e| load_failed(name, e))?,
            };
            return Ok(WasmLm::on_gpu(lm, name));
        }
        let lm = match files {
            LmFiles::Gguf(file) => Lm::load_from(&file.source, &load_options()).map_err(|e| failed(name, e))?,
            LmFiles::Checkpoint(files) => files.load().map_err(|e| named(name, e))?,
        };
        Ok(WasmLm::on_cpu(lm, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> ModelFile {
        let bytes = text.as_bytes().to_vec();
        let source = RangeSource::new(
            bytes.len() as u64,
            1 << 20,
            Box::new(move |offset: u64, buf: &mut [u8]| {
                buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
                Ok(())
            }),
        );
        ModelFile { path: path.into(), source }
    }

    #[test]
    fn files_are_told_apart_by_their_names() {
        assert!(matches!(LmFiles::from(vec![file("models/smol.gguf", "GGUF")]), Ok(LmFiles::Gguf(f)) if f.path == "models/smol.gguf"));
        // A checkpoint, its small files read whole, shards in any folder and case.
        let checkpoint = vec![
            file("qwen/config.json", "{}"),
            file("qwen/tokenizer.json", "tok"),
            file("qwen/model-00001-of-00002.safetensors", "a"),
            file("qwen\\model-00002-of-00002.SafeTensors", "b"),
        ];
        match LmFiles::from(checkpoint) {
            Ok(LmFiles::Checkpoint(hf)) => {
                assert_eq!((hf.config.as_slice(), hf.tokenizer.as_slice(), hf.shards.len()), (&b"{}"[..], &b"tok"[..], 2));
                assert!(hf.tokenizer_config.is_none());
            }
            _ => panic!("a checkpoint"),
        }
        let missing = LmFiles::from(vec![file("config.json", "{}"), file("model.safetensors", "a")]);
        assert!(matches!(missing, Err(e) if e.contains("needs tokenizer.json")));
        let two = LmFiles::from(vec![file("a.gguf", "x"), file("config.json", "{}")]);
        assert!(matches!(two, Err(e) if e.contains("2 files and no .safetensors")));
    }
}
