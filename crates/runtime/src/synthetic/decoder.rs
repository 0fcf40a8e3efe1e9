//! Synthetic decoders: the shapes of the llama, qwen2 and qwen3 models docmem runs, quantized as
//! llama.cpp quantizes them.

use super::blocks::{fill, fill_f32_around, Rng};
use crate::gguf::writer::GgufWriter;
use crate::gguf::GgmlType;

/// A decoder's shapes (the hyper-parameters of its `config.json`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecoderShape {
    /// The name a specification uses (`qwen2-1.5b`).
    pub name: &'static str,
    /// The model it copies.
    pub model: &'static str,
    /// `general.architecture`: `llama`, `qwen2` or `qwen3`.
    pub arch: &'static str,
    /// Transformer blocks.
    pub layers: u32,
    /// Hidden width.
    pub embd: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Feed-forward width.
    pub ff: u32,
    /// Vocabulary size (rows of the embedding table and of the output head).
    pub vocab: u32,
    /// Whether the output head is the embedding table (no `output.weight`).
    pub tied: bool,
    /// Training context.
    pub context: u32,
    /// RoPE base.
    pub rope_base: f32,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// A head's width where it is not `embd / heads` (Qwen3's wider heads).
    pub head_dim: Option<u32>,
    /// Llama 3's RoPE scaling for long contexts: `rope_freqs.weight`, the per-pair
    /// divisors llama.cpp's converter computes from `rope_scaling` (factor 32, low 1,
    /// high 4, 8,192 original positions, as Llama 3.2's `config.json` says).
    pub llama3_rope: bool,
    /// Gemma 3's sliding window and RoPE scaling (`gemma3` files only).
    pub gemma: Option<GemmaLayers>,
    /// Phi-3's RoPE (`phi3` files only).
    pub phi: Option<PhiRope>,
    /// The tokenizer the file carries.
    pub vocabulary: Vocabulary,
}

/// A synthetic file's tokenizer, as the model it copies has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vocabulary {
    /// Byte-level BPE with no merges and ChatML's controls, under the pre-tokenizer named
    /// (`qwen2`, `llama-bpe`, `smollm`).
    ByteLevel(&'static str),
    /// Byte-level BPE with merges, GPT-4o's pre-tokenizer and Phi-4-mini's chat tokens and
    /// template ([`GPT4O_MERGES`]).
    Phi4,
    /// SentencePiece with Gemma's controls and template.
    Gemma,
    /// SentencePiece: Llama 2's layout with Phi-3's chat tokens and template.
    Phi3,
}

/// What a Phi-3 file says of its RoPE: how many of a head's dimensions turn (Phi-4-mini's
/// three quarters), and LongRoPE's original context, whose short and long per-pair factors
/// and attention factor the file holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhiRope {
    /// `rope.dimension_count`.
    pub rope_dims: u32,
    /// `rope.scaling.original_context_length` (4,096 for Phi-3.5-mini and Phi-4-mini).
    pub original_context: u32,
}

/// What a Gemma 3 file says of its layers beyond the common keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmaLayers {
    /// `attention.sliding_window`: positions a windowed layer sees.
    pub window: u32,
    /// The linear RoPE scaling factor of the global layers (`rope.scaling.factor`; the 4B
    /// and larger have 8), or `None`.
    pub rope_scaling: Option<f32>,
}

impl DecoderShape {
    /// A head's width.
    pub fn head_dim(&self) -> u32 {
        self.head_dim.unwrap_or(self.embd / self.heads)
    }

    /// Whether each head's queries and keys are RMS-normed (qwen3, gemma3).
    fn head_norms(&self) -> bool {
        matches!(self.arch, "qwen3" | "gemma3")
    }

    /// Whether attention's and the feed-forward's outputs are RMS-normed again (gemma3).
    fn post_norms(&self) -> bool {
        self.arch == "gemma3"
    }

    /// The dimensions of a head RoPE turns.
    pub fn rope_dims(&self) -> u32 {
        self.phi.map_or(self.head_dim(), |p| p.rope_dims)
    }
}

