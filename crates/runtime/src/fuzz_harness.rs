//! Fuzz harnesses of the model loaders, shared by the cargo-fuzz targets (`fuzz/`) and the
//! corpus regression test (`tests/fuzz_corpus.rs`), so both run exactly the same code. Not
//! a public API. (The core's harnesses, and the time and allocation meter, are in
//! `docmem_core::fuzz_harness`.)
//!
//! A model file is untrusted input: whatever its bytes, loading returns a model or a typed
//! error, and a model that loads renders a chat, tokenizes it and runs a few tokens
//! without panicking.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use docmem_core::embed::EmbedRole;

use crate::chat::ChatMessage;
use crate::embed::{EmbedderOptions, Precision, SentenceEmbedder};
use crate::lm::{Lm, LoadOptions, SamplingParams};
use crate::source::MemorySource;

/// How every harness loads a model: one thread, a small context.
fn options() -> LoadOptions {
    LoadOptions { threads: 1, context: 64, ..LoadOptions::default() }
}

/// The conversation a loaded model renders: a system turn, a user turn with Chinese text
/// and a control token's text, an assistant turn, and a user turn again.
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You answer from the documents."),
        ChatMessage::new("user", "hello world 文档 <|im_end|>\n?"),
        ChatMessage::new("assistant", "Hi."),
        ChatMessage::new("user", "Where?"),
    ]
}

/// Render the conversation, tokenize it, and run a few of its tokens and three generated
/// ones through the model. Errors are fine; panics are not.
fn exercise(lm: &Lm) {
    let Ok(text) = lm.render_chat(&conversation()) else { return };
    let Ok(ids) = lm.tokenizer.encode_prompt(&text) else { return };
    for &id in &ids {
        let _ = lm.tokenizer.token_bytes(id);
    }
    let _ = lm.tokenizer.decode(&ids);
    let head: Vec<u32> = ids.iter().copied().take(8).collect();
    if head.is_empty() {
        return;
    }
    if let Ok(prefix) = crate::block_on(lm.prefill(head, crate::lm::PrefillOptions::default())).map(|p| p.prefix) {
        assert_eq!(prefix.last_logits().len(), lm.config().vocab, "one logit per vocabulary entry");
        let params = SamplingParams { max_tokens: 3, ..SamplingParams::default() };
        let _ = crate::block_on(lm.generate_after(&prefix, "", &params, |_| ControlFlow::Continue(())));
    }
}

/// Bytes as a chat template's source (UTF-8, or nothing runs): compiled, then the
/// conversation rendered with and without the generation prompt. A hostile template must
/// stop at a limit (an [`Error`](crate::Error)), never run long or grow without bound.
pub fn chat_template(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else { return };
    let Ok(template) = crate::chat::ChatTemplate::new(Some(source), "<s>", "</s>") else { return };
    for add_generation_prompt in [false, true] {
        let _ = template.render(&conversation(), add_generation_prompt);
    }
}

/// Bytes as a GGUF model file, through the whole load path from memory (`Lm::load_from`:
/// header, hyper-parameters, tokenizer from the metadata, chat template, tensors), then
/// [`exercise`]d.
pub fn gguf_load(data: &[u8]) {
    let src = MemorySource::new(data.to_vec());
    if let Ok(lm) = Lm::load_from(&src, &options()) {
        exercise(&lm);
    }
}

/// What separates the files in an [`hf_checkpoint`] input.
pub const PART_SEPARATOR: &[u8] = b"\n--docmem-fuzz-part--\n";

/// The files of an [`hf_checkpoint`] input, in order.
pub const PART_NAMES: [&str; 4] = ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"];

/// An [`hf_checkpoint`] input from files by name (those of [`PART_NAMES`]; a missing one
/// is an empty part, and the parts after the last present one are left out).
pub fn hf_input(files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let last = PART_NAMES.iter().rposition(|n| files.contains_key(*n)).map_or(0, |i| i + 1);
    let parts: Vec<&[u8]> = PART_NAMES[..last].iter().map(|n| files.get(*n).map_or(&[][..], Vec::as_slice)).collect();
    parts.join(PART_SEPARATOR)
}

/// The most tensor data [`hf_files`] fills in for a header-only `model.safetensors`.
pub const FILL_LIMIT: u64 = 4 << 20;

