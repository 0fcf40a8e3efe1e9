//! Sentence embedders from GGUF files in llama.cpp's `bert` layout, through the GGUF
//! loader the LMs use.
//!
//! llama.cpp's converter renames the tensors (`blk.N.attn_q.weight`, ...), keeps the shape
//! and pooling in `bert.*` metadata, and rewrites the WordPiece vocabulary in a
//! "phantom space" form: a word-initial piece `foo` becomes `▁foo`, a continuation
//! `##bar` becomes `bar`, bracketed specials stay. Here the vocabulary is turned back into
//! WordPiece for HF `tokenizers` (with BERT's normalizer, lower-casing as llama.cpp's WPM
//! tokenizer does, and `[CLS] … [SEP]` around each text), and each tensor is read by its
//! Hugging Face name through [`hf_to_gguf`], so the encoder is the same code either way.
//! Tested by converting the test model's safetensors to GGUF the way llama.cpp's converter
//! names and lays it out (`tests/embed_parity.rs`): same vectors as from safetensors.

use std::collections::HashMap;

use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::Tokenizer;

use super::config::{BertShape, EmbedderConfig, Pooling};
use crate::gguf::{GgufFile, MetaValue};
use crate::source::ByteSource;
use crate::Error;

/// The GGUF name of a tensor named `hf` in a Hugging Face BERT checkpoint.
pub fn hf_to_gguf(hf: &str) -> Option<String> {
    let (base, suffix) = hf.rsplit_once('.')?;
    let name = match base {
        "embeddings.word_embeddings" => "token_embd".to_owned(),
        "embeddings.position_embeddings" => "position_embd".to_owned(),
        "embeddings.token_type_embeddings" => "token_types".to_owned(),
        "embeddings.LayerNorm" => "token_embd_norm".to_owned(),
        _ => {
            let rest = base.strip_prefix("encoder.layer.")?;
            let (layer, part) = rest.split_once('.')?;
            let part = match part {
                "attention.self.query" => "attn_q",
                "attention.self.key" => "attn_k",
                "attention.self.value" => "attn_v",
                "attention.output.dense" => "attn_output",
                "attention.output.LayerNorm" => "attn_output_norm",
                "intermediate.dense" => "ffn_up",
                "output.dense" => "ffn_down",
                "output.LayerNorm" => "layer_output_norm",
                _ => return None,
            };
            format!("blk.{layer}.{part}")
        }
    };
    Some(format!("{name}.{suffix}"))
}

fn meta_usize(file: &GgufFile, key: &str) -> Result<usize, Error> {
    file.get(key)
        .and_then(MetaValue::as_u64)
        .filter(|v| *v > 0 && *v < 1 << 24)
        .map(|v| v as usize)
        .ok_or_else(|| Error::BadConfig { file: "GGUF metadata".into(), reason: format!("'{key}' is missing or not a positive integer") })
}

/// The configuration and tokenizer a `bert` GGUF file describes.
pub fn read_config(file: &GgufFile) -> Result<(EmbedderConfig, Tokenizer), Error> {
    let arch = file.architecture().unwrap_or("");
    if arch != "bert" {
        return Err(Error::UnsupportedEmbedder { what: format!("GGUF architecture '{arch}' (bert encoders are supported)") });
    }
    let tokens: Vec<&str> = file
        .get("tokenizer.ggml.tokens")
        .and_then(MetaValue::as_array)
        .map(|a| a.iter().filter_map(MetaValue::as_str).collect())
        .unwrap_or_default();
    let types = file.tensor("token_types.weight").and_then(|t| t.dims.get(1).copied()).unwrap_or(2) as usize;
    let shape = BertShape {
        vocab: tokens.len(),
        hidden: meta_usize(file, "bert.embedding_length")?,
        layers: meta_usize(file, "bert.block_count")?,
        heads: meta_usize(file, "bert.attention.head_count")?,
        intermediate: meta_usize(file, "bert.feed_forward_length")?,
        max_positions: meta_usize(file, "bert.context_length")?,
        type_vocab: types,
        layer_norm_eps: file.get("bert.attention.layer_norm_epsilon").and_then(MetaValue::as_f64).unwrap_or(1e-12),
        position_offset: 0,
    };
    if !shape.hidden.is_multiple_of(shape.heads) {
        return Err(Error::BadConfig {
            file: "GGUF metadata".into(),
            reason: format!("embedding_length {} is not a multiple of head_count {}", shape.hidden, shape.heads),
        });
    }
    // llama.cpp's pooling types: 0 none, 1 mean, 2 cls, 3 last.
    let pooling = match file.get("bert.pooling_type").and_then(MetaValue::as_u64) {
        None | Some(1) => Pooling::Mean,
        Some(2) => Pooling::Cls,
        Some(3) => Pooling::Last,
        Some(p) => return Err(Error::UnsupportedEmbedder { what: format!("bert.pooling_type {p} (mean, cls and last are supported)") }),
    };
    let tokenizer = wordpiece(file, &tokens)?;
    let config =
        EmbedderConfig { max_tokens: shape.max_positions, shape, pooling, query_prefix: String::new(), passage_prefix: String::new() };
    Ok((config, tokenizer))
}

