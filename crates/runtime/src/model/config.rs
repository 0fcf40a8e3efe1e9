//! A decoder's hyper-parameters, read from GGUF metadata (`{arch}.block_count`, …).

use crate::gguf::{GgufFile, MetaValue};
use crate::Error;

/// The decoder families docmem runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arch {
    /// Llama (SmolLM2, Llama 2/3): RoPE on adjacent pairs (GGUF permutes Q/K for it).
    Llama,
    /// Qwen2 / Qwen2.5 (MemReader): biases on Q/K/V, RoPE on split halves (NeoX).
    Qwen2,
    /// Qwen3: no Q/K/V biases; each head's queries and keys RMS-normed before RoPE (NeoX);
    /// heads may be wider than `n_embd / n_head`.
    Qwen3,
}

impl Arch {
    /// The `general.architecture` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    /// The architecture a `general.architecture` name names, if docmem runs it.
    pub fn from_name(name: &str) -> Option<Arch> {
        [Arch::Llama, Arch::Qwen2, Arch::Qwen3].into_iter().find(|a| a.name() == name)
    }

    /// Whether RoPE rotates the two halves of each head (NeoX) rather than adjacent pairs.
    pub fn rope_neox(self) -> bool {
        matches!(self, Arch::Qwen2 | Arch::Qwen3)
    }

    /// Whether its blocks add biases to Q, K and V.
    pub fn has_qkv_bias(self) -> bool {
        matches!(self, Arch::Qwen2)
    }

    /// Whether each head's queries and keys are RMS-normed before RoPE.
    pub fn has_head_norms(self) -> bool {
        matches!(self, Arch::Qwen3)
    }
}

/// Decoder hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Family.
    pub arch: Arch,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Hidden width.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (GQA: fewer than query heads).
    pub n_head_kv: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Longest context trained.
    pub context_length: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Dimensions of each head that RoPE rotates.
    pub rope_dims: usize,
}

/// The widest head the runtime takes (the GPU attention's limit; the CPU's RoPE table).
pub const MAX_HEAD_DIM: usize = 512;

fn param(g: &GgufFile, arch: &str, key: &str) -> Result<usize, Error> {
    let full = format!("{arch}.{key}");
    g.get(&full).and_then(MetaValue::as_u64).filter(|&v| v > 0 && v < (1 << 24)).map(|v| v as usize).ok_or(Error::BadParam { key: full })
}

impl ModelConfig {
    /// Read the hyper-parameters of a GGUF file.
    pub fn from_gguf(g: &GgufFile) -> Result<Self, Error> {
        let name = g.architecture().unwrap_or("").to_owned();
        let arch = Arch::from_name(&name).ok_or(Error::UnsupportedArch { arch: name })?;
        let a = arch.name();
        let n_embd = param(g, a, "embedding_length")?;
        let n_head = param(g, a, "attention.head_count")?;
        let n_head_kv = param(g, a, "attention.head_count_kv").unwrap_or(n_head);
        // A head's width: `attention.key_length` where the file says it (Qwen3's heads are
        // wider than `n_embd / n_head`), else the hidden width split over the heads.
        let (head_dim, head_key) = match g.get(&format!("{a}.attention.key_length")) {
            Some(_) => (param(g, a, "attention.key_length")?, "attention.key_length"),
            None if n_embd.is_multiple_of(n_head) => (n_embd / n_head, "embedding_length"),
            None => return Err(Error::BadParam { key: format!("{a}.attention.head_count (it does not divide {a}.embedding_length)") }),
        };
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(Error::BadParam { key: format!("{a}.attention.head_count_kv (it does not divide {a}.attention.head_count)") });
        }
        // Even, for RoPE's pairs; at most 512, as the attention kernels take (models have
        // 64 to 256).
        if !head_dim.is_multiple_of(2) || head_dim > MAX_HEAD_DIM {
            return Err(Error::BadParam {
                key: format!("{a}.{head_key} (a head {head_dim} wide; an even width up to {MAX_HEAD_DIM} runs)"),
            });
        }
        // Widths a 32-bit (wasm) address space multiplies safely; real models stay far below.
        if (n_head as u64) * (head_dim as u64) > 1 << 20 {
            return Err(Error::BadParam { key: format!("{a}.attention.head_count ({n_head} heads of {head_dim})") });
        }
        // A scaled RoPE stated as metadata (YaRN's long-context Qwen files, a linear-scaled
        // Llama 2 fine-tune) turns every angle otherwise: refused, never run with plain
        // angles. (Llama 3 states its scaling as the `rope_freqs.weight` tensor, which runs.)
        let scaling = g.get(&format!("{a}.rope.scaling.type")).and_then(MetaValue::as_str).unwrap_or("none");
        let factor = g.get(&format!("{a}.rope.scaling.factor")).and_then(MetaValue::as_f64).unwrap_or(1.0);
        if !(scaling == "none" || (scaling == "linear" && factor == 1.0)) {
            return Err(Error::ModelConfig {
                reason: format!("its RoPE is scaled ({a}.rope.scaling.type {scaling}, factor {factor}), which docmem does not run"),
            });
        }
        if g.get(&format!("{a}.attention.value_length")).is_some() && param(g, a, "attention.value_length")? != head_dim {
            return Err(Error::BadParam { key: format!("{a}.attention.value_length") });
        }
        let vocab = g
            .tensor(super::tensors::TOKEN_EMBEDDINGS.0)
            .and_then(|t| t.dims.get(1).copied())
            .map(|v| v as usize)
            .ok_or(Error::MissingTensor { name: super::tensors::TOKEN_EMBEDDINGS.0.into() })?;
        let float = |key: &str, default: f32| -> Result<f32, Error> {
            let full = format!("{a}.{key}");
            match g.get(&full) {
                None => Ok(default),
                Some(v) => v.as_f64().map(|x| x as f32).filter(|x| x.is_finite() && *x > 0.0).ok_or(Error::BadParam { key: full }),
            }
        };
        Ok(ModelConfig {
            arch,
            n_layer: param(g, a, "block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: param(g, a, "feed_forward_length")?,
            vocab,
            context_length: param(g, a, "context_length").unwrap_or(4096),
            rms_eps: float("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope_base: float("rope.freq_base", 10_000.0)?,
            rope_dims: param(g, a, "rope.dimension_count").unwrap_or(head_dim).min(head_dim),
        })
    }

    /// Width of the key (and value) vectors of one token: `n_head_kv · head_dim`.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Width of the queries (and of attention's output) of one token: `n_head · head_dim`,
    /// `n_embd` except where heads are wider (Qwen3).
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }
}
