//! A library: documents, their memories, and the index over them, kept in a [`Store`].
//!
//! # Layout (format version 3)
//! - `manifest.json`: format version, generation, embedder, retrieval mode, the index's
//!   parts (each with the key listing the documents removed from it since,
//!   `index/removed/<part>-<generation>.bin`) and the keys of the documents added since
//!   the last part. It is the only key whose contents say what the library
//!   holds, and its size does not grow with the library.
//! - `documents/<id>.json`, `memories/<id>.json`: each document and its memory, read when
//!   first asked for.
//! - `index/fresh/<generation>.bin`: a document added since the last part: its catalog
//!   entry ([`DocumentEntry`]) and what it adds to the index, embedded.
//! - `index/parts/<name>.bin`: a part of the index (HNSW graphs and BM25 per layer) and the
//!   catalog entries of its documents. See [`layout`] for when parts are made and merged.
//! - `routing.json`: the router's symbolic memory ([`crate::route::SymbolicMemory`]), if
//!   routing was ever used. Written on its own (one key, so atomically) after an answer;
//!   it describes how searches went, not what the library holds, so it is not part of a
//!   generation.
//! - `global.json`: the global memory of clue-guided retrieval ([`crate::clues`]), with the
//!   generation and model it was made for; stale once either changes.
//!
//! Versions 1 and 2 kept the manifest's document list and one index blob
//! (`index/<generation>.bin`) that every change rewrote whole, so adding the thousandth
//! document cost a thousand times the first. They are still read: opened by a handle that
//! may write, such a library is rewritten as one part (the blob is removed only once the
//! new manifest is stored, so a failure keeps it as it was).
//!
//! # Collections
//! Each document belongs to one named collection ([`DEFAULT_COLLECTION`] unless given):
//! the corpora that routing ([`crate::route`]) chooses among. One index serves them all;
//! a search can be kept to one collection ([`Library::search_in`]). A manifest written
//! before collections existed reads as every document in the default one.
//!
//! # Why a change is atomic
//! A change writes new keys first (the document, its memory, its index entries, any part
//! made) and the manifest last; a single key's write is atomic in every store. A crash
//! before the manifest's write leaves the old manifest naming keys that are all still
//! there, so the library is exactly as it was; the orphaned keys are removed the next
//! time it is opened. Keys the new manifest no longer names (a sealed document's entries,
//! merged parts) are removed only after it is written. An add writes what the document
//! adds and a manifest of bounded size, whatever the library's size; sealing and merging
//! rewrite each vector twice over the library's life ([`layout`]).
//!
//! Re-adding a document with the same content is a no-op: ids are content hashes.
//! Removing a document removes it from every layer of the index and deletes its files.
//!
//! # Versions: what an older build does with a newer library
//! Two kinds of change, two rules, so that a library shared between builds (a page
//! cached by one tab and updated in another, a CLI older than the app) never loses data:
//! - A field an older build may ignore is added with a serde default and no version
//!   bump. An older build keeps the fields it does not know ([`Manifest::unknown`],
//!   [`DocumentEntry::unknown`]) and writes them back unchanged when it commits, so the
//!   newer build finds them again.
//! - A change an older build must not ignore (a key it would not look for, an index it
//!   would misread) bumps [`Manifest::format_version`]; a build refuses a version it does
//!   not read with [`Error::LibraryVersion`] before it reads or writes anything.

pub mod layout;
pub mod salvage;
pub mod store;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{OnceCell, RefCell};

use serde::{Deserialize, Serialize};

pub use layout::read_only_at_open;
pub use salvage::{salvage, Salvage, SalvagedDocument};
pub use store::{archive, unarchive, JournalStore, MemStore, Store};

use crate::document::{DocId, Document};
use crate::embed::Embedder;
use crate::index::SegmentParams;
use crate::memory::DocumentMemory;
use crate::pieces::DEFAULT_PIECE_CHARS;
use crate::retrieve::{MemoryIndex, MergeJob, MergedPart, PreparedDocument, RetrievalMode, RetrievedChunk, SearchParams, SearchScratch};
use crate::span::Span;
use crate::Error;
use layout::{envelope, fresh_key, merge_due, open_envelope, part_key, removed_key, PartEntry, StoredManifest, MAX_MERGE_TIER};

/// The first library format: one manifest listing every document, one index blob.
/// Read (and rewritten as parts), never written.
pub const LIBRARY_FORMAT_VERSION: u32 = 1;

/// Version 1 with a document's memory replaced ([`Library::replace_memory`]), under a
/// versioned key a version-1 reader would not look for. Read (and rewritten as parts),
/// never written.
pub const REPLACED_MEMORY_FORMAT_VERSION: u32 = 2;

pub use layout::PARTS_FORMAT_VERSION;

fn reads_version(v: u32) -> bool {
    v == LIBRARY_FORMAT_VERSION || v == REPLACED_MEMORY_FORMAT_VERSION || v == PARTS_FORMAT_VERSION
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

const MANIFEST: &str = "manifest.json";
const ROUTING: &str = "routing.json";
const GLOBAL: &str = "global.json";

/// The collection of a document added without one.
pub const DEFAULT_COLLECTION: &str = "default";

fn default_collection() -> String {
    DEFAULT_COLLECTION.into()
}

/// What the manifest says about one document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DocumentEntry {
    /// Content hash.
    pub id: DocId,
    /// Title (file name or given).
    pub title: String,
    /// Detected language.
    pub language: String,
    /// Text length in bytes.
    pub bytes: usize,
    /// Scenarios (chunks) in its memory.
    pub scenarios: usize,
    /// The reader model or chunker that made the memory.
    pub reader: String,
    /// Why extraction fell back to a chunker, if it did.
    pub fallback: Option<String>,
    /// The collection it belongs to.
    #[serde(default = "default_collection")]
    pub collection: String,
    /// How many times its memory was replaced ([`Library::replace_memory`]); names the
    /// memory's key. 0 (and absent) for a memory written when the document was added.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_version: u64,
    /// The generation that added it, which orders the catalog; 0 for a document added
    /// before libraries were stored as parts (those come first, in their old order).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub added: u64,
    /// Fields written by a newer build that this one does not know, kept as they were and
    /// written back on every commit (see the module docs).
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// The manifest: everything needed to read the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`PARTS_FORMAT_VERSION`] for a library this build has written.
    pub format_version: u32,
    /// Bumped by every change; names the current index key.
    pub generation: u64,
    /// The embedder's name; a library is searched with the embedder that built it.
    pub embedder: String,
    /// The embedding dimension.
    pub dim: usize,
    /// The index layout.
    pub mode: RetrievalMode,
    /// A reader memory's chunk longer than this is indexed as pieces
    /// ([`MemoryIndex::with_piece_chars`]); 0, as in libraries written before pieces
    /// existed, keeps chunks whole.
    #[serde(default)]
    pub piece_chars: usize,
    /// Documents in the order they were added.
    pub documents: Vec<DocumentEntry>,
    /// Fields written by a newer build that this one does not know, kept as they were and
    /// written back on every commit (see the module docs).
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// What a new library is built with (and an existing one must match).
#[derive(Clone, Debug, PartialEq)]
pub struct LibrarySettings {
    /// Embedder name ([`Embedder::name`]).
    pub embedder: String,
    /// Embedding dimension.
    pub dim: usize,
    /// Index layout for a new library.
    pub mode: RetrievalMode,
    /// Piece limit for a new library ([`Manifest::piece_chars`]); an existing one keeps
    /// its own.
    pub piece_chars: usize,
    /// Documents added since the last part are sealed into a new one once they hold this
    /// many vectors (all layers together): the size of the smallest part (see
    /// [`layout`]). Not stored; any value opens any library.
    pub part_vectors: usize,
}

impl LibrarySettings {
    /// A new library's defaults for an embedder: three-layer retrieval, long chunks
    /// searched by pieces of at most [`DEFAULT_PIECE_CHARS`], parts of 4,096 vectors.
    pub fn new(embedder: String, dim: usize) -> Self {
        let part_vectors = SegmentParams::default().seal_threshold;
        LibrarySettings { embedder, dim, mode: RetrievalMode::ThreeLayer, piece_chars: DEFAULT_PIECE_CHARS, part_vectors }
    }
}

/// The longest collection name, in bytes.
pub const MAX_COLLECTION_NAME_BYTES: usize = 128;

/// `name` trimmed, if it can name a collection: 1 to [`MAX_COLLECTION_NAME_BYTES`] bytes,
/// no control characters, and not `auto` (which asks the router to choose).
pub fn check_collection_name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty() || name.len() > MAX_COLLECTION_NAME_BYTES || name.chars().any(char::is_control) || name == "auto" {
        return Err(Error::BadCollectionName { name: name.chars().take(80).collect() });
    }
    Ok(name)
}

/// A retrieved chunk with what an answer prompt and a citation need.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Passage<'a> {
    /// The document.
    pub doc_id: DocId,
    /// Its title.
    pub title: &'a str,
    /// The chunk's span in the document.
    pub span: Span,
    /// The chunk's text.
    pub text: &'a str,
    /// The scenario's core content.
    pub core: &'a str,
    /// The scenario's outline item, if any.
    pub outline: Option<&'a str>,
}

fn document_key(id: DocId) -> String {
    format!("documents/{id}.json")
}
fn memory_key(id: DocId, version: u64) -> String {
    if version == 0 {
        format!("memories/{id}.json")
    } else {
        format!("memories/{id}.v{version}.json")
    }
}
/// A memory being written: the windows read so far (see `reader::MemoryDraft::to_bytes`).
/// Not part of any change and not in the manifest: a reading that stops (a reload, a
/// crash) goes on from it, and it goes when the memory lands (the document's add, or the
/// replacement of its chunks) or the document is removed. The CLI reads a document before
/// adding it, so a draft may be of a document not in the library yet.
fn draft_key(id: DocId) -> String {
    format!("drafts/{id}.json")
}
fn index_key(generation: u64) -> String {
    format!("index/{generation}.bin")
}

/// Each listed document, not yet read (see [`Library::documents`]).
fn unread_documents(entries: &[DocumentEntry]) -> BTreeMap<DocId, (u64, OnceCell<(Document, DocumentMemory)>)> {
    entries.iter().map(|e| (e.id, (e.memory_version, OnceCell::new()))).collect()
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: Option<Vec<u8>>) -> Result<T, Error> {
    let bytes = bytes.ok_or_else(|| Error::CorruptLibrary { key: key.into(), message: "missing".into() })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::CorruptLibrary { key: key.into(), message: format!("{e}") })
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail (no maps with non-string keys).
    serde_json::to_vec(value).unwrap_or_default()
}

/// `global.json`: a global memory and what it was made for.
#[derive(Serialize, Deserialize)]
struct SavedGlobalMemory {
    generation: u64,
    model: String,
    memory: crate::clues::GlobalMemory,
}

