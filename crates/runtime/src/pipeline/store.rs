//! A library store on the native file system: one file per key under a directory.
//!
//! A write goes to a temporary file in the same directory, is flushed to disk, and is
//! renamed over the key's file: rename within a directory is atomic on POSIX and
//! Windows, so after a crash a key holds either its old or its new bytes, never a mix.
//! That per-key atomicity is all [`docmem_core::library`] needs to make whole changes
//! atomic (it writes the manifest last).
//!
//! Several processes may open one library (two `docmem ingest`s, an `ask` during an
//! ingest). Each change is computed from the manifest a handle read when it opened, and
//! opening removes keys no manifest names, so two writers at once would lose each
//! other's documents. A handle therefore holds a lock on the directory's `.lock` file for
//! as long as it lives (the operating system's advisory lock, `flock`/`LockFileEx`
//! through `std::fs::File::lock`, released when the process ends, even by a crash): a
//! writer's is exclusive, so writers take turns, each opening the library its
//! predecessor left; a reader's ([`DirStore::open_shared`]) is shared with other readers,
//! may not write, and leaves unnamed keys and temporary files alone.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use docmem_core::library::Store;

/// The lock file in a library's directory (a dot name: never a key).
const LOCK_FILE: &str = ".lock";

/// A directory holding a library, and this handle's lock on it.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
    /// The open lock file (kept open: closing it would release the lock).
    _lock: Arc<fs::File>,
    /// Whether the lock is exclusive (a writer) or shared (a reader).
    writer: bool,
}

/// How [`DirStore`] waits for a lock another process holds.
enum Wait {
    /// Until it is free.
    Block,
    /// Not at all: `None` when it is held.
    Try,
}

fn io_error(key: &str, e: &std::io::Error) -> docmem_core::Error {
    if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) {
        return docmem_core::Error::StorageFull { key: key.into() };
    }
    docmem_core::Error::Storage { key: key.into(), message: e.to_string() }
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        })
}

impl DirStore {
    /// A writer's store in `root`, created (with its parents) if missing; waits while
    /// another process holds the library (see the module docs).
    pub fn open(root: &Path) -> Result<Self, docmem_core::Error> {
        Self::locked(root, true, Wait::Block).map(|s| s.expect("a blocking lock is taken"))
    }

    /// [`DirStore::open`] without waiting: `None` while another process holds the library
    /// (the caller may say so, then [`DirStore::open`]).
    pub fn try_open(root: &Path) -> Result<Option<Self>, docmem_core::Error> {
        Self::locked(root, true, Wait::Try)
    }

    /// A reader's store: shared with other readers, waiting while a writer holds the
    /// library; writes are refused ([`docmem_core::Error::ReadOnly`]).
    pub fn open_shared(root: &Path) -> Result<Self, docmem_core::Error> {
        Self::locked(root, false, Wait::Block).map(|s| s.expect("a blocking lock is taken"))
    }

    /// [`DirStore::open_shared`] without waiting.
    pub fn try_open_shared(root: &Path) -> Result<Option<Self>, docmem_core::Error> {
        Self::locked(root, false, Wait::Try)
    }

    fn locked(root: &Path, writer: bool, wait: Wait) -> Result<Option<Self>, docmem_core::Error> {
        let io = |e: std::io::Error| docmem_core::Error::Storage { key: String::new(), message: format!("{}: {e}", root.display()) };
        fs::create_dir_all(root).map_err(io)?;
        let lock = fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(root.join(LOCK_FILE)).map_err(io)?;
        let taken = match (wait, writer) {
            (Wait::Block, true) => lock.lock().map(|()| true),
            (Wait::Block, false) => lock.lock_shared().map(|()| true),
            (Wait::Try, true) => Self::tried(lock.try_lock()),
            (Wait::Try, false) => Self::tried(lock.try_lock_shared()),
        }
        .map_err(io)?;
        Ok(taken.then(|| DirStore { root: root.to_path_buf(), _lock: Arc::new(lock), writer }))
    }

