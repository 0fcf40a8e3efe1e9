//! How a library lays its index out in the store: a small manifest, parts written once,
//! and the documents added since the last part, each under its own key.
//!
//! Every key is written once and never changed, except the manifest, whose size does not
//! grow with the library: it lists the parts (each with the key that lists the documents
//! removed from it since it was written) and the documents not yet in a part. A document's catalog entry
//! (title, collection, reader) lives with its index entries, in its fresh key and later in
//! its part, so adding the ten-thousandth document writes about what adding the first did.
//! See [`crate::retrieve::MemoryIndex::part_bytes`] for what a part holds.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::DocumentEntry;
use crate::index::codec::{Reader, Writer};
use crate::retrieve::RetrievalMode;
use crate::Error;

/// The format version of a library stored as parts. Libraries of versions 1 and 2 (one
/// index blob, rewritten on every change) are read and rewritten as parts.
pub const PARTS_FORMAT_VERSION: u32 = 3;

/// Parts of one tier merged into one of the next when there are this many.
pub const MERGE_FACTOR: usize = 8;

/// The highest tier merges make. A tier-0 part is a sealed fresh segment (4,096 vectors
/// by default), its vectors searched exactly; a tier-1 part merges [`MERGE_FACTOR`] of
/// them (about 32,000 vectors) into HNSW graphs, half a minute of one core's work, done
/// in the background where the caller allows it ([`super::Library::merge_job`]). Above
/// it a library grows by more parts rather than by rewriting ever larger ones, which
/// keeps every vector's rewrites to two over the library's life (sealed once, merged
/// once); `docmem compact` merges everything when asked.
pub const MAX_MERGE_TIER: u32 = 1;

/// What the manifest says about a part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartEntry {
    /// Its name (the generation that wrote it).
    pub id: u64,
    /// 0 for a sealed fresh segment; one more than its inputs' for a merge.
    pub tier: u32,
    /// Documents it held when written.
    pub documents: usize,
    /// How many documents were removed from it since.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub removed: usize,
    /// The generation whose key ([`removed_key`]) lists them (their entries are skipped
    /// when the part is read); 0 when none. A key of its own, so that the manifest stays
    /// small however many documents a library loses.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub removed_key: u64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// `manifest.json` of a library stored as parts. Its head repeats [`super::Manifest`]'s:
/// that one is the library as a caller sees it (every document listed), this one what is
/// stored (the parts and keys that hold them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredManifest {
    /// [`PARTS_FORMAT_VERSION`].
    pub format_version: u32,
    /// Bumped by every change.
    pub generation: u64,
    /// The embedder's name.
    pub embedder: String,
    /// The embedding dimension.
    pub dim: usize,
    /// The index layout.
    pub mode: RetrievalMode,
    /// The piece limit ([`super::Manifest::piece_chars`]).
    #[serde(default)]
    pub piece_chars: usize,
    /// The parts, in the order they are read.
    pub parts: Vec<PartEntry>,
    /// The keys ([`fresh_key`]) of the documents added since the last part, by the
    /// generation that wrote each, in the order they were added.
    pub fresh: Vec<u64>,
    /// Fields of a newer build, kept (see the library's module docs).
    #[serde(flatten)]
    pub unknown: BTreeMap<String, serde_json::Value>,
}

/// Whether the library reads `key` only while it opens: its index (parts, their removed
/// lists, fresh documents' entries, and the one index blob of formats 1 and 2), decoded
/// then into memory and afterwards only written or removed. A store may stop holding such
/// keys' bytes once the library is open ([`super::JournalStore::release`]).
pub fn read_only_at_open(key: &str) -> bool {
    key.starts_with("index/")
}

/// The key of a part.
pub fn part_key(id: u64) -> String {
    format!("index/parts/{id}.bin")
}

/// The key listing the documents removed from part `part`, as of `generation`.
pub fn removed_key(part: u64, generation: u64) -> String {
    format!("index/removed/{part}-{generation}.bin")
}

/// The key of a document not yet in a part.
pub fn fresh_key(generation: u64) -> String {
    format!("index/fresh/{generation}.bin")
}

const ENVELOPE_KIND: [u8; 4] = *b"LENT";

/// A part's or a fresh document's key: the catalog entries of its documents, then its
/// index bytes.
pub fn envelope(entries: &[&DocumentEntry], index: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(&serde_json::to_vec(entries).unwrap_or_default());
    w.bytes(index);
    w.finish(ENVELOPE_KIND, 1)
}

/// The catalog entries and index bytes of an [`envelope`].
pub fn open_envelope(bytes: &[u8]) -> Result<(Vec<DocumentEntry>, &[u8]), Error> {
    let (_, mut r) = Reader::open(bytes, ENVELOPE_KIND, 1)?;
    let entries = serde_json::from_slice(r.bytes()?).map_err(|_| Error::InvalidField { what: "catalog entries" })?;
    let index = r.bytes()?;
    r.finish()?;
    Ok((entries, index))
}

/// The parts to merge next, and the tier of the result: [`MERGE_FACTOR`] parts of the
/// lowest tier that has that many (below [`MAX_MERGE_TIER`]), oldest first; else one part
/// that has lost more than half its documents, rewritten alone. `None` when nothing is
/// due. `parts` is (name, tier, documents written, documents removed) in read order.
pub fn merge_due(parts: &[(u64, u32, usize, usize)]) -> Option<(Vec<u64>, u32)> {
    for tier in 0..MAX_MERGE_TIER {
        let of_tier: Vec<u64> = parts.iter().filter(|p| p.1 == tier).map(|p| p.0).take(MERGE_FACTOR).collect();
        if of_tier.len() == MERGE_FACTOR {
            return Some((of_tier, tier + 1));
        }
    }
    parts.iter().find(|p| p.3 * 2 > p.2).map(|p| (alloc::vec![p.0], p.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_are_due_per_tier_and_for_parts_mostly_removed() {
        let tier0: Vec<(u64, u32, usize, usize)> = (0..MERGE_FACTOR as u64).map(|i| (i, 0, 10, 0)).collect();
        assert_eq!(merge_due(&tier0[..MERGE_FACTOR - 1]), None);
        assert_eq!(merge_due(&tier0), Some(((0..MERGE_FACTOR as u64).collect(), 1)));
        // The top tier is never merged further, however many parts it has.
        let top: Vec<_> = (0..20).map(|i| (i, MAX_MERGE_TIER, 100, 0)).collect();
        assert_eq!(merge_due(&top), None);
        // A part that lost more than half its documents is rewritten alone.
        let mut top = top;
        top[3].3 = 51;
        assert_eq!(merge_due(&top), Some((alloc::vec![3], MAX_MERGE_TIER)));
    }
}
