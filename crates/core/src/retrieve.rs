//! Three-layer retrieval over document memories, fused with RRF.
//!
//! MoM searches the outline, the core contents and the chunks *independently*, because
//! they answer different kinds of question: an outline item matches "what does the section
//! on X say", a core matches the gist of a question, a chunk matches its exact words. Each
//! layer yields two ranked lists (embedding similarity and BM25); outline and core hits are
//! mapped to their scenario's chunk (an outline item to every chunk under it); the lists are
//! fused with RRF and deduplicated, and the top-k chunks come back with the rank and score
//! each list gave them, so a result can be explained.
//!
//! Three variants from the MoM paper and code are here for comparison ([`RetrievalMode`]),
//! each searched with the same hybrid (embedding + BM25 lists fused by RRF):
//! - *single-vector fusion*: one entry per scenario whose vector is the normalised sum of
//!   the (normalised) vectors of its outline item, core and chunk text, and whose BM25
//!   text is the three joined;
//! - *mixed index*: outline items, cores and chunk texts as entries of one index, each hit
//!   mapped to its chunk(s), a chunk keeping its best rank;
//! - *chunk layer only* ([`RetrievalMode::ChunkOnly`]): what plain chunk-and-embed RAG
//!   does, and what the baseline chunkers (which have no outline or cores) get.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::document::{DocId, Document};
use crate::embed::{EmbedRole, Embedder};
use crate::index::codec::{Reader, Writer};
use crate::index::{Bm25Index, Bm25Params, Hit, Metric, SegmentParams, SegmentedIndex, VectorIndex};
use crate::memory::DocumentMemory;
use crate::rrf::{RankedList, RrfFuser, RrfParams};
use crate::span::Span;
use crate::Error;

/// Which index layout a [`MemoryIndex`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum RetrievalMode {
    /// Outline, core and chunk layers searched apart and fused (MoM's method).
    ThreeLayer,
    /// Single-vector fusion: one entry per scenario, its vector the normalised sum of the
    /// outline item's, the core's and the chunk text's vectors (those present), its BM25
    /// text the three joined. Summing vectors rather than embedding the joined text keeps
    /// a long chunk from pushing the outline and core past the embedder's token limit.
    SingleVector,
    /// One mixed index: outline items, cores and chunk texts as entries of one shared
    /// index; a hit stands for its chunk (an outline item for every chunk under it) and a
    /// chunk keeps its best rank.
    MixedIndex,
    /// Chunks only (plain RAG; the baselines).
    ChunkOnly,
}

impl RetrievalMode {
    /// Every mode, in a stable order.
    pub const ALL: [RetrievalMode; 4] =
        [RetrievalMode::ThreeLayer, RetrievalMode::SingleVector, RetrievalMode::MixedIndex, RetrievalMode::ChunkOnly];

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            RetrievalMode::ThreeLayer => "three-layer",
            RetrievalMode::SingleVector => "single-vector",
            RetrievalMode::MixedIndex => "mixed-index",
            RetrievalMode::ChunkOnly => "chunk-only",
        }
    }

    fn layers(self) -> &'static [Layer] {
        match self {
            RetrievalMode::ThreeLayer => &[Layer::Outline, Layer::Core, Layer::Chunk],
            RetrievalMode::SingleVector => &[Layer::Combined],
            RetrievalMode::MixedIndex => &[Layer::Mixed],
            RetrievalMode::ChunkOnly => &[Layer::Chunk],
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(c: u8) -> Option<Self> {
        RetrievalMode::ALL.into_iter().find(|m| m.code() == c)
    }
}

/// A searchable layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Layer {
    /// Outline items.
    Outline,
    /// Core contents.
    Core,
    /// Chunk texts.
    Chunk,
    /// Outline + core + chunk of a scenario as one entry (single-vector fusion).
    Combined,
    /// Every outline item, core and chunk in one index.
    Mixed,
}

/// How a list ranked its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ListKind {
    /// Embedding similarity.
    Vector,
    /// BM25.
    Lexical,
}

/// Where one ranked list placed a chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ListRank {
    /// The layer searched.
    pub layer: Layer,
    /// Vector or lexical.
    pub kind: ListKind,
    /// Rank in that list, from 1, of the item that brought the chunk in (the chunks under
    /// one outline item share its rank).
    pub rank: u32,
    /// The list's own score for the item that brought the chunk in.
    pub score: f32,
}

/// A retrieved chunk, with the evidence for its place.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RetrievedChunk {
    /// The document.
    pub doc_id: DocId,
    /// The scenario's index in the document's memory.
    pub scenario: u32,
    /// The chunk's span in the document text.
    pub span: Span,
    /// The fused RRF score.
    pub score: f64,
    /// Each list that ranked it.
    pub ranks: Vec<ListRank>,
}

/// Buffers a search reuses: the RRF fuser's map and the per-list hit buffer.
#[derive(Debug, Default)]
pub struct SearchScratch {
    fuser: RrfFuser<u32>,
    hits: Vec<Hit>,
}

/// Whether a summary (outline item or core) holds a letter of any script; one without is
/// not indexed. A small reader sometimes writes sentence numbers ("1", "[3]", "4-7") as
/// outline items; such an entry matches queries at random, and in the fusion random ranks
/// are noise that pushes the right chunk down (measured: three-layer recall@1 0.17 against
/// the chunk layer's 0.71 with an all-numbers outline). Chunk texts are always indexed.
fn carries_words(text: &str) -> bool {
    text.chars().any(char::is_alphabetic)
}

/// The default layer weights: the chunk layer leads; the outline and core layers can move
/// a chunk a few places, not carry one to the top by themselves.
///
/// Chosen on the dev split of the shared SQuAD sample (two articles, 72 questions, the
/// 1.5B reader's memories; `docmem eval retrieval --split dev --layers ...`). With RRF's
/// k = 60 neighbouring top ranks differ by about 1/3600, so a summary layer weighted above
/// a few hundredths reorders the top. Recall at 1,000 characters: equal weights 0.333,
/// chunk layer alone 0.792, outline and core at 0.02 each 0.806 (this default, also the
/// best at 500 characters: 0.597), core at 0.05 0.819 (one question more, but two fewer at
/// 500), outline at 0.1 0.764, outline at 0.25 0.583 (memories of the outline-first
/// prompt). On the groups-first prompt's memories every setting from 0 to 0.05 lies within
/// two dev questions. The cores and titles are summaries; a question about one detail is
/// better matched by the text itself.
pub const DEFAULT_LAYER_WEIGHTS: [(Layer, f64); 3] = [(Layer::Outline, 0.02), (Layer::Core, 0.02), (Layer::Chunk, 1.0)];

