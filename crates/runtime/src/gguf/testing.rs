//! Small GGUF files built byte by byte, for tests, fuzz seeds and the fuzz harness. Not a
//! public API.

pub use super::writer::GgufWriter as Builder;
use super::GgufFile;
use crate::source::MemorySource;

/// A small, valid file: llama metadata, a vocabulary, three tensors of three types.
pub fn sample() -> Vec<u8> {
    Builder::default()
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 2)
        .kv_str_array("tokenizer.ggml.tokens", &["<s>", "a", "文"])
        .tensor("token_embd.weight", &[64, 3], 8, 2 * 3 * 34)
        .tensor("output_norm.weight", &[64], 0, 256)
        .tensor("blk.0.ffn_down.weight", &[256, 2], 12, 2 * 144)
        .build(3)
}

/// The fuzz harness: parse `data` as a GGUF file; whatever parses must describe tensors
/// that lie inside the data.
pub fn fuzz_read(data: &[u8]) {
    let src = MemorySource::new(data.to_vec());
    if let Ok(f) = GgufFile::read(&src) {
        for t in &f.tensors {
            assert!(t.offset >= f.data_offset && t.offset + t.size <= data.len() as u64);
        }
    }
}

/// The tokenizer a [`tiny_lm`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TinyTokenizer {
    /// Byte-level BPE (`gpt2`, SmolLM2's `smollm` pre-tokenizer): lower-case letters, a
    /// few punctuation marks, space and newline, three merges, ChatML's control tokens.
    Gpt2,
    /// SentencePiece (`llama`): lower-case letters, `▁`, two merged pieces, a few byte
    /// tokens, `<unk>`, `<s>`, `</s>` and ChatML's control tokens.
    Spm,
}

/// Q8_0 blocks of a `rows × cols` matrix: a small scale and quants in a pattern.
fn q8_0(rows: u64, cols: u64, salt: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for block in 0..rows * cols / 32 {
        out.extend_from_slice(&0x2000u16.to_le_bytes()); // 2^-7
        out.extend((0..32u64).map(|i| (((block * 31 + i * 7 + salt) % 17) as i8 - 8) as u8));
    }
    out
}

/// Q4_0 blocks of a `rows × cols` matrix.
fn q4_0(rows: u64, cols: u64, salt: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for block in 0..rows * cols / 32 {
        out.extend_from_slice(&0x2400u16.to_le_bytes()); // 2^-6
        out.extend((0..16u64).map(|i| ((block * 13 + i * 5 + salt) % 251) as u8));
    }
    out
}

fn f32s(n: u64, v: f32) -> Vec<u8> {
    (0..n).flat_map(|i| (v * (1.0 + i as f32 * 1e-3)).to_le_bytes()).collect()
}

/// A complete decoder of a few kilobytes that `Lm::load_from` loads and runs: `arch`
/// (`llama`, or `qwen2` with its attention biases), one block, width 32, two query heads
/// and one key/value head, a feed-forward width of 32, `tokenizer`'s vocabulary, and `template` as
/// `tokenizer.chat_template` when given (ChatML is the loader's default). The seed of the
/// `gguf_load` fuzz target and of tests; [`TinyLm`] varies it further.
pub fn tiny_lm(arch: &str, tokenizer: TinyTokenizer, template: Option<&str>) -> Vec<u8> {
    TinyLm { arch, tokenizer, template, ..TinyLm::default() }.build()
}

/// A [`tiny_lm`] with more to choose.
#[derive(Clone, Debug)]
pub struct TinyLm<'a> {
    /// `llama` or `qwen2` (or anything, for a model that must not load).
    pub arch: &'a str,
    /// The vocabulary.
    pub tokenizer: TinyTokenizer,
    /// `tokenizer.chat_template`.
    pub template: Option<&'a str>,
    /// About the value of every RMSNorm weight (1 by default).
    pub norm: f32,
    /// When not 0, one more piece in the vocabulary: this many `a`s.
    pub long_token: usize,
    /// `{arch}.block_count` (1 by default; the file holds one block's tensors whatever it
    /// says).
    pub block_count: u32,
}

impl Default for TinyLm<'_> {
    fn default() -> Self {
        TinyLm { arch: "llama", tokenizer: TinyTokenizer::Gpt2, template: None, norm: 1.0, long_token: 0, block_count: 1 }
    }
}