/// The WordPiece tokenizer behind a phantom-space vocabulary.
fn wordpiece(file: &GgufFile, tokens: &[&str]) -> Result<Tokenizer, Error> {
    let model = file.get("tokenizer.ggml.model").and_then(MetaValue::as_str).unwrap_or("");
    if model != "bert" {
        return Err(Error::UnsupportedEmbedder {
            what: format!("tokenizer.ggml.model '{model}' (a bert WordPiece vocabulary is supported)"),
        });
    }
    let mut vocab = HashMap::with_capacity(tokens.len());
    for (id, t) in tokens.iter().enumerate() {
        let piece = if let Some(word) = t.strip_prefix('\u{2581}') {
            word.to_owned()
        } else if t.starts_with('[') && t.ends_with(']') {
            (*t).to_owned()
        } else {
            format!("##{t}")
        };
        vocab.entry(piece).or_insert(id as u32);
    }
    let special = |key: &str, fallback: &str| -> Result<(String, u32), Error> {
        let id = file.get(key).and_then(MetaValue::as_u64).map(|v| v as u32).or_else(|| vocab.get(fallback).copied());
        let id = id
            .filter(|&i| (i as usize) < tokens.len())
            .ok_or_else(|| Error::EmbedderTokenizer { reason: format!("the vocabulary has no {fallback} token ({key})") })?;
        Ok((tokens[id as usize].to_owned(), id))
    };
    let (cls, sep, unk) = (
        special("tokenizer.ggml.cls_token_id", "[CLS]")?,
        special("tokenizer.ggml.seperator_token_id", "[SEP]")?,
        special("tokenizer.ggml.unknown_token_id", "[UNK]")?,
    );
    let wp = WordPiece::builder()
        .vocab(vocab.into_iter().collect::<ahash::AHashMap<String, u32>>())
        .unk_token(unk.0)
        .continuing_subword_prefix("##".into())
        .build()
        .map_err(|e| Error::EmbedderTokenizer { reason: e.to_string() })?;
    let mut tokenizer = Tokenizer::new(wp);
    tokenizer.with_normalizer(Some(BertNormalizer::new(true, true, None, true)));
    tokenizer.with_pre_tokenizer(Some(BertPreTokenizer));
    tokenizer.with_post_processor(Some(BertProcessing::new(sep, cls)));
    Ok(tokenizer)
}

/// Read the tensor named `hf` (Hugging Face name, PyTorch shape `shape`) from `file` as
/// f32, whatever GGML type it is stored in.
pub fn read_tensor(file: &GgufFile, src: &dyn ByteSource, hf: &str, shape: &[usize]) -> Result<Vec<f32>, Error> {
    let bad = |reason: String| Error::BadConfig { file: "GGUF tensors".into(), reason };
    let name = hf_to_gguf(hf).ok_or_else(|| bad(format!("no GGUF name for {hf}")))?;
    let t = file.tensor(&name).ok_or_else(|| bad(format!("tensor {name} is missing")))?;
    // GGML lists dimensions innermost first.
    let want: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
    if t.dims != want {
        return Err(bad(format!("tensor {name} has shape {:?}, expected {want:?}", t.dims)));
    }
    let bytes = file.tensor_bytes(src, t).map_err(|e| bad(format!("{name}: {e}")))?;
    let mut out = Vec::with_capacity(t.elements() as usize);
    crate::quant::dequantize(t.ggml_type, &bytes, &mut out).map_err(|e| bad(format!("{name}: {e}")))?;
    Ok(out)
}
