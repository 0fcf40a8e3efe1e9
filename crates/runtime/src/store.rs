//! A library store on the native file system: one file per key under a directory.
//!
//! A write goes to a temporary file in the same directory, is flushed to disk, and is
//! renamed over the key's file: rename within a directory is atomic on POSIX and
//! Windows, so after a crash a key holds either its old or its new bytes, never a mix.
//! That per-key atomicity is all [`docmem_core::library`] needs to make whole changes
//! atomic (it writes the manifest last).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use docmem_core::library::{Store, StoreError};

/// A directory holding a library.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

fn io_error(key: &str, e: &std::io::Error) -> StoreError {
    if e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28) {
        return StoreError::Full { key: key.into() };
    }
    StoreError::Io { key: key.into(), message: e.to_string() }
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
    /// A store in `root`, created (with its parents) if missing.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(root).map_err(|e| StoreError::Io { key: String::new(), message: format!("{}: {e}", root.display()) })?;
        Ok(DirStore { root: root.to_path_buf() })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        if !valid_key(key) {
            return Err(StoreError::Io { key: key.into(), message: "not a valid key".into() });
        }
        Ok(self.root.join(key))
    }

    fn walk(&self, dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<(), StoreError> {
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
                // name is otherwise a valid key).
                let _ = fs::remove_file(entry.path());
            } else if valid_key(&key) {
                out.push(key);
            }
        }
        Ok(())
    }
}

impl Store for DirStore {
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match fs::read(self.path(key)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(key, &e)),
        }
    }

    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
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

    fn remove(&mut self, key: &str) -> Result<(), StoreError> {
        match fs::remove_file(self.path(key)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error(key, &e)),
        }
    }

    fn keys(&mut self) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        let root = self.root.clone();
        self.walk(&root, "", &mut out)?;
        Ok(out)
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
}
