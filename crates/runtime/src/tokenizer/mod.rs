//! Tokenizers built from a GGUF file's own metadata, with HF's `tokenizers` crate.
//!
//! A GGUF file carries its whole tokenizer: `tokenizer.ggml.model` (`gpt2` for byte-level
//! BPE, `llama` for SentencePiece), the tokens, the merges or scores, each token's type, the
//! special ids, and `tokenizer.ggml.pre`, a name for the pre-tokenizer (the regex that cuts
//! text into words before BPE). The name is all llama.cpp stores, so [`pretokenizer`] maps
//! each name to the regexes llama.cpp uses for it; that is what makes our ids match
//! llama.cpp's rather than merely HF's.
//!
//! Special tokens (`<|im_start|>`, …) in the text are always recognised as special, as
//! llama.cpp does with `parse_special`, because the chat templates put them there.
//!
//! Hugging Face checkpoints bring their own `tokenizer.json`, which the crate reads as is
//! ([`Tokenizer::from_hf`]); `tokenizer_config.json` supplies BOS/EOS and whether prompts
//! start with BOS.

mod pretokenizer;
mod spm;

use std::fmt;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

use crate::gguf::{GgufFile, MetaValue};
use crate::Error;

pub use pretokenizer::PreTokenizerKind;

/// The most token ids a vocabulary may span. The largest real vocabularies have about
/// 256k tokens; a file that claims more is refused before anything is allocated for it.
pub const MAX_VOCABULARY: usize = 1 << 21;

fn lib_err(e: impl fmt::Display) -> Error {
    Error::TokenizerLibrary { message: e.to_string() }
}

/// GGUF token types (`tokenizer.ggml.token_type`), as llama.cpp numbers them.
mod token_type {
    pub const CONTROL: i64 = 3;
    pub const USER_DEFINED: i64 = 4;
}

/// A model's tokenizer.
pub struct Tokenizer {
    inner: HfTokenizer,
    tokens: Vec<String>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    /// Ids that end a generation: EOS, and end-of-turn tokens such as `<|im_end|>`.
    stop_ids: Vec<u32>,
    special: Vec<bool>,
    pre: Option<PreTokenizerKind>,
    /// Tokens are byte-level BPE strings (GPT-2's byte alphabet); otherwise SentencePiece.
    byte_level: bool,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer").field("vocab", &self.tokens.len()).field("pre", &self.pre).finish()
    }
}

fn strings(gguf: &GgufFile, key: &'static str) -> Result<Vec<String>, Error> {
    let arr = gguf.get(key).and_then(MetaValue::as_array).ok_or(Error::TokenizerMetadata { key })?;
    arr.iter().map(|v| v.as_str().map(str::to_owned).ok_or(Error::TokenizerMetadata { key })).collect()
}

