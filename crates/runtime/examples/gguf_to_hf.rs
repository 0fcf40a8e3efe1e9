//! Write a GGUF model as a Hugging Face checkpoint directory (F16 safetensors by default):
//! `cargo run --release -p docmem-runtime --example gguf_to_hf -- MODEL.gguf OUT_DIR [f16|f32|bf16]`.
//! The safetensors loader's test makes its checkpoint this way.

use std::path::PathBuf;
use std::process::ExitCode;

use docmem_runtime::model::hf_export::export_gguf;
use docmem_runtime::safetensors::Dtype;
use docmem_runtime::source::FileSource;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(model), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("usage: gguf_to_hf MODEL.gguf OUT_DIR [f16|f32|bf16]");
        return ExitCode::from(2);
    };
    let dtype = match args.get(2).map(String::as_str) {
        None | Some("f16") => Dtype::F16,
        Some("f32") => Dtype::F32,
        Some("bf16") => Dtype::BF16,
        Some(other) => {
            eprintln!("unknown dtype {other} (f16, f32 or bf16)");
            return ExitCode::from(2);
        }
    };
    let result = FileSource::open(&PathBuf::from(model)).and_then(|src| export_gguf(&src, &PathBuf::from(out), dtype));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
