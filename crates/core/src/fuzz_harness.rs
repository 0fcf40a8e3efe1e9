//! Fuzz harnesses, shared by the cargo-fuzz targets (`fuzz/`) and the corpus regression
//! test (`tests/fuzz_corpus.rs`), so both run exactly the same code. Not a public API.
//!
//! Each harness also asserts the invariants the code promises, so the fuzzer finds wrong
//! answers as well as panics. [`meter`] measures each case's time and peak allocation
//! against the limits (1 s, 256 MiB) in the targets and in the corpus tests alike.

use alloc::string::String;
use alloc::vec::Vec;

use crate::align::AlignParams;
use crate::index::codec::crc32;
use crate::index::{Bm25Index, FlatIndex, HnswSegment, Int8Index, SegmentParams, SegmentedIndex, VectorIndex};
use crate::parse::parse_memreader_output;
use crate::reader::line_reply::parse_line_reply;
use crate::retrieve::{MemoryIndex, SearchParams};
use crate::span::spans_tile;

/// Split fuzz input at the first 0xFF byte into a document and a reader output, parse the
/// output, align it to the document, and check that the result tiles the document.
pub fn memreader(data: &[u8]) {
    let cut = data.iter().position(|&b| b == 0xFF).unwrap_or(data.len());
    let document = String::from_utf8_lossy(&data[..cut]);
    let output = String::from_utf8_lossy(data.get(cut + 1..).unwrap_or(&[]));
    check_alignment(&document, &output, &[]);
}

/// Decode `data` as every index kind, as given and with its checksum repaired (so the
/// payload parsers see hostile input too); whatever decodes must answer a search.
pub fn index_decode(data: &[u8]) {
    decode_all(data);
    if data.len() >= 22 {
        let mut fixed = data.to_vec();
        let body = fixed.len() - 4;
        let crc = crc32(&fixed[..body]).to_le_bytes();
        fixed[body..].copy_from_slice(&crc);
        decode_all(&fixed);
    }
}

fn decode_all(data: &[u8]) {
    fn probe(index: &dyn VectorIndex) {
        let q: Vec<f32> = (0..index.dim()).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect();
        let _ = index.search(&q, 5);
    }
    if let Ok(i) = FlatIndex::from_bytes(data) {
        probe(&i);
    }
    if let Ok(i) = Int8Index::from_bytes(data) {
        probe(&i);
    }
    if let Ok(i) = HnswSegment::from_bytes(data) {
        probe(&i);
    }
    if let Ok(i) = SegmentedIndex::from_bytes(data, SegmentParams::default()) {
        probe(&i);
    }
    if let Ok(i) = Bm25Index::from_bytes(data) {
        let _ = i.search("a b", 5);
    }
    if let Ok(i) = MemoryIndex::from_bytes(data, SegmentParams::default()) {
        let q = alloc::vec![0.5f32; 1];
        let _ = i.search("a", &q, &SearchParams::default());
    }
    // A library's stored parts and fresh documents, into an index of each layout (a part
    // carries its own dimension; 8 is the seeds').
    for mode in crate::retrieve::RetrievalMode::ALL {
        let mut index = MemoryIndex::new(mode, 8, SegmentParams::default());
        let took_part = index.load_part(data).is_ok();
        let took_doc = crate::retrieve::PreparedDocument::from_bytes(data).is_ok_and(|d| index.insert(d).is_ok());
        if took_part || took_doc {
            let _ = index.search("a", &[0.5f32; 8], &SearchParams::default());
            let part = index.parts().iter().max().map_or(0, |p| p + 1);
            index.seal(part);
            let all = index.parts().to_vec();
            index.merge_parts(&all, part + 1);
            let _ = index.search("a", &[0.5f32; 8], &SearchParams::default());
        }
    }
}

/// Most bytes [`expand`] makes of one fuzz input (1.25 MiB): enough for megabyte-long
/// `[MASK]` prefixes and documents, small enough that the slowest case the fuzzer found
/// (tens of thousands of scenarios) stays well inside the time limit on a loaded machine.
pub const EXPAND_LIMIT: usize = 5 << 18;

