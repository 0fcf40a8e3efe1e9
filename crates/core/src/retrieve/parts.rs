//! A [`MemoryIndex`] stored in pieces that are written once.
//!
//! A library that grows to thousands of documents cannot afford to write its whole index
//! again for every document it adds; the way out is an LSM tree's, as in Lucene's
//! segments and LanceDB's fragments. What a document adds goes to storage on its own
//! ([`PreparedDocument`], a few kilobytes) and into the index's fresh segment. When the
//! fresh segment is full its documents are *sealed* into a *part*: per layer an HNSW graph
//! and a BM25 index, with the maps from items to chunks and chunks to spans, written once
//! as [`MemoryIndex::part_bytes`]. Parts are later merged into larger ones (the owner
//! decides when; [`MemoryIndex::merge_parts`]), so each vector is rewritten only a few
//! times over a library's life. Opening reads the parts and the documents added since.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashSet;

use super::{ChunkRef, DocEntry, MemoryIndex};
use crate::document::DocId;
use crate::index::codec::{Reader, Writer};
use crate::index::{Bm25Index, HnswSegment, VectorIndex};
use crate::span::Span;
use crate::Error;

const DOCUMENT_KIND: [u8; 4] = *b"MDOC";
/// Version 2 stores vectors as f16; version 1 (f32) is still read.
const DOCUMENT_VERSION: u16 = 2;
const PART_KIND: [u8; 4] = *b"MPRT";

/// One entry of a prepared document: its layer, id, the chunks it stands for, its BM25
/// text and its vector.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PreparedItem {
    pub(super) layer: u8,
    pub(super) id: u32,
    pub(super) chunks: Vec<u32>,
    pub(super) text: String,
    pub(super) vector: Vec<f32>,
}

/// What adding one document puts into a [`MemoryIndex`], embedded and numbered but not yet
/// inserted ([`MemoryIndex::prepare_document`], [`MemoryIndex::insert`]). Its bytes are
/// what a library stores for a document not yet sealed into a part.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedDocument {
    pub(super) doc_id: DocId,
    /// One past the largest id it uses: the index's counter after it is inserted.
    pub(super) next_id: u32,
    /// (chunk id, scenario, span)
    pub(super) chunks: Vec<(u32, u32, Span)>,
    pub(super) items: Vec<PreparedItem>,
}

/// A document id as the index files store it (16 bytes, length-prefixed).
pub(super) fn read_doc_id(r: &mut Reader<'_>) -> Result<DocId, Error> {
    let b = r.bytes()?;
    let id: [u8; 16] = b.try_into().map_err(|_| Error::InvalidField { what: "document id" })?;
    Ok(DocId(id))
}

fn write_chunk(w: &mut Writer, id: u32, doc: Option<DocId>, scenario: u32, span: Span) {
    w.u32(id);
    if let Some(doc) = doc {
        w.bytes(&doc.0);
    }
    w.u32(scenario);
    w.u64(span.start as u64);
    w.u64(span.end as u64);
}

fn read_span(r: &mut Reader<'_>) -> Result<Span, Error> {
    let span = Span::new(r.usize()?, r.usize()?);
    if span.start > span.end {
        return Err(Error::InvalidField { what: "chunk span" });
    }
    Ok(span)
}

impl PreparedDocument {
    /// The document it indexes.
    pub fn doc_id(&self) -> DocId {
        self.doc_id
    }

    /// Vectors it adds, over every layer.
    pub fn vectors(&self) -> usize {
        self.items.len()
    }

