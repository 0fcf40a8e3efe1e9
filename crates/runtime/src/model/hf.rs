//! Hugging Face checkpoints: `config.json` and `model.safetensors` (or shards listed in
//! `model.safetensors.index.json`) for the `llama` and `qwen2` architectures, quantized on
//! load so that published checkpoints (the MemReader) run without a conversion step.
//!
//! Two things differ from GGUF. Names: `model.layers.N.self_attn.q_proj.weight` and so on.
//! And RoPE layout for llama: HF rotates the two halves of each head (`rotate_half`), while
//! llama.cpp's converter permutes the query and key rows so that adjacent pairs rotate. We
//! apply the same permutation on load, so one decoder serves both sources (qwen2 keeps the
//! halves in both, and is not permuted).

use std::path::{Path, PathBuf};

use super::config::{Arch, ModelConfig};
use super::tensors::{self, BlockTensor};
use super::weights::{Block, Weights};
use crate::cpu::matmul::QMatrix;
use crate::gguf::GgmlType;
use crate::quant::{quantize_q4_0, quantize_q8_0};
use crate::safetensors::SafetensorsFile;
use crate::source::{ByteSource, FileSource, MemorySource};
use crate::Error;

/// The block format matrices are quantized to on load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[non_exhaustive]
pub enum LoadQuant {
    /// 8-bit blocks (near-lossless; the default).
    #[default]
    Q8_0,
    /// 4-bit blocks (half the memory, some loss).
    Q4_0,
}

/// An opened checkpoint: its configuration and safetensors files (in a directory, or in
/// memory).
pub struct HfCheckpoint {
    /// `config.json`.
    pub config: serde_json::Value,
    files: Vec<(Box<dyn ByteSource>, SafetensorsFile)>,
}

impl std::fmt::Debug for HfCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfCheckpoint").field("files", &self.files.len()).finish()
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, Error> {
    let text = std::fs::read(path).map_err(|e| Error::ModelConfig { reason: format!("cannot read {}: {e}", path.display()) })?;
    serde_json::from_slice(&text).map_err(|e| Error::ModelConfig { reason: format!("{}: {e}", path.display()) })
}

/// Whether `dir` looks like a Hugging Face checkpoint.
pub fn is_checkpoint(dir: &Path) -> bool {
    dir.is_dir() && dir.join("config.json").is_file()
}

impl HfCheckpoint {
    /// Open `dir`: `config.json` and `model.safetensors`, or the shards named by
    /// `model.safetensors.index.json`. Only headers are read here.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let config = read_json(&dir.join("config.json"))?;
        let index = dir.join("model.safetensors.index.json");
        let names: Vec<PathBuf> = if index.is_file() {
            let idx = read_json(&index)?;
            let map = idx
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| Error::ModelConfig { reason: format!("{}: no weight_map", index.display()) })?;
            let mut files: Vec<String> = map.values().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            files.sort();
            files.dedup();
            // Shard names come from the file: keep them inside the checkpoint directory.
            if let Some(bad) = files.iter().find(|f| f.contains('/') || f.contains('\\') || f.contains("..")) {
                return Err(Error::ModelConfig { reason: format!("shard name '{bad}' is not a plain file name") });
            }
            files.into_iter().map(|f| dir.join(f)).collect()
        } else {
            vec![dir.join("model.safetensors")]
        };
        let mut files: Vec<(Box<dyn ByteSource>, SafetensorsFile)> = Vec::new();
        for path in names {
            let src = FileSource::open(&path)?;
            let st = SafetensorsFile::read(&src)?;
            files.push((Box::new(src), st));
        }
        Ok(HfCheckpoint { config, files })
    }

    /// A checkpoint held in memory: `config.json`'s bytes and one `model.safetensors`.
    /// Only the header is parsed here.
    pub fn from_memory(config: &[u8], safetensors: Vec<u8>) -> Result<Self, Error> {
        Self::from_sources(config, vec![Box::new(MemorySource::new(safetensors))])
    }

    /// A checkpoint whose safetensors files (one, or every shard, in any order) are read
    /// through `shards` by offset, as a page reads the files a user dropped: only their
    /// headers are read here, and each tensor when it is loaded.
    pub fn from_sources(config: &[u8], shards: Vec<Box<dyn ByteSource>>) -> Result<Self, Error> {
        let config = serde_json::from_slice(config).map_err(|e| Error::ModelConfig { reason: format!("config.json: {e}") })?;
        if shards.is_empty() {
            return Err(Error::ModelConfig {
                reason: "no .safetensors file: a checkpoint's weights are in model.safetensors or its shards".into(),
            });
        }
        let mut files = Vec::with_capacity(shards.len());
        for src in shards {
            let st = SafetensorsFile::read(src.as_ref())?;
            files.push((src, st));
        }
        Ok(HfCheckpoint { config, files })
    }

    fn find(&self, name: &str) -> Option<&(Box<dyn ByteSource>, SafetensorsFile)> {
        self.files.iter().find(|(_, st)| st.tensor(name).is_some())
    }

    /// How many tensors the checkpoint's files hold.
    pub fn tensor_count(&self) -> usize {
        self.files.iter().map(|(_, st)| st.names().count()).sum()
    }

    /// Whether a tensor exists in any shard.
    pub fn has(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// A tensor in f32, checked against `shape` (outermost first).
    pub fn read_f32(&self, name: &str, shape: &[u64]) -> Result<Vec<f32>, Error> {
        let (src, st) = self.find(name).ok_or_else(|| Error::MissingTensor { name: name.to_owned() })?;
        st.read_f32(src.as_ref(), name, shape)
    }
}