/// The decoders a synthetic model can copy. The `-tiny` ones are for tests and the
/// benchmark script's smoke run (shapes whose rows are whole K-quant blocks, a vocabulary
/// just past the 256 byte pieces). The two newer ones have an output head of their own:
/// with a tied head (whose values are larger) a random model repeats its last token, and
/// a parity golden could not tell that from a broken attention.
pub const DECODERS: [DecoderShape; 25] = [
    // Qwen2.5-Coder-1.5B-Instruct, the file `docmem models fetch bench` fetches: its own
    // output head (the base Qwen2.5-1.5B ties it).
    DecoderShape {
        name: "qwen2-1.5b",
        model: "Qwen2.5-Coder-1.5B-Instruct",
        arch: "qwen2",
        layers: 28,
        embd: 1536,
        heads: 12,
        kv_heads: 2,
        ff: 8960,
        vocab: 151_936,
        tied: false,
        context: 32_768,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen2-0.5b",
        model: "Qwen2.5-0.5B-Instruct",
        arch: "qwen2",
        layers: 24,
        embd: 896,
        heads: 14,
        kv_heads: 2,
        ff: 4864,
        vocab: 151_936,
        tied: true,
        context: 32_768,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen2-3b",
        model: "Qwen2.5-3B-Instruct (MemReader-3B's base)",
        arch: "qwen2",
        layers: 36,
        embd: 2048,
        heads: 16,
        kv_heads: 2,
        ff: 11_008,
        vocab: 151_936,
        tied: true,
        context: 32_768,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen2-7b",
        model: "Qwen2.5-7B-Instruct (MemReader-7B's base)",
        arch: "qwen2",
        layers: 28,
        embd: 3584,
        heads: 28,
        kv_heads: 4,
        ff: 18_944,
        vocab: 152_064,
        tied: false,
        context: 32_768,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "llama-135m",
        model: "SmolLM2-135M-Instruct",
        arch: "llama",
        layers: 30,
        embd: 576,
        heads: 9,
        kv_heads: 3,
        ff: 1536,
        vocab: 49_152,
        tied: true,
        context: 8192,
        rope_base: 1e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("smollm"),
    },
    DecoderShape {
        name: "llama-360m",
        model: "SmolLM2-360M-Instruct",
        arch: "llama",
        layers: 32,
        embd: 960,
        heads: 15,
        kv_heads: 5,
        ff: 2560,
        vocab: 49_152,
        tied: true,
        context: 8192,
        rope_base: 1e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("smollm"),
    },
    DecoderShape {
        name: "llama-1.7b",
        model: "SmolLM2-1.7B-Instruct",
        arch: "llama",
        layers: 24,
        embd: 2048,
        heads: 32,
        kv_heads: 32,
        ff: 8192,
        vocab: 49_152,
        tied: true,
        context: 8192,
        rope_base: 1.3e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("smollm"),
    },
    // Llama 3.x Instruct: Llama 3's RoPE scaling, a 128k-token vocabulary.
    DecoderShape {
        name: "llama3-1b",
        model: "Llama-3.2-1B-Instruct",
        arch: "llama",
        layers: 16,
        embd: 2048,
        heads: 32,
        kv_heads: 8,
        ff: 8192,
        vocab: 128_256,
        tied: true,
        context: 131_072,
        rope_base: 5e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: true,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("llama-bpe"),
    },
    DecoderShape {
        name: "llama3-3b",
        model: "Llama-3.2-3B-Instruct",
        arch: "llama",
        layers: 28,
        embd: 3072,
        heads: 24,
        kv_heads: 8,
        ff: 8192,
        vocab: 128_256,
        tied: true,
        context: 131_072,
        rope_base: 5e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: true,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("llama-bpe"),
    },
    DecoderShape {
        name: "llama3-8b",
        model: "Llama-3.1-8B-Instruct",
        arch: "llama",
        layers: 32,
        embd: 4096,
        heads: 32,
        kv_heads: 8,
        ff: 14_336,
        vocab: 128_256,
        tied: false,
        context: 131_072,
        rope_base: 5e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: true,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("llama-bpe"),
    },
    // Qwen3: heads 128 wide whatever the hidden width, normed per head.
    DecoderShape {
        name: "qwen3-0.6b",
        model: "Qwen3-0.6B",
        arch: "qwen3",
        layers: 28,
        embd: 1024,
        heads: 16,
        kv_heads: 8,
        ff: 3072,
        vocab: 151_936,
        tied: true,
        context: 40_960,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen3-1.7b",
        model: "Qwen3-1.7B",
        arch: "qwen3",
        layers: 28,
        embd: 2048,
        heads: 16,
        kv_heads: 8,
        ff: 6144,
        vocab: 151_936,
        tied: true,
        context: 40_960,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen3-4b",
        model: "Qwen3-4B",
        arch: "qwen3",
        layers: 36,
        embd: 2560,
        heads: 32,
        kv_heads: 8,
        ff: 9728,
        vocab: 151_936,
        tied: true,
        context: 40_960,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "qwen3-8b",
        model: "Qwen3-8B",
        arch: "qwen3",
        layers: 36,
        embd: 4096,
        heads: 32,
        kv_heads: 8,
        ff: 12_288,
        vocab: 151_936,
        tied: false,
        context: 40_960,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    // Gemma 3 1B (text only; its vocabulary of 262,144 SentencePiece pieces, tied head).
    DecoderShape {
        name: "gemma3-1b",
        model: "Gemma 3 1B Instruct",
        arch: "gemma3",
        layers: 26,
        embd: 1152,
        heads: 4,
        kv_heads: 1,
        ff: 6912,
        vocab: 262_144,
        tied: true,
        context: 32_768,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(256),
        llama3_rope: false,
        gemma: Some(GemmaLayers { window: 512, rope_scaling: None }),
        phi: None,
        vocabulary: Vocabulary::Gemma,
    },
    // Gemma 3 4B's text decoder (its vision tower is a separate file).
    DecoderShape {
        name: "gemma3-4b",
        model: "Gemma 3 4B Instruct",
        arch: "gemma3",
        layers: 34,
        embd: 2560,
        heads: 8,
        kv_heads: 4,
        ff: 10_240,
        vocab: 262_208,
        tied: true,
        context: 131_072,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(256),
        llama3_rope: false,
        gemma: Some(GemmaLayers { window: 1024, rope_scaling: Some(8.0) }),
        phi: None,
        vocabulary: Vocabulary::Gemma,
    },
    // Phi-3.5-mini-instruct: Llama 2's SentencePiece vocabulary with Phi's chat tokens,
    // fused Q/K/V and gate/up, LongRoPE to 128k positions.
    DecoderShape {
        name: "phi3.5-mini",
        model: "Phi-3.5-mini-instruct",
        arch: "phi3",
        layers: 32,
        embd: 3072,
        heads: 32,
        kv_heads: 32,
        ff: 8192,
        vocab: 32_064,
        tied: false,
        context: 131_072,
        rope_base: 1e4,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: Some(PhiRope { rope_dims: 96, original_context: 4096 }),
        vocabulary: Vocabulary::Phi3,
    },
    // Phi-4-mini-instruct: grouped heads, a quarter of each head unturned, tied head, and
    // GPT-4o's byte-level vocabulary (o200k) with Phi's chat tokens.
    DecoderShape {
        name: "phi4-mini",
        model: "Phi-4-mini-instruct",
        arch: "phi3",
        layers: 32,
        embd: 3072,
        heads: 24,
        kv_heads: 8,
        ff: 8192,
        vocab: 200_064,
        tied: true,
        context: 131_072,
        rope_base: 1e4,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: Some(PhiRope { rope_dims: 96, original_context: 4096 }),
        vocabulary: Vocabulary::Phi4,
    },
    DecoderShape {
        name: "qwen2-tiny",
        model: "a two-block qwen2 for tests",
        arch: "qwen2",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 320,
        tied: false,
        context: 2048,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "llama-tiny",
        model: "a two-block llama for tests",
        arch: "llama",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 1,
        ff: 512,
        vocab: 320,
        tied: true,
        context: 2048,
        rope_base: 1e4,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("smollm"),
    },
    DecoderShape {
        name: "llama3-tiny",
        model: "a two-block llama with Llama 3's RoPE scaling, for tests",
        arch: "llama",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 320,
        tied: false,
        context: 2048,
        rope_base: 5e5,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: true,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("llama-bpe"),
    },
    DecoderShape {
        name: "qwen3-tiny",
        model: "a two-block qwen3 with heads wider than the hidden width over them, for tests",
        arch: "qwen3",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 320,
        tied: false,
        context: 2048,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: None,
        phi: None,
        vocabulary: Vocabulary::ByteLevel("qwen2"),
    },
    DecoderShape {
        name: "gemma3-tiny",
        model: "a six-block gemma3 (five windowed layers, one global) for tests",
        arch: "gemma3",
        layers: 6,
        // Not whole 256-value blocks, as Gemma 3 1B's 1,152 is not: its quantized files
        // hold Q5_0 and Q8_0 matrices beside the K-quants, and so does this one.
        embd: 384,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 512,
        // Gemma's own head is the embedding table; a head of its own here keeps the
        // argmax from merely echoing the input token (whose embedding, scaled by √384,
        // dominates an untrained residual stream), so the top-1 check says something.
        tied: false,
        context: 2048,
        rope_base: 1e6,
        rms_eps: 1e-6,
        head_dim: Some(128),
        llama3_rope: false,
        gemma: Some(GemmaLayers { window: 24, rope_scaling: Some(8.0) }),
        phi: None,
        vocabulary: Vocabulary::Gemma,
    },
    DecoderShape {
        name: "phi3-tiny",
        model: "a two-block phi3 (fused projections, grouped heads, partial LongRoPE) for tests",
        arch: "phi3",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 512,
        tied: false,
        context: 8192,
        rope_base: 1e4,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: Some(PhiRope { rope_dims: 48, original_context: 2048 }),
        vocabulary: Vocabulary::Phi3,
    },
    DecoderShape {
        name: "phi4-tiny",
        model: "a two-block Phi-4-mini (GPT-4o's pre-tokenizer, merges, tied head) for tests",
        arch: "phi3",
        layers: 2,
        embd: 256,
        heads: 4,
        kv_heads: 2,
        ff: 512,
        vocab: 640,
        tied: true,
        context: 8192,
        rope_base: 1e4,
        rms_eps: 1e-5,
        head_dim: None,
        llama3_rope: false,
        gemma: None,
        phi: Some(PhiRope { rope_dims: 48, original_context: 2048 }),
        vocabulary: Vocabulary::Phi4,
    },
];

/// How a synthetic decoder's matrices are stored: llama.cpp's `--type` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Quant {
    /// Q4_K, with Q6_K for the output head and for `attn_v`/`ffn_down` in the layers
    /// llama.cpp gives more bits (the 1.5B reader's format).
    Q4KM,
    /// Q4_1, with Q6_K for the output head (SmolLM2's test file's format).
    Q4_1,
    /// Q8_0 throughout.
    Q8_0,
    /// Q5_K, with Q6_K where Q4_K_M has it.
    Q5KM,
    /// Q6_K throughout.
    Q6K,
    /// Q4_0, with Q6_K for the output head.
    Q4_0,
}