/// The files of an [`hf_checkpoint`] input: the parts between [`PART_SEPARATOR`]s, named
/// in the order of [`PART_NAMES`] (an empty part is a missing file). A `model.safetensors`
/// that ends exactly where its header does gets the tensor data its header declares
/// (up to [`FILL_LIMIT`] bytes of a fixed pattern of small values), so the corpus holds
/// headers rather than weights; one with any bytes after its header is used as it is, so
/// truncated and damaged data are fuzzed too.
pub fn hf_files(data: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut rest = data;
    for name in PART_NAMES {
        let (part, tail) = match rest.windows(PART_SEPARATOR.len()).position(|w| w == PART_SEPARATOR) {
            Some(i) => (&rest[..i], &rest[i + PART_SEPARATOR.len()..]),
            None => (rest, &[][..]),
        };
        if !part.is_empty() {
            files.insert(name.to_owned(), part.to_vec());
        }
        rest = tail;
    }
    if let Some(st) = files.get_mut("model.safetensors") {
        fill_safetensors(st);
    }
    files
}

/// Append the data a header-only safetensors file declares (see [`hf_files`]).
fn fill_safetensors(st: &mut Vec<u8>) {
    let Some(len) = st.get(..8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])) else { return };
    if len.checked_add(8) != Some(st.len() as u64) {
        return;
    }
    let Ok(serde_json::Value::Object(header)) = serde_json::from_slice::<serde_json::Value>(&st[8..]) else { return };
    let end = header.values().filter_map(|t| t.get("data_offsets")?.as_array()?.get(1)?.as_u64()).max().unwrap_or(0);
    if end <= FILL_LIMIT {
        // Little-endian pairs whose high byte makes a small half (or bfloat16) float.
        st.extend((0..end).map(|i| if i % 2 == 1 { 0x2C + (i / 2 % 7) as u8 } else { (i * 37 % 251) as u8 }));
    }
}

/// The header of a safetensors file, without its data (what [`hf_files`] fills in).
pub fn safetensors_header(st: &[u8]) -> Vec<u8> {
    let len = st.get(..8).map_or(0, |b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]));
    st[..usize::try_from(len.saturating_add(8)).unwrap_or(usize::MAX).min(st.len())].to_vec()
}

/// Bytes as a Hugging Face checkpoint held in memory ([`hf_files`]: `model.safetensors`,
/// `config.json`, `tokenizer.json`, `tokenizer_config.json`), loaded as a decoder
/// (`Lm::load_hf_files`, then [`exercise`]d) and as a sentence embedder
/// (`SentenceEmbedder::from_files`, then three texts embedded, one vector of the model's width
/// each).
pub fn hf_checkpoint(data: &[u8]) {
    let files = hf_files(data);
    if let Ok(lm) = Lm::load_hf_files(files.clone(), &options()) {
        exercise(&lm);
    }
    let options = EmbedderOptions { precision: Precision::F32, threads: 1 };
    if let Ok(embedder) = SentenceEmbedder::from_files(files, "fuzz", options) {
        if let Ok(out) = embedder.embed(&["hello world", "文档记忆", ""], EmbedRole::Passage) {
            assert_eq!(out.vectors.len(), 3);
            assert!(out.vectors.iter().all(|v| v.len() == embedder.dim()), "one vector of the model's width per text");
        }
    }
}

/// Seeds: small valid checkpoints built in code (the real models are far too large for a
/// corpus).
pub mod seeds {
    use std::collections::BTreeMap;

    use crate::gguf::testing::{tiny_lm, TinyTokenizer};
    use crate::model::hf_export::export_gguf;
    use crate::safetensors::{self, Dtype};
    use crate::source::MemorySource;

