//! A decoder's tensors by role, with their names in GGUF files (llama.cpp's) and in Hugging
//! Face checkpoints: the one table the GGUF loader, the safetensors loader and the exporter
//! all read, so an architecture's tensors are described once.
//!
//! The two architectures share the names; they differ in which tensors exist (qwen2's Q/K/V
//! biases: [`Arch::has_qkv_bias`]) and in how Q and K are laid out (llama.cpp permutes a
//! llama model's Q and K rows for its RoPE on adjacent pairs; Hugging Face keeps them in
//! halves: [`BlockTensor::rope_heads`]).

use super::config::{Arch, ModelConfig};

/// A tensor of each decoder block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockTensor {
    /// RMSNorm weight before attention.
    AttnNorm,
    /// Query projection.
    Q,
    /// Key projection.
    K,
    /// Value projection.
    V,
    /// Query bias (qwen2).
    QBias,
    /// Key bias (qwen2).
    KBias,
    /// Value bias (qwen2).
    VBias,
    /// Each query head's RMSNorm weight (qwen3).
    QNorm,
    /// Each key head's RMSNorm weight (qwen3).
    KNorm,
    /// RMSNorm weight of attention's output, before its residual add (gemma).
    AttnPostNorm,
    /// Attention's output projection.
    Output,
    /// RMSNorm weight before the feed-forward.
    FfnNorm,
    /// SwiGLU gate.
    Gate,
    /// SwiGLU up.
    Up,
    /// SwiGLU down.
    Down,
    /// RMSNorm weight of the feed-forward's output, before its residual add (gemma).
    FfnPostNorm,
    /// Q, K and V stacked in one matrix (phi3's files; split when loaded).
    Qkv,
}

impl BlockTensor {
    /// Every block tensor.
    pub const ALL: [BlockTensor; 17] = [
        BlockTensor::AttnNorm,
        BlockTensor::Q,
        BlockTensor::K,
        BlockTensor::V,
        BlockTensor::QBias,
        BlockTensor::KBias,
        BlockTensor::VBias,
        BlockTensor::QNorm,
        BlockTensor::KNorm,
        BlockTensor::Output,
        BlockTensor::FfnNorm,
        BlockTensor::Gate,
        BlockTensor::Up,
        BlockTensor::Down,
        BlockTensor::AttnPostNorm,
        BlockTensor::FfnPostNorm,
        BlockTensor::Qkv,
    ];

    /// Its name within a block: (GGUF, Hugging Face).
    fn names(self) -> (&'static str, &'static str) {
        match self {
            BlockTensor::AttnNorm => ("attn_norm.weight", "input_layernorm.weight"),
            BlockTensor::Q => ("attn_q.weight", "self_attn.q_proj.weight"),
            BlockTensor::K => ("attn_k.weight", "self_attn.k_proj.weight"),
            BlockTensor::V => ("attn_v.weight", "self_attn.v_proj.weight"),
            BlockTensor::QBias => ("attn_q.bias", "self_attn.q_proj.bias"),
            BlockTensor::KBias => ("attn_k.bias", "self_attn.k_proj.bias"),
            BlockTensor::VBias => ("attn_v.bias", "self_attn.v_proj.bias"),
            BlockTensor::QNorm => ("attn_q_norm.weight", "self_attn.q_norm.weight"),
            BlockTensor::KNorm => ("attn_k_norm.weight", "self_attn.k_norm.weight"),
            BlockTensor::Output => ("attn_output.weight", "self_attn.o_proj.weight"),
            BlockTensor::FfnNorm => ("ffn_norm.weight", "post_attention_layernorm.weight"),
            BlockTensor::Gate => ("ffn_gate.weight", "mlp.gate_proj.weight"),
            BlockTensor::Up => ("ffn_up.weight", "mlp.up_proj.weight"),
            BlockTensor::Down => ("ffn_down.weight", "mlp.down_proj.weight"),
            // Gemma's (whose Hugging Face checkpoints name their pre-FFN norm otherwise; the
            // safetensors loader and the exporter take no gemma).
            BlockTensor::AttnPostNorm => ("post_attention_norm.weight", "post_attention_layernorm.weight"),
            BlockTensor::FfnPostNorm => ("post_ffw_norm.weight", "post_feedforward_layernorm.weight"),
            BlockTensor::Qkv => ("attn_qkv.weight", "self_attn.qkv_proj.weight"),
        }
    }

    /// Its name in block `layer` of a GGUF file.
    pub fn gguf(self, layer: usize) -> String {
        format!("blk.{layer}.{}", self.names().0)
    }

    /// Its name in block `layer` of a Hugging Face checkpoint.
    pub fn hf(self, layer: usize) -> String {
        format!("model.layers.{layer}.{}", self.names().1)
    }