/// Search settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchParams {
    /// Chunks to return (default 8).
    pub k: usize,
    /// Items taken from each ranked list (default 50).
    pub window: usize,
    /// RRF constant (default 60).
    pub rrf_k: f64,
    /// Whether the BM25 lists take part (default true).
    pub lexical: bool,
    /// Weight of each layer's lists in the fusion (default [`DEFAULT_LAYER_WEIGHTS`]; 0
    /// leaves the layer out).
    pub layer_weights: [(Layer, f64); 3],
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams { k: 8, window: 50, rrf_k: 60.0, lexical: true, layer_weights: DEFAULT_LAYER_WEIGHTS }
    }
}

impl SearchParams {
    fn weight(&self, layer: Layer) -> f64 {
        self.layer_weights.iter().find(|(l, _)| *l == layer).map_or(1.0, |(_, w)| *w)
    }

    /// Layer weights from a list such as `chunk`, `outline,core,chunk` or
    /// `outline=0.25,core=0.5,chunk`: a named layer weighs 1 unless given `=WEIGHT`, a
    /// layer not named weighs 0 (it is not searched).
    pub fn parse_layer_weights(list: &str) -> Result<[(Layer, f64); 3], Error> {
        let mut weights = [(Layer::Outline, 0.0), (Layer::Core, 0.0), (Layer::Chunk, 0.0)];
        for item in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let (name, weight) = match item.split_once('=') {
                Some((n, w)) => (n.trim(), Some(w.trim())),
                None => (item, None),
            };
            let i =
                ["outline", "core", "chunk"].iter().position(|l| *l == name).ok_or_else(|| Error::UnknownLayer { name: name.into() })?;
            weights[i].1 = match weight {
                None => 1.0,
                Some(w) => match w.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => v,
                    _ => return Err(Error::BadLayerWeight { layer: name.into(), weight: w.into() }),
                },
            };
        }
        if weights.iter().all(|(_, w)| *w == 0.0) {
            return Err(Error::NoLayerWeighted);
        }
        Ok(weights)
    }
}

mod merge;
mod parts;

pub use merge::{MergeJob, MergedPart};
pub use parts::PreparedDocument;
use parts::{read_doc_id, PreparedItem};

const KIND: [u8; 4] = *b"MIDX";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChunkRef {
    doc_id: DocId,
    scenario: u32,
    span: Span,
}

#[derive(Debug)]
struct LayerIndex {
    layer: Layer,
    /// Sealed in step with the other layers: sealed slot `i` belongs to part `parts[i]`.
    vectors: SegmentedIndex,
    /// BM25 of the fresh items (first), then of each sealed part, in the same order as
    /// the vectors' slots; searched as one collection ([`Bm25Index::search_parts`]).
    lexical: Vec<Bm25Index>,
    /// Item id → the chunks it stands for.
    item_chunks: HashMap<u32, Vec<u32>>,
}

/// What one document put into the index.
#[derive(Clone, Debug, Default)]
struct DocEntry {
    chunks: Vec<u32>,
    /// (layer position, item id)
    items: Vec<(u8, u32)>,
    /// The sealed part holding it; `None` while it is in the fresh segment.
    part: Option<u64>,
}

/// The searchable index of a library's memories (see the module docs).
#[derive(Debug)]
pub struct MemoryIndex {
    mode: RetrievalMode,
    dim: usize,
    layers: Vec<LayerIndex>,
    chunks: HashMap<u32, ChunkRef>,
    docs: HashMap<DocId, DocEntry>,
    next_id: u32,
    /// A memory's chunk longer than this many characters is indexed as pieces
    /// ([`crate::pieces`]); 0 indexes every chunk whole. Not serialized: it applies to
    /// the documents added from now on.
    piece_chars: usize,
    /// The sealed parts, in slot order (see [`parts`]).
    parts: Vec<u64>,
    /// Seal the fresh segment once the layers' fresh vectors reach this many.
    seal_threshold: usize,
    /// Merge every part into one when there are more than this many.
    max_parts: usize,
    /// Whether adding a document seals and merges by the thresholds above (an index on
    /// its own) or leaves that to the owner, who stores each part ([`crate::library`]).
    auto_seal: bool,
    /// How merged parts' graphs are built.
    hnsw: crate::index::HnswParams,
}

/// One entry to index: its layer position, the chunks it stands for, its BM25 text, and
/// the texts whose vectors are summed (then normalised) into its vector.
struct Pending {
    layer: u8,
    chunks: Vec<u32>,
    text: String,
    parts: Vec<String>,
}

/// One vector from several: each L2-normalised, summed, and the sum normalised (a zero
/// sum stays zero). A single vector comes back normalised.
fn fuse_vectors(vectors: Vec<Vec<f32>>, dim: usize) -> Vec<f32> {
    if vectors.len() == 1 {
        if let Some(v) = vectors.into_iter().next() {
            return normalized(v);
        }
        return alloc::vec![0.0; dim];
    }
    let mut sum = alloc::vec![0.0f32; dim];
    for v in vectors {
        for (s, x) in sum.iter_mut().zip(normalized(v)) {
            *s += x;
        }
    }
    normalized(sum)
}

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = libm::sqrtf(v.iter().map(|x| x * x).sum::<f32>());
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

impl MemoryIndex {
    /// An empty index for `dim`-dimensional embeddings.
    pub fn new(mode: RetrievalMode, dim: usize, segments: SegmentParams) -> Self {
        // The layers seal in step, when this index (or its owner) says so.
        let in_step = SegmentParams { seal_threshold: usize::MAX, max_sealed: usize::MAX, ..segments.clone() };
        let layers = mode
            .layers()
            .iter()
            .map(|&layer| LayerIndex {
                layer,
                vectors: SegmentedIndex::new(dim, Metric::Cosine, in_step.clone()),
                lexical: alloc::vec![Bm25Index::new(Bm25Params::default())],
                item_chunks: HashMap::new(),
            })
            .collect();
        MemoryIndex {
            mode,
            dim,
            layers,
            chunks: HashMap::new(),
            docs: HashMap::new(),
            next_id: 0,
            piece_chars: 0,
            parts: Vec::new(),
            seal_threshold: segments.seal_threshold.max(1),
            max_parts: segments.max_sealed.max(1),
            auto_seal: true,
            hnsw: segments.hnsw,
        }
    }

    /// Leave sealing and merging to the caller ([`MemoryIndex::seal`],
    /// [`MemoryIndex::merge_parts`]), who stores each part as it is made.
    pub fn with_manual_sealing(mut self) -> Self {
        self.auto_seal = false;
        self
    }

