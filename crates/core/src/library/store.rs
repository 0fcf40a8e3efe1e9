//! Where a library's bytes live: a key → bytes store with atomic writes of single keys.
//!
//! The library never needs more than that: it makes a whole change atomic by writing
//! new keys first and the manifest last (see [`super`]). Natively the store is a
//! directory (`docmem_runtime::pipeline::store::DirStore`: temp file + rename); in the browser it is
//! IndexedDB or OPFS; [`MemStore`] serves tests.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use crate::Error;

/// Key → bytes. Keys are `/`-separated paths of `[a-z0-9._-]` parts.
pub trait Store {
    /// The bytes under `key`, or `None` when there are none.
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error>;
    /// Replace `key`'s bytes. After a crash the key holds either the old or the new bytes.
    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), Error>;
    /// Delete `key` (no error when absent).
    fn remove(&mut self, key: &str) -> Result<(), Error>;
    /// Every key, in any order.
    fn keys(&mut self) -> Result<Vec<String>, Error>;
    /// Whether this handle alone may change the library, so that keys no manifest names
    /// are leftovers to remove. A handle that shares the library (readers holding a shared
    /// lock) must leave them: they may be a change another process is making. Default:
    /// true, for a store only this handle sees.
    fn sole_writer(&self) -> bool {
        true
    }
}

/// A store in memory, with an optional failure after N writes (to test crash safety).
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    /// The contents.
    pub entries: BTreeMap<String, Vec<u8>>,
    /// When `Some(n)`, the write after `n` more successful writes fails (and does nothing).
    pub fail_after_writes: Option<usize>,
}

impl Store for MemStore {
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.entries.get(key).cloned())
    }

    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        match &mut self.fail_after_writes {
            Some(0) => return Err(Error::Storage { key: key.into(), message: "simulated crash".into() }),
            Some(n) => *n -= 1,
            None => {}
        }
        self.entries.insert(key.into(), bytes.to_vec());
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<(), Error> {
        self.entries.remove(key);
        Ok(())
    }

    fn keys(&mut self) -> Result<Vec<String>, Error> {
        Ok(self.entries.keys().cloned().collect())
    }
}

/// A store in memory that keeps, in order, the writes and removals not yet persisted
/// elsewhere: the browser's store. The library runs on it synchronously; after each
/// operation the host takes the journal ([`JournalStore::take_journal`]) and applies it in
/// one transaction of its own storage (IndexedDB, OPFS, files), so a tab closed midway
/// leaves that storage as it was before the operation. The journal preserves the
/// library's order (new keys first, the manifest last).
///
/// The host's storage holds every key anyway, so the keys a library reads only while it
/// opens (its index: see [`super::read_only_at_open`]) need no second copy in memory once
/// it is open: [`JournalStore::release`] drops their bytes and keeps their names, and
/// later writes of such keys go to the journal alone; [`JournalStore::releasing`] gives
/// each up as the library reads it, so that opening holds one copy too. On a library of
/// thousands of documents that is most of what the store held.
#[derive(Clone, Debug, Default)]
pub struct JournalStore {
    entries: BTreeMap<String, Vec<u8>>,
    /// Keys whose bytes only the host's storage holds.
    released: BTreeSet<String>,
    /// Which keys to release as they are written, once [`JournalStore::release`] is called.
    release: Option<fn(&str) -> bool>,
    journal: Vec<(String, Option<Vec<u8>>)>,
}

impl JournalStore {
    /// A store holding `entries` (what the host's storage holds), with an empty journal.
    pub fn from_entries(entries: BTreeMap<String, Vec<u8>>) -> Self {
        JournalStore { entries, ..JournalStore::default() }
    }

    /// The changes since the last call, in order: `(key, Some(bytes))` to write,
    /// `(key, None)` to delete.
    pub fn take_journal(&mut self) -> Vec<(String, Option<Vec<u8>>)> {
        core::mem::take(&mut self.journal)
    }

    /// Every entry whose bytes this store holds (all of them unless some were released).
    pub fn entries(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.entries
    }

    /// This store, set to give up each key `released` picks as it is read (its bytes move
    /// to the reader instead of being copied) or written: for a library about to be
    /// opened, which then never holds two copies of its index, not even while it opens.
    pub fn releasing(mut self, released: fn(&str) -> bool) -> Self {
        self.release = Some(released);
        self
    }

    /// Drop the bytes of every key `released` picks, now and as they are read or written
    /// from now on, keeping their names: a read of one is then an error
    /// ([`Error::Storage`]), so only keys nothing reads again may be released.
    pub fn release(&mut self, released: fn(&str) -> bool) {
        let keys: Vec<String> = self.entries.keys().filter(|k| released(k)).cloned().collect();
        for key in keys {
            self.entries.remove(&key);
            self.released.insert(key);
        }
        self.release = Some(released);
    }

    /// Whether some keys' bytes are held by the host's storage only.
    pub fn has_released(&self) -> bool {
        self.release.is_some()
    }
}

