//! The sentence embedder against sentence-transformers: cosine ≥ 0.999 for every text of
//! the golden set (`tests/golden/embed-minilm.json`, made by `scripts/golden/embed.py` on
//! the same model files), in every precision the embedder offers. The wasm build runs the
//! same check in Node (`tests/wasm/embed.mjs`).

mod common;

use docmem_runtime::embed::{EmbedRole, Embedder, EmbedderOptions, Precision};
use serde_json::Value;

/// The smallest cosine similarity allowed against sentence-transformers.
const MIN_COSINE: f32 = 0.999;

struct Golden {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
    truncated: usize,
}

fn golden() -> Golden {
    let path = common::manifest_dir().join("tests/golden/embed-minilm.json");
    let g: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let max = g["max_seq_length"].as_u64().unwrap();
    let cases = g["cases"].as_array().unwrap();
    Golden {
        texts: cases.iter().map(|c| c["text"].as_str().unwrap().to_owned()).collect(),
        vectors: cases.iter().map(|c| c["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()).collect(),
        truncated: cases.iter().filter(|c| c["tokens"].as_u64().unwrap() > max).count(),
    }
}

fn load(precision: Precision) -> Embedder {
    let options = EmbedderOptions { precision, threads: 2 };
    Embedder::load(&common::model_dir("all-MiniLM-L6-v2"), options).unwrap()
}

/// Embed the golden texts and compare with sentence-transformers; the worst cosine.
fn check(precision: Precision) -> f32 {
    let g = golden();
    assert!(g.texts.len() >= 200);
    let e = load(precision);
    assert_eq!(e.dim(), 384);
    let texts: Vec<&str> = g.texts.iter().map(String::as_str).collect();
    let out = e.embed(&texts, EmbedRole::Passage).unwrap();
    assert_eq!(out.truncated, g.truncated, "{precision:?}: truncated count");
    assert!(out.truncated >= 3, "the golden set must exercise truncation");
    let mut worst = (1f32, 0);
    for (i, (got, want)) in out.vectors.iter().zip(&g.vectors).enumerate() {
        assert_eq!(got.len(), want.len(), "{precision:?}: dimension of text {i}");
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{precision:?}: text {i} has norm {norm}");
        let cos = got.iter().zip(want).map(|(a, b)| a * b).sum::<f32>() / want.iter().map(|x| x * x).sum::<f32>().sqrt();
        if cos < worst.0 {
            worst = (cos, i);
        }
    }
    let (cos, i) = worst;
    eprintln!("{precision:?}: worst cosine {cos:.6} (text {i}) over {} texts", texts.len());
    assert!(cos >= MIN_COSINE, "{precision:?}: text {i} ({:?}) has cosine {cos} with sentence-transformers", g.texts[i]);
    cos
}

#[test]
fn f32_matches_sentence_transformers() {
    // The reference precision is held to a much tighter bar than the one asked.
    assert!(check(Precision::F32) > 0.99999);
}

#[test]
fn f16_matches_sentence_transformers() {
    check(Precision::F16);
}

#[test]
fn q8_0_matches_sentence_transformers() {
    check(Precision::Q8_0);
}

#[test]
fn batching_and_order_do_not_change_vectors() {
    let mut e = load(Precision::F32);
    let texts = ["A short sentence.", "Another, somewhat longer sentence about rivers and cities.", "三个汉字", ""];
    let together = e.embed(&texts, EmbedRole::Passage).unwrap().vectors;
    e.max_batch_tokens = 1;
    for (i, t) in texts.iter().enumerate() {
        let alone = &e.embed(&[t], EmbedRole::Passage).unwrap().vectors[0];
        let cos: f32 = alone.iter().zip(&together[i]).map(|(a, b)| a * b).sum();
        assert!(cos > 0.999_999, "text {i}: cosine {cos}");
    }
}

#[test]
fn broken_model_directories_are_errors_that_name_the_problem() {
    let dir = std::env::temp_dir().join(format!("docmem-embed-broken-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = common::model_dir("all-MiniLM-L6-v2");
    let opts = EmbedderOptions::default();
    let err = Embedder::load(&dir, opts).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    for f in ["config.json", "tokenizer.json", "modules.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    // Weights that are not a safetensors file.
    std::fs::write(dir.join("model.safetensors"), b"not weights").unwrap();
    let err = Embedder::load(&dir, opts).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    // A config whose width disagrees with the weights.
    std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let config = std::fs::read_to_string(src.join("config.json")).unwrap().replace("\"hidden_size\": 384", "\"hidden_size\": 768");
    std::fs::write(dir.join("config.json"), config).unwrap();
    let err = Embedder::load(&dir, opts).unwrap_err().to_string();
    assert!(err.contains("shape"), "{err}");
    // A tokenizer larger than the embedding table.
    let config = std::fs::read_to_string(src.join("config.json")).unwrap().replace("\"vocab_size\": 30522", "\"vocab_size\": 1000");
    std::fs::write(dir.join("config.json"), config).unwrap();
    let err = Embedder::load(&dir, opts).unwrap_err().to_string();
    assert!(err.contains("tokenizer.json has 30522 tokens"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
