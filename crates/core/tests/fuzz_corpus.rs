//! Runs every file of the fuzz corpus (`fuzz/corpus/<target>/`) through its harness, so
//! inputs that once crashed, or that fuzzing found interesting, are checked on every test
//! run without a nightly toolchain or libFuzzer. Each case is measured as the fuzz targets
//! measure it: over 1 s or a 256 MiB allocation peak is a failure naming the file.

use docmem_core::fuzz_harness::meter::{one_at_a_time, replay};

docmem_core::counting_allocator!();

fn run(target: &str, harness: fn(&[u8])) {
    replay(&manifest_dir().join("../../fuzz/corpus"), target, harness, 5);
}

#[test]
fn memreader_corpus() {
    let _serial = one_at_a_time();
    run("memreader", docmem_core::fuzz_harness::memreader);
}

#[test]
fn memreader_adversarial_corpus() {
    let _serial = one_at_a_time();
    run("memreader_adversarial", docmem_core::fuzz_harness::memreader_adversarial);
}

#[test]
fn index_decode_corpus() {
    let _serial = one_at_a_time();
    run("index_decode", docmem_core::fuzz_harness::index_decode);
}

#[test]
fn library_dir_corpus() {
    let _serial = one_at_a_time();
    run("library_dir", docmem_core::fuzz_harness::library_dir);
}

/// The meter counts: a case that allocates 1 MiB peaks at about that, and a cost over the
/// limits is reported as over them, naming the limit.
#[test]
fn the_meter_measures_time_and_peak_allocation() {
    let _serial = one_at_a_time();
    use docmem_core::fuzz_harness::meter::{measure, Cost, PEAK_LIMIT};
    let (cost, outcome) = measure(|| {
        let v = std::hint::black_box(vec![1u8; 1 << 20]);
        drop(v);
    });
    assert!(outcome.is_ok());
    // The meter counts the whole process: a few bytes another thread (the test harness's)
    // frees meanwhile come off the peak, so the lower bound leaves a page of slack.
    assert!(((1 << 20) - 4096..2 << 20).contains(&cost.peak_bytes), "{cost:?}");
    assert!(Cost { seconds: 0.1, peak_bytes: PEAK_LIMIT + 1 }.over_limits().unwrap().contains("limit 256.00 MiB"));
    assert!(Cost { seconds: 1.5, peak_bytes: 0 }.over_limits().unwrap().contains("limit 1 s"));
    assert!(Cost { seconds: 0.5, peak_bytes: 1 << 20 }.over_limits().is_none());
}

/// The library the `library_dir` harness damages opens intact, in every layout, with both
/// documents searchable, so the damage is what the fuzzer explores.
#[test]
fn the_intact_sample_library_opens_and_answers() {
    let _serial = one_at_a_time();
    use docmem_core::library::{Library, MemStore};
    use docmem_core::retrieve::{RetrievalMode, SearchParams};
    for mode in RetrievalMode::ALL {
        let (entries, settings) = docmem_core::fuzz_harness::sample_library(mode);
        assert_eq!(entries.len(), 7, "{:?}", entries.keys());
        assert!(entries.keys().any(|k| k.starts_with("index/parts/")) && entries.keys().any(|k| k.starts_with("index/fresh/")));
        let lib = Library::open(MemStore { entries, fail_after_writes: None }, &settings).unwrap();
        assert_eq!(lib.documents().len(), 2);
        let mut e = docmem_core::HashingEmbedder::new(settings.dim);
        assert!(!lib.search("harbor winter", &mut e, &SearchParams::default()).unwrap().is_empty());
    }
}

/// This package's directory: cargo's run-time value first, so a test binary reused from a
/// shared build cache by a checkout at another path still finds its files.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
