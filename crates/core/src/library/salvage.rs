//! What can still be read from a library that no longer opens.
//!
//! A library fails to open when a key its manifest names is missing or damaged (a disk
//! that lied about a write, storage cleared in part, a file edited by hand), when the
//! manifest itself is unreadable, or when it was built with another embedder. Its
//! documents' texts usually survive all of these: each lives under its own key. So the
//! way out offered to a user is a rebuild: read every document that still decodes, set
//! the damaged library aside (the caller keeps its raw entries), and add the documents to
//! a new library, where their memories are written again. This module does the reading;
//! it never writes.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::{Store, DEFAULT_COLLECTION, MANIFEST};
use crate::document::{DocId, Document};

/// A document read back from a damaged library.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SalvagedDocument {
    /// Its title.
    pub title: String,
    /// Its full text (the id is recomputed from it when it is added again).
    pub text: String,
    /// Its language tag as stored.
    pub language: String,
    /// The collection the manifest put it in ([`DEFAULT_COLLECTION`] when the manifest
    /// cannot say).
    pub collection: String,
}

/// What [`salvage`] found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Salvage {
    /// Every document whose key decodes, in the manifest's order where it can be read
    /// (then the rest, by key).
    pub documents: Vec<SalvagedDocument>,
    /// Document keys that could not be read, each with the reason.
    pub unreadable: Vec<(String, String)>,
}

/// Read what survives of the library in `store` (see the module docs). Never fails:
/// a store that cannot list its keys yields nothing.
pub fn salvage<S: Store>(store: &mut S) -> Salvage {
    // The manifest, if it still decodes far enough, gives the order and the collections:
    // its own list in a library stored as one blob; in one stored as parts, the parts'
    // and fresh documents' catalogs, in the manifest's order.
    #[derive(Deserialize)]
    struct Entry {
        id: DocId,
        #[serde(default)]
        collection: Option<String>,
    }
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        documents: Vec<Entry>,
        #[serde(default)]
        parts: Vec<super::layout::PartEntry>,
        #[serde(default)]
        fresh: Vec<u64>,
    }
    let head = store.read(MANIFEST).ok().flatten().and_then(|bytes| serde_json::from_slice::<Head>(&bytes).ok());
    let catalog = |store: &mut S, key: &str| -> Vec<Entry> {
        let Some(bytes) = store.read(key).ok().flatten() else { return Vec::new() };
        let Ok((entries, _)) = super::layout::open_envelope(&bytes) else { return Vec::new() };
        entries.into_iter().map(|e| Entry { id: e.id, collection: Some(e.collection) }).collect()
    };
    let listed: Vec<Entry> = match head {
        None => Vec::new(),
        Some(h) if h.parts.is_empty() && h.fresh.is_empty() => h.documents,
        Some(h) => {
            let mut listed: Vec<Entry> = Vec::new();
            for p in &h.parts {
                listed.extend(catalog(store, &super::layout::part_key(p.id)));
            }
            for &generation in &h.fresh {
                listed.extend(catalog(store, &super::layout::fresh_key(generation)));
            }
            listed
        }
    };
    let order: BTreeMap<String, usize> = listed.iter().enumerate().map(|(i, e)| (super::document_key(e.id), i)).collect();
    let collection_of = |key: &str| order.get(key).and_then(|&i| listed[i].collection.clone()).unwrap_or_else(|| DEFAULT_COLLECTION.into());

    let mut keys: Vec<String> =
        store.keys().unwrap_or_default().into_iter().filter(|k| k.starts_with("documents/") && k.ends_with(".json")).collect();
    keys.sort_by_key(|k| (order.get(k).copied().unwrap_or(usize::MAX), k.clone()));

    let mut out = Salvage::default();
    for key in keys {
        let read = match store.read(&key) {
            Ok(Some(bytes)) => serde_json::from_slice::<Document>(&bytes).map_err(|e| alloc::format!("{e}")),
            Ok(None) => Err("missing".into()),
            Err(e) => Err(alloc::format!("{e}")),
        };
        match read {
            Ok(doc) if !doc.text.trim().is_empty() => {
                let collection = collection_of(&key);
                out.documents.push(SalvagedDocument { title: doc.title, text: doc.text, language: doc.language, collection });
            }
            Ok(_) => out.unreadable.push((key, "the text is empty".into())),
            Err(reason) => out.unreadable.push((key, reason)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::library::{Library, LibrarySettings, MemStore};
    use crate::memory::DocumentMemory;
    use crate::retrieve::RetrievalMode;
    use crate::span::Span;

    fn doc(title: &str, text: &str) -> (Document, DocumentMemory) {
        let d = Document::new(title, text);
        let m = DocumentMemory::from_spans(&d, &[Span::new(0, d.text.len())], "fixed");
        (d, m)
    }

    #[test]
    fn a_library_whose_index_and_one_document_are_damaged_gives_back_the_rest() {
        let mut e = HashingEmbedder::new(32);
        let settings = LibrarySettings { mode: RetrievalMode::ThreeLayer, ..LibrarySettings::new("hashing-32".into(), 32) };
        let mut lib = Library::open(MemStore::default(), &settings).unwrap();
        let (a, ma) = doc("rivers", "The Danube flows through ten countries.");
        let (b, mb) = doc("lakes", "Lake Baikal is the deepest lake on Earth.");
        let (c, mc) = doc("seas", "The Dead Sea lies far below sea level.");
        lib.add(&a, &ma, &mut e).unwrap();
        lib.add_to("geography", &b, &mb, &mut e).unwrap();
        lib.add(&c, &mc, &mut e).unwrap();
        let mut store = lib.into_store();
        // The third document's index entries are gone and its text is garbage: the library
        // no longer opens. (The catalog of the others, kept with their index entries,
        // still gives their order and collections.)
        let index = store.entries.keys().rfind(|k| k.starts_with("index/")).unwrap().clone();
        store.entries.remove(&index);
        store.entries.insert(super::super::document_key(c.id), b"{not json".to_vec());
        assert!(Library::open(store.clone(), &settings).is_err());

        let s = salvage(&mut store);
        let got: Vec<(&str, &str)> = s.documents.iter().map(|d| (d.title.as_str(), d.collection.as_str())).collect();
        assert_eq!(got, [("rivers", "default"), ("lakes", "geography")]);
        assert_eq!(s.documents[1].text, b.text);
        assert_eq!(s.unreadable.len(), 1);
        assert_eq!(s.unreadable[0].0, super::super::document_key(c.id));

        // With the manifest gone too, the documents still come back (collections unknown).
        store.entries.insert(MANIFEST.into(), b"\0\0".to_vec());
        let s = salvage(&mut store);
        assert_eq!(s.documents.len(), 2);
        assert!(s.documents.iter().all(|d| d.collection == DEFAULT_COLLECTION));
    }

    #[test]
    fn an_empty_store_salvages_nothing() {
        assert_eq!(salvage(&mut MemStore::default()), Salvage::default());
    }
}