impl Quant {
    /// Every quantization.
    pub const ALL: [Quant; 6] = [Quant::Q4KM, Quant::Q4_1, Quant::Q8_0, Quant::Q5KM, Quant::Q6K, Quant::Q4_0];

    /// llama.cpp's name.
    pub fn name(self) -> &'static str {
        match self {
            Quant::Q4KM => "q4_k_m",
            Quant::Q4_1 => "q4_1",
            Quant::Q8_0 => "q8_0",
            Quant::Q5KM => "q5_k_m",
            Quant::Q6K => "q6_k",
            Quant::Q4_0 => "q4_0",
        }
    }

    /// `general.file_type`: llama.cpp's `LLAMA_FTYPE_*`.
    fn file_type(self) -> u32 {
        match self {
            Quant::Q4KM => 15,
            Quant::Q4_1 => 3,
            Quant::Q8_0 => 7,
            Quant::Q5KM => 17,
            Quant::Q6K => 18,
            Quant::Q4_0 => 2,
        }
    }

    /// The type of a matrix: `role` its GGUF name without the block prefix, `layer` its
    /// block (if any), `cols` its row length. llama.cpp's `llama_tensor_get_type` for
    /// these types, with its fallback where a row is not whole blocks of the choice
    /// (`tensor_type_fallback`: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; F16 where even
    /// that fallback's 32-value blocks do not fit).
    fn matrix_type(self, shape: &DecoderShape, role: &str, layer: Option<u32>, cols: u32) -> GgmlType {
        let output = role == "output.weight" || (shape.tied && role == "token_embd.weight");
        // llama.cpp counts the layers in the order their tensors sit in the file, which its
        // converter sorts by name (blk.0, blk.1, blk.10, blk.11, …, blk.2, …): so the
        // layers given more bits are picked by that rank, not by the layer number. (This
        // gives exactly the Q6_K layers of the real Qwen2.5-Coder-1.5B Q4_K_M file.)
        let more_bits = |layer: u32, n: u32| {
            let name = layer.to_string();
            let i = (0..n).filter(|other| other.to_string() < name).count() as u32;
            i < n / 8 || i >= 7 * n / 8 || (i.wrapping_sub(n / 8)) % 3 == 2
        };
        let choice = match self {
            Quant::Q8_0 => GgmlType::Q8_0,
            _ if output => GgmlType::Q6K,
            Quant::Q4_1 => GgmlType::Q4_1,
            Quant::Q4_0 => GgmlType::Q4_0,
            Quant::Q6K => GgmlType::Q6K,
            // A fused Q/K/V matrix takes attn_v's rule (llama.cpp counts it as one).
            Quant::Q4KM | Quant::Q5KM => match layer {
                Some(i) if matches!(role, "attn_v.weight" | "attn_qkv.weight" | "ffn_down.weight") && more_bits(i, shape.layers) => {
                    GgmlType::Q6K
                }
                _ if self == Quant::Q5KM => GgmlType::Q5K,
                _ => GgmlType::Q4K,
            },
        };
        let fallback = match choice {
            _ if u64::from(cols).is_multiple_of(choice.block_elements()) => return choice,
            GgmlType::Q4K => GgmlType::Q5_0,
            GgmlType::Q5K => GgmlType::Q5_1,
            GgmlType::Q6K => GgmlType::Q8_0,
            other => other,
        };
        if u64::from(cols).is_multiple_of(fallback.block_elements()) {
            fallback
        } else {
            GgmlType::F16
        }
    }
}