/// A library open on a store (see the module docs).
#[derive(Debug)]
pub struct Library<S: Store> {
    /// In a cell so that reading a document on first use needs only `&self`.
    store: RefCell<S>,
    manifest: Manifest,
    /// Each document's memory version, and the document and its memory once read: they
    /// are read when first asked for (a passage, a context window), not at open, so that
    /// opening a library of thousands of documents to search it reads its index alone.
    documents: BTreeMap<DocId, (u64, OnceCell<(Document, DocumentMemory)>)>,
    index: MemoryIndex,
    segments: SegmentParams,
    /// The parts the stored manifest names, in read order. Parts the index has beyond
    /// these (made by a seal or a merge whose commit failed, or by migrating an older
    /// library from a handle that may not write) are written by the next commit.
    stored_parts: Vec<PartEntry>,
    /// Tiers of parts made here and not yet stored.
    new_tiers: BTreeMap<u64, u32>,
    /// Each fresh document's key generation.
    fresh_keys: BTreeMap<DocId, u64>,
    /// The documents removed from each part since it was written (see
    /// [`PartEntry::removed_key`]).
    removed: BTreeMap<u64, Vec<DocId>>,
    /// A blob index of an older format, removed once a manifest of parts is stored.
    legacy_index: Option<String>,
    /// While a batch is open ([`Library::begin_batch`]): the keys its changes made stale,
    /// removed once its manifest is written, and whether it changed anything.
    batch: Option<(Vec<String>, bool)>,
    /// Whether merges are left to the caller ([`Library::merge_job`]) rather than made
    /// inside the change that makes them due.
    background_merges: bool,
    /// The merge handed out by [`Library::merge_job`] and not yet applied: the merged
    /// part's name and tier.
    merging: Option<(u64, u32)>,
}

/// One change to commit (see [`Library::commit`]).
struct Change {
    /// The catalog entry of the document added or whose memory is replaced.
    entry: Option<DocumentEntry>,
    /// Keys to write before the manifest.
    writes: Vec<(String, Vec<u8>)>,
    /// A document this change adds, not yet in the index, and its fresh key's generation.
    added: Option<(DocId, u64)>,
    /// A document this change takes out of the index (it is still there).
    taken: Option<DocId>,
    /// Keys to remove once the manifest is written.
    removes_after: Vec<String>,
}

impl<S: Store> Library<S> {
    /// Open the library in `store`, or start an empty one there (nothing is written until
    /// the first change). An existing library must have been built with `settings`'
    /// embedder; its own retrieval mode is kept. Keys left by an interrupted change are
    /// removed, and a library of an older format is rewritten as parts (when this handle
    /// may write; otherwise by its next change).
    pub fn open(mut store: S, settings: &LibrarySettings) -> Result<Self, Error> {
        let segments = SegmentParams { seal_threshold: settings.part_vectors.max(1), ..SegmentParams::default() };
        let Some(bytes) = store.read(MANIFEST)? else {
            let manifest = Manifest {
                format_version: PARTS_FORMAT_VERSION,
                generation: 0,
                embedder: settings.embedder.clone(),
                dim: settings.dim,
                mode: settings.mode,
                piece_chars: settings.piece_chars,
                documents: Vec::new(),
                unknown: BTreeMap::new(),
            };
            let index = MemoryIndex::new(settings.mode, settings.dim, segments.clone())
                .with_piece_chars(settings.piece_chars)
                .with_manual_sealing();
            let mut lib = Library::assemble(store, manifest, BTreeMap::new(), index, segments);
            lib.collect_garbage();
            return Ok(lib);
        };
        // Read the version before the rest, so a newer layout gets a clear error.
        #[derive(Deserialize)]
        struct Version {
            format_version: u32,
        }
        let v: Version = decode(MANIFEST, Some(bytes.clone()))?;
        if !reads_version(v.format_version) {
            return Err(Error::LibraryVersion { found: v.format_version });
        }
        let check_embedder = |embedder: &str, dim: usize| {
            if embedder != settings.embedder || dim != settings.dim {
                return Err(Error::EmbedderMismatch {
                    library: format!("{embedder} ({dim} dimensions)"),
                    given: format!("{} ({} dimensions)", settings.embedder, settings.dim),
                });
            }
            Ok(())
        };
        if v.format_version == PARTS_FORMAT_VERSION {
            let stored: StoredManifest = decode(MANIFEST, Some(bytes))?;
            check_embedder(&stored.embedder, stored.dim)?;
            return Self::open_parts(store, stored, segments);
        }
        let manifest: Manifest = decode(MANIFEST, Some(bytes))?;
        check_embedder(&manifest.embedder, manifest.dim)?;
        let documents = unread_documents(&manifest.documents);
        let ik = index_key(manifest.generation);
        let mut index = match store.read(&ik)? {
            Some(bytes) => MemoryIndex::from_bytes(&bytes, segments.clone())
                .map_err(|e| Error::CorruptLibrary { key: ik.clone(), message: format!("{e}") })?,
            None if manifest.documents.is_empty() => MemoryIndex::new(manifest.mode, manifest.dim, segments.clone()),
            None => return Err(Error::CorruptLibrary { key: ik, message: "missing".into() }),
        }
        .with_piece_chars(manifest.piece_chars)
        .with_manual_sealing();
        let mut manifest = manifest;
        // Numbered in their order, so that a document moved to another part later (its
        // memory replaced) keeps its place; every later add's generation is larger.
        for (i, e) in manifest.documents.iter_mut().enumerate() {
            e.added = i as u64 + 1;
        }
        manifest.generation = manifest.generation.max(manifest.documents.len() as u64);
        // One part holds what the blob held; the next commit stores it.
        let part = manifest.generation + 1;
        index.consolidate(part);
        let mut lib = Library::assemble(store, manifest, documents, index, segments);
        lib.new_tiers.insert(part, MAX_MERGE_TIER);
        lib.legacy_index = Some(ik);
        // Stored as parts now if this handle may write; if that fails (a full disk), the
        // library still opens as it is, and the next change tries again.
        if lib.store.get_mut().sole_writer() {
            let change = lib.unchanged();
            let _ = lib.commit(change);
        }
        lib.collect_garbage();
        Ok(lib)
    }

    fn assemble(
        store: S,
        manifest: Manifest,
        documents: BTreeMap<DocId, (u64, OnceCell<(Document, DocumentMemory)>)>,
        index: MemoryIndex,
        segments: SegmentParams,
    ) -> Self {
        Library {
            store: RefCell::new(store),
            manifest,
            documents,
            index,
            segments,
            stored_parts: Vec::new(),
            new_tiers: BTreeMap::new(),
            fresh_keys: BTreeMap::new(),
            removed: BTreeMap::new(),
            legacy_index: None,
            batch: None,
            background_merges: false,
            merging: None,
        }
    }

    /// Open a library stored as parts: each part, less what was removed from it, then the
    /// fresh documents, then the documents' own keys.
    fn open_parts(mut store: S, stored: StoredManifest, segments: SegmentParams) -> Result<Self, Error> {
        let corrupt = |key: &str, e: Error| Error::CorruptLibrary { key: key.into(), message: format!("{e}") };
        let mut index =
            MemoryIndex::new(stored.mode, stored.dim, segments.clone()).with_piece_chars(stored.piece_chars).with_manual_sealing();
        let mut entries: Vec<DocumentEntry> = Vec::new();
        let mut removed = BTreeMap::new();
        for p in &stored.parts {
            let key = part_key(p.id);
            let bytes = store.read(&key)?.ok_or_else(|| corrupt(&key, Error::InvalidField { what: "missing" }))?;
            let (part_entries, index_bytes) = open_envelope(&bytes).map_err(|e| corrupt(&key, e))?;
            let id = index.load_part(index_bytes).map_err(|e| corrupt(&key, e))?;
            if id != p.id {
                return Err(corrupt(&key, Error::InvalidField { what: "part name" }));
            }
            let gone: Vec<DocId> = if p.removed_key == 0 {
                Vec::new()
            } else {
                let rk = removed_key(p.id, p.removed_key);
                decode(&rk, store.read(&rk)?)?
            };
            let gone_set: hashbrown::HashSet<DocId> = gone.iter().copied().collect();
            for id in &gone {
                index.remove_document(*id);
            }
            // The catalog names the part's documents, each once.
            let mut listed: Vec<DocId> = part_entries.iter().map(|e| e.id).collect();
            let mut held: Vec<DocId> = index.part_documents(Some(p.id)).chain(gone.iter().copied()).collect();
            listed.sort_unstable();
            held.sort_unstable();
            held.dedup();
            if listed != held {
                return Err(corrupt(&key, Error::InvalidField { what: "catalog" }));
            }
            entries.extend(part_entries.into_iter().filter(|e| !gone_set.contains(&e.id)));
            if !gone.is_empty() {
                removed.insert(p.id, gone);
            }
        }
        let mut fresh_keys = BTreeMap::new();
        for &generation in &stored.fresh {
            let key = fresh_key(generation);
            let bytes = store.read(&key)?.ok_or_else(|| corrupt(&key, Error::InvalidField { what: "missing" }))?;
            let (fresh_entries, index_bytes) = open_envelope(&bytes).map_err(|e| corrupt(&key, e))?;
            let prepared = PreparedDocument::from_bytes(index_bytes).map_err(|e| corrupt(&key, e))?;
            let id = prepared.doc_id();
            if fresh_entries.len() != 1 || fresh_entries[0].id != id {
                return Err(corrupt(&key, Error::InvalidField { what: "fresh document" }));
            }
            index.insert(prepared).map_err(|e| corrupt(&key, e))?;
            entries.extend(fresh_entries);
            fresh_keys.insert(id, generation);
        }
        // In the order they were added (a part holds its documents in that order too).
        entries.sort_by_key(|e| e.added);
        if entries.len() != index.documents() {
            return Err(corrupt(MANIFEST, Error::InvalidField { what: "catalog" }));
        }
        let documents = unread_documents(&entries);
        let manifest = Manifest {
            format_version: stored.format_version,
            generation: stored.generation,
            embedder: stored.embedder,
            dim: stored.dim,
            mode: stored.mode,
            piece_chars: stored.piece_chars,
            documents: entries,
            unknown: stored.unknown,
        };
        let mut lib = Library::assemble(store, manifest, documents, index, segments);
        lib.stored_parts = stored.parts;
        lib.fresh_keys = fresh_keys;
        lib.removed = removed;
        lib.collect_garbage();
        Ok(lib)
    }

    /// Open an existing library with the settings its manifest records (for listing and
    /// removing documents, which need no embedder). `None` when `store` holds no library.
    pub fn open_existing(mut store: S) -> Result<Option<Self>, Error> {
        let Some(bytes) = store.read(MANIFEST)? else { return Ok(None) };
        #[derive(Deserialize)]
        struct Head {
            format_version: u32,
            #[serde(default)]
            embedder: String,
            #[serde(default)]
            dim: usize,
            #[serde(default)]
            mode: Option<RetrievalMode>,
        }
        let head: Head = decode(MANIFEST, Some(bytes))?;
        if !reads_version(head.format_version) {
            return Err(Error::LibraryVersion { found: head.format_version });
        }
        let mode = head.mode.unwrap_or(RetrievalMode::ThreeLayer);
        // The manifest's own piece limit applies (`open` reads it), not this one.
        let settings = LibrarySettings { mode, ..LibrarySettings::new(head.embedder, head.dim) };
        Self::open(store, &settings).map(Some)
    }