fn usize_key(c: &serde_json::Value, key: &str) -> Result<usize, Error> {
    c.get(key)
        .and_then(serde_json::Value::as_u64)
        .filter(|&v| v > 0 && v < (1 << 24))
        .map(|v| v as usize)
        .ok_or_else(|| Error::BadParam { key: format!("config.json {key}") })
}

fn float_key(c: &serde_json::Value, key: &str, default: f32) -> Result<f32, Error> {
    match c.get(key) {
        None | Some(serde_json::Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .map(|x| x as f32)
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| Error::BadParam { key: format!("config.json {key}") }),
    }
}

impl ModelConfig {
    /// Hyper-parameters from a Hugging Face `config.json`.
    pub fn from_hf(c: &serde_json::Value) -> Result<Self, Error> {
        let model_type = c.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        let arch = match model_type {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            other => return Err(Error::UnsupportedArch { arch: other.to_owned() }),
        };
        // Scaled RoPE variants (yarn, llama3, …) change the angles; we do not run them.
        if let Some(scaling) = c.get("rope_scaling").filter(|v| !v.is_null()) {
            return Err(Error::ModelConfig { reason: format!("rope_scaling {scaling} is not supported") });
        }
        let n_embd = usize_key(c, "hidden_size")?;
        let n_head = usize_key(c, "num_attention_heads")?;
        let n_head_kv = usize_key(c, "num_key_value_heads").unwrap_or(n_head);
        // Qwen3 states its (wider) heads; the others split the hidden width over them.
        let head_dim = match c.get("head_dim").filter(|v| !v.is_null()) {
            Some(_) => usize_key(c, "head_dim")?,
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => return Err(Error::BadParam { key: "config.json num_attention_heads".into() }),
        };
        if !n_head.is_multiple_of(n_head_kv) || !head_dim.is_multiple_of(2) || head_dim > super::config::MAX_HEAD_DIM {
            return Err(Error::BadParam { key: "config.json num_attention_heads".into() });
        }
        Ok(ModelConfig {
            arch,
            n_layer: usize_key(c, "num_hidden_layers")?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: usize_key(c, "intermediate_size")?,
            vocab: usize_key(c, "vocab_size")?,
            context_length: usize_key(c, "max_position_embeddings").unwrap_or(4096),
            rms_eps: float_key(c, "rms_norm_eps", 1e-6)?,
            rope_base: float_key(c, "rope_theta", 10_000.0)?,
            rope_dims: head_dim,
            rope_freq_scale: 1.0,
            sliding_window: None,
            rope_attn_factor: 1.0,
            rope_original_context: None,
            long_rope: false,
        })
    }
}

/// llama.cpp's converter permutation of query/key rows: within each head, row
/// `s·(d/2) + j` (half `s`, pair `j`) moves to `2j + s`, so that RoPE on adjacent pairs
/// equals HF's rotation of halves.
pub fn permute_rope_rows(w: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    move_rope_rows(w, heads, cols, true)
}

/// The inverse of [`permute_rope_rows`] (GGUF layout back to HF's).
pub fn unpermute_rope_rows(w: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    move_rope_rows(w, heads, cols, false)
}