/// A byte-level BPE vocabulary's layout: its merges (the pieces they make follow the 256
/// byte pieces), its special tokens (last), which of them are BOS (and padding) and EOS,
/// and the chat template its file carries, if any.
struct ByteLevelFlavour {
    merges: &'static [(&'static str, &'static str)],
    specials: &'static [&'static str],
    /// BOS and EOS, as places in `specials`.
    bos_eos: [usize; 2],
    template: Option<&'static str>,
}

/// No merges, ChatML's control tokens (`<|endoftext|>` the BOS, `<|im_end|>` the EOS).
const CHATML_VOCABULARY: ByteLevelFlavour =
    ByteLevelFlavour { merges: &[], specials: &["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos_eos: [0, 2], template: None };

/// Phi-4-mini's: [`GPT4O_MERGES`], its chat tokens and template.
const PHI4_VOCABULARY: ByteLevelFlavour =
    ByteLevelFlavour { merges: GPT4O_MERGES, specials: &PHI4_SPECIALS, bos_eos: [0, 0], template: Some(PHI4_TEMPLATE) };

/// A byte-level BPE tokenizer of `size` tokens ([`vocabulary`]) laid out as `flavour` says,
/// under the pre-tokenizer `pre`; no BOS added.
fn byte_level_tokenizer(w: GgufWriter, size: usize, pre: &str, flavour: &ByteLevelFlavour) -> GgufWriter {
    let (tokens, types) = vocabulary(size, flavour);
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let merges: Vec<String> = flavour.merges.iter().map(|(a, b)| format!("{a} {b}")).collect();
    let merge_refs: Vec<&str> = merges.iter().map(String::as_str).collect();
    let first_special = tokens.len() - flavour.specials.len();
    let [bos, eos] = flavour.bos_eos.map(|i| (first_special + i) as u32);
    let w = w
        .kv_str("tokenizer.ggml.model", "gpt2")
        .kv_str("tokenizer.ggml.pre", pre)
        .kv_str_array("tokenizer.ggml.tokens", &refs)
        .kv_i32_array("tokenizer.ggml.token_type", &types)
        .kv_str_array("tokenizer.ggml.merges", &merge_refs)
        .kv_u32("tokenizer.ggml.bos_token_id", bos)
        .kv_u32("tokenizer.ggml.eos_token_id", eos)
        .kv_u32("tokenizer.ggml.padding_token_id", bos)
        .kv_bool("tokenizer.ggml.add_bos_token", false);
    match flavour.template {
        Some(template) => w.kv_str("tokenizer.chat_template", template),
        None => w,
    }
}

/// Merges for the GPT-4o vocabulary, in rank order (byte-level spellings: `Ġ` a space, `Ċ`
/// a newline). The first are ordinary English pieces; the last join characters whose
/// merging depends on where the pre-tokenizer cuts: most it keeps apart (a lower-case
/// letter and the capital after it, a letter and the space after it, two sentences), some
/// it may keep together (a space before a newline, digits within a group of three, a
/// letter and an apostrophe). With them, a tokenizer whose splits differ from llama.cpp's
/// gives other ids for the golden's text.
const GPT4O_MERGES: &[(&str, &str)] = &[
    ("h", "e"),
    ("t", "h"),
    ("th", "e"),
    ("Ġ", "t"),
    ("Ġt", "he"),
    ("i", "n"),
    ("in", "g"),
    ("e", "r"),
    ("a", "n"),
    ("o", "n"),
    ("r", "e"),
    ("Ġ", "a"),
    ("Ġ", "w"),
    ("o", "r"),
    ("e", "s"),
    ("e", "d"),
    ("Ġ", "s"),
    ("Ġ", "i"),
    ("Ġ", "c"),
    ("a", "t"),
    ("e", "n"),
    ("Ġ", "Ġ"),
    ("ĠĠ", "ĠĠ"),
    ("Ċ", "Ċ"),
    ("'", "s"),
    ("'", "S"),
    ("'", "t"),
    ("'", "re"),
    ("l", "l"),
    ("'", "ll"),
    ("Ġ", "("),
    ("(", ")"),
    (":", "Ċ"),
    (".", "Ċ"),
    ("/", "/"),
    ("Ġ", "="),
    ("1", "2"),
    ("3", "4"),
    ("12", "3"),
    ("5", "6"),
    ("7", "8"),
    ("9", "0"),
    // Where the pre-tokenizer cuts decides whether these apply.
    ("o", "W"),
    ("d", "A"),
    ("e", "C"),
    ("s", "Ġ"),
    ("e", "Ġ"),
    ("d", "Ġ"),
    (".", "Ġ"),
    (",", "Ġ"),
    ("4", "5"),
    ("0", "1"),
    ("e", "'"),
    ("Ġ", "1"),
    ("Ġ", "Ċ"),
];

/// Phi-4-mini's chat tokens, after the text pieces (its `<|endoftext|>` the BOS, EOS and
/// padding token; `<|end|>` ends a turn).
const PHI4_SPECIALS: [&str; 5] = ["<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>"];

/// Phi-4-mini-instruct's chat template (without its tool branch).
const PHI4_TEMPLATE: &str = "{% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

/// A SentencePiece vocabulary's layout: the special pieces before the byte pieces and
/// after the text pieces, the ids its file names, and what it asks of the tokenizer.
struct SentencePieceFlavour {
    /// Special pieces (and their token types) first: Gemma's controls, Llama 2's
    /// `<unk>`, `<s>`, `</s>`.
    leading: &'static [(&'static str, i32)],
    /// Special pieces last (Phi-3's chat tokens, after Llama 2's 32,000).
    trailing: &'static [(&'static str, i32)],
    /// BOS, EOS, unknown and padding ids.
    ids: [u32; 4],
    /// `tokenizer.ggml.add_space_prefix` where the file states it.
    add_space_prefix: Option<bool>,
    /// The chat template.
    template: &'static str,
}