/// The text of fuzz input `bytes`, with repeats: the byte 0xFE followed by a count byte
/// `n` stands for the text since the previous repeat (or the start) written out
/// `2^(n % 21)` times in all, so that a seed of a few hundred bytes can describe a
/// megabyte-long `[MASK]` prefix, a thousand scenarios or a huge document. The result is
/// cut at [`EXPAND_LIMIT`] bytes, and bytes that are not UTF-8 become U+FFFD.
pub fn expand(bytes: &[u8]) -> String {
    let mut out: Vec<u8> = Vec::new();
    let mut segment_start = 0;
    let mut i = 0;
    while i < bytes.len() && out.len() < EXPAND_LIMIT {
        if bytes[i] == 0xFE && i + 1 < bytes.len() {
            let times = 1usize << (bytes[i + 1] % 21);
            let segment = out[segment_start..].to_vec();
            for _ in 1..times {
                if out.len() + segment.len() > EXPAND_LIMIT || segment.is_empty() {
                    break;
                }
                out.extend_from_slice(&segment);
            }
            segment_start = out.len();
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out.truncate(EXPAND_LIMIT);
    String::from_utf8_lossy(&out).into_owned()
}

/// [`memreader`] on adversarial sizes: the document and the output (split at the first
/// 0xFF) are [`expand`]ed first, so the fuzzer reaches megabyte-long prefixes before
/// `[MASK]`, thousands of tags and missing closers, tag names inside `<think>` and
/// full-width tags at scale. The output is aligned both as `[MASK]` patterns and against
/// the document's numbered units (the `<chunk>4-9</chunk>` prompts).
pub fn memreader_adversarial(data: &[u8]) {
    let cut = data.iter().position(|&b| b == 0xFF).unwrap_or(data.len());
    let document = expand(&data[..cut]);
    let output = expand(data.get(cut + 1..).unwrap_or(&[]));
    check_alignment(&document, &output, &[]);
    let numbered = crate::reader::NumberedText::new(&document);
    assert!(numbered.units().is_empty() || spans_tile(&document, numbered.units()), "numbered units must tile the document");
    check_alignment(&document, &output, numbered.units());
}

/// Parse `output`, align it to `document` (on `units` when given), and check the result.
fn check_alignment(document: &str, output: &str, units: &[crate::span::Span]) {
    // Either reply format the prompts ask for.
    for parsed in [parse_memreader_output(output), parse_line_reply(output)] {
        let aligned = crate::align::align_memory_units(document, &parsed, units, &AlignParams::default());
        let spans: Vec<_> = aligned.scenarios.iter().map(|s| s.span).collect();
        assert!(spans.is_empty() || spans_tile(document, &spans), "aligned spans must tile the document");
        assert_eq!(aligned.stats.exact + aligned.stats.fuzzy + aligned.stats.failed, aligned.stats.chunks);
        assert!(aligned.scenarios.iter().all(|s| s.outline_item.is_none_or(|o| (o as usize) < parsed.outline.len())));
    }
}

/// The library the [`library_dir`] harness damages: two documents with outlines and cores
/// (one written as a memory whose spans tile the text, one as overlapping baseline chunks),
/// a third added and removed, in the layout `mode` selects; the first is sealed into a
/// part, the others are fresh. Returns its keys and bytes
/// (the files of a library directory) and its settings.
#[cfg(feature = "serde")]
pub fn sample_library(
    mode: crate::retrieve::RetrievalMode,
) -> (alloc::collections::BTreeMap<String, Vec<u8>>, crate::library::LibrarySettings) {
    use crate::library::{Library, LibrarySettings, MemStore};
    use crate::{Document, DocumentMemory, Embedder, HashingEmbedder, Scenario, Span};

    let mut embedder = HashingEmbedder::new(16);
    let settings = LibrarySettings { mode, ..LibrarySettings::new(embedder.name(), embedder.dim()) };
    let mut lib = Library::open(MemStore::default(), &settings).expect("an empty library opens");
    let text = "The harbor froze every winter. Ships waited in the bay.\n\n文档记忆由大纲组成。Copper was mined in the hills.";
    let doc = Document::new("harbor.md", text);
    let cut = text.find("\n\n").map_or(text.len(), |i| i + 2);
    let mut memory = DocumentMemory::from_spans(&doc, &[Span::new(0, cut), Span::new(cut, text.len())], "fuzz-reader");
    memory.outline = alloc::vec!["Harbor".into(), "Mining".into()];
    for (i, s) in memory.scenarios.iter_mut().enumerate() {
        *s = Scenario { span: s.span, core: alloc::format!("core {i}"), outline_item: Some(i as u32) };
    }
    let chunks = Document::new("chunks.txt", "one two three four five six seven");
    let chunk_memory = DocumentMemory::from_spans(&chunks, &[Span::new(0, 13), Span::new(8, 33)], "fixed");
    let gone = Document::new("gone.txt", "removed again");
    let gone_memory = DocumentMemory::from_spans(&gone, &[Span::new(0, gone.text.len())], "fixed");
    lib.add(&doc, &memory, &mut embedder).expect("the sample library is valid");
    lib.compact().expect("the sample library is valid");
    for (d, m) in [(&chunks, &chunk_memory), (&gone, &gone_memory)] {
        lib.add(d, m, &mut embedder).expect("the sample library is valid");
    }
    lib.remove(gone.id).expect("the sample library is valid");
    (lib.into_store().entries, settings)
}

/// How [`library_dir`] reads its input: a mode byte, then damage records, each
/// `[key, op, pos lo, pos hi, len]` and `len` payload bytes. `key` picks one of the
/// library's keys (in order), `pos` a byte of its value (modulo its length + 1).
#[cfg(feature = "serde")]
pub mod damage {
    /// Cut the value at `pos`.
    pub const TRUNCATE: u8 = 0;
    /// XOR the payload into the value from `pos`.
    pub const FLIP: u8 = 1;
    /// Overwrite the value from `pos` with the payload (growing it if needed).
    pub const OVERWRITE: u8 = 2;
    /// Delete the key.
    pub const REMOVE: u8 = 3;
    /// Replace the whole value by the payload.
    pub const REPLACE: u8 = 4;
    /// Insert the payload at `pos`.
    pub const INSERT: u8 = 5;
    /// Add a key the library did not write, holding the payload: `documents/<pos>.json`
    /// when `pos % 4` is 1, `memories/<pos>.json` when it is 3, else `index/<pos>.bin`.
    pub const EXTRA_KEY: u8 = 6;
    /// How many ops there are (the op byte is taken modulo this).
    pub const OPS: u8 = 7;

    /// One damage record.
    pub fn record(key: u8, op: u8, pos: u16, payload: &[u8]) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec![key, op, pos as u8, (pos >> 8) as u8, payload.len().min(255) as u8];
        out.extend_from_slice(&payload[..payload.len().min(255)]);
        out
    }
}

/// Apply [`damage`] records to a library's entries.
#[cfg(feature = "serde")]
fn apply_damage(entries: &mut alloc::collections::BTreeMap<String, Vec<u8>>, mut data: &[u8]) {
    while data.len() >= 5 {
        let (key_sel, op, pos, len) = (data[0], data[1] % damage::OPS, u16::from_le_bytes([data[2], data[3]]) as usize, data[4] as usize);
        let payload = &data[5..(5 + len).min(data.len())];
        data = &data[(5 + len).min(data.len())..];
        if op == damage::EXTRA_KEY {
            let key = match pos % 4 {
                1 => alloc::format!("documents/{:016x}.json", pos),
                3 => alloc::format!("memories/{:016x}.json", pos),
                _ => alloc::format!("index/{pos}.bin"),
            };
            entries.insert(key, payload.to_vec());
            continue;
        }
        let Some(key) = entries.keys().nth(key_sel as usize % entries.len().max(1)).cloned() else { return };
        if op == damage::REMOVE {
            entries.remove(&key);
            continue;
        }
        let Some(value) = entries.get_mut(&key) else { return };
        let at = pos % (value.len() + 1);
        match op {
            damage::TRUNCATE => value.truncate(at),
            damage::FLIP => {
                for (v, p) in value[at..].iter_mut().zip(payload) {
                    *v ^= p;
                }
            }
            damage::OVERWRITE => {
                let end = at + payload.len();
                if end > value.len() {
                    value.resize(end, 0);
                }
                value[at..end].copy_from_slice(payload);
            }
            damage::REPLACE => *value = payload.to_vec(),
            _ => {
                let tail = value.split_off(at);
                value.extend_from_slice(payload);
                value.extend_from_slice(&tail);
            }
        }
    }
}

/// A library directory with files truncated, corrupted, removed or added: the
/// [`sample_library`] (in the retrieval mode the first byte picks) damaged by the
/// [`damage`] records that follow, then opened, listed, searched, read, added to and
/// removed from, and reopened. Every step must return a value or a typed error, never
/// panic; a library that opened and then took a change must open again; and every damaged
/// library must survive export and import unchanged.
#[cfg(feature = "serde")]
pub fn library_dir(data: &[u8]) {
    use crate::library::{archive, unarchive, Library, MemStore};
    use crate::retrieve::RetrievalMode;
    use crate::{Document, DocumentMemory, HashingEmbedder, Span};

    let modes = RetrievalMode::ALL;
    let mode = modes[data.first().map_or(0, |&b| b as usize) % modes.len()];
    let (mut entries, settings) = sample_library(mode);
    apply_damage(&mut entries, data.get(1..).unwrap_or(&[]));
    assert_eq!(unarchive(&archive(&entries)).as_ref(), Ok(&entries), "export and import keep every byte");

    let mut embedder = HashingEmbedder::new(settings.dim);
    let store = MemStore { entries: entries.clone(), fail_after_writes: None };
    let _ = Library::open_existing(store.clone());
    let Ok(mut lib) = Library::open(store, &settings) else { return };
    let ids: Vec<_> = lib.documents().iter().map(|e| e.id).collect();
    for &id in &ids {
        if let Ok((doc, memory)) = lib.get(id) {
            let _ = memory.check(doc);
        }
    }
    for query in ["harbor winter", "文档", ""] {
        if let Ok(hits) = lib.search(query, &mut embedder, &SearchParams::default()) {
            for hit in &hits {
                let _ = lib.passage(hit);
            }
        }
    }
    let mut changed = false;
    let new = Document::new("new.txt", "Bells rang at noon. They rang again at dusk.");
    let new_memory = DocumentMemory::from_spans(&new, &[Span::new(0, 20), Span::new(20, new.text.len())], "fixed");
    changed |= lib.add(&new, &new_memory, &mut embedder).is_ok_and(|added| added);
    if let Some(&first) = ids.first() {
        changed |= lib.remove(first).is_ok_and(|removed| removed);
    }
    if changed {
        let reopened = Library::open(lib.into_store(), &settings);
        assert!(reopened.is_ok(), "a damaged library that opened and took a change must open again: {:?}", reopened.err());
    }
}

/// Time and peak allocation per fuzz input, and the limits on them (a case over
/// [`TIME_LIMIT`](meter::TIME_LIMIT) or [`PEAK_LIMIT`](meter::PEAK_LIMIT) is a failure).
///
/// Allocations are counted by a global allocator that the measuring binary (a fuzz target,
/// a corpus test) installs with [`counting_allocator!`](crate::counting_allocator): the
/// `unsafe impl GlobalAlloc` is written there, so this crate keeps no `unsafe` of its own.
/// The counts are process-wide; [`measure`](meter::measure) holds a lock, so measured
/// cases never overlap (the other tests of a corpus test binary wait their turn).
#[cfg(feature = "std")]
pub mod meter {
    use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use alloc::format;
    use alloc::string::String;
    use alloc::vec::Vec;

    /// Longest a case may take.
    pub const TIME_LIMIT: Duration = Duration::from_secs(1);
    /// Most bytes a case may have allocated at once (above what was live when it began).
    pub const PEAK_LIMIT: usize = 256 << 20;
    /// How many times [`TIME_LIMIT`] a case may take inside a fuzz target. The targets run
    /// instrumented (coverage counters on every branch, AddressSanitizer on every access),
    /// far slower than the code the limit is for, and by a factor that depends on the code:
    /// a template case that takes 0.13 s in the test build took 0.8 to 1.4 s there, a 2 MB
    /// MemReader output aligned in 0.34 s took 5.1 s. So the fuzzer fails a case past 10 s
    /// (a case that slow is slow in any build), and the corpus tests hold every case it
    /// saved to the 1 s itself.
    pub const FUZZ_TIME_SLACK: u32 = 10;

    static CURRENT: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);
    static COUNTING: AtomicBool = AtomicBool::new(false);
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Called by the counting allocator after each allocation of `size` bytes.
    #[inline]
    pub fn on_alloc(size: usize) {
        COUNTING.store(true, Ordering::Relaxed);
        let now = CURRENT.fetch_add(size, Ordering::Relaxed).wrapping_add(size);
        PEAK.fetch_max(now, Ordering::Relaxed);
    }

    /// Called by the counting allocator after each release of `size` bytes.
    #[inline]
    pub fn on_dealloc(size: usize) {
        CURRENT.fetch_sub(size, Ordering::Relaxed);
    }

    /// Whether a counting allocator is installed (it has counted something).
    pub fn counting() -> bool {
        drop(core::hint::black_box(alloc::boxed::Box::new(0u64)));
        COUNTING.load(Ordering::Relaxed)
    }

    /// What one case cost.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct Cost {
        /// Wall time in seconds.
        pub seconds: f64,
        /// Most bytes allocated at once above what was live when the case began.
        pub peak_bytes: usize,
    }

    impl Cost {
        /// `None` within the limits, else which limit was passed and by how much.
        pub fn over_limits(&self) -> Option<String> {
            let mut over = Vec::new();
            if self.seconds > TIME_LIMIT.as_secs_f64() {
                over.push(format!("took {:.3} s (limit {} s)", self.seconds, TIME_LIMIT.as_secs_f64()));
            }
            if self.peak_bytes > PEAK_LIMIT {
                over.push(format!("peaked at {} (limit {})", mib(self.peak_bytes), mib(PEAK_LIMIT)));
            }
            (!over.is_empty()).then(|| over.join(" and "))
        }
    }

    /// Bytes as MiB, for messages.
    pub fn mib(bytes: usize) -> String {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    }

    /// Run `f` alone (no other measured case runs meanwhile) and return its cost, with
    /// `f`'s panic, if any, as the error.
    pub fn measure(f: impl FnOnce()) -> (Cost, Result<(), String>) {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
            p.downcast_ref::<&str>().map(|s| String::from(*s)).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
        });
        let seconds = start.elapsed().as_secs_f64();
        let peak_bytes = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        (Cost { seconds, peak_bytes }, outcome)
    }

    /// For a fuzz target: run the harness on one input, and panic (a crash libFuzzer keeps)
    /// when it passes a limit (the time limit × [`FUZZ_TIME_SLACK`]). With
    /// `DOCMEM_FUZZ_COST=1` in the environment it prints each input's time and peak on
    /// stderr.
    pub fn fuzz_one(data: &[u8], harness: fn(&[u8])) {
        let (cost, outcome) = measure(|| harness(data));
        if std::env::var_os("DOCMEM_FUZZ_COST").is_some() {
            std::eprintln!("{} bytes: {:.3} ms, peak {}", data.len(), cost.seconds * 1e3, mib(cost.peak_bytes));
        }
        if let Err(message) = outcome {
            panic!("harness panicked: {message}");
        }
        let time_limit = TIME_LIMIT.as_secs_f64() * f64::from(FUZZ_TIME_SLACK);
        if cost.seconds > time_limit {
            panic!(
                "a {}-byte input took {:.3} s instrumented (limit {time_limit} s: {FUZZ_TIME_SLACK} × the time limit)",
                data.len(),
                cost.seconds
            );
        }
        if cost.peak_bytes > PEAK_LIMIT {
            panic!("a {}-byte input peaked at {} (limit {})", data.len(), mib(cost.peak_bytes), mib(PEAK_LIMIT));
        }
    }

    /// What a corpus run measured.
    #[derive(Clone, Debug, Default)]
    pub struct CorpusReport {
        /// Files run.
        pub inputs: usize,
        /// The slowest case's time in seconds, and its file.
        pub max_seconds: (f64, PathBuf),
        /// The largest peak in bytes, and its file.
        pub max_peak: (usize, PathBuf),
        /// The sum of the cases' times in seconds.
        pub total_seconds: f64,
    }

    impl core::fmt::Display for CorpusReport {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            write!(
                f,
                "{} inputs in {:.2} s; slowest {:.1} ms ({}); largest peak {} ({})",
                self.inputs,
                self.total_seconds,
                self.max_seconds.0 * 1e3,
                name(&self.max_seconds.1),
                mib(self.max_peak.0),
                name(&self.max_peak.1)
            )
        }
    }

    /// Hold while a test of a corpus-replay binary runs: the allocation meter counts the
    /// whole process, so that binary's tests run one at a time (a neighbour's allocations
    /// must not count toward an input's peak, nor its work toward an input's time).
    pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static ONE: Mutex<()> = Mutex::new(());
        ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replay `corpus_root/<target>` through `harness` ([`run_corpus`]) for a test: print
    /// the report, panic on a failure or on fewer than `min_inputs` files.
    pub fn replay(corpus_root: &Path, target: &str, harness: fn(&[u8]), min_inputs: usize) {
        let report = run_corpus(&corpus_root.join(target), harness).unwrap_or_else(|e| panic!("{target}: {e}"));
        std::println!("fuzz corpus {target}: {report}");
        assert!(report.inputs >= min_inputs, "the {target} corpus has only {} files", report.inputs);
    }

    /// Run every file of a corpus directory through `harness`, measured. Fails, naming
    /// every file that panicked or passed a limit (with its time and peak), after running
    /// them all; the allocation limit is checked only when a counting allocator is
    /// installed (else peaks read 0, and the error says so).
    pub fn run_corpus(dir: &Path, harness: fn(&[u8])) -> Result<CorpusReport, String> {
        if !counting() {
            return Err(String::from("no counting allocator is installed: put `docmem_core::counting_allocator!();` in the test binary"));
        }
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        let mut report = CorpusReport::default();
        let mut failures = Vec::new();
        for path in paths {
            let data = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let (cost, outcome) = measure(|| harness(&data));
            report.inputs += 1;
            report.total_seconds += cost.seconds;
            if cost.seconds > report.max_seconds.0 {
                report.max_seconds = (cost.seconds, path.clone());
            }
            if cost.peak_bytes > report.max_peak.0 {
                report.max_peak = (cost.peak_bytes, path.clone());
            }
            let what = match (outcome, cost.over_limits()) {
                (Err(message), _) => Some(format!("panicked ({message})")),
                (Ok(()), Some(over)) => Some(over),
                (Ok(()), None) => None,
            };
            if let Some(what) = what {
                failures.push(format!("{}: {what} [{:.3} s, peak {}]", path.display(), cost.seconds, mib(cost.peak_bytes)));
            }
        }
        if failures.is_empty() {
            Ok(report)
        } else {
            Err(format!("{} of {} corpus files failed:\n{}", failures.len(), report.inputs, failures.join("\n")))
        }
    }
}

