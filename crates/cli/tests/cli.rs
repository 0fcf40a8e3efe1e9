//! The `docmem` binary run as a user runs it: real files, real arguments, its output read
//! back as JSON.

use std::path::PathBuf;
use std::process::{Command, Output};

fn docmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docmem")).args(args).output().expect("run docmem")
}

fn example() -> String {
    manifest_dir().join("../../examples/printing-press.md").display().to_string()
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
    // The model-free fallback (the model's own test is below).
    let v = json(&docmem(&[
        "retrieve",
        &example(),
        "--embedder",
        "hashing",
        "--query",
        "Who brought printing to England?",
        "--k",
        "3",
        "--json",
    ]));
    let top = &v["results"][0];
    assert!(top["text"].as_str().unwrap().contains("Caxton"), "top chunk: {top}");
    assert_eq!(top["ranks"].as_array().unwrap().len(), 2, "found by both the vector and the BM25 list");
    // The human form names the document and the byte span.
    let out = docmem(&["retrieve", &example(), "--embedder", "hashing", "--query", "Who brought printing to England?"]);
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
    let names: Vec<&str> = results.iter().map(|r| r["index"].as_str().unwrap()).collect();
    assert_eq!(names, ["flat (exact)", "int8 scan + f32 rescore", "hnsw", "hnsw, int8 rows", "int8 rows, exact scan"]);
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

/// A file or directory of the fetched test models.
fn test_model(name: &str) -> String {
    let dir = std::env::var_os("DOCMEM_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/docmem/models"));
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: run `bash scripts/fetch-models.sh` (npm test does)", path.display());
    path.display().to_string()
}

