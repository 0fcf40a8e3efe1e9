//! Runs every file of the fuzz corpus (`fuzz/corpus/<target>/`) through its harness, so
//! inputs that once crashed, or that fuzzing found interesting, are checked on every test
//! run without a nightly toolchain or libFuzzer.

use docmem_core::fuzz_harness::run_corpus_dir;

fn run_corpus(target: &str, harness: fn(&[u8])) {
    let dir = manifest_dir().join("../../fuzz/corpus").join(target);
    let count = run_corpus_dir(&dir, harness).unwrap_or_else(|e| panic!("{e}"));
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

/// This package's directory: cargo's run-time value first, so a test binary reused from a
/// shared build cache by a checkout at another path still finds its files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
