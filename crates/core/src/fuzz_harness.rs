//! Fuzz harnesses, shared by the cargo-fuzz targets (`fuzz/`) and the corpus regression
//! test (`tests/fuzz_corpus.rs`), so both run exactly the same code. Not a public API.
//!
//! Each harness also asserts the invariants the code promises, so the fuzzer finds wrong
//! answers as well as panics.

use alloc::string::String;
use alloc::vec::Vec;

use crate::align::{align_memory, AlignParams};
use crate::index::codec::crc32;
use crate::index::{Bm25Index, FlatIndex, HnswSegment, Int8Index, SegmentParams, SegmentedIndex, VectorIndex};
use crate::parse::parse_memreader_output;
use crate::retrieve::{MemoryIndex, SearchParams};
use crate::span::spans_tile;

/// Run every file of a corpus directory through `harness`; returns how many ran. Used by the
/// corpus regression tests of every crate with a fuzz target.
#[cfg(feature = "std")]
pub fn run_corpus_dir(dir: &std::path::Path, harness: fn(&[u8])) -> Result<usize, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| alloc::format!("cannot read {}: {e}", dir.display()))?;
    let mut count = 0;
    for entry in entries {
        let path = entry.map_err(|e| alloc::format!("{e}"))?.path();
        if path.is_file() {
            let data = std::fs::read(&path).map_err(|e| alloc::format!("cannot read {}: {e}", path.display()))?;
            std::panic::catch_unwind(|| harness(&data)).map_err(|_| alloc::format!("harness failed on {}", path.display()))?;
            count += 1;
        }
    }
    Ok(count)
}

/// Split fuzz input at the first 0xFF byte into a document and a reader output, parse the
/// output, align it to the document, and check that the result tiles the document.
pub fn memreader(data: &[u8]) {
    let cut = data.iter().position(|&b| b == 0xFF).unwrap_or(data.len());
    let document = String::from_utf8_lossy(&data[..cut]);
    let output = String::from_utf8_lossy(data.get(cut + 1..).unwrap_or(&[]));
    let parsed = parse_memreader_output(&output);
    let aligned = align_memory(&document, &parsed, &AlignParams::default());
    let spans: Vec<_> = aligned.scenarios.iter().map(|s| s.span).collect();
    assert!(spans.is_empty() || spans_tile(&document, &spans), "aligned spans must tile the document");
    assert_eq!(aligned.stats.exact + aligned.stats.fuzzy + aligned.stats.failed, aligned.stats.chunks);
    assert!(aligned.scenarios.iter().all(|s| s.outline_item.is_none_or(|o| (o as usize) < parsed.outline.len())));
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
}
