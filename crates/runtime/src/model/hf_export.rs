//! Write a GGUF model as a Hugging Face checkpoint: `config.json`, `model.safetensors`
//! (tensors dequantized to F16 or F32, query/key rows of llama un-permuted back to HF's
//! layout), `tokenizer.json` and `tokenizer_config.json` (with the chat template).
//!
//! It is the reference the safetensors loader ([`super::hf`]) is tested against: a GGUF
//! test model goes out through here and comes back through the loader, and the two models'
//! logits are compared. `cargo run -p docmem-runtime --example gguf_to_hf` runs it.

use std::io::BufWriter;
use std::path::Path;

use super::config::{Arch, ModelConfig};
use super::hf::unpermute_rope_rows;
use crate::gguf::{GgufFile, MetaValue};
use crate::quant::dequantize;
use crate::safetensors::{self, Dtype};
use crate::source::ByteSource;
use crate::tokenizer::Tokenizer;
use crate::Error;

/// Writing the tensors fails by the file or by the model.
enum WriteError {
    Io(std::io::Error),
    Lm(Error),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Write the model in `src` (a GGUF file) to `dir` as a Hugging Face checkpoint.
pub fn export_gguf(src: &dyn ByteSource, dir: &Path, dtype: Dtype) -> Result<(), Error> {
    let g = GgufFile::read(src)?;
    let cfg = ModelConfig::from_gguf(&g)?;
    // The checkpoints the safetensors loader reads back: a plain RoPE (Llama 3's scaling is
    // a `rope_scaling` entry there, which that loader refuses).
    // The architectures the safetensors loader takes, by their Hugging Face class.
    let class = match cfg.arch {
        Arch::Llama => "LlamaForCausalLM",
        Arch::Qwen2 => "Qwen2ForCausalLM",
        Arch::Qwen3 => "Qwen3ForCausalLM",
        other => {
            return Err(Error::ModelConfig { reason: format!("a {} model is not written as a Hugging Face checkpoint", other.name()) })
        }
    };
    if g.tensor(super::tensors::ROPE_FREQS).is_some() || cfg.rope_freq_scale != 1.0 {
        return Err(Error::ModelConfig { reason: "a scaled RoPE (rope_freqs.weight) is not written as a Hugging Face checkpoint".into() });
    }
    let tok = Tokenizer::from_gguf(&g)?;
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| Error::Io { what, source: e }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;

    let mut tensors = Vec::new();
    let mut plan = Vec::new();
    for t in &g.tensors {
        let Some((name, heads)) = super::tensors::hf_of_gguf(&t.name, &cfg) else { continue };
        // GGUF dims are innermost first; PyTorch's outermost first.
        let shape: Vec<u64> = t.dims.iter().rev().copied().collect();
        tensors.push((name, shape));
        plan.push((t, heads));
    }
    let path = dir.join("model.safetensors");
    let file = std::fs::File::create(&path).map_err(io(&path))?;
    let mut out = BufWriter::new(file);
    safetensors::write::<WriteError>(&tensors, dtype, &mut out, |i| {
        let (t, heads) = plan[i];
        let bytes = g.tensor_bytes(src, t).map_err(WriteError::Lm)?;
        let mut v = Vec::new();
        dequantize(t.ggml_type, &bytes, &mut v)
            .map_err(|_| WriteError::Lm(Error::TensorShape { name: t.name.clone(), found: t.dims.clone(), expected: t.dims.clone() }))?;
        let cols = t.dims.first().copied().unwrap_or(1) as usize;
        Ok(match heads {
            Some(h) => unpermute_rope_rows(&v, h, cols),
            None => v,
        })
    })
    .map_err(|e| match e {
        WriteError::Lm(e) => e,
        WriteError::Io(e) => io(&path)(e),
    })?;
    std::io::Write::flush(&mut out).map_err(io(&path))?;

    let config = serde_json::json!({
        "architectures": [class],
        "model_type": cfg.arch.name(),
        "hidden_size": cfg.n_embd,
        "num_hidden_layers": cfg.n_layer,
        "num_attention_heads": cfg.n_head,
        "num_key_value_heads": cfg.n_head_kv,
        "head_dim": cfg.head_dim,
        "intermediate_size": cfg.n_ff,
        "vocab_size": cfg.vocab,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope_base,
        "max_position_embeddings": cfg.context_length,
        "tie_word_embeddings": g.tensor(super::tensors::HEAD.0).is_none(),
        "torch_dtype": if dtype == Dtype::F32 { "float32" } else { "float16" },
    });
    let text = |id: Option<u32>| id.and_then(|i| tok.token_str(i)).map(str::to_owned);
    let tok_config = serde_json::json!({
        "bos_token": text(tok.bos()),
        "eos_token": text(tok.eos()),
        "add_bos_token": tok.adds_bos(),
        "chat_template": g.get("tokenizer.chat_template").and_then(MetaValue::as_str),
    });
    let write_json = |name: &str, v: &serde_json::Value| -> Result<(), Error> {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).map_err(std::io::Error::from).map_err(io(&p))?).map_err(io(&p))
    };
    write_json("config.json", &config)?;
    write_json("tokenizer_config.json", &tok_config)?;
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, tok.to_hf_json()?).map_err(io(&p))?;
    Ok(())
}
