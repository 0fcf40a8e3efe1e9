//! Writes the seed corpus for the core's fuzz targets into `fuzz/corpus/`: MemReader
//! outputs (well-formed and broken) paired with documents, adversarial ones at megabyte
//! scale (in `memreader_adversarial`'s repeat notation), one serialized index of each
//! kind, and damage to a library's files.
//!
//! `cargo run -p docmem-core --example make_fuzz_seeds`

use std::path::Path;

use docmem_core::embed::HashingEmbedder;
use docmem_core::fuzz_harness::damage;
use docmem_core::index::{Bm25Index, Bm25Params, FlatIndex, HnswParams, HnswSegment, Int8Index, Metric, SegmentParams, SegmentedIndex};
use docmem_core::retrieve::{MemoryIndex, RetrievalMode};
use docmem_core::{Document, DocumentMemory, Span};

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let doc = "The harbor froze every winter. Ships waited in the bay.\n\nCopper was mined in the hills. 文档记忆是一种方法。";
    let outputs = [
        "<think>plan</think><outline>1. Harbor\n2. Mining</outline><scenario><chunk>The harbor[MASK]the bay.</chunk>Ice closed it.</scenario><scenario><chunk>Copper[MASK]方法。</chunk>Mining.</scenario>",
        "</think><outline>- A<scenario><chunk>Ships waited[MASK]bay.</chunk>core<scenario><chunk>Copper was",
        "prose <chunk>The harbor froze every winter.</chunk>verbatim</scenario> trailing",
        "＜outline＞一、港口＜/outline＞<SCENARIO><Chunk>文档记忆［MASK］方法。</Chunk></scenario>",
        "<scenario><chunk>a[MASK]b【MASK】c</chunk></scenario><scenario></scenario></chunk><think>",
    ];
    let dir = root.join("memreader");
    std::fs::create_dir_all(&dir)?;
    for (i, out) in outputs.iter().enumerate() {
        let mut bytes = doc.as_bytes().to_vec();
        bytes.push(0xFF);
        bytes.extend_from_slice(out.as_bytes());
        std::fs::write(dir.join(format!("seed-{i}")), bytes)?;
    }

    let dir = root.join("index_decode");
    std::fs::create_dir_all(&dir)?;
    let mut flat = FlatIndex::new(4, Metric::Cosine);
    for id in 0..40u32 {
        let x = id as f32;
        flat.add(id, &[x.sin(), x.cos(), (x * 0.5).sin(), 1.0]).map_err(std::io::Error::other)?;
    }
    std::fs::write(dir.join("seed-flat"), flat.to_bytes())?;
    std::fs::write(dir.join("seed-int8"), Int8Index::from_flat(flat.clone()).to_bytes())?;
    let params = HnswParams { m: 4, ..HnswParams::default() };
    std::fs::write(dir.join("seed-hnsw"), HnswSegment::build(4, Metric::Cosine, flat.ids().to_vec(), flat.rows(), params).to_bytes())?;
    let mut seg = SegmentedIndex::new(4, Metric::Cosine, SegmentParams { seal_threshold: 16, hnsw: params, ..SegmentParams::default() });
    for (row, &id) in flat.rows().chunks_exact(4).zip(flat.ids()) {
        seg.add(id, row).map_err(std::io::Error::other)?;
    }
    seg.remove(3);
    std::fs::write(dir.join("seed-segmented"), seg.to_bytes())?;
    let mut bm25 = Bm25Index::new(Bm25Params::default());
    bm25.add(1, "the harbor froze").map_err(std::io::Error::other)?;
    bm25.add(2, "文档记忆").map_err(std::io::Error::other)?;
    std::fs::write(dir.join("seed-bm25"), bm25.to_bytes())?;
    let d = Document::new("d", doc);
    let memory = DocumentMemory::from_spans(&d, &[Span::new(0, 56), Span::new(56, doc.len())], "fixed");
    let mut e = HashingEmbedder::new(8);
    let mut mi = MemoryIndex::new(RetrievalMode::ThreeLayer, 8, SegmentParams::default());
    mi.add_document(&d, &memory, &mut e).map_err(std::io::Error::other)?;
    let mut parts = MemoryIndex::new(RetrievalMode::ThreeLayer, 8, SegmentParams::default()).with_manual_sealing();
    parts.add_document(&d, &memory, &mut e).map_err(std::io::Error::other)?;
    parts.seal(1);
    let part = parts.part_bytes(1).ok_or_else(|| std::io::Error::other("no part"))?;
    std::fs::write(root.join("index_decode").join("seed-part"), part)?;
    let other = Document::new("e", "Bells rang at noon. They rang again at dusk.");
    let other_memory = DocumentMemory::from_spans(&other, &[Span::new(0, 20), Span::new(20, other.text.len())], "fixed");
    let prepared = parts.prepare_document(&other, &other_memory, &mut e).map_err(std::io::Error::other)?;
    let prepared = prepared.ok_or_else(|| std::io::Error::other("already indexed"))?;
    std::fs::write(root.join("index_decode").join("seed-prepared"), prepared.to_bytes())?;
    std::fs::write(dir.join("seed-memory-index"), mi.to_bytes())?;
    // Adversarial reader output. `R(n)` (the bytes 0xFE n) repeats what precedes it since
    // the last repeat 2^n times (see `fuzz_harness::expand`), so 2^15 copies of a 31-byte
    // sentence are a 1 MB prefix in a seed of a hundred bytes.
    const R: u8 = 0xFE;
    let sentence = "The harbor froze every winter. ".as_bytes();
    let cat = |parts: &[&[u8]]| parts.concat();
    let d = doc.as_bytes();
    let adversarial: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("tags-inside-think", d.to_vec(), "<think>I will write <outline> then <scenario><chunk>The harbor[MASK]bay.</chunk></scenario>, and </outline> too</think><outline>1. Harbor</outline><scenario><chunk>The harbor[MASK]the bay.</chunk>Ice.</scenario>".into()),
        ("full-width-tags", d.to_vec(), "＜think＞先想＜／think＞＜outline＞一、港口＜／outline＞＜scenario＞＜chunk＞The harbor［MASK］the bay.＜／chunk＞冰。＜／scenario＞＜ＳＣＥＮＡＲＩＯ＞＜ｃｈｕｎｋ＞Copper【MASK】方法。".into()),
        ("missing-closers", d.to_vec(), "<outline>1. A<scenario><chunk>The harbor[MASK]bay.<scenario><chunk>Copper[MASK]<chunk></chunk><outline>".into()),
        ("megabyte-prefix", d.to_vec(), cat(&[b"<scenario><chunk>", sentence, &[R, 15], b"[MASK]the hills.</chunk>core</scenario>"])),
        ("megabyte-suffix", d.to_vec(), cat(&[b"<scenario><chunk>The harbor[MASK]", sentence, &[R, 15], b"</chunk>core</scenario>"])),
        ("megabyte-document", cat(&[sentence, &[R, 15], b"\n\nCopper was mined in the hills."]), "<scenario><chunk>The harbor[MASK]winter.</chunk>a</scenario><scenario><chunk>Copper[MASK]hills.</chunk>b</scenario>".into()),
        ("thousand-scenarios", cat(&[sentence, &[R, 10]]), cat(&[b"<scenario><chunk>The harbor[MASK]winter.</chunk>c</scenario>", &[R, 10]])),
        ("unclosed-tags", d.to_vec(), cat(&[b"<think>", &[R, 16], b"<scenario><chunk>", &[R, 14]])),
        ("numbered-ranges", cat(&[sentence, &[R, 6], b"Ships waited."]), "<scenario><chunk>1-2</chunk>a</scenario><scenario><chunk>3-4294967295</chunk>b</scenario><chunk>0-1</chunk>".into()),
        ("tags-inside-chunk", d.to_vec(), cat(&[b"<scenario><chunk>The harbor</think>[MASK]<outline>the bay.</chunk>x", &[R, 20], b"</scenario>"])),
    ];
    let dir = root.join("memreader_adversarial");
    std::fs::create_dir_all(&dir)?;
    for (name, document, output) in adversarial {
        std::fs::write(dir.join(format!("seed-{name}")), cat(&[&document, &[0xFF], &output]))?;
    }

    // Damage to a library's files: none (each retrieval mode), then one kind at a time.
    let dir = root.join("library_dir");
    std::fs::create_dir_all(&dir)?;
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("intact-three-layer", vec![0]),
        ("intact-single-vector", vec![1]),
        ("intact-mixed", vec![2]),
        ("intact-chunks", vec![3]),
        // The sample library's keys, in order: 0-1 documents, 2 a fresh document's
        // index entries, 3 a part, 4 the manifest, 5-6 memories.
        ("manifest-truncated", [vec![0], damage::record(4, damage::TRUNCATE, 40, &[])].concat()),
        ("manifest-generation", [vec![0], damage::record(4, damage::REPLACE, 0, br#"{"format_version":1,"generation":99,"embedder":"hashing-16","dim":16,"mode":"three-layer","documents":[]}"#)].concat()),
        ("manifest-dim", [vec![0], damage::record(4, damage::OVERWRITE, 0, br#"{"format_version":3,"generation":4,"embedder":"hashing-16","dim":3"#)].concat()),
        ("manifest-parts", [vec![0], damage::record(4, damage::REPLACE, 0, br#"{"format_version":3,"generation":9,"embedder":"hashing-16","dim":16,"mode":"three-layer","parts":[{"id":1,"tier":0,"documents":1},{"id":1,"tier":0,"documents":1}],"fresh":[]}"#)].concat()),
        ("fresh-flipped", [vec![0], damage::record(2, damage::FLIP, 100, &[0x55; 8])].concat()),
        ("part-flipped", [vec![0], damage::record(3, damage::FLIP, 100, &[0x55; 8])].concat()),
        ("part-truncated", [vec![1], damage::record(3, damage::TRUNCATE, 300, &[])].concat()),
        ("part-removed", [vec![0], damage::record(3, damage::REMOVE, 0, &[])].concat()),
        ("fresh-removed", [vec![2], damage::record(2, damage::REMOVE, 0, &[])].concat()),
        ("document-removed", [vec![0], damage::record(0, damage::REMOVE, 0, &[])].concat()),
        ("document-text-changed", [vec![0], damage::record(1, damage::REPLACE, 0, br#"{"id":"0","title":"x","text":"short","language":"en"}"#)].concat()),
        ("memory-span-past-end", [vec![2], damage::record(5, damage::REPLACE, 0, br#"{"format_version":1,"doc_id":"0","outline":["a"],"scenarios":[{"span":{"start":0,"end":99999},"core":"c","outline_item":7}],"provenance":{"reader":"r"}}"#)].concat()),
        ("memory-garbage", [vec![3], damage::record(6, damage::INSERT, 10, b"\xff\x00{[")].concat()),
        ("extra-keys", [vec![0], damage::record(0, damage::EXTRA_KEY, 7, b"junk"), damage::record(0, damage::EXTRA_KEY, 8, b"")].concat()),
        ("everything", [vec![0], damage::record(3, damage::FLIP, 64, &[1, 2, 3]), damage::record(5, damage::TRUNCATE, 30, &[]), damage::record(4, damage::FLIP, 20, &[0x20])].concat()),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}
