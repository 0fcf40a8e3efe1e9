//! Writes the seed corpus for the fuzz targets into `fuzz/corpus/`: MemReader outputs
//! (well-formed and broken) paired with documents, and one serialized index of each kind.
//!
//! `cargo run -p docmem-core --example make_fuzz_seeds`

use std::path::Path;

use docmem_core::embed::HashingEmbedder;
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
    std::fs::write(dir.join("seed-memory-index"), mi.to_bytes())?;
    println!("seeds written under {}", root.display());
    Ok(())
}