/// Gemma's: its control tokens first, no space prefixed, its turn template.
const GEMMA_VOCABULARY: SentencePieceFlavour = SentencePieceFlavour {
    leading: &[("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2), ("<start_of_turn>", 3), ("<end_of_turn>", 3)],
    trailing: &[],
    ids: [2, 1, 3, 0],
    add_space_prefix: Some(false),
    template: GEMMA_TEMPLATE,
};

/// Phi-3's (Llama 2's vocabulary with Phi's chat tokens after it): `<unk>`, `<s>`, `</s>`
/// first, a space prefixed (the key unstated, as Phi's files leave it), `<|endoftext|>` the
/// EOS and `<|end|>` ending each turn.
const PHI3_VOCABULARY: SentencePieceFlavour = SentencePieceFlavour {
    leading: &[("<unk>", 2), ("<s>", 3), ("</s>", 3)],
    trailing: &[("<|endoftext|>", 3), ("<|assistant|>", 3), ("<|end|>", 3), ("<|user|>", 3), ("<|system|>", 3)],
    ids: [1, u32::MAX, 0, u32::MAX],
    add_space_prefix: None,
    template: PHI3_TEMPLATE,
};

/// A SentencePiece tokenizer (`llama`) of `size` pieces: `flavour`'s leading specials, the
/// 256 byte pieces `<0x00>`… for byte fallback, `▁` and the printable ASCII characters, then
/// pieces merged from them (frequent English pairs, then whole words with and without `▁`),
/// scored so that longer pieces merge later; fillers, then `flavour`'s trailing specials.
/// A BOS is added. (EOS and padding ids of `u32::MAX` name the first trailing special.)
fn sentencepiece_tokenizer(w: GgufWriter, size: usize, flavour: &SentencePieceFlavour) -> GgufWriter {
    const SPACE: &str = "\u{2581}";
    let mut tokens: Vec<String> = flavour.leading.iter().map(|(t, _)| (*t).to_owned()).collect();
    let mut types: Vec<i32> = flavour.leading.iter().map(|&(_, ty)| ty).collect();
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let singles = std::iter::once(SPACE.to_owned()).chain((b'!'..=b'~').map(|c| char::from(c).to_string()));
    let pairs = ["th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of", "ed", "is", "it", "al", "ar"];
    let words = ["the", "and", "of", "to", "in", "is", "was", "for", "that", "with", "as", "by", "on", "from", "his", "which"];
    let merged = pairs
        .iter()
        .map(|p| (*p).to_owned())
        .chain(["t", "a", "o", "i", "s", "w", "c", "b", "f"].iter().map(|c| format!("{SPACE}{c}")))
        .chain(words.iter().map(|w| (*w).to_owned()))
        .chain(words.iter().map(|w| format!("{SPACE}{w}")));
    let text_pieces = size.saturating_sub(flavour.trailing.len());
    for piece in singles.chain(merged) {
        if tokens.len() < text_pieces && !tokens.contains(&piece) {
            tokens.push(piece);
            types.push(1);
        }
    }
    while tokens.len() < text_pieces {
        tokens.push(format!("<unused{}>", tokens.len()));
        types.push(5);
    }
    let first_trailing = tokens.len() as u32;
    tokens.extend(flavour.trailing.iter().map(|(t, _)| (*t).to_owned()));
    types.extend(flavour.trailing.iter().map(|&(_, ty)| ty));
    // Scores: the pieces' order (llama.cpp merges the best-scored pair first); control,
    // byte and unused pieces 0.
    let scores: Vec<f32> = types.iter().enumerate().map(|(i, &t)| if t == 1 { -(i as f32) } else { 0.0 }).collect();
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let id = |i: u32| if i == u32::MAX { first_trailing } else { i };
    let [bos, eos, unk, pad] = flavour.ids.map(id);
    let mut w = w
        .kv_str("tokenizer.ggml.model", "llama")
        .kv_str("tokenizer.ggml.pre", "default")
        .kv_str_array("tokenizer.ggml.tokens", &refs)
        .kv_f32_array("tokenizer.ggml.scores", &scores)
        .kv_i32_array("tokenizer.ggml.token_type", &types)
        .kv_u32("tokenizer.ggml.bos_token_id", bos)
        .kv_u32("tokenizer.ggml.eos_token_id", eos)
        .kv_u32("tokenizer.ggml.unknown_token_id", unk)
        .kv_u32("tokenizer.ggml.padding_token_id", pad)
        .kv_bool("tokenizer.ggml.add_bos_token", true);
    if let Some(prefix) = flavour.add_space_prefix {
        w = w.kv_bool("tokenizer.ggml.add_space_prefix", prefix);
    }
    w.kv_str("tokenizer.chat_template", flavour.template)
}

/// Phi-3's chat template (Phi-3.5-mini-instruct's).
const PHI3_TEMPLATE: &str = "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

/// Gemma 3's chat template (its `tokenizer_config.json`'s, text parts only): a system
/// message joins the first user turn, the assistant is `model`, turns must alternate.
const GEMMA_TEMPLATE: &str = "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif -%}{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

/// A byte-level vocabulary of `size` tokens: the 256 byte-level pieces (GPT-2's
/// byte-to-character map, so any text tokenizes), the pieces `flavour`'s merges make,
/// fillers `t<id>` (printable ASCII, which llama.cpp's byte map decodes), and `flavour`'s
/// special tokens last (type 3; the rest type 1).
fn vocabulary(size: usize, flavour: &ByteLevelFlavour) -> (Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).map(String::from).collect();
    tokens.extend(flavour.merges.iter().map(|(a, b)| format!("{a}{b}")));
    let first_special = size - flavour.specials.len();
    while tokens.len() < first_special {
        tokens.push(format!("t{}", tokens.len()));
    }
    tokens.extend(flavour.specials.iter().map(|t| (*t).to_owned()));
    let types = (0..tokens.len()).map(|i| if i >= first_special { 3 } else { 1 }).collect();
    (tokens, types)
}

/// GPT-2's byte-level character for byte `b`: printable Latin-1 bytes stand for
/// themselves, the others map to U+0100 onwards in order.
fn byte_char(b: u8) -> char {
    let printable = |c: u8| (b'!'..=b'~').contains(&c) || (0xA1..=0xAC).contains(&c) || (0xAE..=0xFF).contains(&c);
    if printable(b) {
        return char::from(b);
    }
    let shifted = (0..b).filter(|&c| !printable(c)).count() as u32;
    char::from_u32(256 + shifted).unwrap_or('?')
}

/// One tensor of a synthetic decoder: its GGUF name, shape (innermost first) and type,
/// and the value its entries are drawn around (1 for norms, else 0).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedTensor {
    /// GGUF name (`blk.3.attn_v.weight`).
    pub name: String,
    /// Dimensions, innermost (row length) first.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ty: GgmlType,
    /// Centre of its values (norm weights 1).
    pub centre: f32,
    /// Standard deviation of its values around the centre.
    pub std: f32,
}