fn move_rope_rows(w: &[f32], heads: usize, cols: usize, to_gguf: bool) -> Vec<f32> {
    let hd = w.len() / cols / heads;
    let mut out = vec![0f32; w.len()];
    for h in 0..heads {
        for s in 0..2 {
            for j in 0..hd / 2 {
                let (hf, gguf) = (h * hd + s * (hd / 2) + j, h * hd + 2 * j + s);
                let (from, to) = if to_gguf { (hf, gguf) } else { (gguf, hf) };
                out[to * cols..(to + 1) * cols].copy_from_slice(&w[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

impl Weights {
    /// Read a checkpoint's tensors, quantizing every matrix to `quant`.
    pub fn from_hf(ck: &HfCheckpoint, cfg: &ModelConfig, quant: LoadQuant) -> Result<Self, Error> {
        let (e, kv, ff, vocab) = (cfg.n_embd as u64, cfg.kv_width() as u64, cfg.n_ff as u64, cfg.vocab as u64);
        let (qw, hd) = (cfg.q_width() as u64, cfg.head_dim as u64);
        if !cfg.n_embd.is_multiple_of(32) || !cfg.n_ff.is_multiple_of(32) || !cfg.q_width().is_multiple_of(32) {
            return Err(Error::BadParam {
                key:
                    "config.json hidden_size, intermediate_size or num_attention_heads × head_dim (multiples of 32 are needed to quantize)"
                        .into(),
            });
        }
        let matrix = |name: &str, rows: u64, cols: u64, permute_heads: Option<usize>| -> Result<QMatrix, Error> {
            let mut w = ck.read_f32(name, &[rows, cols])?;
            if let Some(heads) = permute_heads {
                w = permute_rope_rows(&w, heads, cols as usize);
            }
            let mut data = Vec::new();
            let ty = match quant {
                LoadQuant::Q8_0 => {
                    quantize_q8_0(&w, &mut data);
                    GgmlType::Q8_0
                }
                LoadQuant::Q4_0 => {
                    quantize_q4_0(&w, &mut data);
                    GgmlType::Q4_0
                }
            };
            QMatrix::new(ty, rows as usize, cols as usize, data).ok_or_else(|| Error::TensorShape {
                name: name.to_owned(),
                found: vec![rows, cols],
                expected: vec![rows, cols],
            })
        };
        // The layer count comes from config.json: reserve no more layers than the
        // checkpoint has tensors (see `Weights::load`).
        let mut layers = Vec::with_capacity(cfg.n_layer.min(ck.tensor_count()));
        for i in 0..cfg.n_layer {
            let optional = |t: BlockTensor, len: u64| -> Result<Option<Vec<f32>>, Error> {
                t.exists_in(cfg.arch).then(|| ck.read_f32(&t.hf(i), &[len])).transpose()
            };
            // Hugging Face keeps Q and K in halves; a llama model's rows are permuted to
            // the GGUF layout the kernels take.
            let m = |t: BlockTensor, rows: u64, cols: u64| matrix(&t.hf(i), rows, cols, t.rope_heads(cfg));
            layers.push(Block {
                attn_norm: ck.read_f32(&BlockTensor::AttnNorm.hf(i), &[e])?,
                wq: m(BlockTensor::Q, qw, e)?,
                wk: m(BlockTensor::K, kv, e)?,
                wv: m(BlockTensor::V, kv, e)?,
                bq: optional(BlockTensor::QBias, qw)?,
                bk: optional(BlockTensor::KBias, kv)?,
                bv: optional(BlockTensor::VBias, kv)?,
                q_norm: optional(BlockTensor::QNorm, hd)?,
                k_norm: optional(BlockTensor::KNorm, hd)?,
                wo: m(BlockTensor::Output, e, qw)?,
                ffn_norm: ck.read_f32(&BlockTensor::FfnNorm.hf(i), &[e])?,
                w_gate: m(BlockTensor::Gate, ff, e)?,
                w_up: m(BlockTensor::Up, ff, e)?,
                w_down: m(BlockTensor::Down, e, ff)?,
                post_norms: [optional(BlockTensor::AttnPostNorm, e)?, optional(BlockTensor::FfnPostNorm, e)?],
            });
        }
        let output = if ck.has(tensors::HEAD.1) { Some(matrix(tensors::HEAD.1, vocab, e, None)?) } else { None };
        Ok(Weights {
            token_embd: matrix(tensors::TOKEN_EMBEDDINGS.1, vocab, e, None)?,
            layers,
            output_norm: ck.read_f32(tensors::OUTPUT_NORM.1, &[e])?,
            output,
            rope_freqs: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_permutation_matches_llama_cpp_and_inverts() {
        // llama.cpp's convert_hf_to_gguf.py: w.reshape(heads, 2, d/2, cols).swapaxes(1, 2)
        // for 2 heads of 4 rows, one column: HF rows [a0 a1 b0 b1] per head → [a0 b0 a1 b1].
        let w: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let p = permute_rope_rows(&w, 2, 1);
        assert_eq!(p, [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
        let wide: Vec<f32> = (0..64 * 3).map(|i| i as f32).collect();
        assert_eq!(unpermute_rope_rows(&permute_rope_rows(&wide, 4, 3), 4, 3), wide);
    }

    #[test]
    fn config_json_errors_name_the_key() {
        let c = serde_json::json!({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4});
        let e = ModelConfig::from_hf(&c).unwrap_err().to_string();
        assert!(e.contains("num_hidden_layers"), "{e}");
        let c = serde_json::json!({"model_type": "gpt_neox"});
        assert!(matches!(ModelConfig::from_hf(&c), Err(Error::UnsupportedArch { .. })));
        let c = serde_json::json!({"model_type": "llama", "rope_scaling": {"type": "yarn"}});
        assert!(matches!(ModelConfig::from_hf(&c), Err(Error::ModelConfig { .. })));
    }
}