    /// Index each memory chunk longer than `max_chars` characters as sentence-bounded
    /// pieces of at most that length, which search ranks and returns one by one (their
    /// scenario's core and outline item stand for each); 0, the default, keeps chunks whole.
    /// Applies to the reader memories of documents added from now on, not to a baseline
    /// chunker's passages (a memory without summaries, or [`MemoryIndex::add_chunks`]).
    /// See [`crate::pieces`] for why.
    pub fn with_piece_chars(mut self, max_chars: usize) -> Self {
        self.piece_chars = max_chars;
        self
    }

    /// The layout.
    pub fn mode(&self) -> RetrievalMode {
        self.mode
    }

    /// Number of documents.
    pub fn documents(&self) -> usize {
        self.docs.len()
    }

    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// True when the document is indexed.
    pub fn contains(&self, doc: DocId) -> bool {
        self.docs.contains_key(&doc)
    }

    fn layer_pos(&self, layer: Layer) -> Option<u8> {
        self.layers.iter().position(|l| l.layer == layer).map(|p| p as u8)
    }

    /// Index a document's memory, whose spans must tile the document. Returns false (and
    /// changes nothing) when the document is already indexed: remove it first to replace its
    /// memory. On error nothing changes.
    pub fn add_document(&mut self, doc: &Document, memory: &DocumentMemory, embedder: &mut dyn Embedder) -> Result<bool, Error> {
        if self.docs.contains_key(&doc.id) {
            return Ok(false);
        }
        memory.check(doc)?;
        // A chunker's passages stay as the chunker cut them.
        let piece_chars = if memory.has_summaries() { self.piece_chars } else { 0 };
        self.add_unchecked(doc, memory, piece_chars, embedder)
    }

    /// Index a baseline chunker's chunks, which may overlap and need not tile (see
    /// [`DocumentMemory::check_chunks`]). Otherwise as [`MemoryIndex::add_document`].
    pub fn add_chunks(&mut self, doc: &Document, chunks: &DocumentMemory, embedder: &mut dyn Embedder) -> Result<bool, Error> {
        if self.docs.contains_key(&doc.id) {
            return Ok(false);
        }
        chunks.check_chunks(doc)?;
        self.add_unchecked(doc, chunks, 0, embedder)
    }

    fn add_unchecked(
        &mut self,
        doc: &Document,
        memory: &DocumentMemory,
        piece_chars: usize,
        embedder: &mut dyn Embedder,
    ) -> Result<bool, Error> {
        let prepared = self.prepare_unchecked(doc, memory, piece_chars, embedder)?;
        self.insert(prepared)?;
        if self.auto_seal && self.fresh_vectors() >= self.seal_threshold {
            let part = self.parts.iter().max().map_or(0, |p| p + 1);
            self.seal(part);
            if self.parts.len() > self.max_parts {
                let all = self.parts.clone();
                self.merge_parts(&all, part + 1);
            }
        }
        Ok(true)
    }

    /// Embed and number a document's entries without changing the index: what
    /// [`MemoryIndex::add_document`] would add, for an owner that stores it first and
    /// inserts it after ([`MemoryIndex::insert`]). `None` when the document is indexed.
    pub fn prepare_document(
        &self,
        doc: &Document,
        memory: &DocumentMemory,
        embedder: &mut dyn Embedder,
    ) -> Result<Option<PreparedDocument>, Error> {
        if self.docs.contains_key(&doc.id) {
            return Ok(None);
        }
        memory.check(doc)?;
        let piece_chars = if memory.has_summaries() { self.piece_chars } else { 0 };
        self.prepare_unchecked(doc, memory, piece_chars, embedder).map(Some)
    }

    /// [`MemoryIndex::prepare_document`] for a baseline chunker's chunks (as
    /// [`MemoryIndex::add_chunks`]).
    pub fn prepare_chunks(
        &self,
        doc: &Document,
        chunks: &DocumentMemory,
        embedder: &mut dyn Embedder,
    ) -> Result<Option<PreparedDocument>, Error> {
        if self.docs.contains_key(&doc.id) {
            return Ok(None);
        }
        chunks.check_chunks(doc)?;
        self.prepare_unchecked(doc, chunks, 0, embedder).map(Some)
    }

    /// What replacing an indexed document's memory by `memory` would add (checked as
    /// [`MemoryIndex::add_document`] does, or as [`MemoryIndex::add_chunks`] for a memory
    /// that does not tile): insert it after removing the document. Its ids follow every
    /// id in use, the old entries' included.
    pub fn prepare_replacement(
        &self,
        doc: &Document,
        memory: &DocumentMemory,
        embedder: &mut dyn Embedder,
    ) -> Result<PreparedDocument, Error> {
        if memory.check(doc).is_ok() {
            let piece_chars = if memory.has_summaries() { self.piece_chars } else { 0 };
            self.prepare_unchecked(doc, memory, piece_chars, embedder)
        } else {
            memory.check_chunks(doc)?;
            self.prepare_unchecked(doc, memory, 0, embedder)
        }
    }