    /// Remove keys no manifest names (left by a change that did not finish). Best effort:
    /// a key that cannot be removed now is tried again next time.
    fn collect_garbage(&mut self) {
        let store = self.store.get_mut();
        if !store.sole_writer() {
            return;
        }
        let Ok(keys) = store.keys() else { return };
        let mut live: hashbrown::HashSet<String> = hashbrown::HashSet::new();
        live.insert(MANIFEST.into());
        if let Some(legacy) = &self.legacy_index {
            live.insert(legacy.clone());
        }
        live.extend(self.stored_parts.iter().map(|p| part_key(p.id)));
        live.extend(self.stored_parts.iter().filter(|p| p.removed_key != 0).map(|p| removed_key(p.id, p.removed_key)));
        live.extend(self.fresh_keys.values().map(|&g| fresh_key(g)));
        for e in &self.manifest.documents {
            live.insert(document_key(e.id));
            live.insert(memory_key(e.id, e.memory_version));
        }
        for key in keys {
            let ours = key.starts_with("documents/") || key.starts_with("memories/") || key.starts_with("index/");
            if ours && !live.contains(&key) {
                let _ = self.store.get_mut().remove(&key);
            }
        }
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Documents, in the order they were added.
    pub fn documents(&self) -> &[DocumentEntry] {
        &self.manifest.documents
    }

    /// True when a document with this id is in the library.
    pub fn contains(&self, id: DocId) -> bool {
        self.documents.contains_key(&id)
    }

    /// The collections that hold documents, in the order each first appeared.
    pub fn collections(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for e in &self.manifest.documents {
            if !names.contains(&e.collection.as_str()) {
                names.push(&e.collection);
            }
        }
        names
    }

    /// The documents of one collection.
    pub fn collection_documents<'a>(&'a self, collection: &'a str) -> impl Iterator<Item = &'a DocumentEntry> + 'a {
        self.manifest.documents.iter().filter(move |e| e.collection == collection)
    }

    /// A document and its memory.
    pub fn get(&self, id: DocId) -> Result<(&Document, &DocumentMemory), Error> {
        self.loaded(id).map(|(d, m)| (d, m))
    }

    /// A document and its memory, read from the store the first time they are asked for.
    fn loaded(&self, id: DocId) -> Result<&(Document, DocumentMemory), Error> {
        let (version, cell) = self.documents.get(&id).ok_or(Error::NoSuchDocument { id })?;
        if let Some(loaded) = cell.get() {
            return Ok(loaded);
        }
        let (dk, mk) = (document_key(id), memory_key(id, *version));
        let mut store = self.store.try_borrow_mut().map_err(|_| Error::Storage { key: dk.clone(), message: "busy".into() })?;
        let doc: Document = decode(&dk, store.read(&dk)?)?;
        let memory: DocumentMemory = decode(&mk, store.read(&mk)?)?;
        if doc.id != id || memory.doc_id != id {
            return Err(Error::CorruptLibrary { key: dk, message: "another document's text".into() });
        }
        Ok(cell.get_or_init(|| (doc, memory)))
    }

    /// The index (for searches with a caller's own vectors or parameters).
    pub fn index(&self) -> &MemoryIndex {
        &self.index
    }

    /// The store, for what it offers beside [`Store`] (a [`JournalStore`]'s journal, say).
    /// Writing keys through it bypasses the library: don't.
    pub fn store_mut(&mut self) -> &mut S {
        self.store.get_mut()
    }

    /// The store, given back.
    pub fn into_store(self) -> S {
        self.store.into_inner()
    }

    /// A change that changes no document: what stores parts made in memory.
    fn unchanged(&self) -> Change {
        Change { entry: None, writes: Vec::new(), added: None, taken: None, removes_after: Vec::new() }
    }

    /// Write the next generation: the change's keys first, then every part the index
    /// holds and the store does not, then the manifest; then remove what the manifest no
    /// longer names. On failure the manifest is unchanged and the new keys are removed.
    /// The index itself is not touched: the caller inserts or removes after success.
    fn commit(&mut self, change: Change) -> Result<(), Error> {
        let Change { entry: changed_entry, mut writes, added, taken, mut removes_after } = change;
        let generation = self.manifest.generation + 1;
        // The fresh documents: those in the index's fresh segment, less the one taken out,
        // plus the one added.
        let mut fresh_keys = BTreeMap::new();
        for (&id, &key) in &self.fresh_keys {
            if Some(id) != taken && self.index.part_of(id) == Some(None) {
                fresh_keys.insert(id, key);
            } else {
                removes_after.push(fresh_key(key));
            }
        }
        if let Some((id, key)) = added {
            fresh_keys.insert(id, key);
        }
        let taken_part = taken.and_then(|id| self.index.part_of(id)).flatten();
        // Catalog entries by id, with their place in the library's order (for the parts
        // written now; none on most commits).
        let writes_parts = self.index.parts().iter().any(|id| !self.stored_parts.iter().any(|p| p.id == *id));
        let mut by_id: BTreeMap<DocId, (usize, &DocumentEntry)> = BTreeMap::new();
        if writes_parts {
            by_id.extend(self.manifest.documents.iter().enumerate().map(|(i, e)| (e.id, (i, e))));
            if let Some(e) = &changed_entry {
                let place = by_id.get(&e.id).map_or(usize::MAX, |p| p.0);
                by_id.insert(e.id, (place, e));
            }
        }
        let mut parts = Vec::with_capacity(self.index.parts().len());
        let mut removed_lists: BTreeMap<u64, Vec<DocId>> = BTreeMap::new();
        for &id in self.index.parts() {
            let mut entry = match self.stored_parts.iter().find(|p| p.id == id) {
                Some(p) => p.clone(),
                None => {
                    let mut ids: Vec<DocId> = self.index.part_documents(Some(id)).collect();
                    let tier = self.new_tiers.get(&id).copied().unwrap_or(0);
                    let bytes = self.index.part_bytes(id).ok_or(Error::InvalidField { what: "part" })?;
                    // The catalog in the library's order.
                    ids.sort_by_key(|d| by_id.get(d).map(|e| e.0));
                    let catalog: Vec<&DocumentEntry> = ids.iter().filter_map(|d| by_id.get(d).map(|e| e.1)).collect();
                    writes.push((part_key(id), envelope(&catalog, &bytes)));
                    PartEntry { id, tier, documents: ids.len(), removed: 0, removed_key: 0 }
                }
            };
            if let (Some(gone), true) = (taken, taken_part == Some(id)) {
                let mut list = self.removed.get(&id).cloned().unwrap_or_default();
                list.push(gone);
                writes.push((removed_key(id, generation), encode(&list)));
                if entry.removed_key != 0 {
                    removes_after.push(removed_key(id, entry.removed_key));
                }
                entry.removed = list.len();
                entry.removed_key = generation;
                removed_lists.insert(id, list);
            }
            parts.push(entry);
        }
        for p in self.stored_parts.iter().filter(|p| !self.index.parts().contains(&p.id)) {
            removes_after.push(part_key(p.id));
            if p.removed_key != 0 {
                removes_after.push(removed_key(p.id, p.removed_key));
            }
        }
        let stored = self.stored_manifest(generation, &parts, &fresh_keys);
        // In a batch, a key written again is live again (a document removed and added
        // back): it must not be removed at the batch's end, nor by a rollback here, since
        // the manifest last stored may name it.
        let mut restore_pending: Vec<String> = Vec::new();
        if let Some((pending, _)) = &mut self.batch {
            pending.retain(|k| {
                let rewritten = writes.iter().any(|(w, _)| w == k);
                if rewritten {
                    restore_pending.push(k.clone());
                }
                !rewritten
            });
        }
        let mut written: Vec<String> = Vec::new();
        let mut result = Ok(());
        for (key, bytes) in &writes {
            if let Err(e) = self.store.get_mut().write(key, bytes) {
                result = Err(e);
                break;
            }
            written.push(key.clone());
        }
        // In a batch the manifest waits for its end ([`Library::finish_batch`]).
        if result.is_ok() && self.batch.is_none() {
            result = self.store.get_mut().write(MANIFEST, &encode(&stored));
        }
        if let Err(e) = result {
            for key in written.iter().filter(|k| !restore_pending.contains(k)) {
                let _ = self.store.get_mut().remove(key);
            }
            if let Some((pending, _)) = &mut self.batch {
                pending.extend(restore_pending);
            }
            return Err(e);
        }
        match &mut self.batch {
            Some((pending, changed)) => {
                pending.extend(removes_after);
                *changed = true;
            }
            None => {
                for key in removes_after.iter().chain(self.legacy_index.take().as_ref()) {
                    let _ = self.store.get_mut().remove(key);
                }
            }
        }
        for (id, list) in removed_lists {
            self.removed.insert(id, list);
        }
        self.removed.retain(|id, _| parts.iter().any(|p| p.id == *id));
        self.stored_parts = parts;
        self.new_tiers.retain(|id, _| !self.stored_parts.iter().any(|p| p.id == *id));
        self.fresh_keys = fresh_keys;
        let place = |lib: &Self, id: DocId| lib.manifest.documents.iter().position(|e| e.id == id);
        match (changed_entry, taken) {
            (Some(entry), Some(_)) => {
                if let Some(i) = place(self, entry.id) {
                    self.manifest.documents[i] = entry;
                }
            }
            (Some(entry), None) => self.manifest.documents.push(entry),
            (None, Some(id)) => {
                if let Some(i) = place(self, id) {
                    self.manifest.documents.remove(i);
                }
            }
            (None, None) => {}
        }
        self.manifest.generation = generation;
        self.manifest.format_version = PARTS_FORMAT_VERSION;
        Ok(())
    }

    /// The manifest that names `parts` and the fresh documents' keys.
    fn stored_manifest(&self, generation: u64, parts: &[PartEntry], fresh_keys: &BTreeMap<DocId, u64>) -> StoredManifest {
        let mut fresh: Vec<u64> = fresh_keys.values().copied().collect();
        fresh.sort_unstable();
        StoredManifest {
            format_version: PARTS_FORMAT_VERSION,
            generation,
            embedder: self.manifest.embedder.clone(),
            dim: self.manifest.dim,
            mode: self.manifest.mode,
            piece_chars: self.manifest.piece_chars,
            parts: parts.to_vec(),
            fresh,
            unknown: self.manifest.unknown.clone(),
        }
    }

    /// Start a batch: the changes that follow write their keys as they are made, and one
    /// manifest at [`Library::finish_batch`] makes them all part of the library at once.
    /// Searches and reads in between see them already. Until the batch finishes, a crash
    /// (or dropping the library) leaves the library as the last finished change left it;
    /// the keys written meanwhile are removed at the next open. Adding a folder commits
    /// in batches so: a cancel keeps every finished batch. A batch already open goes on.
    pub fn begin_batch(&mut self) {
        self.batch.get_or_insert_with(|| (Vec::new(), false));
    }