impl PlannedTensor {
    /// Bytes of its data.
    pub fn bytes(&self) -> u64 {
        self.dims.iter().product::<u64>() / self.ty.block_elements() * self.ty.block_bytes()
    }
}

/// Every tensor of `shape` stored as `quant`, in file order (llama.cpp's converter's).
pub fn decoder_tensors(shape: &DecoderShape, quant: Quant) -> Vec<PlannedTensor> {
    let s = shape;
    let hd = u64::from(s.head_dim());
    let (e, kv, ff, vocab) = (u64::from(s.embd), hd * u64::from(s.kv_heads), u64::from(s.ff), u64::from(s.vocab));
    let qw = hd * u64::from(s.heads);
    let mut out = Vec::new();
    // The output head's values are larger, so the logits spread as a trained model's do
    // (a standard deviation of about 3 over the vocabulary, a few tokens well ahead):
    // with the 0.02 of the other matrices every token would be about as likely, and
    // nucleus sampling would have to sort the whole vocabulary at every step, which no
    // real model makes it do.
    let head_std = 3.0 / (s.embd as f32).sqrt();
    let matrix = |name: String, role: &str, layer: Option<u32>, cols: u64, rows: u64| {
        let ty = quant.matrix_type(s, role, layer, cols as u32);
        let head = role == "output.weight" || (s.tied && role == "token_embd.weight");
        PlannedTensor { name, dims: vec![cols, rows], ty, centre: 0.0, std: if head { head_std } else { 0.02 } }
    };
    let vector = |name: String, len: u64, centre: f32| PlannedTensor { name, dims: vec![len], ty: GgmlType::F32, centre, std: 0.02 };
    if s.llama3_rope {
        // Its values are Llama 3's divisors, not drawn ([`llama3_rope_divisors`]).
        out.push(PlannedTensor { name: ROPE_FREQS.into(), dims: vec![hd / 2], ty: GgmlType::F32, centre: 1.0, std: 0.0 });
    }
    if let Some(p) = s.phi {
        // LongRoPE's factors ([`longrope_factors`]), as the converter writes them first.
        for name in [ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT] {
            out.push(PlannedTensor { name: name.into(), dims: vec![u64::from(p.rope_dims / 2)], ty: GgmlType::F32, centre: 1.0, std: 0.0 });
        }
    }
    out.push(matrix("token_embd.weight".into(), "token_embd.weight", None, e, vocab));
    if !s.tied {
        out.push(matrix("output.weight".into(), "output.weight", None, e, vocab));
    }
    out.push(vector("output_norm.weight".into(), e, 1.0));
    for i in 0..s.layers {
        let b = |part: &str| format!("blk.{i}.{part}");
        out.push(vector(b("attn_norm.weight"), e, 1.0));
        let projections: &[(&str, u64, u64)] = if s.phi.is_some() {
            &[("attn_qkv.weight", e, qw + 2 * kv), ("attn_output.weight", qw, e)]
        } else {
            &[("attn_q.weight", e, qw), ("attn_k.weight", e, kv), ("attn_v.weight", e, kv), ("attn_output.weight", qw, e)]
        };
        for &(part, cols, rows) in projections {
            out.push(matrix(b(part), part, Some(i), cols, rows));
        }
        if s.arch == "qwen2" {
            for (part, len) in [("attn_q.bias", qw), ("attn_k.bias", kv), ("attn_v.bias", kv)] {
                out.push(vector(b(part), len, 0.0));
            }
        }
        if s.head_norms() {
            for part in ["attn_q_norm.weight", "attn_k_norm.weight"] {
                out.push(vector(b(part), hd, 1.0));
            }
        }
        if s.post_norms() {
            out.push(vector(b("post_attention_norm.weight"), e, 1.0));
        }
        out.push(vector(b("ffn_norm.weight"), e, 1.0));
        // Phi-3 stacks gate and up in one `ffn_up`, twice as tall.
        let feed_forward: &[(&str, u64, u64)] = if s.phi.is_some() {
            &[("ffn_up.weight", e, 2 * ff), ("ffn_down.weight", ff, e)]
        } else {
            &[("ffn_gate.weight", e, ff), ("ffn_up.weight", e, ff), ("ffn_down.weight", ff, e)]
        };
        for &(part, cols, rows) in feed_forward {
            out.push(matrix(b(part), part, Some(i), cols, rows));
        }
        if s.post_norms() {
            out.push(vector(b("post_ffw_norm.weight"), e, 1.0));
        }
    }
    out
}