    /// Its stored form (versioned, checksummed; see [`crate::index::codec`]), its vectors
    /// as f16.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode(DOCUMENT_VERSION)
    }

    /// The stored form in layout `version`: 2 stores vectors as f16 (they were rounded to
    /// it when the document was prepared), 1 as f32 (what older libraries hold).
    fn encode(&self, version: u16) -> Vec<u8> {
        let mut w = Writer::new();
        w.bytes(&self.doc_id.0);
        w.u32(self.next_id);
        w.u64(self.chunks.len() as u64);
        for &(id, scenario, span) in &self.chunks {
            write_chunk(&mut w, id, None, scenario, span);
        }
        w.u64(self.items.len() as u64);
        for item in &self.items {
            w.u8(item.layer);
            w.u32(item.id);
            w.u32s(&item.chunks);
            w.str(&item.text);
            if version < 2 {
                w.f32s(&item.vector);
            } else {
                let bits: Vec<u8> = item.vector.iter().flat_map(|&x| crate::f16::f32_to_f16(x).to_le_bytes()).collect();
                w.bytes(&bits);
            }
        }
        w.finish(DOCUMENT_KIND, version)
    }

    /// Read back [`PreparedDocument::to_bytes`]; damage is an error. Whether it fits an
    /// index is checked when it is inserted.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let (version, mut r) = Reader::open(bytes, DOCUMENT_KIND, DOCUMENT_VERSION)?;
        let doc_id = read_doc_id(&mut r)?;
        let next_id = r.u32()?;
        let n = r.count(24)?;
        let mut chunks = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u32()?;
            let scenario = r.u32()?;
            chunks.push((id, scenario, read_span(&mut r)?));
        }
        let n = r.count(17)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            let layer = r.u8()?;
            let id = r.u32()?;
            let chunks = r.u32s()?;
            let text = String::from(r.str()?);
            let vector = if version < 2 {
                r.f32s()?
            } else {
                let bits = r.bytes()?;
                if bits.len() % 2 != 0 {
                    return Err(Error::InvalidField { what: "f16 vector" });
                }
                bits.chunks_exact(2).map(|b| crate::f16::f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect()
            };
            if vector.iter().any(|x| !x.is_finite()) {
                return Err(Error::NonFinite { id });
            }
            items.push(PreparedItem { layer, id, chunks, text, vector });
        }
        r.finish()?;
        Ok(PreparedDocument { doc_id, next_id, chunks, items })
    }
}

impl MemoryIndex {
    /// The stored form of sealed part `part` (`None` when there is no such part): per
    /// layer its HNSW graph, BM25 index and items, then its chunks and documents. Written
    /// once when the part is made; what is removed from it later is the owner's to record
    /// and to replay with [`MemoryIndex::remove_document`] after [`MemoryIndex::load_part`].
    pub fn part_bytes(&self, part: u64) -> Option<Vec<u8>> {
        let slot = self.parts.iter().position(|&p| p == part)?;
        let mut w = Writer::new();
        w.u64(part);
        w.u64(self.layers.len() as u64);
        for l in &self.layers {
            w.u8(l.layer as u8);
            let graph = l.vectors.sealed(slot)?;
            w.bytes(&graph.to_bytes());
            w.bytes(&l.lexical.get(slot + 1)?.to_bytes());
            let mut ids: Vec<u32> = graph.ids().iter().copied().filter(|id| l.item_chunks.contains_key(id)).collect();
            ids.sort_unstable();
            w.u64(ids.len() as u64);
            for id in ids {
                w.u32(id);
                w.u32s(l.item_chunks.get(&id).map_or(&[][..], Vec::as_slice));
            }
        }
        let mut docs: Vec<(&DocId, &DocEntry)> = self.docs.iter().filter(|(_, e)| e.part == Some(part)).collect();
        docs.sort_unstable_by_key(|(id, _)| **id);
        w.u64(docs.len() as u64);
        for (id, entry) in docs {
            w.bytes(&id.0);
            w.u64(entry.chunks.len() as u64);
            for c in &entry.chunks {
                let r = self.chunks.get(c)?;
                write_chunk(&mut w, *c, None, r.scenario, r.span);
            }
            w.u64(entry.items.len() as u64);
            for &(layer, item) in &entry.items {
                w.u8(layer);
                w.u32(item);
            }
        }
        Some(w.finish(PART_KIND, 1))
    }