    /// Write the manifest of the changes since [`Library::begin_batch`], then remove the
    /// keys they made stale. On error the batch stays open (call again to retry); the
    /// store still holds the library as it was before the batch.
    pub fn finish_batch(&mut self) -> Result<(), Error> {
        let Some((pending, changed)) = self.batch.take() else { return Ok(()) };
        if !changed {
            return Ok(());
        }
        // A commit outside the batch: it stores whatever the index holds that the store
        // does not (a part whose commit failed, an older library's one part) before the
        // manifest that names it.
        let change = self.unchanged();
        if let Err(e) = self.commit(change) {
            self.batch = Some((pending, changed));
            return Err(e);
        }
        for key in &pending {
            let _ = self.store.get_mut().remove(key);
        }
        Ok(())
    }

    /// The parts as [`merge_due`] reads them: stored ones with their removals, and those
    /// made here.
    fn part_sizes(&self) -> Vec<(u64, u32, usize, usize)> {
        self.index
            .parts()
            .iter()
            .map(|&id| match self.stored_parts.iter().find(|p| p.id == id) {
                Some(p) => (id, p.tier, p.documents, p.removed),
                None => (id, self.new_tiers.get(&id).copied().unwrap_or(0), self.index.part_documents(Some(id)).count(), 0),
            })
            .collect()
    }

    /// Seal the fresh segment once it is full and make the merges due, then store them
    /// (one commit). Called after each change; a failure leaves the library as the last
    /// commit left it, and the next commit stores what was made.
    fn maintain(&mut self) -> Result<(), Error> {
        let mut changed = false;
        if self.index.fresh_vectors() >= self.segments.seal_threshold {
            let part = self.next_part_name();
            self.index.seal(part);
            self.new_tiers.insert(part, 0);
            changed = true;
        }
        while let Some((inputs, tier)) = merge_due(&self.part_sizes()).filter(|_| !self.background_merges) {
            let into = self.next_part_name();
            if !self.index.merge_parts(&inputs, into) {
                break;
            }
            self.new_tiers.insert(into, tier);
            changed = true;
        }
        if !changed {
            return Ok(());
        }
        let change = self.unchanged();
        self.commit(change)
    }

    fn next_part_name(&self) -> u64 {
        let newest = self.index.parts().iter().copied().max().unwrap_or(0);
        let reserved = self.merging.map_or(0, |(into, _)| into);
        newest.max(self.manifest.generation).max(reserved) + 1
    }

    /// Leave merges to the caller: a change no longer makes the merges it makes due (the
    /// one that builds graphs, seconds of work), and [`Library::merge_job`] hands them out
    /// to run elsewhere, a thread or an idle moment, and [`Library::apply_merge`] stores
    /// them. `docmem ingest` works so: adding a document never waits for a merge.
    pub fn set_background_merges(&mut self, on: bool) {
        self.background_merges = on;
    }

    /// The next merge due, to build with [`MergeJob::run`] (anywhere) and store with
    /// [`Library::apply_merge`]; `None` when none is due or one is already out.
    pub fn merge_job(&mut self) -> Option<MergeJob> {
        if self.merging.is_some() {
            return None;
        }
        let (inputs, tier) = merge_due(&self.part_sizes())?;
        let into = self.next_part_name();
        let job = self.index.merge_job(&inputs, into)?;
        self.merging = Some((into, tier));
        Some(job)
    }

    /// Store a merge built from [`Library::merge_job`]: its part replaces the parts it
    /// merged (whatever was removed from them meanwhile stays removed), in one commit.
    /// False, changing nothing, when those parts changed meanwhile ([`Library::compact`]).
    /// On a storage error the merge stays in memory and the next change stores it.
    pub fn apply_merge(&mut self, merged: MergedPart) -> Result<bool, Error> {
        let Some((into, tier)) = self.merging else { return Ok(false) };
        if merged.into_part() != into {
            return Ok(false);
        }
        self.merging = None;
        if !self.index.apply_merge(merged) {
            return Ok(false);
        }
        self.new_tiers.insert(into, tier);
        let change = self.unchanged();
        self.commit(change)?;
        Ok(true)
    }

    /// Seal the documents added since the last part and merge every part into one, then
    /// store it: the fastest library to open and search, at the cost of rewriting it
    /// whole (minutes per hundred thousand vectors). On a storage error the store holds
    /// the library as it was and the compacted index stays in memory, searched as it is,
    /// for the next change to store.
    pub fn compact(&mut self) -> Result<(), Error> {
        if self.index.part_documents(None).next().is_some() {
            let part = self.next_part_name();
            self.index.seal(part);
            self.new_tiers.insert(part, 0);
        }
        let all = self.index.parts().to_vec();
        if all.len() > 1 || self.stored_parts.iter().any(|p| p.removed > 0) {
            let into = self.next_part_name();
            if self.index.merge_parts(&all, into) {
                self.new_tiers.insert(into, MAX_MERGE_TIER);
            }
        }
        let change = self.unchanged();
        self.commit(change)
    }

    /// Add a document and its memory (spans that tile the text, or a baseline chunker's
    /// chunks). Returns false, changing nothing, when the same content is already there.
    /// On error the library is as it was.
    pub fn add(&mut self, doc: &Document, memory: &DocumentMemory, embedder: &mut dyn Embedder) -> Result<bool, Error> {
        self.add_to(DEFAULT_COLLECTION, doc, memory, embedder)
    }

    /// [`Library::add`] into the named collection. Content already in the library stays
    /// where it is (ids are content hashes): false, nothing changed.
    pub fn add_to(
        &mut self,
        collection: &str,
        doc: &Document,
        memory: &DocumentMemory,
        embedder: &mut dyn Embedder,
    ) -> Result<bool, Error> {
        let collection = check_collection_name(collection)?;
        if self.documents.contains_key(&doc.id) {
            return Ok(false);
        }
        let prepared = if memory.check(doc).is_ok() {
            self.index.prepare_document(doc, memory, embedder)?
        } else {
            self.index.prepare_chunks(doc, memory, embedder)?
        };
        let Some(prepared) = prepared else { return Ok(false) };
        let generation = self.manifest.generation + 1;
        let entry = DocumentEntry {
            id: doc.id,
            title: doc.title.clone(),
            language: doc.language.clone(),
            bytes: doc.text.len(),
            scenarios: memory.scenarios.len(),
            reader: memory.provenance.reader.clone(),
            fallback: memory.provenance.fallback.clone(),
            collection: collection.into(),
            memory_version: 0,
            added: generation,
            unknown: BTreeMap::new(),
        };
        let writes = alloc::vec![
            (document_key(doc.id), encode(doc)),
            (memory_key(doc.id, 0), encode(memory)),
            (fresh_key(generation), envelope(&[&entry], &prepared.to_bytes())),
        ];
        // A draft of its memory (a reader's, stopped and resumed) is done with once it is in.
        let removes_after = alloc::vec![draft_key(doc.id)];
        let change = Change { entry: Some(entry), writes, added: Some((doc.id, generation)), taken: None, removes_after };
        self.commit(change)?;
        // The index was checked to take it when it was prepared; nothing has changed it since.
        self.index.insert(prepared)?;
        self.documents.insert(doc.id, (0, OnceCell::from((doc.clone(), memory.clone()))));
        let _ = self.maintain();
        Ok(true)
    }

    /// Remove a document from every layer and delete its files. Returns false when it was
    /// not there. On error the library is as it was.
    pub fn remove(&mut self, id: DocId) -> Result<bool, Error> {
        if !self.documents.contains_key(&id) {
            return Ok(false);
        }
        let version = self.manifest.documents.iter().find(|e| e.id == id).map_or(0, |e| e.memory_version);
        let change = Change {
            entry: None,
            writes: Vec::new(),
            added: None,
            taken: Some(id),
            removes_after: alloc::vec![document_key(id), memory_key(id, version), draft_key(id)],
        };
        self.commit(change)?;
        self.index.remove_document(id);
        self.documents.remove(&id);
        let _ = self.maintain();
        Ok(true)
    }

    /// Replace the memory of a document already in the library by `memory` (a reader's
    /// memory written after the document went in with plain chunks, say), in one commit:
    /// until it lands searches see the old memory, after it the new one, and on any error
    /// the library is as it was. Returns false when the document is not there (removed
    /// meanwhile). The new memory goes under a new key, so an interrupted replace leaves
    /// the old memory and index intact.
    pub fn replace_memory(&mut self, memory: &DocumentMemory, embedder: &mut dyn Embedder) -> Result<bool, Error> {
        let id = memory.doc_id;
        if !self.documents.contains_key(&id) {
            return Ok(false);
        }
        let doc = self.loaded(id)?.0.clone();
        memory.check_chunks(&doc).map_err(|why| Error::BadMemory { why: Box::new(why) })?;
        let Some(old_version) = self.manifest.documents.iter().find(|e| e.id == id).map(|e| e.memory_version) else {
            return Ok(false);
        };
        // Numbered after every id in use, the old entries' included.
        let prepared = self.index.prepare_replacement(&doc, memory, embedder)?;
        let generation = self.manifest.generation + 1;
        let version = old_version + 1;
        let Some(mut entry) = self.manifest.documents.iter().find(|e| e.id == id).cloned() else { return Ok(false) };
        entry.memory_version = version;
        entry.scenarios = memory.scenarios.len();
        entry.reader = memory.provenance.reader.clone();
        entry.fallback = memory.provenance.fallback.clone();
        let writes =
            alloc::vec![(memory_key(id, version), encode(memory)), (fresh_key(generation), envelope(&[&entry], &prepared.to_bytes())),];
        let change = Change {
            entry: Some(entry),
            writes,
            added: Some((id, generation)),
            taken: Some(id),
            removes_after: alloc::vec![memory_key(id, old_version), draft_key(id)],
        };
        self.commit(change)?;
        self.index.remove_document(id);
        self.index.insert(prepared)?;
        self.documents.insert(id, (version, OnceCell::from((doc, memory.clone()))));
        let _ = self.maintain();
        Ok(true)
    }

    /// The stored draft of document `id`'s memory (the windows a reader has read of it so
    /// far), if there is one. The document need not be in the library yet.
    pub fn stored_draft(&mut self, id: DocId) -> Result<Option<Vec<u8>>, Error> {
        self.store.get_mut().read(&draft_key(id))
    }

    /// Store `bytes` as the draft of document `id`'s memory, replacing the one before. It
    /// goes when the memory replaces the document's ([`Library::replace_memory`]), when
    /// the document is removed, or with [`Library::remove_draft`].
    pub fn save_draft(&mut self, id: DocId, bytes: &[u8]) -> Result<(), Error> {
        self.store.get_mut().write(&draft_key(id), bytes)
    }

    /// Drop the stored draft of document `id`'s memory (no error when there is none).
    pub fn remove_draft(&mut self, id: DocId) -> Result<(), Error> {
        self.store.get_mut().remove(&draft_key(id))
    }

    /// Search with a query embedded by `embedder`.
    pub fn search(&self, query: &str, embedder: &mut dyn Embedder, params: &SearchParams) -> Result<Vec<RetrievedChunk>, Error> {
        self.index.search_text(query, embedder, params)
    }

