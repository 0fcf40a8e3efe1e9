//! Synthetic sentence embedders: a BERT encoder's shapes in llama.cpp's `bert` GGUF
//! layout (the one [`crate::embed::SentenceEmbedder::from_gguf`] reads), with f32 weights.

use super::blocks::{fill_f32_around, Rng};
use crate::embed::gguf::hf_to_gguf;
use crate::gguf::writer::GgufWriter;
use crate::gguf::GgmlType;

/// An encoder's shapes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmbedderShape {
    /// The name a specification uses (`minilm`).
    pub name: &'static str,
    /// The model it copies.
    pub model: &'static str,
    /// Vocabulary size.
    pub vocab: u32,
    /// Hidden width.
    pub hidden: u32,
    /// Encoder layers.
    pub layers: u32,
    /// Attention heads.
    pub heads: u32,
    /// Feed-forward width.
    pub intermediate: u32,
    /// Position embeddings (the longest input).
    pub max_positions: u32,
}

/// The encoders a synthetic embedder can copy.
pub const EMBEDDERS: [EmbedderShape; 2] = [
    EmbedderShape {
        name: "minilm",
        model: "all-MiniLM-L6-v2",
        vocab: 30_522,
        hidden: 384,
        layers: 6,
        heads: 12,
        intermediate: 1536,
        max_positions: 512,
    },
    EmbedderShape {
        name: "bge-small",
        model: "bge-small-en-v1.5",
        vocab: 30_522,
        hidden: 384,
        layers: 12,
        heads: 12,
        intermediate: 1536,
        max_positions: 512,
    },
];

/// Words that are one WordPiece token each, in MiniLM's vocabulary and in every synthetic
/// one: benchmark texts are built from them, so a text's token count is known.
pub const BENCH_WORDS: [&str; 24] = [
    "the", "river", "city", "house", "music", "paper", "light", "water", "green", "small", "people", "world", "time", "north", "school",
    "story", "printing", "press", "book", "church", "king", "war", "trade", "ship",
];

/// The GGUF file of a synthetic encoder: mean pooling, its vocabulary in llama.cpp's
/// phantom-space form (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`, the [`BENCH_WORDS`],
/// the letters, then fillers), f32 weights of standard deviation 0.02, LayerNorm weights
/// about 1.
pub fn embedder_gguf(shape: &EmbedderShape, seed: u64) -> Vec<u8> {
    let s = shape;
    let mut tokens: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(String::from).to_vec();
    tokens.extend(BENCH_WORDS.iter().map(|w| format!("\u{2581}{w}")));
    tokens.extend((b'a'..=b'z').map(|c| format!("\u{2581}{}", char::from(c))));
    tokens.extend((b'a'..=b'z').map(|c| char::from(c).to_string()));
    while tokens.len() < s.vocab as usize {
        tokens.push(format!("\u{2581}w{}", tokens.len()));
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut w = GgufWriter::default()
        .kv_str("general.architecture", "bert")
        .kv_str("general.name", &format!("synthetic {}", s.model))
        .kv_u32("bert.context_length", s.max_positions)
        .kv_u32("bert.embedding_length", s.hidden)
        .kv_u32("bert.feed_forward_length", s.intermediate)
        .kv_u32("bert.attention.head_count", s.heads)
        .kv_u32("bert.block_count", s.layers)
        .kv_f32("bert.attention.layer_norm_epsilon", 1e-12)
        .kv_u32("bert.pooling_type", 1)
        .kv_str("tokenizer.ggml.model", "bert")
        .kv_str_array("tokenizer.ggml.tokens", &refs)
        .kv_u32("tokenizer.ggml.unknown_token_id", 1)
        .kv_u32("tokenizer.ggml.cls_token_id", 2)
        .kv_u32("tokenizer.ggml.seperator_token_id", 3);
    let (h, ff) = (u64::from(s.hidden), u64::from(s.intermediate));
    // Hugging Face names and PyTorch shapes (outermost first), as the encoder reads them.
    let mut tensors: Vec<(String, Vec<u64>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![u64::from(s.vocab), h]),
        ("embeddings.position_embeddings.weight".into(), vec![u64::from(s.max_positions), h]),
        ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
        ("embeddings.LayerNorm.weight".into(), vec![h]),
        ("embeddings.LayerNorm.bias".into(), vec![h]),
    ];
    for l in 0..s.layers {
        let p = |part: &str| format!("encoder.layer.{l}.{part}");
        for (part, rows, cols) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", ff, h),
            ("output.dense", h, ff),
        ] {
            tensors.push((p(&format!("{part}.weight")), vec![rows, cols]));
            tensors.push((p(&format!("{part}.bias")), vec![rows]));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push((p(&format!("{norm}.weight")), vec![h]));
            tensors.push((p(&format!("{norm}.bias")), vec![h]));
        }
    }
    let mut rng = Rng::new(seed);
    for (hf, shape) in tensors {
        let Some(name) = hf_to_gguf(&hf) else { continue };
        let dims: Vec<u64> = shape.iter().rev().copied().collect();
        let centre = if hf.ends_with("LayerNorm.weight") { 1.0 } else { 0.0 };
        w = w.tensor_with(&name, &dims, GgmlType::F32, |out| fill_f32_around(out, centre, 0.02, &mut rng));
    }
    w.build(3)
}
