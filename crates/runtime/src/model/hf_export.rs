//! Write a GGUF model as a Hugging Face checkpoint: `config.json`, `model.safetensors`
//! (tensors dequantized to F16 or F32, query/key rows of llama un-permuted back to HF's
//! layout), `tokenizer.json` and `tokenizer_config.json` (with the chat template).
//!
//! It is the reference the safetensors loader ([`super::hf`]) is tested against: a GGUF
//! test model goes out through here and comes back through the loader, and the two models'
//! logits are compared. `cargo run -p docmem-runtime --example gguf_to_hf` runs it.

use std::io::BufWriter;
use std::path::Path;

use super::config::{Arch, ModelConfig, ModelFileError};
use super::hf::unpermute_rope_rows;
use crate::gguf::{GgufFile, MetaValue};
use crate::lm::LmError;
use crate::quant::dequantize;
use crate::safetensors::{self, Dtype};
use crate::source::{ByteSource, SourceError};
use crate::tokenizer::Tokenizer;

/// Writing the tensors fails by the file or by the model.
enum WriteError {
    Io(std::io::Error),
    Lm(LmError),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Where a GGUF tensor goes: its HF name, and the heads to un-permute for (llama Q/K).
fn hf_name(gguf: &str, cfg: &ModelConfig) -> Option<(String, Option<usize>)> {
    let llama = cfg.arch == Arch::Llama;
    let top = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(n) = top {
        return Some((n.to_owned(), None));
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, name) = rest.split_once('.')?;
    let (hf, heads) = match name {
        "attn_norm.weight" => ("input_layernorm.weight", None),
        "attn_q.weight" => ("self_attn.q_proj.weight", llama.then_some(cfg.n_head)),
        "attn_k.weight" => ("self_attn.k_proj.weight", llama.then_some(cfg.n_head_kv)),
        "attn_v.weight" => ("self_attn.v_proj.weight", None),
        "attn_q.bias" => ("self_attn.q_proj.bias", None),
        "attn_k.bias" => ("self_attn.k_proj.bias", None),
        "attn_v.bias" => ("self_attn.v_proj.bias", None),
        "attn_output.weight" => ("self_attn.o_proj.weight", None),
        "ffn_norm.weight" => ("post_attention_layernorm.weight", None),
        "ffn_gate.weight" => ("mlp.gate_proj.weight", None),
        "ffn_up.weight" => ("mlp.up_proj.weight", None),
        "ffn_down.weight" => ("mlp.down_proj.weight", None),
        _ => return None,
    };
    Some((format!("model.layers.{layer}.{hf}"), heads))
}

/// Write the model in `src` (a GGUF file) to `dir` as a Hugging Face checkpoint.
pub fn export_gguf(src: &dyn ByteSource, dir: &Path, dtype: Dtype) -> Result<(), LmError> {
    let g = GgufFile::read(src)?;
    let cfg = ModelConfig::from_gguf(&g)?;
    let tok = Tokenizer::from_gguf(&g)?;
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| LmError::Source(SourceError::Io { what, source: e })
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;

    let mut tensors = Vec::new();
    let mut plan = Vec::new();
    for t in &g.tensors {
        let Some((name, heads)) = hf_name(&t.name, &cfg) else { continue };
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
        let bytes = g.tensor_bytes(src, t).map_err(|e| WriteError::Lm(ModelFileError::Read(e).into()))?;
        let mut v = Vec::new();
        dequantize(t.ggml_type, &bytes, &mut v).map_err(|_| {
            WriteError::Lm(ModelFileError::TensorShape { name: t.name.clone(), found: t.dims.clone(), expected: t.dims.clone() }.into())
        })?;
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
        "architectures": [if cfg.arch == Arch::Llama { "LlamaForCausalLM" } else { "Qwen2ForCausalLM" }],
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
        "tie_word_embeddings": g.tensor("output.weight").is_none(),
        "torch_dtype": if dtype == Dtype::F32 { "float32" } else { "float16" },
    });
    let text = |id: Option<u32>| id.and_then(|i| tok.token_str(i)).map(str::to_owned);
    let tok_config = serde_json::json!({
        "bos_token": text(tok.bos()),
        "eos_token": text(tok.eos()),
        "add_bos_token": tok.adds_bos(),
        "chat_template": g.get("tokenizer.chat_template").and_then(MetaValue::as_str),
    });
    let write_json = |name: &str, v: &serde_json::Value| -> Result<(), LmError> {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).map_err(std::io::Error::from).map_err(io(&p))?).map_err(io(&p))
    };
    write_json("config.json", &config)?;
    write_json("tokenizer_config.json", &tok_config)?;
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, tok.to_hf_json()?).map_err(io(&p))?;
    Ok(())
}