fn smollm2() -> String {
    test_model("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// Run docmem with `stdin` as its standard input.
fn docmem_with_stdin(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run docmem");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("docmem output")
}

#[test]
fn embed_gives_unit_vectors_that_rank_paraphrases_first() {
    let model = test_model("all-MiniLM-L6-v2");
    let lines = "A man is playing a guitar.\nSomeone plays an instrument.\nThe stock market fell sharply today.\n";
    let v = json(&docmem_with_stdin(&["embed", "--model", &model, "--json"], lines));
    assert_eq!(v["dim"], 384);
    assert_eq!(v["truncated"], 0);
    let vectors: Vec<Vec<f64>> = serde_json::from_value(v["vectors"].clone()).expect("vectors");
    assert_eq!(vectors.len(), 3);
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    for x in &vectors {
        assert!((dot(x, x) - 1.0).abs() < 1e-4, "not unit length");
    }
    assert!(dot(&vectors[0], &vectors[1]) > dot(&vectors[0], &vectors[2]) + 0.2);
    // A directory that is not a model is named in the error, with exit status 2.
    let out = docmem_with_stdin(&["embed", "--model", "/no/such/embedder"], "hi\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/no/such/embedder"), "{err}");
}

#[test]
fn retrieve_with_minilm_finds_the_answering_chunk() {
    let model = test_model("all-MiniLM-L6-v2");
    let question = "Who brought printing to England?";
    let v = json(&docmem(&["retrieve", &example(), "--embedder", &model, "--query", question, "--k", "3", "--json"]));
    // MiniLM puts "the spread of printing" a hair above the Caxton passage, which BM25
    // ranks first; fused, the Caxton passage is in the top two, found by both lists.
    let results = v["results"].as_array().unwrap();
    let caxton = results.iter().position(|r| r["text"].as_str().unwrap().contains("Caxton")).expect("Caxton retrieved");
    assert!(caxton < 2, "Caxton at rank {}: {v}", caxton + 1);
    assert_eq!(results[caxton]["ranks"].as_array().unwrap().len(), 2, "found by both the vector and the BM25 list");
    assert!(v["embedder"].as_str().unwrap().starts_with("all-MiniLM-L6-v2"), "{}", v["embedder"]);
    // Without --embedder the fetched model is the default ($DOCMEM_MODELS, as npm test
    // sets it); the hashing embedder is only the named fallback.
    let models = PathBuf::from(&model).parent().unwrap().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(["retrieve", &example(), "--query", question, "--json"])
        .env("DOCMEM_MODELS", &models)
        .output()
        .unwrap();
    assert!(json(&out)["embedder"].as_str().unwrap().starts_with("all-MiniLM-L6-v2"));
    let v = json(&docmem(&["retrieve", &example(), "--embedder", "hashing", "--query", question, "--json"]));
    assert!(v["embedder"].as_str().unwrap().contains("fallback"), "{}", v["embedder"]);
}

#[test]
fn lm_commands_tokenize_score_and_generate() {
    use std::io::Write;
    let model = smollm2();
    // tokenize: stdin in, ids out (llama.cpp's ids for this text, see lm-smollm2.json).
    let mut child = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(["tokenize", "--model", &model, "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Hello, world! This is a test.").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(json(&out), serde_json::json!([19556, 28, 905, 17, 669, 314, 253, 1028, 30]));
    // logits: llama.cpp's top token and log-probability after this prompt.
    let v = json(&docmem(&["logits", "--model", &model, "--prompt", "The capital of France is", "--top", "5", "--json"]));
    assert_eq!(v["top"][0]["id"], 7042);
    assert_eq!(v["top"][0]["text"], " Paris");
    assert!((v["top"][0]["logprob"].as_f64().unwrap() + 0.2644).abs() < 1e-3);
    // generate: greedy, the same text twice.
    let gen = |seed: &str| {
        json(&docmem(&[
            "generate",
            "--model",
            &model,
            "--prompt",
            "The capital of France is",
            "--max-tokens",
            "8",
            "--seed",
            seed,
            "--json",
        ]))
    };
    let a = gen("1");
    assert!(a["text"].as_str().unwrap().starts_with(" Paris"), "{a}");
    assert_eq!(a["tokens"], gen("2")["tokens"]);
}

#[test]
fn a_missing_model_is_a_clear_input_error() {
    let out = docmem(&["generate", "--model", "/no/such/model.gguf", "--prompt", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--model") && err.contains("/no/such/model.gguf"), "{err}");
}

#[test]
fn a_malformed_golden_file_is_named() {
    let golden = std::env::temp_dir().join(format!("docmem-golden-{}.json", std::process::id()));
    std::fs::write(&golden, r#"{"tokenize": 3}"#).unwrap();
    let model = smollm2();
    let args = ["bench", "lm", "--model", &model, "--prompt-tokens", "4", "--gen-tokens", "1", "--llama-bench", "/no/such/llama-bench"];
    let out = docmem(&[&args[..], &["--golden", &golden.display().to_string()]].concat());
    let _ = std::fs::remove_file(&golden);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--golden") && err.contains("tokenize"), "{err}");
}

#[test]
fn bench_lm_times_paths_batched_and_one_by_one() {
    let model = smollm2();
    let args = ["bench", "lm", "--model", &model, "--prompt-tokens", "8", "--gen-tokens", "4", "--paths", "3", "--json"];
    let out = docmem(&[&args[..], &["--llama-bench", "/no/such/llama-bench"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &report["multi_path"];
    assert_eq!(m["paths"], 3);
    assert_eq!(m["identical"], true, "{m}");
    assert!(m["ratio"].as_f64().unwrap() > 0.0 && m["tokens"].as_u64().unwrap() >= 1, "{m}");
}

#[test]
fn models_fetch_test_set_is_verified_and_idempotent() {
    let dir = std::env::temp_dir().join(format!("docmem-models-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display().to_string();
    let first = docmem(&["models", "fetch", "test", "--dir", &d]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let fetched = std::fs::read(dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    assert_eq!(fetched, std::fs::read(smollm2()).unwrap(), "the same bytes as the test model");
    // The default embedder comes with the test set.
    let weights = std::fs::read(dir.join("all-MiniLM-L6-v2/model.safetensors")).unwrap();
    assert_eq!(weights, std::fs::read(PathBuf::from(test_model("all-MiniLM-L6-v2")).join("model.safetensors")).unwrap());
    let again = docmem(&["models", "fetch", "test", "--dir", &d]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already fetched"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// This package's directory: cargo's run-time value first, so a test binary reused from a
/// shared build cache by a checkout at another path still finds its files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}

/// Two articles in the SQuAD layout, four paragraphs, each with one answerable and one
/// unanswerable question, written to `dir/squad.json` (`dir` made afresh).
fn printing_squad(dir: &std::path::Path) -> std::path::PathBuf {
    let mut paragraphs = Vec::new();
    for (i, (fact, answer)) in [
        ("William Caxton brought the printing press to England in 1476.", "William Caxton"),
        ("Johannes Gutenberg printed his Bible in Mainz around 1455.", "Mainz"),
        ("Aldus Manutius founded the Aldine Press in Venice.", "Venice"),
        ("The first newspaper was printed in Strasbourg in 1605.", "Strasbourg"),
    ]
    .iter()
    .enumerate()
    {
        let filler = "Printing spread slowly at first. ".repeat(20);
        paragraphs.push(serde_json::json!({
            "context": format!("{filler}{fact}"),
            "qas": [
                {"id": format!("q{i}"), "question": format!("Which place or person: {fact}"), "is_impossible": false,
                 "answers": [{"text": answer, "answer_start": 0}]},
                {"id": format!("u{i}"), "question": "What is unanswerable?", "is_impossible": true, "answers": []}
            ]
        }));
    }
    let data = serde_json::json!({"version": "v2.0", "data": [
        {"title": "Early printing", "paragraphs": paragraphs[..2]},
        {"title": "Later printing", "paragraphs": paragraphs[2..]}
    ]});
    fresh_file(dir, "squad.json", &data)
}

/// `data` as the only file of a fresh folder `dir`.
fn fresh_file(dir: &std::path::Path, name: &str, data: &serde_json::Value) -> std::path::PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, data.to_string()).unwrap();
    file
}

#[test]
fn eval_retrieval_scores_budgets_and_splits() {
    // Every question is searched against both articles.
    let dir = std::env::temp_dir().join(format!("docmem-eval-{}", std::process::id()));
    let file = printing_squad(&dir);
    let (f, cache) = (file.display().to_string(), dir.join("cache").display().to_string());
    let run = |split: &str| {
        json(&docmem(&[
            "eval",
            "retrieval",
            "--data",
            &f,
            "--library-cache",
            &cache,
            "--methods",
            "sentence,fixed:200",
            "--split",
            split,
            "--embedder",
            "hashing",
            "--json",
        ]))
    };
    let all = run("all");
    assert_eq!(all["documents"], 2);
    assert_eq!(all["questions"], 4, "the answerable questions only");
    let rows = all["rows"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["method"].as_str().unwrap()).collect::<Vec<_>>(), ["sentence", "fixed:200"]);
    for r in rows {
        assert_eq!(r["budgets"], serde_json::json!([500, 1000, 2000]));
        assert_eq!(r["ks"], serde_json::json!([1, 3, 8]));
        let b: Vec<f64> = r["budget_recall"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert!(b[0] <= b[1] && b[1] <= b[2], "{r}");
        assert!(r["mean_chunk_chars"].as_f64().unwrap() > 0.0);
        assert!(r["reader_tok_s"].is_null());
    }
    // Fixed 200-character chunks: 2,000 characters take 10 of them, past recall@8's depth
    // (the library has about 2,900 characters).
    assert!(rows[1]["mean_retrieved"].as_f64().unwrap() >= 10.0, "{}", rows[1]);
    let (dev, test) = (run("dev"), run("test"));
    assert_eq!(dev["questions"].as_u64().unwrap() + test["questions"].as_u64().unwrap(), 4);
    let out = docmem(&["eval", "retrieval", "--data", &f, "--library-cache", &cache, "--split", "train"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A HotpotQA distractor file: two bridge questions that share a paragraph ("Mainz") and
/// a comparison that stands alone, each with its two gold paragraphs and a distractor.
fn printing_hotpot(dir: &std::path::Path) -> std::path::PathBuf {
    let data = serde_json::json!([
        {"_id": "b1", "question": "In which city was the inventor of the printing press born?", "answer": "Mainz",
         "type": "bridge", "level": "medium", "supporting_facts": [["Johannes Gutenberg", 0], ["Mainz", 0]],
         "context": [["Johannes Gutenberg", ["Johannes Gutenberg invented the printing press.", " He was born in Mainz."]],
                     ["Mainz", ["Mainz is a city on the Rhine.", " It was a seat of archbishops."]],
                     ["Paper", ["Paper came to Europe from China."]]]},
        {"_id": "b2", "question": "On which river lies the city where Gutenberg was born?", "answer": "the Rhine",
         "type": "bridge", "level": "medium", "supporting_facts": [["Johannes Gutenberg", 1], ["Mainz", 0]],
         "context": [["Mainz", ["Mainz is a city on the Rhine.", " It was a seat of archbishops."]],
                     ["Johannes Gutenberg", ["Johannes Gutenberg invented the printing press.", " He was born in Mainz."]],
                     ["Ink", ["Oil-based ink held on metal type."]]]},
        {"_id": "c1", "question": "Was William Caxton born before Aldus Manutius?", "answer": "yes",
         "type": "comparison", "level": "hard", "supporting_facts": [["William Caxton", 0], ["Aldus Manutius", 0]],
         "context": [["William Caxton", ["William Caxton was born about 1422."]],
                     ["Aldus Manutius", ["Aldus Manutius was born in 1449."]],
                     ["Venice", ["Venice was a centre of printing."]]]}
    ]);
    fresh_file(dir, "hotpot.json", &data)
}

#[test]
fn eval_answers_reads_hotpotqa_and_reports_each_kind_of_question_apart() {
    let dir = std::env::temp_dir().join(format!("docmem-eval-hotpot-{}", std::process::id()));
    let file = printing_hotpot(&dir);
    let model = dir.join("tiny.gguf");
    let (f, m) = (file.display().to_string(), model.display().to_string());
    assert!(docmem(&["synth-gguf", "llama-tiny:q4_1", &m, "--seed", "4"]).status.success());
    let records = dir.join("records.jsonl");
    let r = records.display().to_string();
    let ask = |split: &str, methods: &str| {
        let _ = std::fs::remove_file(&records);
        let out = docmem(&[
            "eval",
            "answers",
            "--data",
            &f,
            "--split",
            split,
            "--answerable",
            "10",
            "--methods",
            methods,
            "--answerer",
            &m,
            "--embedder",
            "hashing",
            "--max-tokens",
            "4",
            "--out",
            &r,
        ]);
        let rows: Vec<serde_json::Value> =
            std::fs::read_to_string(&records).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (out, rows)
    };
    let (out, rows) = ask("all", "ours,gold");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rows.len(), 6, "three questions, two methods");
    let kinds: Vec<&str> = rows[..3].iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["bridge", "bridge", "comparison"]);
    assert!(rows.iter().all(|r| r["answerable"] == true), "HotpotQA has no unanswerable question");
    // The table: one row per method and kind.
    let table = String::from_utf8_lossy(&out.stdout);
    for row in ["| Ours | bridge | 2 |", "| Ours | comparison | 1 |", "| Gold | bridge | 2 |", "| Gold | comparison | 1 |"] {
        assert!(table.contains(row), "{row} in\n{table}");
    }
    // The split keeps the questions that share a paragraph together.
    let (dev, test) = (ask("dev", "gold").1, ask("test", "gold").1);
    assert_eq!(dev.len() + test.len(), 3);
    let ids = |rows: &[serde_json::Value]| rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (dev, test) = (ids(&dev), ids(&test));
    assert!(!dev.is_empty() && !test.is_empty(), "dev {dev:?}, test {test:?}");
    assert_eq!(dev.contains(&"b1".to_string()), dev.contains(&"b2".to_string()), "dev {dev:?}");
    // Memories that are chunks under another name are refused: without --memories, and
    // with a library whose memories fell back to the chunker.
    let (out, _) = ask("all", "memories");
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--memories"));
    let lib = dir.join("lib");
    let doc = dir.join("mainz.txt");
    std::fs::write(&doc, "Mainz is a city on the Rhine. It was a seat of archbishops.").unwrap();
    let l = lib.display().to_string();
    let ingested = docmem(&["ingest", "--library", &l, "--chunker", "sentence", "--embedder", "hashing", &doc.display().to_string()]);
    assert!(ingested.status.success(), "{}", String::from_utf8_lossy(&ingested.stderr));
    let out = docmem(&[
        "eval",
        "answers",
        "--data",
        &f,
        "--split",
        "all",
        "--methods",
        "memories",
        "--memories",
        &l,
        "--answerer",
        &m,
        "--embedder",
        "hashing",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no reader-written memory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eval_answers_states_records_each_question_once_with_the_layers_asked_and_the_refusals_lean() {
    let dir = std::env::temp_dir().join(format!("docmem-eval-states-{}", std::process::id()));
    let file = printing_squad(&dir);
    let model = dir.join("tiny.gguf");
    let (f, m) = (file.display().to_string(), model.display().to_string());
    assert!(docmem(&["synth-gguf", "llama-tiny:q4_1", &m, "--seed", "4"]).status.success());
    let states = dir.join("states.jsonl");
    let s = states.display().to_string();
    let args = [
        "eval",
        "answers",
        "--data",
        &f,
        "--split",
        "all",
        "--answerable",
        "4",
        "--unanswerable",
        "4",
        "--k",
        "2",
        "--methods",
        "ours",
        "--answerer",
        &m,
        "--embedder",
        "hashing",
        "--states",
        &s,
        "--state-layers",
        "0,1",
    ];
    let out = docmem(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(&states).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 8, "every question once");
    // Answerable and unanswerable in turn, so that a run stopped early is balanced.
    let answerable: Vec<bool> = rows.iter().map(|r| r["answerable"].as_bool().unwrap()).collect();
    assert_eq!(answerable, [true, false, true, false, true, false, true, false]);
    for r in &rows {
        assert_eq!(r["layers"], serde_json::json!([0, 1]));
        for key in ["states", "question_states"] {
            let layers = r[key].as_array().unwrap();
            assert_eq!(layers.len(), 2, "{key}");
            let first = layers[0].as_array().unwrap();
            assert!(!first.is_empty() && first.iter().all(|v| v.as_f64().unwrap().is_finite()), "{key}");
        }
        let lean = &r["refusal_opening"];
        assert!(lean["logprob"].as_f64().unwrap() <= 0.0, "{lean}");
        assert!(lean["greedy"].is_boolean(), "{lean}");
    }
    // With --answer-states, each greedy answer and the states read as it was written.
    let answered = dir.join("answered.jsonl");
    let a = answered.display().to_string();
    let mut with_answers: Vec<&str> = args.to_vec();
    let states_at = with_answers.len() - 3;
    with_answers[states_at] = &a;
    with_answers.extend(["--answer-states", "--max-tokens", "6"]);
    let out = docmem(&with_answers);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(&answered).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 8, "every question once");
    for r in &rows {
        let answer = r["answer"].as_str().unwrap();
        let refused = r["refused"].as_bool().unwrap();
        assert!(refused || !(answer.trim().is_empty() || answer.starts_with("Not in the documents")), "{answer:?} counts as refused");
        for key in ["last", "mean", "end"] {
            let layers = r["answer_states"][key].as_array().unwrap();
            assert_eq!(layers.len(), 2, "{key}");
            let first = layers[0].as_array().unwrap();
            assert_eq!(first.len(), r["states"][0].as_array().unwrap().len(), "{key}: one value per hidden dimension");
            assert!(first.iter().all(|v| v.as_f64().unwrap().is_finite()), "{key}");
        }
    }
    // With --question-alone, each question is read without its passages: no retrieval, and
    // a state at its last token other than the one it has after the passages.
    let alone = dir.join("alone.jsonl");
    let al = alone.display().to_string();
    let mut question_alone: Vec<&str> = args.to_vec();
    question_alone[states_at] = &al;
    question_alone.push("--question-alone");
    let out = docmem(&question_alone);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let alone_rows: Vec<serde_json::Value> =
        std::fs::read_to_string(&alone).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(alone_rows.len(), 8, "every question once");
    let with_passages: Vec<serde_json::Value> =
        std::fs::read_to_string(&states).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (a, r) in alone_rows.iter().zip(&with_passages) {
        assert_eq!(a["id"], r["id"]);
        assert_eq!((&a["question_alone"], &r["question_alone"]), (&serde_json::json!(true), &serde_json::json!(false)));
        assert!(a["retrieval"].is_null(), "no passages were retrieved: {}", a["retrieval"]);
        assert!(a["refusal_opening"].is_null(), "no lean towards the refusal is read without passages");
        assert_eq!(a["question_states"][0].as_array().unwrap().len(), r["question_states"][0].as_array().unwrap().len());
        assert_ne!(a["question_states"], r["question_states"], "the passages change the question's state");
    }
    // --question-alone belongs to --states, and reads no answer.
    let out = docmem(&["eval", "answers", "--data", &f, "--question-alone"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--states"));
    question_alone.push("--answer-states");
    let out = docmem(&question_alone);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--answer-states"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A layer the model does not have is refused by name.
    let mut bad = args;
    bad[bad.len() - 1] = "0,99";
    let out = docmem(&bad);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("layer 99"));
    // --answer-states belongs to --states.
    let out = docmem(&["eval", "answers", "--data", &f, "--answer-states"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--states"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `docmem models info` says what a file is from its header: a Qwen3's architecture and
/// size, and for a Mamba (a state-space model; no weights needed) that it is not
/// supported, as an error.
#[test]
fn models_info_names_a_files_architecture_and_refuses_one_it_does_not_run() {
    let dir = std::env::temp_dir().join(format!("docmem-models-info-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let qwen3 = dir.join("qwen3.gguf").display().to_string();
    assert!(docmem(&["synth-gguf", "qwen3-tiny:q4_k_m", &qwen3]).status.success());
    let out = docmem(&["models", "info", &qwen3, "--context", "100"]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && line.contains(": qwen3 · ") && line.contains("to run with 100 tokens of context"), "{line}");
    let facts = json(&docmem(&["models", "info", &qwen3, "--json"]));
    assert_eq!((facts["architecture"].as_str(), facts["layers"].as_u64()), (Some("qwen3"), Some(2)), "{facts}");
    // A GGUF header naming mamba, and nothing else.
    let mut mamba = b"GGUF".to_vec();
    mamba.extend(3u32.to_le_bytes());
    mamba.extend(0u64.to_le_bytes());
    mamba.extend(1u64.to_le_bytes());
    for (i, text) in ["general.architecture", "mamba"].into_iter().enumerate() {
        mamba.extend((text.len() as u64).to_le_bytes());
        mamba.extend(text.as_bytes());
        if i == 0 {
            mamba.extend(8u32.to_le_bytes()); // a string value
        }
    }
    let path = dir.join("mamba.gguf");
    std::fs::write(&path, mamba).unwrap();
    let out = docmem(&["models", "info", &path.display().to_string()]);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && said.contains("mamba") && said.contains("not supported"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn synth_gguf_writes_a_model_the_commands_load_and_bench_lm_runs_it_in_memory() {
    let path = std::env::temp_dir().join(format!("docmem-synth-{}.gguf", std::process::id()));
    let file = path.display().to_string();
    let out = docmem(&["synth-gguf", "llama-tiny:q4_1", &file, "--seed", "4"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&path).unwrap();
    // A model file like any other: the LM commands load it (any text tokenizes).
    let v = json(&docmem(&["logits", "--model", &file, "--prompt", "Hello there", "--top", "3", "--json"]));
    assert_eq!(v["top"].as_array().unwrap().len(), 3, "{v}");
    // The same seed, the same bytes.
    assert!(docmem(&["synth-gguf", "llama-tiny:q4_1", &file, "--seed", "4"]).status.success());
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let _ = std::fs::remove_file(&path);
    // bench lm builds it in memory; a step reads every tensor (the head is the tied table).
    let args = ["bench", "lm", "--synthetic", "llama-tiny:q4_1", "--seed", "4", "--prompt-tokens", "8", "--gen-tokens", "2", "--json"];
    let report = json(&docmem(&[&args[..], &["--llama-bench", "/no/such/llama-bench", "--peak-gbs", "100"]].concat()));
    assert_eq!(report["model"], "synthetic llama-tiny:q4_1 (seed 4)");
    let weights = report["weight_bytes_per_token"].as_u64().unwrap();
    assert!(weights > 0 && weights < bytes.len() as u64, "{weights} of {}", bytes.len());
    assert!(report["bandwidth_share"].as_f64().unwrap() > 0.0, "{report}");
    // Unknown names are input errors that list what is known.
    let out = docmem(&["synth-gguf", "gpt-9:q4_k_m", &file]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gpt-9") && err.contains("qwen2-1.5b"), "{err}");
    let out = docmem(&["bench", "lm", "--synthetic", "qwen2-1.5b:q2_k", "--prompt-tokens", "4", "--gen-tokens", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("q4_k_m"));
}
