//! Where a library's bytes live: a key → bytes store with atomic writes of single keys.
//!
//! The library never needs more than that: it makes a whole change atomic by writing
//! new keys first and the manifest last (see [`super`]). Natively the store is a
//! directory (`docmem_runtime::store::DirStore`: temp file + rename); in the browser it is
//! IndexedDB or OPFS; [`MemStore`] serves tests.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A store failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// Reading, writing or listing failed; the message names the key and the cause.
    Io {
        /// The key (or "" for a listing).
        key: String,
        /// What the storage said.
        message: String,
    },
    /// The storage is full (a browser's quota, a full disk).
    Full {
        /// The key being written.
        key: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { key, message } if key.is_empty() => write!(f, "library storage: {message}"),
            StoreError::Io { key, message } => write!(f, "library storage, '{key}': {message}"),
            StoreError::Full { key } => write!(f, "library storage is full (writing '{key}')"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for StoreError {}

/// Key → bytes. Keys are `/`-separated paths of `[a-z0-9._-]` parts.
pub trait Store {
    /// The bytes under `key`, or `None` when there are none.
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Replace `key`'s bytes. After a crash the key holds either the old or the new bytes.
    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Delete `key` (no error when absent).
    fn remove(&mut self, key: &str) -> Result<(), StoreError>;
    /// Every key, in any order.
    fn keys(&mut self) -> Result<Vec<String>, StoreError>;
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
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.entries.get(key).cloned())
    }

    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        match &mut self.fail_after_writes {
            Some(0) => return Err(StoreError::Io { key: key.into(), message: "simulated crash".into() }),
            Some(n) => *n -= 1,
            None => {}
        }
        self.entries.insert(key.into(), bytes.to_vec());
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<(), StoreError> {
        self.entries.remove(key);
        Ok(())
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        Ok(self.entries.keys().cloned().collect())
    }
}
