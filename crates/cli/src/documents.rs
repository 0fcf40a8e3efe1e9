//! `docmem documents`, `docmem remove` and `docmem compact`: what a library holds, taking
//! a document out of it (from every layer of the index, its files deleted), and merging
//! its index into one part. None needs a model.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use docmem_core::library::Library;
use docmem_runtime::pipeline::store::DirStore;

use crate::input::count;
use crate::CliError;

#[derive(Args)]
pub struct DocumentsArgs {
    /// The library directory.
    #[arg(long)]
    pub library: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Also print each document's outline (the reader's outline items, each with its
    /// number of chunks).
    #[arg(long)]
    pub outline: bool,
}

#[derive(Args)]
pub struct RemoveArgs {
    /// The library directory.
    #[arg(long)]
    pub library: PathBuf,
    /// Documents to remove: ids (as `docmem documents` prints them) or exact titles.
    #[arg(required = true)]
    pub documents: Vec<String>,
}

#[derive(Args)]
pub struct CompactArgs {
    /// The library directory.
    #[arg(long)]
    pub library: PathBuf,
}

/// The library at `dir`: read-only for `documents` (it shares the library with other
/// readers), writable for `remove`.
fn open(dir: &Path, write: bool) -> Result<Library<DirStore>, CliError> {
    if !dir.join("manifest.json").is_file() {
        return Err(CliError::BadArgument {
            message: format!("--library: {} holds no library (make one with docmem ingest)", dir.display()),
        });
    }
    let store = if write { crate::open_store::writer(dir)? } else { crate::open_store::reader(dir)? };
    Library::open_existing(store)?
        .ok_or_else(|| CliError::BadArgument { message: format!("--library: {} holds no library", dir.display()) })
}

pub fn list(a: &DocumentsArgs) -> Result<(), CliError> {
    let lib = open(&a.library, false)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, lib.manifest()).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    let m = lib.manifest();
    let n = m.documents.len();
    writeln!(out, "{}, embedder {} ({} dimensions), {} index", count(n, "document"), m.embedder, m.dim, m.mode.name())?;
    for d in &m.documents {
        let fallback = if d.fallback.is_some() { ", fell back to the sentence chunker" } else { "" };
        writeln!(out, "{}  {}  {} bytes, {}, by {}{fallback}", d.id, d.title, d.bytes, count(d.scenarios, "chunk"), d.reader)?;
        if a.outline {
            let (_, memory) = lib.get(d.id)?;
            if memory.outline.is_empty() {
                writeln!(out, "    (no outline: {})", count(memory.scenarios.len(), "plain chunk"))?;
            }
            for (i, item) in memory.outline.iter().enumerate() {
                let chunks = memory.scenarios.iter().filter(|s| s.outline_item == Some(i as u32)).count();
                writeln!(out, "    {}. {item}  ({})", i + 1, count(chunks, "chunk"))?;
            }
        }
    }
    Ok(())
}

pub fn remove(a: &RemoveArgs) -> Result<(), CliError> {
    let mut lib = open(&a.library, true)?;
    // Resolve every name first, so a typo removes nothing.
    let mut ids = Vec::new();
    for name in &a.documents {
        let found = lib.documents().iter().find(|d| d.id.to_string() == *name || d.title == *name).map(|d| d.id);
        ids.push(found.ok_or_else(|| CliError::BadArgument { message: format!("no document '{name}' in {}", a.library.display()) })?);
    }
    let mut out = std::io::stdout().lock();
    for id in ids {
        if lib.remove(id)? {
            writeln!(out, "removed {id}")?;
        }
    }
    Ok(())
}

/// Merge the library's index into one part: what adding does a little at a time, done
/// whole (a library opens and searches fastest so; it takes seconds per ten thousand
/// vectors).
pub fn compact(a: &CompactArgs) -> Result<(), CliError> {
    let mut lib = open(&a.library, true)?;
    let started = std::time::Instant::now();
    lib.compact()?;
    let parts = lib.index().parts().len();
    writeln!(
        std::io::stdout().lock(),
        "compacted {} into {} in {:.1} s",
        count(lib.documents().len(), "document"),
        count(parts, "part"),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}
