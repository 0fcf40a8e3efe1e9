//! A library: documents, their memories, and the index over them, kept in a [`Store`].
//!
//! # Layout (format version 1)
//! - `manifest.json`: format version, generation, embedder, retrieval mode, and one entry
//!   per document. It is the only key whose contents say what the library holds.
//! - `documents/<id>.json`, `memories/<id>.json`: each document and its memory.
//! - `index/<generation>.bin`: the [`MemoryIndex`] of that generation.
//! - `routing.json`: the router's symbolic memory ([`crate::route::SymbolicMemory`]), if
//!   routing was ever used. Written on its own (one key, so atomically) after an answer;
//!   it describes how searches went, not what the library holds, so it is not part of a
//!   generation.
//! - `global.json`: the global memory of clue-guided retrieval ([`crate::clues`]), with the
//!   generation and model it was made for; stale once either changes.
//!
//! # Collections
//! Each document belongs to one named collection ([`DEFAULT_COLLECTION`] unless given):
//! the corpora that routing ([`crate::route`]) chooses among. One index serves them all;
//! a search can be kept to one collection ([`Library::search_in`]). A manifest written
//! before collections existed reads as every document in the default one.
//!
//! # Why a change is atomic
//! A change writes new keys first (the document, its memory, the next generation's index)
//! and the manifest last; a single key's write is atomic in every store. A crash before
//! the manifest's write leaves the old manifest naming the old index, so the library is
//! exactly as it was; the orphaned keys are removed the next time it is opened. The
//! index is rewritten whole on each change: simple and safe, and cheap next to reading a
//! document with an LM (a library of tens of thousands of chunks would want an
//! append-only log here instead).
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

pub mod salvage;
pub mod store;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

pub use salvage::{salvage, Salvage, SalvagedDocument};
pub use store::{archive, unarchive, JournalStore, MemStore, Store};

use crate::document::{DocId, Document};
use crate::embed::Embedder;
use crate::index::SegmentParams;
use crate::memory::DocumentMemory;
use crate::pieces::DEFAULT_PIECE_CHARS;
use crate::retrieve::{MemoryIndex, RetrievalMode, RetrievedChunk, SearchParams, SearchScratch};
use crate::span::Span;
use crate::Error;

/// The library format version this build writes and reads.
pub const LIBRARY_FORMAT_VERSION: u32 = 1;

/// The format version of a library in which a document's memory has been replaced
/// ([`Library::replace_memory`]): its memory then lives under a versioned key that a build
/// reading only version 1 would not look for, so such a manifest says 2 and that build
/// refuses it with a clear error instead of pairing a new index with an old memory. This
/// build reads both and writes 1 until a memory is replaced.
pub const REPLACED_MEMORY_FORMAT_VERSION: u32 = 2;

fn reads_version(v: u32) -> bool {
    v == LIBRARY_FORMAT_VERSION || v == REPLACED_MEMORY_FORMAT_VERSION
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
    /// Fields written by a newer build that this one does not know, kept as they were and
    /// written back on every commit (see the module docs).
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// The manifest: everything needed to read the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`LIBRARY_FORMAT_VERSION`] when written.
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
}