fn ints(gguf: &GgufFile, key: &'static str) -> Result<Option<Vec<i64>>, Error> {
    let Some(v) = gguf.get(key) else { return Ok(None) };
    let arr = v.as_array().ok_or(Error::TokenizerMetadata { key })?;
    arr.iter()
        .map(|v| match *v {
            MetaValue::I32(x) => Ok(i64::from(x)),
            ref other => other.as_u64().map(|x| x as i64).ok_or(Error::TokenizerMetadata { key }),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn id(gguf: &GgufFile, key: &str, vocab: usize) -> Option<u32> {
    gguf.get(key).and_then(MetaValue::as_u64).filter(|&v| (v as usize) < vocab).map(|v| v as u32)
}

/// `stop_ids` plus the end-of-turn control tokens chat models use, which are not always
/// declared as EOS or EOT.
fn with_turn_ends(mut stop_ids: Vec<u32>, tokens: &[String], special: &[bool]) -> Vec<u32> {
    for name in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>"] {
        if let Some(i) = tokens.iter().position(|t| t == name) {
            if special[i] && !stop_ids.contains(&(i as u32)) {
                stop_ids.push(i as u32);
            }
        }
    }
    stop_ids
}

/// A Hugging Face tokenizer from `tokenizer.json` bytes, with the JSON as a value. The
/// bytes are parsed as JSON first, and malformed JSON is an error here: the `tokenizers`
/// crate (0.22) panics instead of erring on malformed JSON inside the `decoder` object
/// (`.expect("Helper")` in its decoder deserializer; a fuzz finding).
pub(crate) fn hf_tokenizer_from_json(json: &[u8]) -> Result<(HfTokenizer, serde_json::Value), String> {
    let raw: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let inner = HfTokenizer::from_bytes(json).map_err(|e| e.to_string())?;
    Ok((inner, raw))
}

/// Whether a tokenizer.json component (or any in its sequence) has `"type": name`.
fn mentions_type(v: &serde_json::Value, name: &str) -> bool {
    match v {
        serde_json::Value::Object(m) => m.get("type").and_then(|t| t.as_str()) == Some(name) || m.values().any(|x| mentions_type(x, name)),
        serde_json::Value::Array(a) => a.iter().any(|x| mentions_type(x, name)),
        _ => false,
    }
}

/// Whether the special tokens in a text swallow the whitespace after them, as llama.cpp
/// sets them for a file whose `general.name` names Phi-3 (`phi-3` or `phi3`, any case),
/// after Phi-3's own tokenizer: its chat template puts a newline after each role token,
/// and the model was trained without it.
fn strips_after_specials(gguf: &GgufFile) -> bool {
    let name = gguf.get("general.name").and_then(MetaValue::as_str).unwrap_or("").to_lowercase();
    name.contains("phi-3") || name.contains("phi3")
}

/// The special tokens that keep the whitespace after them even then.
const KEEPS_FOLLOWING_SPACE: [&str; 3] = ["<unk>", "<s>", "<|endoftext|>"];

impl Tokenizer {
    /// Build the tokenizer a GGUF file describes.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self, Error> {
        let model =
            gguf.get("tokenizer.ggml.model").and_then(MetaValue::as_str).ok_or(Error::TokenizerMetadata { key: "tokenizer.ggml.model" })?;
        let tokens = strings(gguf, "tokenizer.ggml.tokens")?;
        let types = ints(gguf, "tokenizer.ggml.token_type")?.unwrap_or_default();
        let n = tokens.len();
        if n > MAX_VOCABULARY {
            return Err(Error::VocabularyTooLarge { id: n as u64 - 1 });
        }
        // Types are looked up by token position: one per token, or none at all.
        if !types.is_empty() && types.len() != n {
            return Err(Error::TokenizerLengthMismatch { key: "tokenizer.ggml.token_type", tokens: n, found: types.len() });
        }
        let bos = id(gguf, "tokenizer.ggml.bos_token_id", n);
        let eos = id(gguf, "tokenizer.ggml.eos_token_id", n);
        let (mut inner, pre, default_add_bos) = match model {
            "gpt2" => {
                let pre_name = gguf.get("tokenizer.ggml.pre").and_then(MetaValue::as_str).unwrap_or("default");
                let pre =
                    PreTokenizerKind::from_name(pre_name).ok_or_else(|| Error::UnsupportedPreTokenizer { pre: pre_name.to_owned() })?;
                let merges = strings(gguf, "tokenizer.ggml.merges")?
                    .into_iter()
                    .map(|line| match line.split_once(' ') {
                        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
                        _ => Err(Error::BadMerge { line }),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
                let bpe = BPE::builder().vocab_and_merges(vocab, merges).ignore_merges(pre.ignores_merges()).build().map_err(lib_err)?;
                let mut t = HfTokenizer::new(bpe);
                t.with_pre_tokenizer(Some(pre.build()?));
                t.with_decoder(Some(ByteLevelDecoder::default()));
                (t, Some(pre), pre.adds_bos())
            }
            "llama" => {
                let scores = gguf
                    .get("tokenizer.ggml.scores")
                    .and_then(MetaValue::as_array)
                    .ok_or(Error::TokenizerMetadata { key: "tokenizer.ggml.scores" })?
                    .iter()
                    .map(|v| v.as_f64().map(|x| x as f32).ok_or(Error::TokenizerMetadata { key: "tokenizer.ggml.scores" }))
                    .collect::<Result<Vec<_>, _>>()?;
                // Llama 2's files prefix a space to the text; Gemma's say not to.
                let prefix = gguf.get("tokenizer.ggml.add_space_prefix").and_then(MetaValue::as_bool).unwrap_or(true);
                (spm::build(&tokens, &scores, &types, prefix)?, None, true)
            }
            other => return Err(Error::UnsupportedTokenizer { model: other.to_owned() }),
        };
        let mut special = vec![false; n];
        let strips = strips_after_specials(gguf);
        let added: Vec<AddedToken> = types
            .iter()
            .enumerate()
            .filter(|&(_, &t)| t == token_type::CONTROL || t == token_type::USER_DEFINED)
            .map(|(i, &t)| {
                special[i] = t == token_type::CONTROL;
                let rstrip = strips && !KEEPS_FOLLOWING_SPACE.contains(&tokens[i].as_str());
                AddedToken::from(tokens[i].clone(), true).normalized(false).rstrip(rstrip)
            })
            .collect();
        inner.add_special_tokens(&added);
        let add_bos = gguf
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| if let MetaValue::Bool(b) = v { Some(*b) } else { None })
            .unwrap_or(default_add_bos);
        let mut stop_ids: Vec<u32> = eos.into_iter().collect();
        if let Some(eot) = id(gguf, "tokenizer.ggml.eot_token_id", n) {
            stop_ids.push(eot);
        }
        let stop_ids = with_turn_ends(stop_ids, &tokens, &special);
        Ok(Tokenizer { inner, tokens, bos, eos, add_bos, stop_ids, special, byte_level: pre.is_some(), pre })
    }

    /// Build a Hugging Face tokenizer from its `tokenizer.json` bytes, with the model's
    /// `tokenizer_config.json` (BOS/EOS tokens, `add_bos_token`; `null` when absent).
    pub fn from_hf(json: &[u8], config: &serde_json::Value) -> Result<Self, Error> {
        let (inner, raw) = hf_tokenizer_from_json(json).map_err(|message| Error::TokenizerJson { message })?;
        let vocab = inner.get_vocab(true);
        let largest = vocab.values().copied().max();
        if let Some(id) = largest.filter(|&i| i as usize >= MAX_VOCABULARY) {
            return Err(Error::VocabularyTooLarge { id: u64::from(id) });
        }
        let n = largest.map_or(0, |i| i as usize + 1);
        let mut tokens = vec![String::new(); n];
        for (t, &i) in &vocab {
            tokens[i as usize] = t.clone();
        }
        let mut special = vec![false; n];
        for (&i, t) in inner.get_added_tokens_decoder().iter() {
            if t.special && (i as usize) < n {
                special[i as usize] = true;
            }
        }
        // `"<s>"` or `{"content": "<s>", …}` in tokenizer_config.json.
        let token_id = |key: &str| -> Option<u32> {
            let v = config.get(key)?;
            let text = v.as_str().or_else(|| v.get("content").and_then(|c| c.as_str()))?;
            inner.token_to_id(text)
        };
        let (bos, eos) = (token_id("bos_token"), token_id("eos_token"));
        let add_bos = config.get("add_bos_token").and_then(|v| v.as_bool()).unwrap_or(false);
        let byte_level = ["decoder", "pre_tokenizer"].iter().any(|k| raw.get(*k).is_some_and(|v| mentions_type(v, "ByteLevel")));
        let stop_ids = with_turn_ends(eos.into_iter().collect(), &tokens, &special);
        Ok(Tokenizer { inner, tokens, bos, eos, add_bos, stop_ids, special, pre: None, byte_level })
    }

    /// The tokenizer as a Hugging Face `tokenizer.json` (what [`Tokenizer::from_hf`] reads).
    pub fn to_hf_json(&self) -> Result<String, Error> {
        self.inner.to_string(true).map_err(lib_err)
    }

    /// Token ids of `text`, without BOS. Special-token text becomes the special token.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        let enc = self.inner.encode_fast(text, false).map_err(lib_err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Token ids of a prompt: BOS first when the model wants one (as llama.cpp adds it).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        if self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend(self.encode(text)?);
        Ok(ids)
    }

    /// The text of a sequence of ids (special tokens included as their text).
    pub fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        if let Some(&id) = ids.iter().find(|&&i| i as usize >= self.tokens.len()) {
            return Err(Error::UnknownTokenId { id });
        }
        self.inner.decode(ids, false).map_err(lib_err)
    }

    /// The raw bytes one token stands for (byte-level BPE tokens may be part of a UTF-8
    /// character, so streaming output works in bytes).
    pub fn token_bytes(&self, id: u32) -> Result<Vec<u8>, Error> {
        let tok = self.tokens.get(id as usize).ok_or(Error::UnknownTokenId { id })?;
        if self.special[id as usize] {
            return Ok(tok.as_bytes().to_vec());
        }
        Ok(if self.byte_level { pretokenizer::byte_level_to_bytes(tok) } else { spm::piece_bytes(tok) })
    }

    /// The vocabulary's token strings, as stored.
    pub fn token_str(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// Beginning-of-sequence id.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence id.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether prompts start with BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Ids that end generation.
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// Whether an id is a control token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests;