    /// Whether a model of `arch` has it.
    pub fn exists_in(self, arch: Arch) -> bool {
        match self {
            BlockTensor::QBias | BlockTensor::KBias | BlockTensor::VBias => arch.has_qkv_bias(),
            BlockTensor::QNorm | BlockTensor::KNorm => arch.has_head_norms(),
            BlockTensor::AttnPostNorm | BlockTensor::FfnPostNorm => arch.has_post_norms(),
            BlockTensor::Qkv => arch.fuses_projections(),
            _ => true,
        }
    }

    /// For a tensor whose rows llama.cpp permutes for RoPE (a llama model's Q and K), the
    /// heads to permute by between the two layouts.
    pub fn rope_heads(self, cfg: &ModelConfig) -> Option<usize> {
        match (cfg.arch.rope_neox(), self) {
            (false, BlockTensor::Q) => Some(cfg.n_head),
            (false, BlockTensor::K) => Some(cfg.n_head_kv),
            _ => None,
        }
    }

    /// The block tensor a GGUF name names, and its layer.
    pub fn from_gguf(name: &str) -> Option<(BlockTensor, usize)> {
        let (layer, rest) = name.strip_prefix("blk.")?.split_once('.')?;
        let layer = layer.parse().ok()?;
        BlockTensor::ALL.into_iter().find(|t| t.names().0 == rest).map(|t| (t, layer))
    }
}

/// The tensors outside the blocks: (GGUF, Hugging Face) names.
pub const TOKEN_EMBEDDINGS: (&str, &str) = ("token_embd.weight", "model.embed_tokens.weight");
/// The final RMSNorm's weight.
pub const OUTPUT_NORM: (&str, &str) = ("output_norm.weight", "model.norm.weight");
/// The LM head (absent when it is tied to the embeddings).
pub const HEAD: (&str, &str) = ("output.weight", "lm_head.weight");
/// RoPE's per-pair frequency divisors (Llama 3's long-context scaling, which llama.cpp's
/// converter writes as a tensor); absent for a plain RoPE. GGUF only: a Hugging Face
/// checkpoint states the scaling in its `config.json`.
pub const ROPE_FREQS: &str = "rope_freqs.weight";
/// LongRoPE's per-pair factors (Phi-3's 128k-context files) for contexts past the original
/// one, and for those within it.
pub const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
/// See [`ROPE_FACTORS_LONG`].
pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

/// The Hugging Face name of the tensor a GGUF file names, and the heads to un-permute it
/// by (see [`BlockTensor::rope_heads`]); `None` for a tensor a decoder does not have.
pub fn hf_of_gguf(gguf: &str, cfg: &ModelConfig) -> Option<(String, Option<usize>)> {
    if let Some((_, hf)) = [TOKEN_EMBEDDINGS, OUTPUT_NORM, HEAD].into_iter().find(|(g, _)| *g == gguf) {
        return Some((hf.to_owned(), None));
    }
    let (t, layer) = BlockTensor::from_gguf(gguf)?;
    Some((t.hf(layer), t.rope_heads(cfg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_tensor_maps_from_gguf_to_hugging_face() {
        let cfg = ModelConfig {
            arch: Arch::Llama,
            n_layer: 2,
            n_embd: 64,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 16,
            n_ff: 128,
            vocab: 100,
            context_length: 128,
            rms_eps: 1e-5,
            rope_base: 10_000.0,
            rope_dims: 16,
            rope_freq_scale: 1.0,
            sliding_window: None,
            rope_attn_factor: 1.0,
            rope_original_context: None,
            long_rope: false,
        };
        for t in BlockTensor::ALL {
            assert_eq!(BlockTensor::from_gguf(&t.gguf(11)), Some((t, 11)));
            assert_eq!(hf_of_gguf(&t.gguf(3), &cfg), Some((t.hf(3), t.rope_heads(&cfg))));
        }
        assert_eq!(hf_of_gguf("blk.0.attn_q.weight", &cfg), Some(("model.layers.0.self_attn.q_proj.weight".into(), Some(4))));
        assert_eq!(hf_of_gguf("blk.0.attn_k.weight", &cfg).unwrap().1, Some(2));
        let qwen2 = ModelConfig { arch: Arch::Qwen2, ..cfg.clone() };
        assert_eq!(hf_of_gguf("blk.0.attn_q.weight", &qwen2).unwrap().1, None, "qwen2 keeps Q in halves in both layouts");
        assert_eq!(hf_of_gguf("output.weight", &cfg), Some(("lm_head.weight".into(), None)));
        assert_eq!(hf_of_gguf("blk.0.attn_q.scale", &cfg), None);
        assert_eq!(hf_of_gguf("blk.x.attn_q.weight", &cfg), None);
        assert!(BlockTensor::QBias.exists_in(Arch::Qwen2) && !BlockTensor::QBias.exists_in(Arch::Llama));
        assert!(!BlockTensor::QBias.exists_in(Arch::Qwen3) && BlockTensor::KNorm.exists_in(Arch::Qwen3));
        assert!(!BlockTensor::QNorm.exists_in(Arch::Qwen2));
    }
}
