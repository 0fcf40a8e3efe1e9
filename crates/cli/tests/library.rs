//! Libraries from the command line: `docmem ingest` and `docmem ask`, with the small test
//! model (SmolLM2-135M) as reader and answerer, as a new user would run them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn docmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docmem")).args(args).output().expect("run docmem")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "docmem failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/printing-press.md").display().to_string()
}

fn smollm2() -> String {
    let dir = std::env::var_os("DOCMEM_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/docmem/models"));
    let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.is_file(), "{} is missing: run scripts/fetch-models.sh (npm test does)", p.display());
    p.display().to_string()
}

fn temp_library(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("docmem-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walk(dir) {
        out.push(e.strip_prefix(dir).unwrap().display().to_string());
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn ingest_with_smollm2_then_ask_gives_a_cited_answer() {
    // The default embedder (all-MiniLM-L6-v2 from $DOCMEM_MODELS, as npm test sets it).
    let lib = temp_library("mom");
    let model = smollm2();
    let l = lib.display().to_string();
    let out = docmem(&["ingest", "--library", &l, "--reader", &model, "--samples", "1", "--max-new-tokens", "300", "--json", &example()]);
    let line: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
    assert_eq!(line["added"], true, "{line}");
    assert!(line["scenarios"].as_u64().unwrap() >= 2, "{line}");
    // Progress lines went to stderr, one per candidate.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("candidates 2/2"), "{err}");
    let before = files(&lib);
    assert!(before.contains(&"manifest.json".to_string()), "{before:?}");

    // The same content again: skipped without reading.
    let again = ok(&docmem(&["ingest", "--library", &l, "--reader", "/nonexistent.gguf", &example()]));
    assert!(again.contains("already in the library"), "{again}");
    assert_eq!(files(&lib), before);

    let out = docmem(&[
        "ask",
        "Who brought printing to England?",
        "--library",
        &l,
        "--answerer",
        &model,
        "--k",
        "3",
        "--max-tokens",
        "48",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let sources = v["sources"].as_array().unwrap();
    assert!(!sources.is_empty());
    // SmolLM2-135M writes weak cores (here it fell back to sentence chunks with one-line
    // cores), so the core layer may rank the Caxton passage below others; the chunk
    // layer finds it. It must be among the numbered sources the answer cites from.
    let caxton = sources.iter().find(|s| s["text"].as_str().unwrap().contains("Caxton")).unwrap_or_else(|| panic!("{v}"));
    assert!(!v["answer"].as_str().unwrap().is_empty());
    assert!(caxton["ranks"].as_array().unwrap().len() >= 2, "ranked by several layers and lists");
    // Retrieval alone, one question per stdin line, one JSON line each in order; and one
    // layer only.
    let mut child = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(["search", "--library", &l, "--k", "3", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(b"Who brought printing to England?\nWhen was the Gutenberg Bible printed?\n").unwrap();
    let lines: Vec<serde_json::Value> =
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["question"], "When was the Gutenberg Bible printed?");
    let passages = lines[0]["passages"].as_array().unwrap();
    assert_eq!(passages.len(), 3);
    assert!(passages.iter().any(|p| p["text"].as_str().unwrap().contains("Caxton")), "{}", lines[0]);
    let one = docmem(&["search", "Who brought printing to England?", "--library", &l, "--layers", "chunk", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&ok(&one)).unwrap();
    for p in v["passages"].as_array().unwrap() {
        assert!(p["ranks"].as_array().unwrap().iter().all(|r| r["layer"] == "chunk"), "{p}");
    }
    let bad = docmem(&["search", "x", "--library", &l, "--layers", "chapters"]);
    assert_eq!(bad.status.code(), Some(2));

    // Human form: the streamed answer, then citations with the document and character span.
    // `--backend auto` (the default) says where the answerer runs: here, without a GPU
    // that passes the kernel checks, the CPU and why.
    let asked =
        docmem(&["ask", "Who brought printing to England?", "--library", &l, "--answerer", &model, "--k", "3", "--max-tokens", "48"]);
    let text = ok(&asked);
    assert!(text.contains("→ printing-press.md, characters "), "{text}");
    let said = String::from_utf8_lossy(&asked.stderr);
    assert!(said.contains("[backend: cpu (") || said.contains("[backend: gpu, "), "{said}");
    let bad = docmem(&["ask", "x", "--library", &l, "--answerer", &model, "--backend", "tpu"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    std::fs::remove_dir_all(&lib).unwrap();
}

/// `docmem ingest --library LIBRARY --chunker sentence --embedder hashing ARGS…`.
fn ingest_sentences(library: &str, args: &[&str]) -> Output {
    let mut all = vec!["ingest", "--library", library, "--chunker", "sentence", "--embedder", "hashing"];
    all.extend_from_slice(args);
    docmem(&all)
}

#[test]
fn baseline_chunkers_need_no_reader_and_bad_files_change_nothing() {
    let lib = temp_library("baseline");
    let l = lib.display().to_string();
    // A folder: its .html and .pdf are read (text extracted), other files are skipped.
    let folder = lib.with_extension("docs");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let html = folder.join("bells.html");
    std::fs::write(&html, "<html><body><h1>Bells</h1><p>The bell of Saint Paul rang at noon &amp; at dusk.</p></body></html>").unwrap();
    std::fs::write(folder.join("picture.png"), [0u8, 1, 2]).unwrap();
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../runtime/tests/fixtures/two-pages.pdf"), folder.join("caxton.pdf")).unwrap();
    let h = folder.display().to_string();
    let out = ingest_sentences(&l, &[&example(), &h]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipping"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ok(&out);
    assert_eq!(out.matches(": added ").count(), 3, "{out}");
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&[
        "ask",
        "When did the bell ring?",
        "--library",
        &l,
        "--embedder",
        "hashing",
        "--k",
        "1",
        "--answerer",
        &smollm2(),
        "--max-tokens",
        "8",
        "--json",
    ])))
    .unwrap();
    assert_eq!(v["sources"][0]["text"].as_str().unwrap().trim(), "Bells\n\nThe bell of Saint Paul rang at noon & at dusk.");
    let before = files(&lib);
    let out = ingest_sentences(&l, &[&example(), "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Cargo.toml: unsupported file type"));
    assert_eq!(files(&lib), before, "nothing written");
    let broken = folder.join("broken.pdf");
    std::fs::write(&broken, b"%PDF-1.4\n1 0 obj << /Type /Catalog").unwrap();
    let out = ingest_sentences(&l, &[&broken.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("broken.pdf: the PDF could not be read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files(&lib), before, "nothing written");
    std::fs::remove_file(&broken).unwrap();
    // A document over --max-document-bytes is refused, naming the limit, before the
    // documents named before it go in.
    let long = folder.join("long.txt");
    std::fs::write(&long, "The bell rang at noon. ".repeat(10)).unwrap();
    let short = folder.join("short.txt");
    std::fs::write(&short, "A bell.").unwrap();
    let out = ingest_sentences(&l, &["--max-document-bytes", "100", &short.display().to_string(), &long.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("long.txt") && err.contains("over the document size limit (max_document_bytes) of 100"), "{err}");
    assert_eq!(files(&lib), before, "nothing written");
    std::fs::remove_file(&long).unwrap();
    std::fs::remove_file(&short).unwrap();
    // An empty file stops the batch before anything is read or written, naming the file.
    let blank = lib.with_extension("blank.txt");
    std::fs::write(&blank, " \n\n ").unwrap();
    let new_doc = folder.join("new.txt");
    std::fs::write(&new_doc, "A document that is not in the library yet.").unwrap();
    let out = ingest_sentences(&l, &[&new_doc.display().to_string(), &blank.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("blank.txt: no text in the file"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(files(&lib), before, "nothing written, not even the good file before it");
    std::fs::remove_file(&blank).unwrap();
    std::fs::remove_file(&new_doc).unwrap();
    // Another embedder cannot search this library.
    let out = docmem(&["ask", "bells?", "--library", &l, "--embedder", "/nonexistent-model"]);
    assert_eq!(out.status.code(), Some(2));
    // Listing, and removal by title: gone from every layer, its files deleted.
    let listed = ok(&docmem(&["documents", "--library", &l]));
    assert!(listed.starts_with("3 documents, embedder hashing-384"), "{listed}");
    assert!(listed.contains("  caxton.pdf  "), "{listed}");
    assert!(listed.contains("  bells.html  "), "{listed}");
    let out = docmem(&["remove", "--library", &l, "no-such-title"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(files(&lib), before, "a bad name removes nothing");
    ok(&docmem(&["remove", "--library", &l, "bells.html"]));
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&["documents", "--library", &l, "--json"]))).unwrap();
    assert_eq!(v["documents"].as_array().unwrap().len(), 2);
    assert_eq!(files(&lib).iter().filter(|f| f.starts_with("documents/")).count(), 2);
    let before = files(&lib);

    // A new document with a reader that does not exist: a named input error, no change.
    let txt = lib.with_extension("txt");
    std::fs::write(&txt, "A new text about clocks.").unwrap();
    let out = docmem(&["ingest", "--library", &l, "--reader", "/nonexistent.gguf", "--embedder", "hashing", &txt.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.gguf does not exist"));
    assert_eq!(files(&lib), before);
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    std::fs::remove_file(&txt).unwrap();
}

/// A crash mid-ingest (the process killed while the reader works) leaves the library as
/// it was before that document, and it opens and takes the document afterwards.
#[test]
fn killed_mid_ingest_the_library_is_as_before_and_reopens() {
    let lib = temp_library("killed");
    let l = lib.display().to_string();
    ok(&docmem(&["ingest", "--library", &l, "--chunker", "sentence", &example()]));
    let before = files(&lib);
    let other = lib.with_extension("clocks.txt");
    std::fs::write(&other, "Mechanical clocks appeared in European towers in the thirteenth century.\n\n".repeat(40)).unwrap();
    let o = other.display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_docmem"))
        .args(["ingest", "--library", &l, "--reader", &smollm2(), "--samples", "1", &o])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(child.try_wait().unwrap().is_none(), "the reader finished before it could be killed");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(files(&lib), before, "nothing of the killed ingest is visible");
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&["documents", "--library", &l, "--json"]))).unwrap();
    assert_eq!(v["documents"].as_array().unwrap().len(), 1);
    ok(&docmem(&["ingest", "--library", &l, "--chunker", "sentence", &o]));
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&["documents", "--library", &l, "--json"]))).unwrap();
    assert_eq!(v["documents"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_file(&other).unwrap();
}

#[test]
fn two_ingests_at_once_into_one_library_both_land() {
    // Six rounds of two `docmem ingest` processes started together on one library, with a
    // `docmem documents` beside them: without the library lock, the later commit wrote
    // over the earlier one and the next open deleted its files.
    let lib = temp_library("two-writers");
    let l = lib.display().to_string();
    let docs = lib.with_extension("texts");
    let _ = std::fs::remove_dir_all(&docs);
    std::fs::create_dir_all(&docs).unwrap();
    let bin = env!("CARGO_BIN_EXE_docmem");
    let spawn = |args: &[&str]| {
        Command::new(bin).args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap()
    };
    for round in 0..6 {
        let mut children = Vec::new();
        for who in ["a", "b"] {
            let f = docs.join(format!("{who}{round}.txt"));
            std::fs::write(&f, format!("Document {who}{round}. It says something of its own about round {round} and writer {who}."))
                .unwrap();
            let f = f.display().to_string();
            children.push(spawn(&["ingest", "--library", &l, "--chunker", "sentence", "--embedder", "hashing", &f]));
        }
        if round > 0 {
            children.push(spawn(&["documents", "--library", &l]));
        }
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&["documents", "--library", &l, "--json"]))).unwrap();
    let mut titles: Vec<&str> = v["documents"].as_array().unwrap().iter().map(|d| d["title"].as_str().unwrap()).collect();
    titles.sort_unstable();
    assert_eq!(titles.len(), 12, "every document of every round is in the library: {titles:?}");
    // (`documents` opened the library, reading every file its manifest names: none was
    // deleted under it.)
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_dir_all(&docs).unwrap();
}

#[test]
fn an_oversized_file_and_a_folder_that_links_back_to_itself_are_handled_before_any_reading() {
    let lib = temp_library("bounded");
    let l = lib.display().to_string();
    let folder = lib.with_extension("inputs");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    std::fs::write(folder.join("sub/note.txt"), "A short note about the bells of Saint Paul.").unwrap();
    // A link from inside the folder back up to it: walked once, not forever.
    std::os::unix::fs::symlink(&folder, folder.join("sub/loop")).unwrap();
    let out = ingest_sentences(&l, &[&folder.display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = ok(&out);
    assert_eq!(text.matches(": added ").count(), 1, "{text}");
    assert!(err.contains("already read"), "{err}");
    // A sparse 17 MiB text file: refused by its size, named, and nothing is added.
    let big = folder.with_extension("big.txt");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 << 20).unwrap();
    let out = ingest_sentences(&l, &[&big.display().to_string()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("over docmem's limit of 16 MiB"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&ok(&docmem(&["documents", "--library", &l, "--json"]))).unwrap();
    assert_eq!(v["documents"].as_array().unwrap().len(), 1);
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    std::fs::remove_file(&big).unwrap();
}

/// A library compacted into one part answers as before, and lists the same documents.
#[test]
fn compact_merges_the_index_into_one_part_and_changes_no_answer() {
    let lib = temp_library("compact");
    let l = lib.display().to_string();
    let docs = lib.with_extension("compact-texts");
    let _ = std::fs::remove_dir_all(&docs);
    std::fs::create_dir_all(&docs).unwrap();
    for i in 0..12 {
        std::fs::write(
            docs.join(format!("t{i:02}.txt")),
            format!("Tower {i} has a clock. Its bell w{i}z rings at noon. The keeper is k{i}q."),
        )
        .unwrap();
    }
    ok(&docmem(&["ingest", "--library", &l, "--chunker", "sentence", "--embedder", "hashing", &docs.display().to_string()]));
    let search = |q: &str| -> serde_json::Value {
        serde_json::from_str(&ok(&docmem(&["search", q, "--library", &l, "--embedder", "hashing", "--k", "1", "--json"]))).unwrap()
    };
    let before = search("Its bell w7z rings at noon.");
    assert!(files(&lib).iter().all(|f| !f.starts_with("index/parts/")), "twelve small documents stay fresh");
    let out = ok(&docmem(&["compact", "--library", &l]));
    assert!(out.starts_with("compacted 12 documents into 1 part"), "{out}");
    let listed = files(&lib);
    assert_eq!(listed.iter().filter(|f| f.starts_with("index/")).collect::<Vec<_>>().len(), 1, "{listed:?}");
    // The same passages, ranks and fused scores; a vector's similarity now comes from the
    // part's int8 codes, within 0.01 of the f32 one.
    let (mut was, mut now) = (before.clone(), search("Its bell w7z rings at noon."));
    let vector_scores = |v: &mut serde_json::Value| -> Vec<f64> {
        let mut scores = Vec::new();
        for p in v["passages"].as_array_mut().unwrap() {
            for r in p["ranks"].as_array_mut().unwrap() {
                if r["kind"] == "vector" {
                    scores.push(r["score"].as_f64().unwrap());
                    r["score"] = serde_json::Value::Null;
                }
            }
        }
        scores
    };
    let (a, b) = (vector_scores(&mut was), vector_scores(&mut now));
    assert_eq!(now, was);
    assert_eq!(a.len(), b.len());
    assert!(!a.is_empty() && a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 0.01), "{a:?} against {b:?}");
    assert!(before.to_string().contains("w7z"), "{before}");
    std::fs::remove_dir_all(&lib).unwrap();
    std::fs::remove_dir_all(&docs).unwrap();
}