/// The name llama.cpp's converter gives Llama 3's RoPE divisors.
const ROPE_FREQS: &str = "rope_freqs.weight";
/// The names it gives LongRoPE's factors (Phi-3).
const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

/// LongRoPE's per-pair factors for `pairs` pairs, shaped as Phi-3.5-mini's `config.json`
/// gives them: 1 for the pairs that turn fast, rising smoothly for the slow ones, to about
/// 1.1 (short, within the original context) or about 50 (long, past it).
pub fn longrope_factors(pairs: usize, long: bool) -> Vec<f32> {
    let top = if long { 50.0f64 } else { 1.1 };
    (0..pairs)
        .map(|i| {
            let t = i as f64 / (pairs.max(2) - 1) as f64;
            (1.0 + (top - 1.0) * t * t * (3.0 - 2.0 * t)) as f32
        })
        .collect()
}

/// LongRoPE's attention factor as llama.cpp's converter computes it from the trained and
/// original contexts.
fn longrope_attn_factor(context: u32, original: u32) -> f32 {
    let scale = f64::from(context) / f64::from(original);
    if scale > 1.0 {
        (1.0 + scale.ln() / f64::from(original).ln()).sqrt() as f32
    } else {
        1.0
    }
}

/// Llama 3's RoPE divisors for `pairs` pairs of base `base`, as llama.cpp's converter
/// computes them from Llama 3.2's `rope_scaling` (factor 32, low-frequency factor 1,
/// high-frequency factor 4, 8,192 original positions): 1 for the pairs that turn fast,
/// 32 for the slow ones, smoothed between.
pub fn llama3_rope_divisors(base: f32, pairs: usize) -> Vec<f32> {
    let (factor, low, high, original) = (32f64, 1f64, 4f64, 8192f64);
    let (low_wavelen, high_wavelen) = (original / low, original / high);
    (0..pairs)
        .map(|i| {
            let freq = 1.0 / f64::from(base).powf(2.0 * i as f64 / (2 * pairs) as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let divisor = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (original / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            divisor as f32
        })
        .collect()
}

/// The GGUF file of a synthetic decoder: `shape` stored as `quant`, values from `seed`
/// (the same seed gives the same bytes).
pub fn decoder_gguf(shape: &DecoderShape, quant: Quant, seed: u64) -> Vec<u8> {
    let s = shape;
    let key = |k: &str| format!("{}.{k}", s.arch);
    let mut w = GgufWriter::default()
        .kv_str("general.architecture", s.arch)
        .kv_str("general.name", &format!("synthetic {} {}", s.model, quant.name()))
        .kv_u32("general.file_type", quant.file_type())
        .kv_u32("general.quantization_version", 2)
        .kv_u32(&key("block_count"), s.layers)
        .kv_u32(&key("context_length"), s.context)
        .kv_u32(&key("embedding_length"), s.embd)
        .kv_u32(&key("feed_forward_length"), s.ff)
        .kv_u32(&key("attention.head_count"), s.heads)
        .kv_u32(&key("attention.head_count_kv"), s.kv_heads)
        .kv_f32(&key("rope.freq_base"), s.rope_base)
        .kv_f32(&key("attention.layer_norm_rms_epsilon"), s.rms_eps);
    w = match s.vocabulary {
        Vocabulary::Gemma => sentencepiece_tokenizer(w, s.vocab as usize, &GEMMA_VOCABULARY),
        Vocabulary::Phi3 => sentencepiece_tokenizer(w, s.vocab as usize, &PHI3_VOCABULARY),
        Vocabulary::Phi4 => byte_level_tokenizer(w, s.vocab as usize, "gpt-4o", &PHI4_VOCABULARY),
        Vocabulary::ByteLevel(pre) => byte_level_tokenizer(w, s.vocab as usize, pre, &CHATML_VOCABULARY),
    };
    if let Some(g) = s.gemma {
        w = w.kv_u32(&key("attention.sliding_window"), g.window);
        if let Some(factor) = g.rope_scaling {
            w = w.kv_str(&key("rope.scaling.type"), "linear").kv_f32(&key("rope.scaling.factor"), factor);
        }
    }
    // The keys llama.cpp's converter writes for these models (the older shapes' files
    // stay byte for byte as they were).
    if s.llama3_rope || s.head_dim.is_some() {
        w = w.kv_u32(&key("rope.dimension_count"), s.head_dim());
    }
    if let Some(p) = s.phi {
        w = w
            .kv_u32(&key("rope.dimension_count"), p.rope_dims)
            .kv_u32(&key("rope.scaling.original_context_length"), p.original_context)
            .kv_f32(&key("rope.scaling.attn_factor"), longrope_attn_factor(s.context, p.original_context))
            .kv_u32(&key("attention.sliding_window"), 0);
    }
    if let Some(hd) = s.head_dim {
        w = w.kv_u32(&key("attention.key_length"), hd).kv_u32(&key("attention.value_length"), hd);
    }
    let (mut matrices, mut vectors) = (Rng::new(seed), Rng::new(seed ^ 0x5EED));
    for t in decoder_tensors(shape, quant) {
        w = w.tensor_with(&t.name, &t.dims, t.ty, |out| match t.ty {
            _ if t.name == ROPE_FREQS => {
                let divisors = llama3_rope_divisors(s.rope_base, t.dims[0] as usize);
                out.iter_mut().zip(divisors.iter().flat_map(|d| d.to_le_bytes())).for_each(|(o, b)| *o = b);
            }
            _ if t.name == ROPE_FACTORS_LONG || t.name == ROPE_FACTORS_SHORT => {
                let factors = longrope_factors(t.dims[0] as usize, t.name == ROPE_FACTORS_LONG);
                out.iter_mut().zip(factors.iter().flat_map(|d| d.to_le_bytes())).for_each(|(o, b)| *o = b);
            }
            GgmlType::F32 => fill_f32_around(out, t.centre, t.std, &mut vectors),
            ty => fill(ty, out, t.std, &mut matrices),
        });
    }
    w.build(3)
}