impl LibrarySettings {
    /// A new library's defaults for an embedder: three-layer retrieval, long chunks
    /// searched by pieces of at most [`DEFAULT_PIECE_CHARS`].
    pub fn new(embedder: String, dim: usize) -> Self {
        LibrarySettings { embedder, dim, mode: RetrievalMode::ThreeLayer, piece_chars: DEFAULT_PIECE_CHARS }
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
fn index_key(generation: u64) -> String {
    format!("index/{generation}.bin")
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
    store: S,
    manifest: Manifest,
    documents: BTreeMap<DocId, (Document, DocumentMemory)>,
    index: MemoryIndex,
    segments: SegmentParams,
}

impl<S: Store> Library<S> {
    /// Open the library in `store`, or start an empty one there (nothing is written until
    /// the first change). An existing library must have been built with `settings`'
    /// embedder; its own retrieval mode is kept. Keys left by an interrupted change are
    /// removed.
    pub fn open(mut store: S, settings: &LibrarySettings) -> Result<Self, Error> {
        let segments = SegmentParams::default();
        let Some(bytes) = store.read(MANIFEST)? else {
            let manifest = Manifest {
                format_version: LIBRARY_FORMAT_VERSION,
                generation: 0,
                embedder: settings.embedder.clone(),
                dim: settings.dim,
                mode: settings.mode,
                piece_chars: settings.piece_chars,
                documents: Vec::new(),
                unknown: BTreeMap::new(),
            };
            let index = MemoryIndex::new(settings.mode, settings.dim, segments.clone()).with_piece_chars(settings.piece_chars);
            let mut lib = Library { store, manifest, documents: BTreeMap::new(), index, segments };
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
        let manifest: Manifest = decode(MANIFEST, Some(bytes))?;
        if manifest.embedder != settings.embedder || manifest.dim != settings.dim {
            return Err(Error::EmbedderMismatch {
                library: format!("{} ({} dimensions)", manifest.embedder, manifest.dim),
                given: format!("{} ({} dimensions)", settings.embedder, settings.dim),
            });
        }
        let mut documents = BTreeMap::new();
        for e in &manifest.documents {
            let (dk, mk) = (document_key(e.id), memory_key(e.id, e.memory_version));
            let doc: Document = decode(&dk, store.read(&dk)?)?;
            let memory: DocumentMemory = decode(&mk, store.read(&mk)?)?;
            documents.insert(e.id, (doc, memory));
        }
        let ik = index_key(manifest.generation);
        let index = match store.read(&ik)? {
            Some(bytes) => MemoryIndex::from_bytes(&bytes, segments.clone())
                .map_err(|e| Error::CorruptLibrary { key: ik.clone(), message: format!("{e}") })?,
            None if manifest.documents.is_empty() => MemoryIndex::new(manifest.mode, manifest.dim, segments.clone()),
            None => return Err(Error::CorruptLibrary { key: ik, message: "missing".into() }),
        }
        .with_piece_chars(manifest.piece_chars);
        let mut lib = Library { store, manifest, documents, index, segments };
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
        if !self.store.sole_writer() {
            return;
        }
        let Ok(keys) = self.store.keys() else { return };
        let live_index = index_key(self.manifest.generation);
        for key in keys {
            let live = key == MANIFEST
                || key == live_index
                || self.manifest.documents.iter().any(|e| key == document_key(e.id) || key == memory_key(e.id, e.memory_version));
            let ours = key.starts_with("documents/") || key.starts_with("memories/") || key.starts_with("index/");
            if ours && !live {
                let _ = self.store.remove(&key);
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
        self.documents.get(&id).map(|(d, m)| (d, m)).ok_or(Error::NoSuchDocument { id })
    }

    /// The index (for searches with a caller's own vectors or parameters).
    pub fn index(&self) -> &MemoryIndex {
        &self.index
    }

    /// The store, for what it offers beside [`Store`] (a [`JournalStore`]'s journal, say).
    /// Writing keys through it bypasses the library: don't.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The store, given back.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Write the next generation: the keys in `extra` first, then the index, then the
    /// manifest. On failure the manifest is unchanged, and the new keys are removed.
    fn commit(&mut self, manifest: Manifest, extra: &[(String, Vec<u8>)]) -> Result<(), Error> {
        let ik = index_key(manifest.generation);
        let mut written: Vec<String> = Vec::new();
        let mut result = Ok(());
        for (key, bytes) in extra.iter().map(|(k, b)| (k.clone(), b.clone())).chain([(ik.clone(), self.index.to_bytes())]) {
            if let Err(e) = self.store.write(&key, &bytes) {
                result = Err(e);
                break;
            }
            written.push(key);
        }
        if result.is_ok() {
            result = self.store.write(MANIFEST, &encode(&manifest));
        }
        if let Err(e) = result {
            for key in written {
                let _ = self.store.remove(&key);
            }
            return Err(e);
        }
        let _ = self.store.remove(&index_key(self.manifest.generation));
        self.manifest = manifest;
        Ok(())
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
        let added = if memory.check(doc).is_ok() {
            self.index.add_document(doc, memory, embedder)?
        } else {
            self.index.add_chunks(doc, memory, embedder)?
        };
        if !added {
            return Ok(false);
        }
        let mut manifest = self.manifest.clone();
        manifest.generation += 1;
        manifest.documents.push(DocumentEntry {
            id: doc.id,
            title: doc.title.clone(),
            language: doc.language.clone(),
            bytes: doc.text.len(),
            scenarios: memory.scenarios.len(),
            reader: memory.provenance.reader.clone(),
            fallback: memory.provenance.fallback.clone(),
            collection: collection.into(),
            memory_version: 0,
            unknown: BTreeMap::new(),
        });
        let extra = [(document_key(doc.id), encode(doc)), (memory_key(doc.id, 0), encode(memory))];
        if let Err(e) = self.commit(manifest, &extra) {
            self.index.remove_document(doc.id);
            return Err(e);
        }
        self.documents.insert(doc.id, (doc.clone(), memory.clone()));
        Ok(true)
    }

    /// Remove a document from every layer and delete its files. Returns false when it was
    /// not there. On error the library is as it was.
    pub fn remove(&mut self, id: DocId) -> Result<bool, Error> {
        if !self.documents.contains_key(&id) {
            return Ok(false);
        }
        let version = self.manifest.documents.iter().find(|e| e.id == id).map_or(0, |e| e.memory_version);
        let before = self.index.to_bytes();
        self.index.remove_document(id);
        let mut manifest = self.manifest.clone();
        manifest.generation += 1;
        manifest.documents.retain(|e| e.id != id);
        if let Err(e) = self.commit(manifest, &[]) {
            if let Ok(index) = MemoryIndex::from_bytes(&before, self.segments.clone()) {
                self.index = index.with_piece_chars(self.manifest.piece_chars);
            }
            return Err(e);
        }
        self.documents.remove(&id);
        let _ = self.store.remove(&document_key(id));
        let _ = self.store.remove(&memory_key(id, version));
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
        let Some((doc, _)) = self.documents.get(&id) else { return Ok(false) };
        let doc = doc.clone();
        memory.check_chunks(&doc).map_err(|why| Error::BadMemory { why: Box::new(why) })?;
        let Some(old_version) = self.manifest.documents.iter().find(|e| e.id == id).map(|e| e.memory_version) else {
            return Ok(false);
        };
        let before = self.index.to_bytes();
        let restore = |lib: &mut Self| {
            if let Ok(index) = MemoryIndex::from_bytes(&before, lib.segments.clone()) {
                lib.index = index.with_piece_chars(lib.manifest.piece_chars);
            }
        };
        self.index.remove_document(id);
        let added = if memory.check(&doc).is_ok() {
            self.index.add_document(&doc, memory, embedder)
        } else {
            self.index.add_chunks(&doc, memory, embedder)
        };
        if let Err(e) = added {
            restore(self);
            return Err(e);
        }
        let mut manifest = self.manifest.clone();
        manifest.generation += 1;
        let version = old_version + 1;
        if let Some(entry) = manifest.documents.iter_mut().find(|e| e.id == id) {
            entry.memory_version = version;
            entry.scenarios = memory.scenarios.len();
            entry.reader = memory.provenance.reader.clone();
            entry.fallback = memory.provenance.fallback.clone();
        }
        manifest.format_version = REPLACED_MEMORY_FORMAT_VERSION;
        if let Err(e) = self.commit(manifest, &[(memory_key(id, version), encode(memory))]) {
            restore(self);
            return Err(e);
        }
        let _ = self.store.remove(&memory_key(id, old_version));
        self.documents.insert(id, (doc, memory.clone()));
        Ok(true)
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
        let Some(bytes) = self.store.read(ROUTING)? else { return Ok(None) };
        decode(ROUTING, Some(bytes)).map(Some)
    }

    /// Save the router's symbolic memory (one key, written atomically; the documents and
    /// the index are untouched).
    pub fn save_routing_memory(&mut self, memory: &crate::route::SymbolicMemory) -> Result<(), Error> {
        self.store.write(ROUTING, &encode(memory))
    }

    /// The global memory saved for this generation of the library and `model`, if any.
    pub fn cached_global_memory(&mut self, model: &str) -> Option<crate::clues::GlobalMemory> {
        let bytes = self.store.read(GLOBAL).ok()??;
        let saved: SavedGlobalMemory = serde_json::from_slice(&bytes).ok()?;
        (saved.generation == self.manifest.generation && saved.model == model).then_some(saved.memory)
    }

    /// Save the global memory made by `model` for this generation (one key, atomically).
    pub fn save_global_memory(&mut self, model: &str, memory: &crate::clues::GlobalMemory) -> Result<(), Error> {
        let saved = SavedGlobalMemory { generation: self.manifest.generation, model: model.into(), memory: memory.clone() };
        self.store.write(GLOBAL, &encode(&saved))
    }

    /// The windows of text around `hits` that the answerer reads (small-to-big; see
    /// [`crate::context`]), with `measure` giving a text's size in the budget's unit.
    pub fn context_windows(
        &self,
        hits: &[RetrievedChunk],
        params: &crate::context::ContextParams,
        measure: &mut dyn FnMut(&str) -> usize,
    ) -> Vec<crate::context::Window> {
        crate::context::windows(hits, |id| self.documents.get(&id).map(|(d, m)| (d, m)), params, measure)
    }

    /// The text, core and outline item of a retrieved chunk.
    pub fn passage(&self, hit: &RetrievedChunk) -> Option<Passage<'_>> {
        let (doc, memory) = self.documents.get(&hit.doc_id)?;
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
        let mut store = lib.into_store();
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
        assert_eq!(lib.manifest().format_version, LIBRARY_FORMAT_VERSION);
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
        assert_eq!(lib.manifest().format_version, REPLACED_MEMORY_FORMAT_VERSION);
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
        // A newer build added a field to the manifest and one to each document's entry.
        let mut json = manifest_of(&store);
        json["shelf_order"] = serde_json::json!(["b", "a"]);
        json["documents"][0]["pinned"] = serde_json::json!({"by": "tab 2"});
        store.entries.insert(MANIFEST.into(), serde_json::to_vec(&json).unwrap());

        let mut lib = Library::open(store, &settings()).unwrap();
        let doc = Document::new("b.txt", "The second document is about lakes and their depth.");
        let memory = DocumentMemory::from_spans(&doc, &[Span::new(0, doc.text.len())], "fixed");
        lib.add(&doc, &memory, &mut e).unwrap();
        let store = lib.into_store();
        let json = manifest_of(&store);
        assert_eq!(json["shelf_order"], serde_json::json!(["b", "a"]));
        assert_eq!(json["documents"][0]["pinned"], serde_json::json!({"by": "tab 2"}));
        assert!(json["documents"][1].get("pinned").is_none());

        let mut lib = Library::open(store, &settings()).unwrap();
        assert!(lib.remove(doc.id).unwrap());
        let json = manifest_of(&lib.into_store());
        assert_eq!(json["shelf_order"], serde_json::json!(["b", "a"]));
        assert_eq!(json["documents"][0]["pinned"], serde_json::json!({"by": "tab 2"}));
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
