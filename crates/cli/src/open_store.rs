//! Opening a library's directory for a command: as a writer (ingest, ask, remove: each may
//! change it) or a reader (documents), waiting, and saying so, while another docmem holds
//! it. The lock itself is `DirStore`'s (see docmem_runtime::pipeline::store): writers take turns,
//! so two ingests into one library both land.

use std::path::Path;

use docmem_runtime::pipeline::store::DirStore;

use crate::CliError;

/// The library at `dir`, writable, once no other process holds it.
pub fn writer(dir: &Path) -> Result<DirStore, CliError> {
    if let Some(store) = DirStore::try_open(dir)? {
        return Ok(store);
    }
    eprintln!("docmem: {} is in use by another docmem; waiting for it to finish…", dir.display());
    Ok(DirStore::open(dir)?)
}

/// The library at `dir`, read-only, once no writer holds it (readers share it).
pub fn reader(dir: &Path) -> Result<DirStore, CliError> {
    if let Some(store) = DirStore::try_open_shared(dir)? {
        return Ok(store);
    }
    eprintln!("docmem: {} is being changed by another docmem; waiting for it to finish…", dir.display());
    Ok(DirStore::open_shared(dir)?)
}