    /// A chat template in the style of SmolLM2's (a default system turn, ChatML turns).
    pub const SMOLLM_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    /// A [`tiny_lm`] written out as a Hugging Face checkpoint (F16 safetensors,
    /// `config.json`, `tokenizer.json`, `tokenizer_config.json`), as files by name.
    pub fn tiny_hf_lm(arch: &str, tokenizer: TinyTokenizer, template: Option<&str>) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
        let gguf = MemorySource::new(tiny_lm(arch, tokenizer, template));
        let dir = std::env::temp_dir().join(format!("docmem-fuzz-seed-{arch}-{tokenizer:?}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let result = export_gguf(&gguf, &dir, Dtype::F16).map_err(std::io::Error::other).and_then(|()| {
            let mut files = BTreeMap::new();
            for name in super::PART_NAMES {
                let mut bytes = std::fs::read(dir.join(name))?;
                if name.ends_with(".json") {
                    // Compact: the corpus is kept small.
                    bytes = serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&bytes)?)?;
                }
                files.insert(name.to_owned(), bytes);
            }
            Ok(files)
        });
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    /// A BERT sentence embedder of one layer, width 32 and a 32-token WordPiece vocabulary
    /// (F16 safetensors, `config.json`, `tokenizer.json`), as files by name.
    pub fn tiny_bert() -> BTreeMap<String, Vec<u8>> {
        let (h, ff, positions, vocab) = (32u64, 64u64, 16u64, 32u64);
        let mut tensors: Vec<(String, Vec<u64>)> = vec![
            ("embeddings.word_embeddings.weight".into(), vec![vocab, h]),
            ("embeddings.position_embeddings.weight".into(), vec![positions, h]),
            ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        let layer = |s: &str| format!("encoder.layer.0.{s}");
        for p in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"] {
            tensors.push((layer(&format!("{p}.weight")), vec![h, h]));
            tensors.push((layer(&format!("{p}.bias")), vec![h]));
        }
        for p in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push((layer(&format!("{p}.weight")), vec![h]));
            tensors.push((layer(&format!("{p}.bias")), vec![h]));
        }
        tensors.push((layer("intermediate.dense.weight"), vec![ff, h]));
        tensors.push((layer("intermediate.dense.bias"), vec![ff]));
        tensors.push((layer("output.dense.weight"), vec![h, ff]));
        tensors.push((layer("output.dense.bias"), vec![h]));
        let mut weights = Vec::new();
        safetensors::write::<std::io::Error>(&tensors, Dtype::F16, &mut weights, |i| {
            let n: u64 = tensors[i].1.iter().product();
            let norm = tensors[i].0.contains("LayerNorm.weight");
            Ok((0..n).map(|j| if norm { 1.0 } else { ((j * 7 + i as u64) % 13) as f32 / 64.0 - 0.09 }).collect())
        })
        .expect("writing to memory cannot fail");
        let config = serde_json::json!({
            "model_type": "bert", "hidden_size": h, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": ff, "max_position_embeddings": positions, "type_vocab_size": 2,
            "layer_norm_eps": 1e-12, "hidden_act": "gelu", "vocab_size": vocab,
        });
        let mut words: Vec<String> =
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "文", "档", "记", "忆"].map(String::from).to_vec();
        words.extend((b'a'..=b'z').map(|c| char::from(c).to_string()).take(vocab as usize - words.len() - 2));
        words.extend(["##o", "##d"].map(String::from));
        let vocab_map: serde_json::Map<String, serde_json::Value> = words.iter().enumerate().map(|(i, w)| (w.clone(), i.into())).collect();
        let special = |id: usize, content: &str| serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
        let tokenizer = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"), special(3, "[SEP]")],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab_map},
        });
        let json = |v: &serde_json::Value| serde_json::to_vec(v).expect("JSON values serialize");
        BTreeMap::from([
            ("model.safetensors".to_owned(), weights),
            ("config.json".to_owned(), json(&config)),
            ("tokenizer.json".to_owned(), json(&tokenizer)),
        ])
    }
}

/// Bytes as a PDF a user dropped: the text of its pages, or a typed error, never a panic
/// or an abort. Its streams may inflate to 16 MiB here (the product allows 256 MiB, more
/// than the meter's peak), so a decompression bomb must be refused as `TooLarge` before
/// the extractor inflates it. Text that comes back is not blank, and its pages are
/// separated as citations expect (a form feed on its own line).
#[cfg(feature = "pdf")]
pub fn pdf(data: &[u8]) {
    use crate::pipeline::pdf::pdf_text_within;
    const LIMIT: u64 = 16 << 20;
    match pdf_text_within(data, LIMIT) {
        Ok(text) => {
            assert!(!text.trim().is_empty(), "text that comes back is not blank");
            for (i, c) in text.char_indices().filter(|&(_, c)| c == docmem_core::document::PAGE_BREAK) {
                assert!(text[..i].ends_with('\n') && text[i + c.len_utf8()..].starts_with('\n'), "a page break stands on its own line");
            }
        }
        Err(crate::Error::PdfTooLarge { limit }) => assert_eq!(limit, LIMIT),
        Err(_) => {}
    }
}