    /// [`Library::search`] kept to the documents of `collection` (`None`: all). Exact: each
    /// ranked list is read past other collections' items, not cut first and filtered after.
    pub fn search_in(
        &self,
        query: &str,
        embedder: &mut dyn Embedder,
        params: &SearchParams,
        collection: Option<&str>,
    ) -> Result<Vec<RetrievedChunk>, Error> {
        let Some(name) = collection else { return self.search(query, embedder, params) };
        let keep: hashbrown::HashSet<DocId> = self.collection_documents(name).map(|e| e.id).collect();
        if keep.is_empty() {
            return Err(Error::NoSuchCollection { name: name.into() });
        }
        let v = embedder.embed(&[query], crate::embed::EmbedRole::Query)?;
        let v = v.into_iter().next().ok_or(Error::EmbedderWrongCount { expected: 1, got: 0 })?;
        let filter = |d: DocId| keep.contains(&d);
        self.index.search_filtered(query, &v, params, &mut SearchScratch::default(), Some(&filter))
    }

    /// The router's symbolic memory as last saved, or `None` if routing never ran here.
    pub fn routing_memory(&mut self) -> Result<Option<crate::route::SymbolicMemory>, Error> {
        let Some(bytes) = self.store.get_mut().read(ROUTING)? else { return Ok(None) };
        decode(ROUTING, Some(bytes)).map(Some)
    }

    /// Save the router's symbolic memory (one key, written atomically; the documents and
    /// the index are untouched).
    pub fn save_routing_memory(&mut self, memory: &crate::route::SymbolicMemory) -> Result<(), Error> {
        self.store.get_mut().write(ROUTING, &encode(memory))
    }

    /// The global memory saved for this generation of the library and `model`, if any.
    pub fn cached_global_memory(&mut self, model: &str) -> Option<crate::clues::GlobalMemory> {
        let bytes = self.store.get_mut().read(GLOBAL).ok()??;
        let saved: SavedGlobalMemory = serde_json::from_slice(&bytes).ok()?;
        (saved.generation == self.manifest.generation && saved.model == model).then_some(saved.memory)
    }

    /// Save the global memory made by `model` for this generation (one key, atomically).
    pub fn save_global_memory(&mut self, model: &str, memory: &crate::clues::GlobalMemory) -> Result<(), Error> {
        let saved = SavedGlobalMemory { generation: self.manifest.generation, model: model.into(), memory: memory.clone() };
        self.store.get_mut().write(GLOBAL, &encode(&saved))
    }

    /// The windows of text around `hits` that the answerer reads (small-to-big; see
    /// [`crate::context`]), with `measure` giving a text's size in the budget's unit.
    pub fn context_windows(
        &self,
        hits: &[RetrievedChunk],
        params: &crate::context::ContextParams,
        measure: &mut dyn FnMut(&str) -> usize,
    ) -> Vec<crate::context::Window> {
        crate::context::windows(hits, |id| self.loaded(id).ok().map(|(d, m)| (d, m)), params, measure)
    }

    /// The text, core and outline item of a retrieved chunk.
    pub fn passage(&self, hit: &RetrievedChunk) -> Option<Passage<'_>> {
        let (doc, memory) = self.loaded(hit.doc_id).ok()?;
        let scenario = memory.scenarios.get(hit.scenario as usize)?;
        Some(Passage {
            doc_id: doc.id,
            title: &doc.title,
            span: hit.span,
            text: hit.span.slice(&doc.text)?,
            core: &scenario.core,
            outline: scenario.outline_item.and_then(|i| memory.outline.get(i as usize)).map(String::as_str),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::memory::Scenario;
    use alloc::vec;

    fn settings() -> LibrarySettings {
        LibrarySettings::new("hashing-64".into(), 64)
    }

    fn doc_and_memory(title: &str, parts: &[(&str, &str)]) -> (Document, DocumentMemory) {
        let text: String = parts.iter().map(|(t, _)| *t).collect();
        let doc = Document::new(title, text);
        let mut at = 0;
        let scenarios = parts
            .iter()
            .enumerate()
            .map(|(i, (t, core))| {
                let s = Scenario { span: Span::new(at, at + t.len()), core: (*core).into(), outline_item: Some(i as u32) };
                at += t.len();
                s
            })
            .collect();
        let mut m = DocumentMemory::from_spans(&doc, &[], "test-reader");
        m.outline = parts.iter().map(|(_, c)| format!("About {c}")).collect();
        m.scenarios = scenarios;
        (doc, m)
    }

    /// `lib` as a build before parts stored it: one manifest listing every document, and
    /// one index blob named by its generation.
    fn as_format_1(lib: &Library<MemStore>) -> MemStore {
        let mut store = MemStore::default();
        for entry in lib.documents() {
            let (doc, memory) = lib.get(entry.id).unwrap();
            store.entries.insert(document_key(entry.id), encode(doc));
            store.entries.insert(memory_key(entry.id, entry.memory_version), encode(memory));
        }
        let mut json = serde_json::to_value(lib.manifest()).unwrap();
        json["format_version"] = serde_json::json!(1);
        json["generation"] = serde_json::json!(7);
        for d in json["documents"].as_array_mut().unwrap() {
            d.as_object_mut().unwrap().remove("added");
        }
        store.entries.insert(MANIFEST.into(), serde_json::to_vec(&json).unwrap());
        store.entries.insert(index_key(7), lib.index().to_bytes());
        store
    }

    fn rivers() -> (Document, DocumentMemory) {
        doc_and_memory("rivers.txt", &[("The Nile flows north into the sea. ", "Nile"), ("The Amazon carries the most water. ", "Amazon")])
    }
    fn peaks() -> (Document, DocumentMemory) {
        doc_and_memory("peaks.txt", &[("Everest is the highest mountain. ", "Everest"), ("K2 is harder to climb. ", "K2")])
    }

    #[test]
    fn add_search_reopen_remove() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        let (d1, m1) = rivers();
        let (d2, m2) = peaks();
        assert!(lib.add(&d1, &m1, &mut e).unwrap());
        assert!(lib.add(&d2, &m2, &mut e).unwrap());
        assert!(!lib.add(&d1, &m1, &mut e).unwrap(), "same content again is a no-op");
        let hits = lib.search("which mountain is highest", &mut e, &SearchParams::default()).unwrap();
        let top = lib.passage(&hits[0]).unwrap();
        assert_eq!((top.title, top.core, top.outline), ("peaks.txt", "Everest", Some("About Everest")));
        assert!(top.text.starts_with("Everest"));

        let store = lib.into_store();
        let mut lib = Library::open(store, &settings()).unwrap();
        assert_eq!(lib.documents().len(), 2);
        assert_eq!(lib.manifest().generation, 2);
        assert!(lib.remove(d2.id).unwrap());
        assert!(!lib.remove(d2.id).unwrap());
        let hits = lib.search("which mountain is highest", &mut e, &SearchParams::default()).unwrap();
        assert!(hits.iter().all(|h| h.doc_id == d1.id), "removed from every layer");
        let keys = lib.into_store().entries.into_keys().collect::<Vec<_>>();
        assert_eq!(keys.len(), 4, "{keys:?}");
        assert!(!keys.iter().any(|k| k.contains(&d2.id.to_string())));
    }

    #[test]
    fn collections_keep_searches_apart_and_old_manifests_read_as_default() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        let (d1, m1) = rivers();
        let (d2, m2) = peaks();
        assert!(lib.add_to("geography", &d1, &m1, &mut e).unwrap());
        assert!(lib.add_to("climbing", &d2, &m2, &mut e).unwrap());
        assert_eq!(lib.collections(), vec!["geography", "climbing"]);
        // Kept to one collection, a query about the other finds only this one's chunks.
        let p = SearchParams::default();
        let hits = lib.search_in("which mountain is highest", &mut e, &p, Some("geography")).unwrap();
        assert!(!hits.is_empty() && hits.iter().all(|h| h.doc_id == d1.id));
        // Ranks count the kept items only: the best kept chunk is rank 1 in some list.
        assert!(hits[0].ranks.iter().any(|r| r.rank == 1));
        let all = lib.search_in("which mountain is highest", &mut e, &p, None).unwrap();
        assert_eq!(all, lib.search("which mountain is highest", &mut e, &p).unwrap());
        assert_eq!(lib.search_in("x", &mut e, &p, Some("nope")).unwrap_err(), Error::NoSuchCollection { name: "nope".into() });
        let (d3, m3) = doc_and_memory("c.txt", &[("Lakes are still. ", "Lakes")]);
        for bad in ["", "  ", "a\nb", &"x".repeat(129), "auto"] {
            let err = lib.add_to(bad, &d3, &m3, &mut e).unwrap_err();
            assert!(matches!(err, Error::BadCollectionName { .. }), "{bad:?}");
        }
        assert_eq!(lib.documents().len(), 2, "a refused name changes nothing");
        // The routing memory is its own key and survives reopening.
        assert_eq!(lib.routing_memory().unwrap(), None);
        let mut memory = crate::route::SymbolicMemory::new();
        memory.describe("climbing", "Peaks".into(), vec!["everest".into()]);
        lib.save_routing_memory(&memory).unwrap();
        let mut lib = Library::open(lib.into_store(), &settings()).unwrap();
        assert_eq!(lib.routing_memory().unwrap(), Some(memory));
        let global = crate::clues::GlobalMemory { text: "# rivers".into(), documents: 2, gist: false };
        lib.save_global_memory("m.gguf", &global).unwrap();
        assert_eq!(lib.cached_global_memory("m.gguf"), Some(global));
        assert_eq!(lib.cached_global_memory("other.gguf"), None);
        assert_eq!(lib.documents()[1].collection, "climbing");
        // A manifest from before collections: every document in the default one.
        let mut store = as_format_1(&lib);
        let manifest = String::from_utf8(store.read(MANIFEST).unwrap().unwrap()).unwrap();
        let old = manifest.replace(",\"collection\":\"geography\"", "").replace(",\"collection\":\"climbing\"", "");
        assert!(!old.contains("collection"));
        store.write(MANIFEST, old.as_bytes()).unwrap();
        let lib = Library::open(store, &settings()).unwrap();
        assert_eq!(lib.collections(), vec![DEFAULT_COLLECTION]);
    }

