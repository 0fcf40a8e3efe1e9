use std::collections::BTreeMap;

use super::*;

fn gguf(meta: Vec<(&str, MetaValue)>) -> GgufFile {
    let metadata: BTreeMap<String, MetaValue> = meta.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    GgufFile { version: 3, metadata, tensors: Vec::new(), alignment: 32, data_offset: 0 }
}

fn strs(items: &[&str]) -> MetaValue {
    MetaValue::Array(items.iter().map(|s| MetaValue::String((*s).to_owned())).collect())
}

fn i32s(items: &[i32]) -> MetaValue {
    MetaValue::Array(items.iter().map(|&v| MetaValue::I32(v)).collect())
}

/// A byte-level BPE over "hello world" with one control token.
fn toy_bpe() -> GgufFile {
    let tokens =
        ["h", "e", "l", "o", "Ġ", "w", "r", "d", "he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "Ġworld", "ld", "<|im_end|>", "1", "2"];
    let mut types = vec![1; tokens.len()];
    types[17] = 3;
    gguf(vec![
        ("tokenizer.ggml.model", MetaValue::String("gpt2".into())),
        ("tokenizer.ggml.pre", MetaValue::String("smollm".into())),
        ("tokenizer.ggml.tokens", strs(&tokens)),
        ("tokenizer.ggml.token_type", i32s(&types)),
        ("tokenizer.ggml.merges", strs(&["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"])),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(17)),
    ])
}

#[test]
fn byte_level_bpe_merges_and_specials() {
    let t = Tokenizer::from_gguf(&toy_bpe()).unwrap();
    assert_eq!(t.encode("hello world").unwrap(), vec![11, 15]);
    // The control token is cut out of the text, not spelled.
    assert_eq!(t.encode("hello<|im_end|>").unwrap(), vec![11, 17]);
    // smollm splits digits one by one.
    assert_eq!(t.encode("12").unwrap(), vec![18, 19]);
    assert_eq!(t.decode(&[11, 15]).unwrap(), "hello world");
    assert_eq!(t.token_bytes(15).unwrap(), b" world");
    assert_eq!(t.token_bytes(17).unwrap(), b"<|im_end|>");
    assert!(t.stop_ids().contains(&17));
    assert!(!t.adds_bos());
    assert!(matches!(t.decode(&[99]), Err(Error::UnknownTokenId { id: 99 })));
}

#[test]
fn unknown_pre_tokenizer_is_named() {
    let mut g = toy_bpe();
    g.metadata.insert("tokenizer.ggml.pre".into(), MetaValue::String("tekken".into()));
    let err = Tokenizer::from_gguf(&g).unwrap_err();
    assert!(err.to_string().contains("tekken"), "{err}");
}

#[test]
fn bad_merge_line_is_an_error() {
    let mut g = toy_bpe();
    g.metadata.insert("tokenizer.ggml.merges".into(), strs(&["nospace"]));
    assert!(matches!(Tokenizer::from_gguf(&g), Err(Error::BadMerge { .. })));
}

#[test]
fn sentencepiece_merges_by_score_with_byte_fallback() {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"].iter().map(|s| s.to_string()).collect();
    let mut scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -3.0, -4.0, -0.5];
    let mut types = vec![2, 3, 3, 1, 1, 1, 1, 1, 1];
    for b in 0..=255u32 {
        tokens.push(format!("<0x{b:02X}>"));
        scores.push(-100.0);
        types.push(6);
    }
    let names: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut g = gguf(vec![
        ("tokenizer.ggml.model", MetaValue::String("llama".into())),
        ("tokenizer.ggml.tokens", strs(&names)),
        ("tokenizer.ggml.scores", MetaValue::Array(scores.iter().map(|&s| MetaValue::F32(s)).collect())),
        ("tokenizer.ggml.token_type", i32s(&types)),
        ("tokenizer.ggml.bos_token_id", MetaValue::U32(1)),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(2)),
    ]);
    let t = Tokenizer::from_gguf(&g).unwrap();
    assert_eq!(t.encode("ab").unwrap(), vec![8]);
    assert_eq!(t.encode_prompt("ab a").unwrap(), vec![1, 8, 6]);
    // "é" has no piece: two byte tokens.
    let ids = t.encode("é").unwrap();
    assert_eq!(ids, vec![3, 9 + 0xC3, 9 + 0xA9]);
    assert_eq!(t.decode(&[8, 6]).unwrap(), "ab a");
    assert_eq!(t.token_bytes(9 + 0xC3).unwrap(), vec![0xC3]);
    // Gemma's files ask for no space before the text: "ab" is then its own piece, and
    // decoding keeps a leading space that was in the text.
    g.metadata.insert("tokenizer.ggml.add_space_prefix".into(), MetaValue::Bool(false));
    let t = Tokenizer::from_gguf(&g).unwrap();
    assert_eq!(t.encode("ab a").unwrap(), vec![7, 6]);
    assert_eq!(t.encode(" ab").unwrap(), vec![8]);
    assert_eq!(t.decode(&[8, 6]).unwrap(), " ab a");
}

