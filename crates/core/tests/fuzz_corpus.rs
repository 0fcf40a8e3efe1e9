//! Runs every file of the fuzz corpus (`fuzz/corpus/<target>/`) through its harness, so
//! inputs that once crashed, or that fuzzing found interesting, are checked on every test
//! run without a nightly toolchain or libFuzzer.

use std::path::Path;

fn run_corpus(target: &str, harness: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("corpus entry").path();
        if path.is_file() {
            let data = std::fs::read(&path).expect("corpus file");
            let result = std::panic::catch_unwind(|| harness(&data));
            assert!(result.is_ok(), "{} failed on {}", target, path.display());
            count += 1;
        }
    }
    assert!(count >= 5, "the {target} corpus has only {count} files");
}

#[test]
fn memreader_corpus() {
    run_corpus("memreader", docmem_core::fuzz_harness::memreader);
}

#[test]
fn index_decode_corpus() {
    run_corpus("index_decode", docmem_core::fuzz_harness::index_decode);
}