    #[test]
    fn a_library_keeps_its_piece_limit_and_old_ones_keep_whole_chunks() {
        let mut e = HashingEmbedder::new(64);
        let long = "The Nile flows north into the sea. It floods every summer. Farmers wait for it. ";
        let (d1, m1) = doc_and_memory("nile.txt", &[(long, "Nile")]);
        let cut = LibrarySettings { piece_chars: 40, ..settings() };
        let mut lib = Library::open(MemStore::default(), &cut).unwrap();
        assert!(lib.add(&d1, &m1, &mut e).unwrap());
        assert_eq!(lib.index().chunks(), 3, "three sentences, each its own piece");
        let hits = lib.search("when does it flood", &mut e, &SearchParams::default()).unwrap();
        let top = lib.passage(&hits[0]).unwrap();
        assert_eq!((top.text, top.core), ("It floods every summer. ", "Nile"), "a piece, with its scenario's core");
        // Reopened with other settings, the library keeps its own limit for new documents.
        let mut lib = Library::open(lib.into_store(), &settings()).unwrap();
        assert_eq!(lib.manifest().piece_chars, 40);
        let (d2, m2) = doc_and_memory("nile2.txt", &[(&long.replace("Nile", "Congo"), "Congo")]);
        assert!(lib.add(&d2, &m2, &mut e).unwrap());
        assert_eq!(lib.index().chunks(), 6);
        // A manifest from before pieces reads as 0: whole chunks.
        let mut store = lib.into_store();
        let manifest = String::from_utf8(store.read(MANIFEST).unwrap().unwrap()).unwrap();
        let old = manifest.replace(",\"piece_chars\":40", "");
        assert!(!old.contains("piece_chars"));
        store.write(MANIFEST, old.as_bytes()).unwrap();
        let mut lib = Library::open(store, &settings()).unwrap();
        assert_eq!(lib.manifest().piece_chars, 0);
        let (d3, m3) = doc_and_memory("nile3.txt", &[(&long.replace("Nile", "Niger"), "Niger")]);
        assert!(lib.add(&d3, &m3, &mut e).unwrap());
        assert_eq!(lib.index().chunks(), 7);
    }

    #[test]
    fn a_crash_at_any_write_leaves_the_library_as_it_was() {
        let mut e = HashingEmbedder::new(64);
        let (d1, m1) = rivers();
        let (d2, m2) = peaks();
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        lib.add(&d1, &m1, &mut e).unwrap();
        let before = lib.into_store();
        // Adding writes 4 keys; fail at each in turn.
        for fail_at in 0..4 {
            let mut store = before.clone();
            store.fail_after_writes = Some(fail_at);
            let mut lib = Library::open(store, &settings()).unwrap();
            assert!(lib.add(&d2, &m2, &mut e).is_err());
            assert!(!lib.contains(d2.id), "in memory too");
            let mut store = lib.into_store();
            store.fail_after_writes = None;
            let lib = Library::open(store, &settings()).unwrap();
            assert_eq!(lib.documents().len(), 1, "fail at write {fail_at}");
            assert_eq!(lib.into_store().entries, before.entries, "fail at write {fail_at}: leftovers removed");
        }
    }

    /// rivers.txt as a baseline chunker stores it: one plain chunk per sentence.
    fn rivers_as_chunks() -> (Document, DocumentMemory) {
        let (doc, reader_memory) = rivers();
        let spans: Vec<Span> = reader_memory.scenarios.iter().map(|s| s.span.trim(&doc.text)).collect();
        let chunks = DocumentMemory::from_spans(&doc, &spans, "sentence");
        (doc, chunks)
    }

    #[test]
    fn a_replaced_memory_is_searched_reopened_and_crash_safe() {
        let mut e = HashingEmbedder::new(64);
        let (doc, chunks) = rivers_as_chunks();
        let (_, reader_memory) = rivers();
        let (d2, m2) = peaks();
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        lib.add(&doc, &chunks, &mut e).unwrap();
        lib.add(&d2, &m2, &mut e).unwrap();
        assert_eq!(lib.manifest().format_version, PARTS_FORMAT_VERSION);
        let before = lib.into_store();

        // A crash at each write of the replace (memory, index, manifest) leaves the chunks.
        for fail_at in 0..3 {
            let mut store = before.clone();
            store.fail_after_writes = Some(fail_at);
            let mut lib = Library::open(store, &settings()).unwrap();
            assert!(lib.replace_memory(&reader_memory, &mut e).is_err(), "fail at {fail_at}");
            assert_eq!(lib.get(doc.id).unwrap().1, &chunks, "in memory too");
            let hits = lib.search("Nile", &mut e, &SearchParams::default()).unwrap();
            assert!(lib.passage(&hits[0]).unwrap().core.is_empty(), "the old index still answers");
            let mut store = lib.into_store();
            store.fail_after_writes = None;
            let lib = Library::open(store, &settings()).unwrap();
            assert_eq!(lib.into_store().entries, before.entries, "fail at write {fail_at}: leftovers removed");
        }

        let mut lib = Library::open(before.clone(), &settings()).unwrap();
        assert!(lib.replace_memory(&reader_memory, &mut e).unwrap());
        let hits = lib.search("which river flows north", &mut e, &SearchParams::default()).unwrap();
        let top = lib.passage(&hits[0]).unwrap();
        assert_eq!((top.title, top.core), ("rivers.txt", "Nile"), "the reader's memory is searched");
        let entry = lib.documents().iter().find(|d| d.id == doc.id).unwrap().clone();
        assert_eq!((entry.memory_version, entry.reader.as_str(), entry.scenarios), (1, "test-reader", 2));
        assert_eq!(lib.manifest().format_version, PARTS_FORMAT_VERSION);
        // The other document is untouched; the old memory's key is gone.
        assert_eq!(lib.get(d2.id).unwrap().1, &m2);
        let store = lib.into_store();
        assert!(!store.entries.contains_key(&memory_key(doc.id, 0)));
        assert!(store.entries.contains_key(&memory_key(doc.id, 1)));
        // Reopened, it is the same; a second replace and a removal clean up after themselves.
        let mut lib = Library::open(store, &settings()).unwrap();
        assert_eq!(lib.get(doc.id).unwrap().1, &reader_memory);
        assert!(lib.replace_memory(&chunks, &mut e).unwrap());
        assert!(lib.remove(doc.id).unwrap());
        assert!(!lib.replace_memory(&reader_memory, &mut e).unwrap(), "a removed document is not brought back");
        let store = lib.into_store();
        assert!(!store.entries.keys().any(|k| k.contains(&doc.id.to_string())), "{:?}", store.entries.keys());
    }

    #[test]
    fn a_replacement_that_does_not_fit_its_document_is_refused() {
        let mut e = HashingEmbedder::new(64);
        let (doc, chunks) = rivers_as_chunks();
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        lib.add(&doc, &chunks, &mut e).unwrap();
        let mut bad = chunks.clone();
        bad.scenarios[0].span = Span::new(0, 10_000);
        let err = lib.replace_memory(&bad, &mut e).unwrap_err();
        assert!(matches!(err, Error::BadMemory { .. }), "{err}");
        assert_eq!(crate::HasErrorCode::code(&err), crate::ErrorCode::BadArgument);
        assert_eq!(lib.get(doc.id).unwrap().1, &chunks);
    }

    #[test]
    fn refuses_another_embedder_and_a_newer_format() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        let (d, m) = rivers();
        lib.add(&d, &m, &mut e).unwrap();
        let mut store = lib.into_store();
        let reopened = Library::open_existing(store.clone()).unwrap().unwrap();
        assert_eq!(reopened.documents().len(), 1);
        assert!(Library::open_existing(MemStore::default()).unwrap().is_none());
        let other = LibrarySettings::new("all-MiniLM-L6-v2".into(), 384);
        let err = Library::open(store.clone(), &other).unwrap_err();
        assert!(err.to_string().contains("hashing-64 (64 dimensions)"), "{err}");
        store.entries.insert(MANIFEST.into(), br#"{"format_version": 9}"#.to_vec());
        assert_eq!(Library::open(store.clone(), &settings()).unwrap_err(), Error::LibraryVersion { found: 9 });
        store.entries.insert(MANIFEST.into(), b"not json".to_vec());
        assert!(matches!(Library::open(store, &settings()).unwrap_err(), Error::CorruptLibrary { .. }));
    }

    #[test]
    fn fields_of_a_newer_build_survive_an_older_builds_commits() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        let (d, m) = rivers();
        lib.add(&d, &m, &mut e).unwrap();
        let mut store = lib.into_store();
        let manifest_of = |store: &MemStore| -> serde_json::Value { serde_json::from_slice(&store.entries[MANIFEST]).unwrap() };
        // A newer build added a field to the manifest and one to the document's entry.
        let mut json = manifest_of(&store);
        json["shelf_order"] = serde_json::json!(["b", "a"]);
        store.entries.insert(MANIFEST.into(), serde_json::to_vec(&json).unwrap());
        let key = fresh_key(json["fresh"][0].as_u64().unwrap());
        let (mut entries, index) = {
            let (entries, index) = open_envelope(&store.entries[&key]).unwrap();
            (entries, index.to_vec())
        };
        entries[0].unknown.insert("pinned".into(), serde_json::json!({"by": "tab 2"}));
        store.entries.insert(key, envelope(&[&entries[0]], &index));

        let mut lib = Library::open(store, &settings()).unwrap();
        let doc = Document::new("b.txt", "The second document is about lakes and their depth.");
        let memory = DocumentMemory::from_spans(&doc, &[Span::new(0, doc.text.len())], "fixed");
        lib.add(&doc, &memory, &mut e).unwrap();
        // Sealed into a part, the entries are written again: the unknown field with them.
        lib.compact().unwrap();
        let store = lib.into_store();
        let json = manifest_of(&store);
        assert_eq!(json["shelf_order"], serde_json::json!(["b", "a"]));
        assert_eq!(json["parts"].as_array().unwrap().len(), 1);
        assert!(json["fresh"].as_array().unwrap().is_empty());
        let part = part_key(json["parts"][0]["id"].as_u64().unwrap());
        let (entries, _) = open_envelope(&store.entries[&part]).unwrap();
        assert_eq!(entries[0].unknown["pinned"], serde_json::json!({"by": "tab 2"}));
        assert!(entries[1].unknown.is_empty());

