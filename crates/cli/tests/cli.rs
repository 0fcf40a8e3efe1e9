//! The `docmem` binary run as a user runs it: real files, real arguments, its output read
//! back as JSON.

use std::path::PathBuf;
use std::process::{Command, Output};

fn docmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docmem")).args(args).output().expect("run docmem")
}

fn example() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/printing-press.md").display().to_string()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "docmem failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

#[test]
fn chunk_json_gives_spans_of_the_file() {
    let text = std::fs::read_to_string(example()).unwrap();
    for chunker in ["fixed", "sentence", "recursive", "semantic"] {
        let v = json(&docmem(&["chunk", "--chunker", chunker, "--size", "400", "--overlap", "40", &example(), "--json"]));
        let chunks = v["chunks"].as_array().unwrap();
        assert!(chunks.len() >= 3, "{chunker}: {} chunks", chunks.len());
        for c in chunks {
            let (s, e) = (c["start"].as_u64().unwrap() as usize, c["end"].as_u64().unwrap() as usize);
            assert_eq!(&text[s..e], c["text"].as_str().unwrap(), "{chunker}");
        }
        assert_eq!(v["chunker"], chunker);
    }
}

#[test]
fn retrieve_finds_the_answering_chunk() {
    let v = json(&docmem(&["retrieve", &example(), "--query", "Who brought printing to England?", "--k", "3", "--json"]));
    let top = &v["results"][0];
    assert!(top["text"].as_str().unwrap().contains("Caxton"), "top chunk: {top}");
    assert_eq!(top["ranks"].as_array().unwrap().len(), 2, "found by both the vector and the BM25 list");
    // The human form names the document and the byte span.
    let out = docmem(&["retrieve", &example(), "--query", "Who brought printing to England?"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("printing-press.md · bytes "), "{text}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let out = docmem(&["chunk", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Cargo.toml: unsupported file type"));
    let out = docmem(&["chunk", "--chunker", "fixed", "--size", "0", &example()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chunk size must be at least 1"));
    let out = docmem(&["chunk", "missing.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read missing.txt"));
    let out = docmem(&["chunk", "--chunker", "mom", &example()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bench_index_reports_recall_against_exact_search() {
    let v = json(&docmem(&["bench", "index", "--n", "2000", "--dim", "32", "--queries", "20", "--sweep", "16,64", "--json"]));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["recall_at_k"], 1.0);
    for r in results {
        let recall = r["recall_at_k"].as_f64().unwrap();
        assert!((0.5..=1.0).contains(&recall), "{r}");
        assert!(r["p50_ms"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(v["hnsw_sweep"].as_array().unwrap().len(), 2);
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(["chunk", "--chunker", "fixed", "--size", "20", &example()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run docmem");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The reader is dropped here, as `| head -1` would close it.
    let out = child.wait_with_output().unwrap();
    assert!(first.contains("chunks (fixed chunker)"), "{first}");
    assert!(out.status.success(), "exit {:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}