    fn prepare_unchecked(
        &self,
        doc: &Document,
        memory: &DocumentMemory,
        piece_chars: usize,
        embedder: &mut dyn Embedder,
    ) -> Result<PreparedDocument, Error> {
        if embedder.dim() != self.dim {
            return Err(Error::EmbedderWrongDimension { expected: self.dim, got: embedder.dim() });
        }
        let mut next_id = self.next_id;
        let mut alloc_id = || -> Result<u32, Error> {
            let id = next_id;
            next_id = next_id.checked_add(1).ok_or(Error::IndexFull)?;
            Ok(id)
        };
        // Plan every item and embed them all. The chunks indexed are the scenarios'
        // spans, or their pieces where one is too long.
        let mut pieces: Vec<(u32, u32, Span)> = Vec::with_capacity(memory.scenarios.len());
        let mut scenario_chunks: Vec<Vec<u32>> = Vec::with_capacity(memory.scenarios.len());
        for (i, s) in memory.scenarios.iter().enumerate() {
            let mut ids = Vec::new();
            for span in crate::pieces::pieces(&doc.text, s.span, piece_chars) {
                let id = alloc_id()?;
                ids.push(id);
                pieces.push((id, i as u32, span));
            }
            scenario_chunks.push(ids);
        }
        let piece_text = |span: Span| span.slice(&doc.text).unwrap_or("");
        let mut pending: Vec<Pending> = Vec::new();
        let mut outline_chunks: Vec<Vec<u32>> = alloc::vec![Vec::new(); memory.outline.len()];
        for (i, s) in memory.scenarios.iter().enumerate() {
            if let Some(o) = s.outline_item {
                outline_chunks[o as usize].extend(&scenario_chunks[i]);
            }
        }
        for &layer in self.mode.layers() {
            let pos = self.layer_pos(layer).unwrap_or(0);
            let mut push = |chunks: Vec<u32>, text: String| {
                if !text.trim().is_empty() && !chunks.is_empty() {
                    pending.push(Pending { layer: pos, chunks, parts: alloc::vec![text.clone()], text });
                }
            };
            let outline_items = |push: &mut dyn FnMut(Vec<u32>, String)| {
                for (o, item) in memory.outline.iter().enumerate().filter(|(_, t)| carries_words(t)) {
                    push(outline_chunks[o].clone(), item.clone());
                }
            };
            let cores = |push: &mut dyn FnMut(Vec<u32>, String)| {
                for (i, s) in memory.scenarios.iter().enumerate().filter(|(_, s)| carries_words(&s.core)) {
                    push(scenario_chunks[i].clone(), s.core.clone());
                }
            };
            let chunks = |push: &mut dyn FnMut(Vec<u32>, String)| {
                for &(id, _, span) in &pieces {
                    push(alloc::vec![id], String::from(piece_text(span)));
                }
            };
            match layer {
                Layer::Outline => outline_items(&mut push),
                Layer::Core => cores(&mut push),
                Layer::Chunk => chunks(&mut push),
                Layer::Mixed => {
                    outline_items(&mut push);
                    cores(&mut push);
                    chunks(&mut push);
                }
                Layer::Combined => {
                    for &(id, i, span) in &pieces {
                        let s = &memory.scenarios[i as usize];
                        let outline = s.outline_item.and_then(|o| memory.outline.get(o as usize)).map_or("", String::as_str);
                        let summaries = [outline, s.core.as_str()].into_iter().filter(|t| carries_words(t));
                        let parts: Vec<String> =
                            summaries.chain([piece_text(span)]).filter(|t| !t.trim().is_empty()).map(String::from).collect();
                        if !parts.is_empty() {
                            pending.push(Pending { layer: pos, chunks: alloc::vec![id], text: parts.join("\n"), parts });
                        }
                    }
                }
            }
        }
        let texts: Vec<&str> = pending.iter().flat_map(|p| p.parts.iter().map(String::as_str)).collect();
        let part_vectors = if texts.is_empty() { Vec::new() } else { embedder.embed(&texts, EmbedRole::Passage)? };
        if part_vectors.len() != texts.len() {
            return Err(Error::EmbedderWrongCount { expected: texts.len(), got: part_vectors.len() });
        }
        if let Some(v) = part_vectors.iter().find(|v| v.len() != self.dim || v.iter().any(|x| !x.is_finite())) {
            return Err(if v.len() != self.dim {
                Error::EmbedderWrongDimension { expected: self.dim, got: v.len() }
            } else {
                Error::NonFinite { id: u32::MAX }
            });
        }
        let mut next = part_vectors.into_iter();
        // Held at f16 precision from here on: what a library stores for a document not yet
        // sealed (`PreparedDocument::to_bytes`), so that a reopened library holds the same
        // values as the one that added it.
        let vectors: Vec<Vec<f32>> = pending
            .iter()
            .map(|p| {
                let mut v = fuse_vectors(next.by_ref().take(p.parts.len()).collect(), self.dim);
                v.iter_mut().for_each(|x| *x = crate::f16::f16_round(*x));
                v
            })
            .collect();
        let mut items = Vec::with_capacity(pending.len());
        for (p, vector) in pending.into_iter().zip(vectors) {
            items.push(PreparedItem { layer: p.layer, id: alloc_id()?, chunks: p.chunks, text: p.text, vector });
        }
        Ok(PreparedDocument { doc_id: doc.id, next_id, chunks: pieces, items })
    }

    /// Put a prepared document into the fresh segment. Refused, changing nothing, when
    /// the document is already indexed or one of its ids is taken (it was prepared before
    /// another insert, or read back damaged).
    pub fn insert(&mut self, prepared: PreparedDocument) -> Result<(), Error> {
        let taken = self.docs.contains_key(&prepared.doc_id)
            || prepared.chunks.iter().any(|c| self.chunks.contains_key(&c.0))
            || prepared.items.iter().any(|i| self.layers.get(i.layer as usize).is_none_or(|l| l.item_chunks.contains_key(&i.id)))
            || prepared.items.iter().any(|i| i.id >= prepared.next_id || i.vector.len() != self.dim)
            || prepared.chunks.iter().any(|c| c.0 >= prepared.next_id);
        let chunk_ids: hashbrown::HashSet<u32> = prepared.chunks.iter().map(|c| c.0).collect();
        let mut item_ids = hashbrown::HashSet::new();
        let unique = chunk_ids.len() == prepared.chunks.len()
            && prepared.items.iter().all(|i| !chunk_ids.contains(&i.id) && item_ids.insert(i.id))
            && prepared.items.iter().all(|i| i.chunks.iter().all(|c| chunk_ids.contains(c)));
        if taken || !unique {
            return Err(Error::InvalidField { what: "prepared document" });
        }
        // From here on nothing can fail: ids are fresh and vectors were checked.
        let mut entry =
            DocEntry { chunks: prepared.chunks.iter().map(|p| p.0).collect(), items: Vec::with_capacity(prepared.items.len()), part: None };
        for item in prepared.items {
            let layer = &mut self.layers[item.layer as usize];
            layer.vectors.add(item.id, &item.vector)?;
            layer.lexical[0].add(item.id, &item.text)?;
            layer.item_chunks.insert(item.id, item.chunks);
            entry.items.push((item.layer, item.id));
        }
        for (id, scenario, span) in prepared.chunks {
            self.chunks.insert(id, ChunkRef { doc_id: prepared.doc_id, scenario, span });
        }
        self.docs.insert(prepared.doc_id, entry);
        self.next_id = self.next_id.max(prepared.next_id);
        Ok(())
    }

    /// Remove a document from every layer; false when it was not indexed.
    pub fn remove_document(&mut self, doc: DocId) -> bool {
        let Some(entry) = self.docs.remove(&doc) else { return false };
        for (layer, id) in entry.items {
            let l = &mut self.layers[layer as usize];
            l.vectors.remove(id);
            if let Some(part) = l.lexical.iter_mut().find(|b| b.contains(id)) {
                part.remove(id);
            }
            l.item_chunks.remove(&id);
        }
        for c in entry.chunks {
            self.chunks.remove(&c);
        }
        true
    }