/// Regression (fuzzing the GGUF load path): building the merges looked up both
/// halves of every cut of every piece, quadratic in a piece's length, so a model file with
/// one 1 MB token took about two minutes to load. Only cuts where both halves have the
/// length of some piece are looked up now; merges between long pieces are still found.
#[test]
fn a_sentencepiece_vocabulary_with_a_megabyte_token_builds_quickly_and_keeps_its_merges() {
    let (huge, x, y) = ("a".repeat(1 << 20), "x".repeat(5000), "y".repeat(5000));
    let xy = format!("{x}{y}");
    let names = ["<unk>", "a", "aa", huge.as_str(), x.as_str(), y.as_str(), xy.as_str()];
    let g = gguf(vec![
        ("tokenizer.ggml.model", MetaValue::String("llama".into())),
        ("tokenizer.ggml.tokens", strs(&names)),
        ("tokenizer.ggml.scores", MetaValue::Array((0..names.len()).map(|i| MetaValue::F32(-(i as f32))).collect())),
    ]);
    let start = std::time::Instant::now();
    let t = Tokenizer::from_gguf(&g).unwrap();
    assert!(start.elapsed().as_secs_f64() < 1.0, "{:?}", start.elapsed());
    assert_eq!(t.encode("aa").unwrap().last(), Some(&2));
    let json: serde_json::Value = serde_json::from_str(&t.to_hf_json().unwrap()).unwrap();
    let merges = json["model"]["merges"].as_array().unwrap();
    assert!(merges.contains(&serde_json::json!([x, y])), "the merge of two long pieces is kept");
    assert!(merges.contains(&serde_json::json!(["a", "a"])));
}

#[test]
fn a_token_type_array_longer_than_the_token_list_is_an_error() {
    let mut file = toy_bpe();
    let n = 20;
    file.metadata.insert("tokenizer.ggml.token_type".into(), i32s(&vec![1; n + 5]));
    let err = Tokenizer::from_gguf(&file).unwrap_err();
    assert!(matches!(err, Error::TokenizerLengthMismatch { key: "tokenizer.ggml.token_type", tokens: 20, found: 25 }), "{err}");
    assert!(err.to_string().contains("25 entries for 20 tokens"), "{err}");
}

#[test]
fn a_tokenizer_json_with_a_huge_token_id_is_refused_before_allocating() {
    let json = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
        "pre_tokenizer":null,"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"a":0,"b":4000000000},"unk_token":"a"}}"#;
    let err = Tokenizer::from_hf(json, &serde_json::Value::Null).unwrap_err();
    assert!(matches!(err, Error::VocabularyTooLarge { id: 4_000_000_000 }), "{err}");
    // A dense vocabulary still loads.
    let json = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
        "pre_tokenizer":null,"post_processor":null,"decoder":null,
        "model":{"type":"WordLevel","vocab":{"a":0,"b":1},"unk_token":"a"}}"#;
    assert!(Tokenizer::from_hf(json, &serde_json::Value::Null).is_ok());
}

/// Regression (fuzzing Hugging Face checkpoints): malformed JSON inside the
/// `decoder` object made the `tokenizers` crate panic (`.expect("Helper")`) instead of
/// returning an error. The JSON is parsed first now, so it is a typed error.
#[test]
fn a_tokenizer_json_with_malformed_json_in_its_decoder_is_an_error_not_a_panic() {
    for decoder in [r#"{"type": 1: 2}"#, r#"{"a" "b"}"#, r#"{1: 2}"#, "{\"a\": \"\u{1}\"}", r#"{"a": "\ud800"}"#] {
        let json = format!(
            r#"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
            "pre_tokenizer":null,"post_processor":null,"decoder":{decoder},
            "model":{{"type":"WordLevel","vocab":{{"a":0}},"unk_token":"a"}}}}"#
        );
        let err = Tokenizer::from_hf(json.as_bytes(), &serde_json::Value::Null).unwrap_err();
        assert!(matches!(err, Error::TokenizerJson { .. }), "{decoder}: {err}");
    }
}
