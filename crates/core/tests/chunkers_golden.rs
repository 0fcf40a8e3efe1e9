//! docmem's recursive and sentence chunkers against the libraries they reproduce
//! (LangChain's RecursiveCharacterTextSplitter, LlamaIndex's SentenceSplitter), through
//! golden chunks written by `scripts/golden/chunkers.py`.

use docmem_core::chunk::{recursive_chunks, sentence_chunks, RecursiveParams, SentenceParams, TokenCounter};

/// Whitespace-separated words: what the golden script gives LlamaIndex as its tokenizer.
struct Words;

impl TokenCounter for Words {
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

fn golden() -> serde_json::Value {
    let path = manifest_dir().join("tests/golden/chunkers.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("golden file")).expect("golden JSON")
}

#[test]
fn chunkers_match_their_reference_libraries() {
    let g = golden();
    let mut failures = Vec::new();
    let cases = g["cases"].as_array().expect("cases");
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["text"].as_str().unwrap();
        let text = g["texts"][name].as_str().unwrap();
        let size = case["size"].as_u64().unwrap() as usize;
        let overlap = case["overlap"].as_u64().unwrap() as usize;
        let want: Vec<&str> = case["chunks"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        let chunker = case["chunker"].as_str().unwrap();
        let spans = match chunker {
            "recursive" => {
                recursive_chunks(text, &RecursiveParams { chunk_size: size, chunk_overlap: overlap, ..RecursiveParams::default() })
            }
            "sentence" => {
                sentence_chunks(text, &SentenceParams { chunk_size: size, chunk_overlap: overlap, ..SentenceParams::default() }, &Words)
            }
            other => panic!("unknown chunker {other}"),
        };
        let got: Vec<&str> = spans.iter().map(|s| s.slice(text).unwrap()).collect();
        if got != want {
            let first = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
            failures.push(format!(
                "{chunker} size={size} overlap={overlap} on {name}: {} chunks vs {} expected; first difference at chunk {first}:\n  ours: {:?}\n  want: {:?}",
                got.len(),
                want.len(),
                got.get(first),
                want.get(first)
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// This package's directory: cargo's run-time value first, so a test binary reused from a
/// shared build cache by a checkout at another path still finds its files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