    /// A `try_lock` result as taken (true), held elsewhere (false) or failed.
    fn tried(r: Result<(), fs::TryLockError>) -> std::io::Result<bool> {
        match r {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    /// Whether this handle holds the exclusive lock (may write).
    pub fn is_writer(&self) -> bool {
        self.writer
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf, docmem_core::Error> {
        if !valid_key(key) {
            return Err(docmem_core::Error::Storage { key: key.into(), message: "not a valid key".into() });
        }
        Ok(self.root.join(key))
    }

    fn walk(&self, dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<(), docmem_core::Error> {
        let entries = fs::read_dir(dir).map_err(|e| io_error(prefix, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(prefix, &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            let kind = entry.file_type().map_err(|e| io_error(&key, &e))?;
            if kind.is_dir() {
                self.walk(&entry.path(), &key, out)?;
            } else if name.starts_with(".tmp-") {
                // A temporary file of a write that did not finish (checked first: its
                // name is otherwise a valid key). Only a writer may remove it: a reader
                // shares the library with nobody who writes, but the check is cheap.
                if self.writer {
                    let _ = fs::remove_file(entry.path());
                }
            } else if name.starts_with('.') {
                // The lock file, and nothing else of ours: never a key.
            } else if valid_key(&key) {
                out.push(key);
            }
        }
        Ok(())
    }
}

impl Store for DirStore {
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, docmem_core::Error> {
        match fs::read(self.path(key)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(key, &e)),
        }
    }

    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), docmem_core::Error> {
        if !self.writer {
            return Err(docmem_core::Error::ReadOnly { key: key.into() });
        }
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| io_error(key, &e))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".tmp-{}-{name}", std::process::id()));
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            // Make the rename itself durable (a directory fsync; not available everywhere).
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        result.map_err(|e: std::io::Error| {
            let _ = fs::remove_file(&tmp);
            io_error(key, &e)
        })
    }

    fn remove(&mut self, key: &str) -> Result<(), docmem_core::Error> {
        if !self.writer {
            return Err(docmem_core::Error::ReadOnly { key: key.into() });
        }
        match fs::remove_file(self.path(key)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(key, &e)),
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, docmem_core::Error> {
        let mut out = Vec::new();
        let root = self.root.clone();
        self.walk(&root, "", &mut out)?;
        Ok(out)
    }

    fn sole_writer(&self) -> bool {
        self.writer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("docmem-store-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn round_trip_nested_keys_and_listing() {
        let d = temp_dir("rt");
        let mut s = DirStore::open(&d).unwrap();
        s.write("manifest.json", b"{}").unwrap();
        s.write("documents/abc.json", b"doc").unwrap();
        s.write("documents/abc.json", b"doc2").unwrap();
        assert_eq!(s.read("documents/abc.json").unwrap().as_deref(), Some(&b"doc2"[..]));
        assert_eq!(s.read("missing.json").unwrap(), None);
        // A leftover temporary file is neither a key nor kept.
        fs::write(d.join("documents/.tmp-1-x.json"), b"partial").unwrap();
        let mut keys = s.keys().unwrap();
        keys.sort();
        assert_eq!(keys, ["documents/abc.json", "manifest.json"]);
        assert!(!d.join("documents/.tmp-1-x.json").exists());
        s.remove("documents/abc.json").unwrap();
        s.remove("documents/abc.json").unwrap();
        assert!(s.write("../escape", b"x").is_err());
        assert!(s.write("Upper.json", b"x").is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_writer_excludes_every_other_handle_and_readers_share() {
        let d = temp_dir("lock");
        let mut w = DirStore::open(&d).unwrap();
        w.write("manifest.json", b"{}").unwrap();
        // The lock is the file's, not the process's: a second handle here is refused as
        // another process would be (it would wait, with `open`).
        assert!(DirStore::try_open(&d).unwrap().is_none(), "a second writer waits");
        assert!(DirStore::try_open_shared(&d).unwrap().is_none(), "a reader waits for the writer");
        assert!(!w.keys().unwrap().iter().any(|k| k.starts_with('.')), "the lock file is not a key");
        drop(w);
        let mut r1 = DirStore::try_open_shared(&d).unwrap().expect("free once the writer is gone");
        let r2 = DirStore::try_open_shared(&d).unwrap().expect("readers share");
        assert!(DirStore::try_open(&d).unwrap().is_none(), "a writer waits for the readers");
        assert_eq!(r1.read("manifest.json").unwrap().as_deref(), Some(&b"{}"[..]));
        assert_eq!(r1.write("manifest.json", b"[]"), Err(docmem_core::Error::ReadOnly { key: "manifest.json".into() }));
        assert!(r1.remove("manifest.json").is_err() && !r1.sole_writer());
        // A reader leaves a writer's temporary file (it may be a write in flight).
        fs::write(d.join(".tmp-1-manifest.json"), b"partial").unwrap();
        r1.keys().unwrap();
        assert!(d.join(".tmp-1-manifest.json").exists());
        drop((r1, r2));
        assert!(DirStore::try_open(&d).unwrap().is_some_and(|w| w.is_writer()));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_library_opened_by_a_reader_keeps_keys_its_manifest_does_not_name() {
        use docmem_core::library::{Library, LibrarySettings};
        let d = temp_dir("gc");
        let settings = LibrarySettings::new("test-embedder".to_string(), 4);
        // A key another process has written for a change it has not committed yet.
        fs::create_dir_all(d.join("documents")).unwrap();
        fs::write(d.join("documents/in-flight.json"), b"{}").unwrap();
        Library::open(DirStore::open_shared(&d).unwrap(), &settings).unwrap();
        assert!(d.join("documents/in-flight.json").exists(), "a reader removes nothing");
        Library::open(DirStore::open(&d).unwrap(), &settings).unwrap();
        assert!(!d.join("documents/in-flight.json").exists(), "the sole writer collects leftovers");
        fs::remove_dir_all(&d).unwrap();
    }
}