/// Install the counting global allocator of [`meter`] in this binary (a fuzz target or a
/// corpus test): the system allocator, with every allocation and release counted.
#[cfg(feature = "std")]
#[macro_export]
macro_rules! counting_allocator {
    () => {
        struct CountingAllocator;

        // SAFETY: every method forwards to the system allocator with the caller's own
        // arguments, so its contract is the system allocator's; the counting beside it
        // touches only atomics and never allocates.
        unsafe impl ::std::alloc::GlobalAlloc for CountingAllocator {
            unsafe fn alloc(&self, layout: ::std::alloc::Layout) -> *mut u8 {
                // SAFETY: forwarded as given (see the impl).
                let p = unsafe { ::std::alloc::System.alloc(layout) };
                if !p.is_null() {
                    $crate::fuzz_harness::meter::on_alloc(layout.size());
                }
                p
            }
            unsafe fn alloc_zeroed(&self, layout: ::std::alloc::Layout) -> *mut u8 {
                // SAFETY: forwarded as given (see the impl).
                let p = unsafe { ::std::alloc::System.alloc_zeroed(layout) };
                if !p.is_null() {
                    $crate::fuzz_harness::meter::on_alloc(layout.size());
                }
                p
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: ::std::alloc::Layout) {
                // SAFETY: forwarded as given (see the impl).
                unsafe { ::std::alloc::System.dealloc(ptr, layout) };
                $crate::fuzz_harness::meter::on_dealloc(layout.size());
            }
            unsafe fn realloc(&self, ptr: *mut u8, layout: ::std::alloc::Layout, new_size: usize) -> *mut u8 {
                // SAFETY: forwarded as given (see the impl).
                let p = unsafe { ::std::alloc::System.realloc(ptr, layout, new_size) };
                if !p.is_null() {
                    // The new block is counted before the old one is released: a peak
                    // that includes both, as a copying reallocation has.
                    $crate::fuzz_harness::meter::on_alloc(new_size);
                    $crate::fuzz_harness::meter::on_dealloc(layout.size());
                }
                p
            }
        }

        #[global_allocator]
        static COUNTING_ALLOCATOR: CountingAllocator = CountingAllocator;
    };
}