        let mut lib = Library::open(store, &settings()).unwrap();
        assert_eq!(lib.documents()[0].unknown["pinned"], serde_json::json!({"by": "tab 2"}));
        assert!(lib.remove(doc.id).unwrap());
        let store_of_removed_check = lib.into_store();
        let json = manifest_of(&store_of_removed_check);
        assert_eq!(json["shelf_order"], serde_json::json!(["b", "a"]));
        assert_eq!(json["parts"][0]["removed"], serde_json::json!(1));
        let listed = removed_key(json["parts"][0]["id"].as_u64().unwrap(), json["parts"][0]["removed_key"].as_u64().unwrap());
        let removed: Vec<DocId> = serde_json::from_slice(&store_of_removed_check.entries[&listed]).unwrap();
        assert_eq!(removed, [doc.id]);
    }

    /// A [`MemStore`] that counts the bytes written to it.
    #[derive(Default)]
    struct Counting {
        inner: MemStore,
        written: usize,
    }

    impl Store for Counting {
        fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
            self.inner.read(key)
        }
        fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), Error> {
            self.written += bytes.len();
            self.inner.write(key, bytes)
        }
        fn remove(&mut self, key: &str) -> Result<(), Error> {
            self.inner.remove(key)
        }
        fn keys(&mut self) -> Result<Vec<String>, Error> {
            self.inner.keys()
        }
    }

    /// Document `i` of a made-up collection: three sentences of words of its own.
    fn numbered(i: usize) -> (Document, DocumentMemory) {
        let text =
            format!("Record {i} tells of the harbour w{i}a. Its ships carried w{i}b to the coast. The town of w{i}c kept the ledger. ");
        let doc = Document::new(format!("record-{i}.txt"), text);
        let mut spans = Vec::new();
        let mut at = 0;
        for s in doc.text.split_inclusive(". ") {
            spans.push(Span::new(at, at + s.len()));
            at += s.len();
        }
        let memory = DocumentMemory::from_spans(&doc, &spans, "sentence");
        (doc, memory)
    }

    fn small_parts() -> LibrarySettings {
        LibrarySettings { part_vectors: 24, ..settings() }
    }

    #[test]
    fn an_add_writes_what_it_adds_however_large_the_library() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(Counting::default(), &small_parts()).unwrap();
        let mut per_add = Vec::new();
        for i in 0..640 {
            let (doc, memory) = numbered(i);
            let before = lib.store_mut().written;
            assert!(lib.add(&doc, &memory, &mut e).unwrap());
            per_add.push(lib.store_mut().written - before);
        }
        // 3 vectors a document, 8 documents a part, 8 parts a merge: by the end the
        // library holds tier-1 parts, tier-0 parts and fresh documents.
        let mean = |xs: &[usize]| xs.iter().sum::<usize>() as f64 / xs.len() as f64;
        let (first, last) = (mean(&per_add[..64]), mean(&per_add[per_add.len() - 64..]));
        assert!(last < 1.25 * first, "bytes per add grew from {first:.0} to {last:.0}");
        // Every byte is written a bounded number of times: once on its own, once sealed,
        // once merged, plus the manifest each time.
        let stored: usize = lib.store_mut().inner.entries.values().map(Vec::len).sum();
        let total = lib.store_mut().written;
        assert!(total < 6 * stored, "{total} bytes written for a library of {stored}");
        let manifest = lib.store_mut().inner.entries[MANIFEST].len();
        assert!(manifest < 4096, "the manifest is {manifest} bytes");
        let tiers: Vec<u32> = lib.stored_parts.iter().map(|p| p.tier).collect();
        assert!(tiers.contains(&1) && tiers.len() < 2 * layout::MERGE_FACTOR + 2, "{tiers:?}");

        // Every document is found by its own words, and again after reopening.
        let check = |lib: &Library<Counting>, e: &mut HashingEmbedder| {
            assert_eq!(lib.documents().len(), 640);
            for i in (0..640).step_by(37) {
                let hits = lib.search(&format!("Its ships carried w{i}b to the coast."), e, &SearchParams::default()).unwrap();
                assert_eq!(lib.passage(&hits[0]).unwrap().title, format!("record-{i}.txt"), "w{i}b");
                // (The hashing embedder gives every record's sentence about the same vector.)
                assert!(hits[0].ranks.iter().all(|r| r.rank == 1 || r.score > 0.999), "{:?}", hits[0].ranks);
            }
        };
        check(&lib, &mut e);
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        check(&lib, &mut e);
        assert_eq!(lib.documents()[0].title, "record-0.txt", "in the order added");
        assert_eq!(lib.documents()[639].title, "record-639.txt");
    }

    #[test]
    fn documents_in_parts_are_removed_replaced_and_crash_safe() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        for i in 0..41 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        assert!(lib.stored_parts.len() >= 4);
        let (d3, _) = numbered(3);
        let (d39, _) = numbered(40);
        assert_eq!(lib.index().part_of(d39.id), Some(None), "the last one is fresh");
        assert!(matches!(lib.index().part_of(d3.id), Some(Some(_))));
        let before = lib.into_store();

        // Each write of a removal, and of a replacement, may fail: the library is as it was.
        let (_, m3) = numbered(3);
        let mut replacement = m3.clone();
        replacement.scenarios[0].core = "The harbour's trade.".into();
        // A removal writes the manifest; a replacement the memory, its entries, the manifest.
        for (replace, fail_at) in [(false, 0), (true, 0), (true, 1), (true, 2)] {
            let mut store = before.clone();
            store.fail_after_writes = Some(fail_at);
            let mut lib = Library::open(store, &small_parts()).unwrap();
            if replace {
                assert!(lib.replace_memory(&replacement, &mut e).is_err(), "fail at {fail_at}");
            } else {
                assert!(lib.remove(d3.id).is_err());
            }
            let hits = lib.search("w3a", &mut e, &SearchParams::default()).unwrap();
            assert!(lib.passage(&hits[0]).unwrap().core.is_empty(), "in memory too");
            let mut store = lib.into_store();
            store.fail_after_writes = None;
            assert_eq!(store.entries, before.entries, "fail at {fail_at}: leftovers removed");
        }

        let mut lib = Library::open(before.clone(), &small_parts()).unwrap();
        assert!(lib.remove(d3.id).unwrap());
        assert!(lib.remove(d39.id).unwrap());
        let (d5, m5) = numbered(5);
        let mut m5b = m5.clone();
        m5b.outline = alloc::vec!["Shipping ledgers".into()];
        for s in &mut m5b.scenarios {
            s.outline_item = Some(0);
            s.core = "Trade of the coast".into();
        }
        assert!(lib.replace_memory(&m5b, &mut e).unwrap());
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        assert_eq!(lib.documents().len(), 39);
        for gone in ["w3a", "w40b"] {
            let hits = lib.search(gone, &mut e, &SearchParams::default()).unwrap();
            assert!(hits.iter().all(|h| h.doc_id != d3.id && h.doc_id != d39.id), "{gone}");
        }
        assert_eq!(lib.get(d5.id).unwrap().1, &m5b);
        let hits = lib.search("shipping ledgers", &mut e, &SearchParams::default()).unwrap();
        let outline = |h: &RetrievedChunk| h.ranks.iter().any(|r| r.layer == crate::retrieve::Layer::Outline);
        assert!(hits.iter().filter(|h| outline(h)).all(|h| h.doc_id == d5.id) && hits.iter().any(outline), "{hits:?}");
        assert_eq!(lib.documents().iter().position(|d| d.id == d5.id), Some(4), "a replaced memory keeps its place");
        // Compacting leaves one part and nothing removed; the store holds only live keys.
        let mut lib = lib;
        lib.compact().unwrap();
        assert_eq!((lib.stored_parts.len(), lib.fresh_keys.len()), (1, 0));
        let store = lib.into_store();
        let index_keys = store.entries.keys().filter(|k| k.starts_with("index/")).count();
        assert_eq!(index_keys, 1);
        assert_eq!(store.entries.len(), 1 + 1 + 2 * 39);
        let lib = Library::open(store, &small_parts()).unwrap();
        assert_eq!(lib.search("w7c", &mut e, &SearchParams::default()).unwrap()[0].doc_id, numbered(7).0.id);
    }

    #[test]
    fn a_draft_outlives_a_reopen_and_goes_with_its_memory_or_document() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        let (d1, m1) = rivers();
        let (d2, m2) = peaks();
        lib.add(&d1, &m1, &mut e).unwrap();
        lib.add(&d2, &m2, &mut e).unwrap();
        let (d3, _) = numbered(3);
        for id in [d1.id, d2.id, d3.id] {
            lib.save_draft(id, format!("draft of {id}").as_bytes()).unwrap();
        }
        let generation = lib.manifest().generation;
        let mut lib = Library::open(lib.into_store(), &settings()).unwrap();
        assert_eq!(lib.manifest().generation, generation, "a draft is no change to the library");
        assert_eq!(lib.stored_draft(d1.id).unwrap().unwrap(), format!("draft of {}", d1.id).as_bytes());
        assert!(lib.stored_draft(d3.id).unwrap().is_some(), "a document not added yet keeps its draft");
        assert!(lib.replace_memory(&m1, &mut e).unwrap());
        assert_eq!(lib.stored_draft(d1.id).unwrap(), None, "gone with the memory it was for");
        assert!(lib.remove(d2.id).unwrap());
        assert_eq!(lib.stored_draft(d2.id).unwrap(), None, "gone with its document");
        lib.remove_draft(d3.id).unwrap();
        lib.remove_draft(d3.id).unwrap();
        assert!(lib.into_store().entries.keys().all(|k| !k.starts_with("drafts/")));
    }

    #[test]
    fn a_journal_store_that_released_the_index_works_on_and_its_journal_reopens() {
        // The host's storage: what the journal is applied to, as the page applies it to
        // IndexedDB after each operation.
        fn apply(host: &mut BTreeMap<String, Vec<u8>>, lib: &mut Library<JournalStore>) {
            for (key, bytes) in lib.store_mut().take_journal() {
                match bytes {
                    Some(b) => host.insert(key, b),
                    None => host.remove(&key),
                };
            }
        }
        let mut e = HashingEmbedder::new(64);
        let mut host = BTreeMap::new();
        // A library of the one-blob format opens from a releasing store too (and is
        // rewritten as parts, its old index read once).
        let mut old = Library::open(MemStore::default(), &settings()).unwrap();
        old.add(&rivers().0, &rivers().1, &mut e).unwrap();
        let legacy = JournalStore::from_entries(as_format_1(&old).entries).releasing(read_only_at_open);
        let legacy = Library::open(legacy, &settings()).unwrap();
        assert_eq!(legacy.search("Nile", &mut e, &SearchParams::default()).unwrap()[0].doc_id, rivers().0.id);

        let mut lib = Library::open(JournalStore::default(), &small_parts()).unwrap();
        for i in 0..300 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
            apply(&mut host, &mut lib);
            if i == 120 {
                // Reopened from the host's storage, as a reload does, and released.
                let mut reopened = Library::open(JournalStore::from_entries(host.clone()), &small_parts()).unwrap();
                reopened.store_mut().release(read_only_at_open);
                assert!(reopened.store_mut().has_released());
                lib = reopened;
            }
            if i == 200 {
                // Reopened giving each index key up as it is read.
                let store = JournalStore::from_entries(host.clone()).releasing(read_only_at_open);
                let mut reopened = Library::open(store, &small_parts()).unwrap();
                assert!(reopened.store_mut().entries().keys().all(|k| !read_only_at_open(k)), "every index key was read once and given up");
                lib = reopened;
            }
        }
        assert!(lib.stored_parts.iter().any(|p| p.tier == 1), "merged parts, written after the release");
        let (d7, _) = numbered(7);
        assert!(lib.remove(d7.id).unwrap());
        let (d250, m250) = numbered(250);
        let mut replacement = m250.clone();
        replacement.scenarios[0].core = "The harbour's trade.".into();
        assert!(lib.replace_memory(&replacement, &mut e).unwrap());
        apply(&mut host, &mut lib);

        // The store holds no index bytes, lists every key the host holds, and a read of a
        // released key is an error rather than a missing key.
        let store = lib.store_mut();
        assert!(store.entries().keys().all(|k| !read_only_at_open(k)), "no index bytes held");
        let held: usize = store.entries().values().map(Vec::len).sum();
        let hosted: usize = host.values().map(Vec::len).sum();
        assert!(held * 2 < hosted, "{held} of {hosted} bytes held");
        assert_eq!(store.keys().unwrap(), host.keys().cloned().collect::<Vec<_>>());
        let part = host.keys().find(|k| k.starts_with("index/parts/")).unwrap().clone();
        assert!(matches!(store.read(&part), Err(Error::Storage { .. })));

        // Searches agree with the library reopened from the host's storage.
        let again = Library::open(JournalStore::from_entries(host.clone()), &small_parts()).unwrap();
        assert_eq!(again.documents().len(), 299);
        for q in ["w3a", "w7b", "w250c", "The harbour's trade.", "w299b"] {
            let ours = lib.search(q, &mut e, &SearchParams::default()).unwrap();
            let theirs = again.search(q, &mut e, &SearchParams::default()).unwrap();
            let ids = |hs: &[RetrievedChunk]| hs.iter().map(|h| (h.doc_id, h.span)).collect::<Vec<_>>();
            assert_eq!(ids(&ours), ids(&theirs), "{q}");
        }
        assert!(again.search("w7b", &mut e, &SearchParams::default()).unwrap().iter().all(|h| h.doc_id != d7.id));
        assert_eq!(again.get(d250.id).unwrap().1, &replacement);
        // Documents stay readable: they are read when first needed, after the release.
        let hits = lib.search("w5a", &mut e, &SearchParams::default()).unwrap();
        assert_eq!(lib.passage(&hits[0]).unwrap().title, "record-5.txt");
        lib.compact().unwrap();
        apply(&mut host, &mut lib);
        let compacted = Library::open(JournalStore::from_entries(host), &small_parts()).unwrap();
        assert_eq!(compacted.stored_parts.len(), 1);
        assert_eq!(compacted.search("w42c", &mut e, &SearchParams::default()).unwrap()[0].doc_id, numbered(42).0.id);
    }

    #[test]
    fn a_batch_lands_whole_or_not_at_all() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        for i in 0..3 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        let before = lib.store_mut().clone();
        lib.begin_batch();
        for i in 3..20 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        let (d5, _) = numbered(5);
        assert!(lib.remove(d5.id).unwrap());
        // Searched at once, though not yet stored: the manifest is the one before the batch.
        let hits = lib.search("Its ships carried w12b to the coast.", &mut e, &SearchParams::default()).unwrap();
        assert_eq!(lib.passage(&hits[0]).unwrap().title, "record-12.txt");
        assert_eq!(lib.store_mut().entries[MANIFEST], before.entries[MANIFEST]);
        // A crash now: the library is as it was, and the batch's keys go at the next open.
        let crashed = Library::open(lib.store_mut().clone(), &small_parts()).unwrap();
        assert_eq!(crashed.documents().len(), 3);
        assert_eq!(crashed.into_store().entries, before.entries);
        // A failed finish keeps the batch open; the next one lands it, in one manifest.
        lib.store_mut().fail_after_writes = Some(0);
        assert!(lib.finish_batch().is_err());
        lib.store_mut().fail_after_writes = None;
        lib.finish_batch().unwrap();
        lib.finish_batch().unwrap();
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        assert_eq!(lib.documents().len(), 19);
        assert!(!lib.contains(d5.id));
        let hits = lib.search("Its ships carried w17b to the coast.", &mut e, &SearchParams::default()).unwrap();
        assert_eq!(lib.passage(&hits[0]).unwrap().title, "record-17.txt");
        let keys = lib.into_store().entries;
        assert!(!keys.keys().any(|k| k.contains(&d5.id.to_string())), "the removed document's keys are gone");
    }

    #[test]
    fn a_batch_that_removes_and_adds_back_keeps_the_document() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        let (d1, m1) = numbered(1);
        let (d2, m2) = numbered(2);
        lib.add(&d1, &m1, &mut e).unwrap();
        lib.add(&d2, &m2, &mut e).unwrap();
        lib.begin_batch();
        assert!(lib.remove(d1.id).unwrap());
        // The add back fails once (its keys are the ones the stored manifest names): they
        // stay.
        lib.store_mut().fail_after_writes = Some(2);
        assert!(lib.add(&d1, &m1, &mut e).is_err());
        assert!(Library::open(lib.store_mut().clone(), &small_parts()).unwrap().get(d1.id).is_ok());
        lib.store_mut().fail_after_writes = None;
        assert!(lib.add(&d1, &m1, &mut e).unwrap());
        lib.finish_batch().unwrap();
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        assert_eq!(lib.get(d1.id).unwrap().1, &m1, "its files were not removed at the batch's end");
        assert_eq!(lib.documents().len(), 2);
    }

    #[test]
    fn an_older_library_whose_rewrite_failed_is_stored_by_the_next_change_not_lost() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        for i in 0..5 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        let mut old = as_format_1(&lib);
        old.fail_after_writes = Some(0);
        let mut lib = Library::open(old.clone(), &small_parts()).unwrap();
        lib.store_mut().fail_after_writes = None;
        // A batch that changed nothing writes nothing.
        lib.begin_batch();
        lib.finish_batch().unwrap();
        old.fail_after_writes = None;
        assert_eq!(lib.store_mut().entries, old.entries);
        // One that did stores the older library's part with it.
        lib.begin_batch();
        let (doc, memory) = numbered(5);
        lib.add(&doc, &memory, &mut e).unwrap();
        lib.finish_batch().unwrap();
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        assert_eq!(lib.documents().len(), 6);
        let titles: Vec<&str> = lib.documents().iter().map(|d| d.title.as_str()).collect();
        assert_eq!(titles, ["record-0.txt", "record-1.txt", "record-2.txt", "record-3.txt", "record-4.txt", "record-5.txt"]);
        assert!(lib.get(numbered(0).0.id).is_ok());
    }

    #[test]
    fn a_merge_built_in_slices_stores_the_part_built_at_once() {
        let mut e = HashingEmbedder::new(64);
        let mut libs = [(); 2].map(|_| {
            let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
            lib.set_background_merges(true);
            for i in 0..70 {
                let (doc, memory) = numbered(i);
                lib.add(&doc, &memory, &mut e).unwrap();
            }
            lib
        });
        let at_once = libs[0].merge_job().expect("a merge is due").run();
        let mut sliced = libs[1].merge_job().expect("a merge is due");
        let (total, mut slices) = (sliced.vectors(), 0);
        while !sliced.step(5) {
            slices += 1;
            assert_eq!(sliced.vectors(), total - 5 * slices);
        }
        assert!(slices >= total / 5 - 1, "{slices} slices for {total} vectors");
        assert!(libs[0].apply_merge(at_once).unwrap());
        assert!(libs[1].apply_merge(sliced.run()).unwrap());
        let [a, b] = libs.map(Library::into_store);
        assert_eq!(a.entries, b.entries);
    }

    #[test]
    fn merges_built_elsewhere_land_and_keep_what_was_removed_meanwhile() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        lib.set_background_merges(true);
        for i in 0..70 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        assert!(lib.stored_parts.len() >= layout::MERGE_FACTOR, "no merge made in a change");
        let job = lib.merge_job().expect("a merge is due");
        assert!(lib.merge_job().is_none(), "one at a time");
        // Meanwhile: a document of a merged part is removed, and more are added.
        let (d2, _) = numbered(2);
        assert!(lib.index().part_of(d2.id).flatten().is_some_and(|p| job.parts().contains(&p)));
        assert!(lib.remove(d2.id).unwrap());
        for i in 70..80 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        let merged = std::thread::spawn(move || job.run()).join().unwrap();
        assert!(lib.apply_merge(merged).unwrap());
        assert!(lib.stored_parts.iter().any(|p| p.tier == 1));
        let check = |lib: &Library<MemStore>, e: &mut HashingEmbedder| {
            assert_eq!(lib.documents().len(), 79);
            let hits = lib.search("Record 2 tells of the harbour w2a.", e, &SearchParams::default()).unwrap();
            assert!(hits.iter().all(|h| h.doc_id != d2.id), "removed while merging, and still removed");
            for i in [0, 9, 33, 75] {
                let hits = lib.search(&format!("Its ships carried w{i}b to the coast."), e, &SearchParams::default()).unwrap();
                assert_eq!(lib.passage(&hits[0]).unwrap().title, format!("record-{i}.txt"));
            }
        };
        check(&lib, &mut e);
        let lib = Library::open(lib.into_store(), &small_parts()).unwrap();
        check(&lib, &mut e);
        // A merge whose parts went meanwhile is refused and changes nothing.
        let mut lib = lib;
        lib.set_background_merges(true);
        for i in 80..200 {
            let (doc, memory) = numbered(i);
            lib.add(&doc, &memory, &mut e).unwrap();
        }
        let job = lib.merge_job().expect("another merge is due");
        lib.compact().unwrap();
        assert!(!lib.apply_merge(job.run()).unwrap());
        assert_eq!(lib.index().parts().len(), 1);
    }

    #[test]
    fn a_library_of_the_blob_format_is_rewritten_as_parts() {
        let mut e = HashingEmbedder::new(64);
        let mut lib = Library::open(MemStore::default(), &small_parts()).unwrap();
        for i in 0..20 {
            let (doc, memory) = numbered(i);
            lib.add_to(if i % 2 == 0 { "even" } else { "odd" }, &doc, &memory, &mut e).unwrap();
        }
        let old = as_format_1(&lib);
        let queries = ["w4a", "w11c", "harbour ships"];
        let answers: Vec<_> = queries.iter().map(|q| lib.search(q, &mut e, &SearchParams::default()).unwrap()).collect();

        // A store that fails every write: it still opens, as it was, and nothing is lost.
        let mut failing = old.clone();
        failing.fail_after_writes = Some(0);
        let lib = Library::open(failing, &small_parts()).unwrap();
        assert_eq!(lib.documents().len(), 20);
        assert_eq!(lib.into_store().entries, old.entries);

        let lib = Library::open(old.clone(), &small_parts()).unwrap();
        for (q, want) in queries.iter().zip(&answers) {
            let got = lib.search(q, &mut e, &SearchParams::default()).unwrap();
            assert_eq!(
                got.iter().map(|h| (h.doc_id, h.span)).collect::<Vec<_>>()[..3],
                want.iter().map(|h| (h.doc_id, h.span)).collect::<Vec<_>>()[..3],
                "{q}"
            );
        }
        let store = lib.into_store();
        let manifest: serde_json::Value = serde_json::from_slice(&store.entries[MANIFEST]).unwrap();
        assert_eq!(manifest["format_version"], PARTS_FORMAT_VERSION);
        assert!(manifest.get("documents").is_none());
        assert!(!store.entries.contains_key(&index_key(7)), "the blob is gone once the parts are stored");
        let lib = Library::open(store, &small_parts()).unwrap();
        assert_eq!(lib.collections(), ["even", "odd"]);
        assert_eq!(lib.documents()[13].title, "record-13.txt");
        let kept = lib.search_in("harbour", &mut e, &SearchParams::default(), Some("odd")).unwrap();
        assert!(!kept.is_empty() && kept.iter().all(|h| lib.documents().iter().any(|d| d.id == h.doc_id && d.collection == "odd")));
    }

    #[test]
    fn baseline_chunks_that_overlap_are_accepted() {
        let mut e = HashingEmbedder::new(64);
        let doc = Document::new("a.txt", "one two three four five six");
        let m = DocumentMemory::from_spans(&doc, &[Span::new(0, 13), Span::new(8, 27)], "fixed");
        let mut lib = Library::open(MemStore::default(), &settings()).unwrap();
        assert!(lib.add(&doc, &m, &mut e).unwrap());
        assert_eq!(lib.documents()[0].reader, "fixed");
        let _ = vec![0u8];
    }
}