    /// Serialize the whole index (layers, maps, id counter) as one blob: the layout a
    /// library stored before it kept parts apart, read back by [`MemoryIndex::from_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(self.mode.code());
        w.u32(self.dim as u32);
        w.u32(self.next_id);
        w.u64(self.layers.len() as u64);
        for l in &self.layers {
            w.u8(l.layer as u8);
            w.bytes(&l.vectors.to_bytes());
            let parts: Vec<&Bm25Index> = l.lexical.iter().collect();
            w.bytes(&Bm25Index::merged(&parts).to_bytes());
            let mut items: Vec<(&u32, &Vec<u32>)> = l.item_chunks.iter().collect();
            items.sort_unstable();
            w.u64(items.len() as u64);
            for (id, chunks) in items {
                w.u32(*id);
                w.u32s(chunks);
            }
        }
        let mut chunks: Vec<(&u32, &ChunkRef)> = self.chunks.iter().collect();
        chunks.sort_unstable_by_key(|(id, _)| **id);
        w.u64(chunks.len() as u64);
        for (id, c) in chunks {
            w.u32(*id);
            w.bytes(&c.doc_id.0);
            w.u32(c.scenario);
            w.u64(c.span.start as u64);
            w.u64(c.span.end as u64);
        }
        let mut docs: Vec<(&DocId, &DocEntry)> = self.docs.iter().collect();
        docs.sort_unstable_by_key(|(id, _)| **id);
        w.u64(docs.len() as u64);
        for (id, d) in docs {
            w.bytes(&id.0);
            w.u32s(&d.chunks);
            w.u64(d.items.len() as u64);
            for &(layer, item) in &d.items {
                w.u8(layer);
                w.u32(item);
            }
        }
        w.finish(KIND, 1)
    }

    /// Deserialize, checking that every reference resolves.
    pub fn from_bytes(bytes: &[u8], segments: SegmentParams) -> Result<Self, Error> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let invalid = |what| Error::InvalidField { what };
        let mode = RetrievalMode::from_code(r.u8()?).ok_or(invalid("retrieval mode"))?;
        let dim = r.dim()?;
        let next_id = r.u32()?;
        let mut idx = MemoryIndex::new(mode, dim, segments.clone());
        let n_layers = r.count(1)?;
        if n_layers != idx.layers.len() {
            return Err(invalid("layer count"));
        }
        for l in idx.layers.iter_mut() {
            if r.u8()? != l.layer as u8 {
                return Err(invalid("layer kind"));
            }
            l.vectors = SegmentedIndex::from_bytes(r.bytes()?, segments.clone())?.sealed_in_step();
            if l.vectors.dim() != dim {
                return Err(invalid("layer dimension"));
            }
            let lexical = Bm25Index::from_bytes(r.bytes()?)?;
            let n = r.count(12)?;
            for _ in 0..n {
                let id = r.u32()?;
                let chunks = r.u32s()?;
                if id >= next_id || !l.vectors.contains(id) || !lexical.contains(id) {
                    return Err(invalid("layer item"));
                }
                l.item_chunks.insert(id, chunks);
            }
            // Every vector and every BM25 entry is an item (the items were checked to be in
            // both, so equal counts leave none over): an id without one would be found by
            // a search with nothing to return, and would collide with a later add.
            if l.vectors.len() != l.item_chunks.len() || lexical.len() != l.item_chunks.len() {
                return Err(invalid("layer entry without an item"));
            }
            l.lexical = alloc::vec![lexical];
        }
        let n = r.count(44)?;
        for _ in 0..n {
            let id = r.u32()?;
            let doc_id = read_doc_id(&mut r)?;
            let scenario = r.u32()?;
            let span = Span::new(r.usize()?, r.usize()?);
            if span.start > span.end {
                return Err(invalid("chunk span"));
            }
            if id >= next_id {
                return Err(invalid("chunk id"));
            }
            idx.chunks.insert(id, ChunkRef { doc_id, scenario, span });
        }
        let n = r.count(40)?;
        for _ in 0..n {
            let doc_id = read_doc_id(&mut r)?;
            let chunks = r.u32s()?;
            let n_items = r.count(5)?;
            let mut items = Vec::with_capacity(n_items);
            for _ in 0..n_items {
                let layer = r.u8()?;
                let item = r.u32()?;
                if !idx.layers.get(layer as usize).is_some_and(|l| l.item_chunks.contains_key(&item)) {
                    return Err(invalid("document item"));
                }
                items.push((layer, item));
            }
            if chunks.iter().any(|c| !idx.chunks.contains_key(c)) {
                return Err(invalid("document chunk"));
            }
            idx.docs.insert(doc_id, DocEntry { chunks, items, part: None });
        }
        r.finish()?;
        if idx.layers.iter().any(|l| l.item_chunks.values().flatten().any(|c| !idx.chunks.contains_key(c))) {
            return Err(invalid("item chunk"));
        }
        idx.next_id = next_id;
        // A blob's layers sealed on their own; keep them in step from here on.
        if idx.layers.iter().any(|l| l.vectors.sealed_segments() > 0) {
            idx.consolidate(0);
        }
        Ok(idx)
    }

    /// Everything into one sealed part, `part`: what a blob read by
    /// [`MemoryIndex::from_bytes`] becomes before it is stored as parts.
    pub fn consolidate(&mut self, part: u64) {
        for l in &mut self.layers {
            l.vectors.seal_in_step();
            let all: Vec<usize> = (0..l.vectors.sealed_segments()).collect();
            l.vectors.merge_sealed(&all);
            let parts: Vec<&Bm25Index> = l.lexical.iter().collect();
            let merged = Bm25Index::merged(&parts);
            l.lexical = alloc::vec![Bm25Index::new(Bm25Params::default()), merged];
        }
        self.parts = alloc::vec![part];
        for d in self.docs.values_mut() {
            d.part = Some(part);
        }
    }

    /// Vectors in the fresh segment, over every layer.
    pub fn fresh_vectors(&self) -> usize {
        self.layers.iter().map(|l| l.vectors.fresh_len()).sum()
    }

    /// The sealed parts, in the order they are searched.
    pub fn parts(&self) -> &[u64] {
        &self.parts
    }

    /// The documents in `part` (`None`: the fresh segment).
    pub fn part_documents(&self, part: Option<u64>) -> impl Iterator<Item = DocId> + '_ {
        self.docs.iter().filter(move |(_, e)| e.part == part).map(|(id, _)| *id)
    }

    /// The part holding `doc`: `Some(None)` for the fresh segment, `None` when it is not
    /// indexed.
    pub fn part_of(&self, doc: DocId) -> Option<Option<u64>> {
        self.docs.get(&doc).map(|e| e.part)
    }

    /// Seal the fresh segment of every layer into a new part named `part` (an HNSW graph
    /// and a BM25 index per layer), even when it is empty, so that the layers' slots stay in
    /// step. A name already in use is refused.
    pub fn seal(&mut self, part: u64) -> bool {
        if self.parts.contains(&part) {
            return false;
        }
        for l in &mut self.layers {
            l.vectors.seal_in_step();
            let fresh = core::mem::replace(&mut l.lexical[0], Bm25Index::new(Bm25Params::default()));
            l.lexical.push(fresh);
        }
        for d in self.docs.values_mut().filter(|d| d.part.is_none()) {
            d.part = Some(part);
        }
        self.parts.push(part);
        true
    }

    /// Merge the sealed parts `parts` into one named `into` (which may reuse one of their
    /// names), dropping what was removed from them; it is searched after the others.
    /// False, changing nothing, when a part is unknown or `into` names another part. The
    /// same as [`MemoryIndex::merge_job`], run here, then [`MemoryIndex::apply_merge`].
    pub fn merge_parts(&mut self, parts: &[u64], into: u64) -> bool {
        match self.merge_job(parts, into) {
            Some(job) => self.apply_merge(job.run()),
            None => false,
        }
    }

    /// Search with a query embedded by `embedder` (as a query).
    pub fn search_text(&self, query: &str, embedder: &mut dyn Embedder, params: &SearchParams) -> Result<Vec<RetrievedChunk>, Error> {
        let v = embedder.embed(&[query], EmbedRole::Query)?;
        let v = v.into_iter().next().ok_or(Error::EmbedderWrongCount { expected: 1, got: 0 })?;
        self.search(query, &v, params)
    }

    /// Search with a query text (for BM25) and its embedding.
    pub fn search(&self, query: &str, query_vector: &[f32], params: &SearchParams) -> Result<Vec<RetrievedChunk>, Error> {
        self.search_with(query, query_vector, params, &mut SearchScratch::default())
    }

    /// [`MemoryIndex::search`] reusing `scratch` (no per-query allocation of the fusion map
    /// or hit buffers), for callers that search in a loop.
    pub fn search_with(
        &self,
        query: &str,
        query_vector: &[f32],
        params: &SearchParams,
        scratch: &mut SearchScratch,
    ) -> Result<Vec<RetrievedChunk>, Error> {
        self.search_filtered(query, query_vector, params, scratch, None)
    }

    /// [`MemoryIndex::search_with`] over the chunks of the documents `keep` accepts
    /// (`None`: all), as if the others were not indexed: each list is read to its end
    /// rather than cut at `params.window` first, and ranks count only the items kept. A
    /// collection's search ([`crate::library::Library::search_in`]) is this.
    pub fn search_filtered(
        &self,
        query: &str,
        query_vector: &[f32],
        params: &SearchParams,
        scratch: &mut SearchScratch,
        keep: Option<&dyn Fn(DocId) -> bool>,
    ) -> Result<Vec<RetrievedChunk>, Error> {
        struct List {
            layer: Layer,
            kind: ListKind,
            weight: f64,
            chunks: Vec<u32>,
            /// Each chunk's rank: that of the item that brought it in, so the chunks
            /// under one outline item tie rather than fill the top of the list.
            ranks: Vec<u32>,
            scores: Vec<f32>,
        }
        let mut lists: Vec<List> = Vec::new();
        let SearchScratch { fuser, hits } = scratch;
        for l in &self.layers {
            let weight = params.weight(l.layer);
            // A layer of weight 0 is not searched (`docmem search --layers`).
            if weight == 0.0 {
                continue;
            }
            // Filtered, every item is read, so that the window holds kept items only.
            let depth = if keep.is_some() { l.vectors.len().max(params.window) } else { params.window };
            for kind in [ListKind::Vector, ListKind::Lexical] {
                match kind {
                    ListKind::Vector => l.vectors.search_into(query_vector, depth, hits)?,
                    ListKind::Lexical if params.lexical => {
                        let parts: Vec<&Bm25Index> = l.lexical.iter().collect();
                        Bm25Index::search_parts(&parts, query, depth, hits)
                    }
                    ListKind::Lexical => continue,
                }
                // Map items to chunks, keeping each chunk's first (best) position.
                let mut list = List { layer: l.layer, kind, weight, chunks: Vec::new(), ranks: Vec::new(), scores: Vec::new() };
                let mut item_rank = 0u32;
                for h in hits.iter() {
                    let chunks = l.item_chunks.get(&h.id).map_or(&[][..], Vec::as_slice);
                    let kept = |c: &&u32| match keep {
                        Some(keep) => self.chunks.get(*c).is_some_and(|r| keep(r.doc_id)),
                        None => true,
                    };
                    let mut chunks = chunks.iter().filter(kept).peekable();
                    if chunks.peek().is_none() {
                        continue;
                    }
                    item_rank += 1;
                    if item_rank as usize > params.window {
                        break;
                    }
                    for &c in chunks {
                        if !list.chunks.contains(&c) {
                            list.chunks.push(c);
                            list.ranks.push(item_rank);
                            list.scores.push(h.score);
                        }
                    }
                }
                lists.push(list);
            }
        }
        let ranked: Vec<RankedList<'_, u32>> =
            lists.iter().map(|l| RankedList { ids: &l.chunks, weight: l.weight, ranks: Some(&l.ranks) }).collect();
        let fused = fuser.fuse(&ranked, &RrfParams { k: params.rrf_k, window: params.window });
        let mut out = Vec::with_capacity(params.k.min(fused.len()));
        for f in fused.iter().take(params.k) {
            let Some(c) = self.chunks.get(&f.id) else { continue };
            let ranks = lists
                .iter()
                .filter_map(|l| {
                    let pos = l.chunks.iter().position(|&x| x == f.id)?;
                    Some(ListRank { layer: l.layer, kind: l.kind, rank: l.ranks[pos], score: l.scores[pos] })
                })
                .collect();
            out.push(RetrievedChunk { doc_id: c.doc_id, scenario: c.scenario, span: c.span, score: f.score, ranks });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::memory::Scenario;

    fn doc_with_memory() -> (Document, DocumentMemory) {
        let text = "The harbor froze every winter. Ships waited in the bay for the ice to break.\n\n\
                    Copper was mined in the hills. The ore went to the smelter by cart.\n\n\
                    The town council met on Mondays to set the price of bread.";
        let doc = Document::new("town.txt", text);
        let a = text.find("Copper").unwrap();
        let b = text.find("The town council").unwrap();
        let memory = DocumentMemory {
            format_version: crate::memory::MEMORY_FORMAT_VERSION,
            doc_id: doc.id,
            outline: alloc::vec!["Winter shipping".into(), "Mining industry".into(), "Local government".into()],
            scenarios: alloc::vec![
                Scenario { span: Span::new(0, a), core: "Ice closed the port in cold months.".into(), outline_item: Some(0) },
                Scenario { span: Span::new(a, b), core: "Metal ore was extracted and processed.".into(), outline_item: Some(1) },
                Scenario { span: Span::new(b, text.len()), core: "Officials fixed food prices weekly.".into(), outline_item: Some(2) },
            ],
            provenance: Default::default(),
        };
        (doc, memory)
    }

    #[test]
    fn each_layer_can_find_its_scenario() {
        let (doc, memory) = doc_with_memory();
        let mut e = HashingEmbedder::new(256);
        let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 256, SegmentParams::default());
        assert!(idx.add_document(&doc, &memory, &mut e).unwrap());
        assert!(!idx.add_document(&doc, &memory, &mut e).unwrap(), "re-adding is a no-op");
        assert_eq!(idx.chunks(), 3);
        // Equal weights: each layer alone must be able to bring its scenario to the top.
        let equal = [(Layer::Outline, 1.0), (Layer::Core, 1.0), (Layer::Chunk, 1.0)];
        let p = SearchParams { k: 3, layer_weights: equal, ..SearchParams::default() };
        // Outline words only.
        let r = idx.search_text("mining industry", &mut e, &p).unwrap();
        assert_eq!(r[0].scenario, 1);
        assert!(r[0].ranks.iter().any(|x| x.layer == Layer::Outline && x.rank == 1));
        // Core words only.
        let r = idx.search_text("officials food prices", &mut e, &p).unwrap();
        assert_eq!(r[0].scenario, 2);
        assert!(r[0].ranks.iter().any(|x| x.layer == Layer::Core && x.rank == 1));
        // Chunk words only.
        let r = idx.search_text("ships waited in the bay", &mut e, &p).unwrap();
        assert_eq!(r[0].scenario, 0);
        assert_eq!(r[0].span, memory.scenarios[0].span);
        // A reused scratch gives the same answers as fresh searches.
        let mut scratch = SearchScratch::default();
        for q in ["mining industry", "officials food prices", "ships waited in the bay"] {
            let v = e.embed_one(q);
            assert_eq!(idx.search_with(q, &v, &p, &mut scratch).unwrap(), idx.search(q, &v, &p).unwrap());
        }
        // Chunk-only mode cannot see the outline.
        let mut plain = MemoryIndex::new(RetrievalMode::ChunkOnly, 256, SegmentParams::default());
        plain.add_document(&doc, &memory, &mut e).unwrap();
        let r = plain.search_text("mining industry", &mut e, &p).unwrap();
        assert!(r.iter().all(|x| x.ranks.iter().all(|l| l.layer == Layer::Chunk)));
    }

    #[test]
    fn variants_index_and_remove() {
        let (doc, memory) = doc_with_memory();
        let mut e = HashingEmbedder::new(128);
        for mode in RetrievalMode::ALL {
            let mut idx = MemoryIndex::new(mode, 128, SegmentParams::default());
            idx.add_document(&doc, &memory, &mut e).unwrap();
            let r = idx.search_text("copper ore smelter", &mut e, &SearchParams::default()).unwrap();
            assert_eq!(r[0].scenario, 1, "{mode:?}");
            // Results are deduplicated.
            let mut seen: Vec<u32> = r.iter().map(|x| x.scenario).collect();
            seen.dedup();
            assert_eq!(seen.len(), r.len());
            let back = MemoryIndex::from_bytes(&idx.to_bytes(), SegmentParams::default()).unwrap();
            assert_eq!(back.search_text("copper ore smelter", &mut e, &SearchParams::default()).unwrap(), r);
            assert!(idx.remove_document(doc.id));
            assert!(!idx.remove_document(doc.id));
            assert!(idx.search_text("copper", &mut e, &SearchParams::default()).unwrap().is_empty());
        }
    }

    #[test]
    fn a_decoded_index_with_stray_ids_is_refused_so_a_later_add_cannot_fail_half_way() {
        let (doc, memory) = doc_with_memory();
        let e = HashingEmbedder::new(64);
        let decode = |idx: &MemoryIndex| MemoryIndex::from_bytes(&idx.to_bytes(), SegmentParams::default());
        let fresh = || {
            let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 64, SegmentParams::default());
            idx.add_document(&doc, &memory, &mut HashingEmbedder::new(64)).unwrap();
            idx
        };
        assert!(decode(&fresh()).is_ok());
        // A vector (the id the next add would take) with no item entry.
        let mut idx = fresh();
        let id = idx.next_id;
        idx.layers[0].vectors.add(id, &e.embed_one("stray")).unwrap();
        assert_eq!(decode(&idx).unwrap_err(), Error::InvalidField { what: "layer entry without an item" });
        // A BM25 entry with no item entry.
        let mut idx = fresh();
        let id = idx.next_id;
        idx.layers[1].lexical[0].add(id, "stray").unwrap();
        assert_eq!(decode(&idx).unwrap_err(), Error::InvalidField { what: "layer entry without an item" });
        // A chunk id the counter would hand out again.
        let mut idx = fresh();
        let id = idx.next_id;
        idx.chunks.insert(id, ChunkRef { doc_id: doc.id, scenario: 0, span: Span::new(0, 1) });
        assert_eq!(decode(&idx).unwrap_err(), Error::InvalidField { what: "chunk id" });
        // A document naming an item that is not there.
        let mut idx = fresh();
        if let Some(d) = idx.docs.values_mut().next() {
            d.items.push((0, 999_999));
        }
        assert_eq!(decode(&idx).unwrap_err(), Error::InvalidField { what: "document item" });
    }

    #[test]
    fn single_vector_fusion_sums_the_layers() {
        let v = fuse_vectors(alloc::vec![alloc::vec![2.0, 0.0], alloc::vec![0.0, 0.5]], 2);
        let h = core::f32::consts::FRAC_1_SQRT_2;
        assert!((v[0] - h).abs() < 1e-6 && (v[1] - h).abs() < 1e-6, "{v:?}");
        assert_eq!(fuse_vectors(alloc::vec![alloc::vec![0.0, 3.0]], 2), [0.0, 1.0]);
        // Each scenario's one vector carries its outline item and its core: words of
        // either alone find it, with only the combined layer searched.
        let (doc, memory) = doc_with_memory();
        let mut e = HashingEmbedder::new(256);
        let mut idx = MemoryIndex::new(RetrievalMode::SingleVector, 256, SegmentParams::default());
        idx.add_document(&doc, &memory, &mut e).unwrap();
        let p = SearchParams { k: 3, lexical: false, ..SearchParams::default() };
        for (q, want) in [("mining industry", 1), ("officials food prices", 2), ("ships waited in the bay", 0)] {
            let r = idx.search_text(q, &mut e, &p).unwrap();
            assert_eq!(r[0].scenario, want, "{q}");
            assert!(r[0].ranks.iter().all(|x| x.layer == Layer::Combined));
        }
    }

    #[test]
    fn bad_input_changes_nothing() {
        let (doc, mut memory) = doc_with_memory();
        let mut e = HashingEmbedder::new(64);
        let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 128, SegmentParams::default());
        assert!(matches!(idx.add_document(&doc, &memory, &mut e), Err(Error::EmbedderWrongDimension { .. })));
        let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 64, SegmentParams::default());
        memory.scenarios[0].span.end -= 1;
        assert!(matches!(idx.add_document(&doc, &memory, &mut e), Err(Error::SpansDoNotTile)));
        assert_eq!((idx.documents(), idx.chunks()), (0, 0));
    }

    #[test]
    fn summaries_without_letters_are_not_indexed() {
        // A reader that wrote sentence numbers as outline items and a core: those entries
        // would match queries at random, so only the chunk layer holds this document.
        let (doc, mut memory) = doc_with_memory();
        memory.outline = alloc::vec!["1".into(), "[2]".into(), "3-4".into()];
        memory.scenarios[0].core = "1-2".into();
        let mut e = HashingEmbedder::new(64);
        let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 64, SegmentParams::default());
        idx.add_document(&doc, &memory, &mut e).unwrap();
        let only = |layer: Layer| {
            let w = [Layer::Outline, Layer::Core, Layer::Chunk].map(|l| (l, if l == layer { 1.0 } else { 0.0 }));
            SearchParams { k: 8, layer_weights: w, ..SearchParams::default() }
        };
        assert!(idx.search_text("1", &mut e, &only(Layer::Outline)).unwrap().is_empty());
        let cores: Vec<u32> = idx.search_text("prices", &mut e, &only(Layer::Core)).unwrap().iter().map(|r| r.scenario).collect();
        assert!(!cores.contains(&0) && !cores.is_empty(), "{cores:?}");
        assert_eq!(idx.search_text("harbor", &mut e, &only(Layer::Chunk)).unwrap().len(), 3);
    }

    #[test]
    fn layer_weight_lists_parse_and_bad_ones_are_named() {
        let w = SearchParams::parse_layer_weights("outline=0.25, core ,chunk=2").unwrap();
        assert_eq!(w, [(Layer::Outline, 0.25), (Layer::Core, 1.0), (Layer::Chunk, 2.0)]);
        assert_eq!(SearchParams::parse_layer_weights("chunk").unwrap()[0], (Layer::Outline, 0.0));
        assert_eq!(SearchParams::parse_layer_weights("page"), Err(Error::UnknownLayer { name: "page".into() }));
        assert!(matches!(SearchParams::parse_layer_weights("core=-1"), Err(Error::BadLayerWeight { .. })));
        assert!(matches!(SearchParams::parse_layer_weights("core=NaN"), Err(Error::BadLayerWeight { .. })));
        assert_eq!(SearchParams::parse_layer_weights("core=0"), Err(Error::NoLayerWeighted));
        assert_eq!(SearchParams::parse_layer_weights(""), Err(Error::NoLayerWeighted));
    }

    #[test]
    fn a_long_chunk_is_searched_and_returned_by_pieces_that_keep_their_scenario() {
        let (doc, memory) = doc_with_memory();
        let mut e = HashingEmbedder::new(256);
        let equal = [(Layer::Outline, 1.0), (Layer::Core, 1.0), (Layer::Chunk, 1.0)];
        let p = SearchParams { k: 8, layer_weights: equal, ..SearchParams::default() };
        // A 40-character limit cuts the two-sentence scenarios in two, not the one-sentence one.
        let mut idx = MemoryIndex::new(RetrievalMode::ThreeLayer, 256, SegmentParams::default()).with_piece_chars(40);
        assert!(idx.add_document(&doc, &memory, &mut e).unwrap());
        assert_eq!(idx.chunks(), 5);
        // Chunk words find the one piece that holds them, with its scenario.
        let r = idx.search_text("ships waited in the bay", &mut e, &p).unwrap();
        assert_eq!(r[0].scenario, 0);
        assert_eq!(r[0].span.slice(&doc.text).map(str::trim), Some("Ships waited in the bay for the ice to break."));
        // A core stands for every piece of its scenario: its pieces tie on the core list.
        let r = idx.search_text("officials food prices metal ore extracted processed", &mut e, &p).unwrap();
        let core_ranks = |scenario: u32| -> Vec<u32> {
            r.iter()
                .filter(|x| x.scenario == scenario)
                .filter_map(|x| x.ranks.iter().find(|l| l.layer == Layer::Core && l.kind == ListKind::Vector).map(|l| l.rank))
                .collect()
        };
        let ranks = core_ranks(1);
        assert_eq!(ranks.len(), 2, "both pieces of scenario 1: {r:?}");
        assert_eq!(ranks[0], ranks[1]);
        // Every piece lies inside its scenario, and the pieces tile it.
        let mut all = idx.search_text("the", &mut e, &SearchParams { k: 10, ..p.clone() }).unwrap();
        all.sort_by_key(|x| x.span.start);
        assert_eq!(all.len(), 5);
        for (i, s) in memory.scenarios.iter().enumerate() {
            let spans: Vec<Span> = all.iter().filter(|x| x.scenario == i as u32).map(|x| x.span).collect();
            assert_eq!(spans.first().map(|x| x.start), Some(s.span.start));
            assert_eq!(spans.last().map(|x| x.end), Some(s.span.end));
        }
        // A baseline chunker's passages are never cut, even where they tile the document,
        // and removal takes every piece.
        let mut base = MemoryIndex::new(RetrievalMode::ChunkOnly, 256, SegmentParams::default()).with_piece_chars(40);
        assert!(base.add_chunks(&doc, &memory, &mut e).unwrap());
        assert_eq!(base.chunks(), 3);
        let spans: Vec<Span> = memory.scenarios.iter().map(|s| s.span).collect();
        let passages = DocumentMemory::from_spans(&doc, &spans, "sentence");
        let mut base = MemoryIndex::new(RetrievalMode::ChunkOnly, 256, SegmentParams::default()).with_piece_chars(40);
        assert!(base.add_document(&doc, &passages, &mut e).unwrap());
        assert_eq!(base.chunks(), 3);
        assert!(idx.remove_document(doc.id));
        assert_eq!(idx.chunks(), 0);
        assert!(idx.search_text("ships", &mut e, &p).unwrap().is_empty());
    }
}