impl TinyLm<'_> {
    /// The GGUF file.
    pub fn build(&self) -> Vec<u8> {
        let TinyLm { arch, tokenizer, template, norm, long_token, block_count } = *self;
        let (e, heads, kv_heads, ff) = (32u64, 2u64, 1u64, 32u64);
        let kv = e / heads * kv_heads;
        let key = |k: &str| format!("{arch}.{k}");
        let mut b = Builder::default()
            .kv_str("general.architecture", arch)
            .kv_u32(&key("block_count"), block_count)
            .kv_u32(&key("context_length"), 64)
            .kv_u32(&key("embedding_length"), e as u32)
            .kv_u32(&key("feed_forward_length"), ff as u32)
            .kv_u32(&key("attention.head_count"), heads as u32)
            .kv_u32(&key("attention.head_count_kv"), kv_heads as u32)
            .kv_f32(&key("attention.layer_norm_rms_epsilon"), 1e-5)
            .kv_f32(&key("rope.freq_base"), 10_000.0);
        let specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];
        let vocab = match tokenizer {
            TinyTokenizer::Gpt2 => {
                let mut tokens: Vec<String> = "abcdefghijklmnopqrstuvwxyz.,?!'<>|_".chars().map(String::from).collect();
                tokens.extend(["Ġ", "Ċ", "he", "ll", "Ġw"].map(String::from));
                let normal = tokens.len();
                tokens.extend(specials.map(String::from));
                if long_token > 0 {
                    tokens.push("a".repeat(long_token));
                }
                let types: Vec<i32> = (0..tokens.len()).map(|i| if (normal..normal + 3).contains(&i) { 3 } else { 1 }).collect();
                let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
                b = b
                    .kv_str("tokenizer.ggml.model", "gpt2")
                    .kv_str("tokenizer.ggml.pre", "smollm")
                    .kv_str_array("tokenizer.ggml.tokens", &refs)
                    .kv_i32_array("tokenizer.ggml.token_type", &types)
                    .kv_str_array("tokenizer.ggml.merges", &["h e", "l l", "Ġ w"])
                    .kv_u32("tokenizer.ggml.bos_token_id", normal as u32 + 2)
                    .kv_u32("tokenizer.ggml.eos_token_id", normal as u32 + 1)
                    .kv_bool("tokenizer.ggml.add_bos_token", false);
                tokens.len() as u64
            }
            TinyTokenizer::Spm => {
                let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
                tokens.extend(specials.map(String::from));
                tokens.extend(["<0x0A>", "<0xE6>", "<0x96>", "<0x87>"].map(String::from));
                tokens.push("\u{2581}".into());
                tokens.extend((b'a'..=b'z').map(|c| char::from(c).to_string()));
                tokens.extend(["\u{2581}h", "he"].map(String::from));
                if long_token > 0 {
                    tokens.push("a".repeat(long_token));
                }
                let types: Vec<i32> = (0..tokens.len())
                    .map(|i| match i {
                        0 => 2,
                        1..=5 => 3,
                        6..=9 => 6,
                        _ => 1,
                    })
                    .collect();
                let scores: Vec<f32> = (0..tokens.len()).map(|i| -(i as f32)).collect();
                let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
                b = b
                    .kv_str("tokenizer.ggml.model", "llama")
                    .kv_str_array("tokenizer.ggml.tokens", &refs)
                    .kv_f32_array("tokenizer.ggml.scores", &scores)
                    .kv_i32_array("tokenizer.ggml.token_type", &types)
                    .kv_u32("tokenizer.ggml.bos_token_id", 1)
                    .kv_u32("tokenizer.ggml.eos_token_id", 2);
                tokens.len() as u64
            }
        };
        if let Some(t) = template {
            b = b.kv_str("tokenizer.chat_template", t);
        }
        let embd = if tokenizer == TinyTokenizer::Gpt2 { (8, q8_0(vocab, e, 1)) } else { (2, q4_0(vocab, e, 1)) };
        b = b.tensor_data("token_embd.weight", &[e, vocab], embd.0, &embd.1).tensor_data("output_norm.weight", &[e], 0, &f32s(e, norm));
        let matrices = [
            ("attn_q", e, e),
            ("attn_k", e, kv),
            ("attn_v", e, kv),
            ("attn_output", e, e),
            ("ffn_gate", e, ff),
            ("ffn_up", e, ff),
            ("ffn_down", ff, e),
        ];
        for (i, (name, cols, rows)) in matrices.into_iter().enumerate() {
            // Q4_0, and Q8_0 for the last: both block formats, in few bytes.
            let (ty, data) = if name == "ffn_down" { (8, q8_0(rows, cols, i as u64 + 2)) } else { (2, q4_0(rows, cols, i as u64 + 2)) };
            b = b.tensor_data(&format!("blk.0.{name}.weight"), &[cols, rows], ty, &data);
        }
        b = b.tensor_data("blk.0.attn_norm.weight", &[e], 0, &f32s(e, norm)).tensor_data("blk.0.ffn_norm.weight", &[e], 0, &f32s(e, norm));
        if arch == "qwen2" {
            for (name, len) in [("attn_q", e), ("attn_k", kv), ("attn_v", kv)] {
                b = b.tensor_data(&format!("blk.0.{name}.bias"), &[len], 0, &f32s(len, 0.01));
            }
        }
        b.build(3)
    }
}