    /// Add a part read back from [`MemoryIndex::part_bytes`] after the parts already here.
    /// Every reference is checked first: a damaged or foreign part is an error and changes
    /// nothing.
    pub fn load_part(&mut self, bytes: &[u8]) -> Result<u64, Error> {
        let invalid = |what| Error::InvalidField { what };
        let (_, mut r) = Reader::open(bytes, PART_KIND, 1)?;
        let part = r.u64()?;
        if self.parts.contains(&part) {
            return Err(invalid("part name"));
        }
        if r.count(1)? != self.layers.len() {
            return Err(invalid("layer count"));
        }
        struct LayerPart {
            graph: HnswSegment,
            lexical: Bm25Index,
            items: Vec<(u32, Vec<u32>)>,
            dead: Vec<u32>,
        }
        let mut layers = Vec::with_capacity(self.layers.len());
        let mut item_ids: Vec<HashSet<u32>> = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            if r.u8()? != l.layer as u8 {
                return Err(invalid("layer kind"));
            }
            let graph = HnswSegment::from_bytes(r.bytes()?)?;
            let lexical = Bm25Index::from_bytes(r.bytes()?)?;
            if graph.dim() != self.dim {
                return Err(invalid("layer dimension"));
            }
            let n = r.count(12)?;
            let mut items = Vec::with_capacity(n);
            let mut ids = HashSet::with_capacity(n);
            for _ in 0..n {
                let id = r.u32()?;
                let chunks = r.u32s()?;
                if !ids.insert(id) || !lexical.contains(id) || l.item_chunks.contains_key(&id) {
                    return Err(invalid("layer item"));
                }
                items.push((id, chunks));
            }
            // The BM25 index and the items name the same entries, all in the graph; a vector
            // without an item was removed while the part was being merged, and is a
            // tombstone from the start.
            let graph_ids: HashSet<u32> = graph.ids().iter().copied().collect();
            if graph_ids.len() != graph.len() || lexical.len() != n || !ids.is_subset(&graph_ids) {
                return Err(invalid("layer entry without an item"));
            }
            if graph_ids.iter().any(|id| !ids.contains(id) && l.vectors.contains(*id)) {
                return Err(invalid("layer item"));
            }
            let dead: Vec<u32> = graph_ids.difference(&ids).copied().collect();
            item_ids.push(ids);
            layers.push(LayerPart { graph, lexical, items, dead });
        }
        let n = r.count(40)?;
        let mut docs = Vec::with_capacity(n);
        let mut chunks: hashbrown::HashMap<u32, ChunkRef> = hashbrown::HashMap::new();
        for _ in 0..n {
            let doc_id = read_doc_id(&mut r)?;
            if self.docs.contains_key(&doc_id) || docs.iter().any(|(d, _)| *d == doc_id) {
                return Err(invalid("part document"));
            }
            let nc = r.count(24)?;
            let mut entry = DocEntry { chunks: Vec::with_capacity(nc), items: Vec::new(), part: Some(part) };
            for _ in 0..nc {
                let id = r.u32()?;
                let scenario = r.u32()?;
                let span = read_span(&mut r)?;
                if self.chunks.contains_key(&id) || chunks.insert(id, ChunkRef { doc_id, scenario, span }).is_some() {
                    return Err(invalid("chunk id"));
                }
                entry.chunks.push(id);
            }
            let ni = r.count(5)?;
            for _ in 0..ni {
                let layer = r.u8()?;
                let item = r.u32()?;
                if !item_ids.get(layer as usize).is_some_and(|ids| ids.contains(&item)) {
                    return Err(invalid("document item"));
                }
                entry.items.push((layer, item));
            }
            docs.push((doc_id, entry));
        }
        r.finish()?;
        if layers.iter().any(|l| l.items.iter().flat_map(|(_, c)| c).any(|c| !chunks.contains_key(c))) {
            return Err(invalid("item chunk"));
        }
        let ids = layers.iter().flat_map(|l| l.items.iter().map(|(id, _)| *id).chain(l.dead.iter().copied())).chain(chunks.keys().copied());
        let next_id = match ids.max() {
            Some(max) => max.checked_add(1).ok_or(invalid("chunk id"))?,
            None => 0,
        };
        // Nothing below can fail: every id was checked against this index.
        for (l, p) in self.layers.iter_mut().zip(layers) {
            l.vectors.push_sealed(p.graph)?;
            for id in p.dead {
                l.vectors.remove(id);
            }
            l.lexical.push(p.lexical);
            l.item_chunks.extend(p.items);
        }
        self.chunks.extend(chunks);
        self.docs.extend(docs);
        self.parts.push(part);
        self.next_id = self.next_id.max(next_id);
        Ok(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;
    use crate::embed::HashingEmbedder;
    use crate::index::SegmentParams;
    use crate::memory::DocumentMemory;
    use crate::retrieve::RetrievalMode;

    fn prepared() -> PreparedDocument {
        let doc = Document::new("d", "Bells rang at noon over the harbour. They rang again at dusk for the fleet.");
        let memory = DocumentMemory::from_spans(&doc, &[Span::new(0, 36), Span::new(36, doc.text.len())], "fixed");
        let index = MemoryIndex::new(RetrievalMode::ThreeLayer, 16, SegmentParams::default());
        index.prepare_document(&doc, &memory, &mut HashingEmbedder::new(16)).unwrap().unwrap()
    }

    #[test]
    fn a_prepared_document_is_stored_with_f16_vectors_and_read_back_exactly() {
        let p = prepared();
        assert!(p.vectors() > 0);
        // Rounded to f16 when prepared, so storing loses nothing more.
        assert!(p.items.iter().flat_map(|i| &i.vector).all(|&x| crate::f16::f16_round(x) == x));
        let bytes = p.to_bytes();
        assert_eq!(PreparedDocument::from_bytes(&bytes).unwrap(), p);
        // Version 1 (f32 vectors) is still read.
        let v1 = p.encode(1);
        assert_eq!(v1.len() - bytes.len(), p.vectors() * 16 * 2, "two bytes a value saved");
        assert_eq!(PreparedDocument::from_bytes(&v1).unwrap(), p);
    }
}