impl Store for JournalStore {
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        if self.released.contains(key) {
            return Err(Error::Storage {
                key: key.into(),
                message: "its bytes were released to the host's storage after the library opened".into(),
            });
        }
        if self.release.is_some_and(|released| released(key)) {
            let Some(bytes) = self.entries.remove(key) else { return Ok(None) };
            self.released.insert(key.into());
            return Ok(Some(bytes));
        }
        Ok(self.entries.get(key).cloned())
    }

    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        if self.release.is_some_and(|released| released(key)) {
            self.entries.remove(key);
            self.released.insert(key.into());
        } else {
            self.released.remove(key);
            self.entries.insert(key.into(), bytes.to_vec());
        }
        self.journal.push((key.into(), Some(bytes.to_vec())));
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<(), Error> {
        if self.entries.remove(key).is_some() || self.released.remove(key) {
            self.journal.push((key.into(), None));
        }
        Ok(())
    }

    fn keys(&mut self) -> Result<Vec<String>, Error> {
        let mut keys: Vec<String> = self.entries.keys().chain(&self.released).cloned().collect();
        keys.sort_unstable();
        Ok(keys)
    }
}

/// The first bytes of an exported library.
const ARCHIVE_MAGIC: &[u8; 8] = b"DOCMEMLB";
/// The archive layout's version.
pub(crate) const ARCHIVE_VERSION: u32 = 1;

/// A whole library as one byte string (export, backup, moving between devices):
/// `DOCMEMLB`, version (u32 LE), entry count (u32 LE), then per entry key length (u32 LE),
/// key (UTF-8), value length (u64 LE), value. Keys in order, so equal libraries give equal
/// bytes.
pub fn archive(entries: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let size: usize = entries.iter().map(|(k, v)| 12 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(16 + size);
    out.extend_from_slice(ARCHIVE_MAGIC);
    out.extend_from_slice(&ARCHIVE_VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// The entries of an [`archive`]. Never allocates more than the input's size.
pub fn unarchive(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let rest = bytes.strip_prefix(ARCHIVE_MAGIC.as_slice()).ok_or(Error::NotAnArchive)?;
    let take = |rest: &mut &[u8], n: usize| -> Option<Vec<u8>> {
        let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
        *rest = tail;
        Some(head.to_vec())
    };
    let u32_at = |rest: &mut &[u8]| take(rest, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let mut rest = rest;
    let version = u32_at(&mut rest).ok_or(Error::NotAnArchive)?;
    if version > ARCHIVE_VERSION {
        return Err(Error::ArchiveVersion { found: version });
    }
    let count = u32_at(&mut rest).ok_or(Error::MalformedArchive { entry: 0 })?;
    let mut out = BTreeMap::new();
    for entry in 0..count {
        let bad = Error::MalformedArchive { entry };
        let klen = u32_at(&mut rest).ok_or(bad.clone())? as usize;
        let key = String::from_utf8(take(&mut rest, klen).ok_or(bad.clone())?).map_err(|_| bad.clone())?;
        let valid = !key.is_empty()
            && key.split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && part.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
            });
        if !valid {
            return Err(bad);
        }
        let vlen = take(&mut rest, 8).map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])).ok_or(bad.clone())?;
        let vlen = usize::try_from(vlen).map_err(|_| bad.clone())?;
        let value = take(&mut rest, vlen).ok_or(bad)?;
        out.insert(key, value);
    }
    if !rest.is_empty() {
        return Err(Error::MalformedArchive { entry: count });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_keeps_order_and_drops_nothing() {
        let mut s = JournalStore::default();
        s.write("documents/a", b"1").unwrap();
        s.write("manifest.json", b"m").unwrap();
        s.remove("documents/a").unwrap();
        s.remove("never-there").unwrap();
        let j = s.take_journal();
        assert_eq!(
            j,
            [("documents/a".into(), Some(b"1".to_vec())), ("manifest.json".into(), Some(b"m".to_vec())), ("documents/a".into(), None)]
        );
        assert!(s.take_journal().is_empty());
        assert_eq!(s.keys().unwrap(), ["manifest.json"]);
    }

    #[test]
    fn archives_round_trip_and_damage_is_an_error() {
        let mut entries = BTreeMap::new();
        entries.insert("manifest.json".to_string(), b"{}".to_vec());
        entries.insert("documents/ab12.json".to_string(), vec![0u8, 255, 7]);
        entries.insert("empty".to_string(), Vec::new());
        let bytes = archive(&entries);
        assert_eq!(unarchive(&bytes).unwrap(), entries);
        assert_eq!(unarchive(b"not a library"), Err(Error::NotAnArchive));
        // Every truncation is an error, never a panic or a partial library.
        for cut in 0..bytes.len() {
            assert!(unarchive(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut newer = bytes.clone();
        newer[8] = 9;
        assert_eq!(unarchive(&newer), Err(Error::ArchiveVersion { found: 9 }));
        // A key that would escape a directory store is refused.
        let mut evil = BTreeMap::new();
        evil.insert("../etc".to_string(), vec![1]);
        assert!(matches!(unarchive(&archive(&evil)), Err(Error::MalformedArchive { entry: 0 })));
        // A huge declared length does not allocate: it is checked against the input.
        let mut huge = archive(&BTreeMap::from([("k".to_string(), vec![1u8])]));
        let at = huge.len() - 9;
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(unarchive(&huge).is_err());
    }
}
