//! Where model bytes come from.
//!
//! The loader reads through [`ByteSource`] by offset, never asking for the whole file, so a
//! 1 GB model can stream from disk, from memory, or (in the browser) from fetched HTTP
//! ranges straight into GPU buffers.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why bytes could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceError {
    /// The underlying file or stream failed.
    Io {
        /// What was being read.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The read asked for bytes past the end of the source.
    OutOfRange {
        /// Offset asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The source's length.
        source_len: u64,
    },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Io { what, source } => write!(f, "cannot read {what}: {source}"),
            SourceError::OutOfRange { offset, len, source_len } => {
                write!(f, "read of {len} bytes at offset {offset} runs past the end ({source_len} bytes)")
            }
        }
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SourceError::Io { source, .. } => Some(source),
            SourceError::OutOfRange { .. } => None,
        }
    }
}

/// Random-access bytes of known length.
pub trait ByteSource {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` with the bytes at `offset..offset + buf.len()`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), SourceError>;
}

fn check_range(offset: u64, len: usize, source_len: u64) -> Result<(), SourceError> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= source_len => Ok(()),
        _ => Err(SourceError::OutOfRange { offset, len: len as u64, source_len }),
    }
}

/// Bytes held in memory.
pub struct MemorySource {
    bytes: Vec<u8>,
}

impl MemorySource {
    /// Wrap a buffer.
    pub fn new(bytes: Vec<u8>) -> Self {
        MemorySource { bytes }
    }
}

impl ByteSource for MemorySource {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), SourceError> {
        check_range(offset, buf.len(), self.len())?;
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes[start..start + buf.len()]);
        Ok(())
    }
}

/// A file read by offset (positioned reads, no shared cursor).
pub struct FileSource {
    file: std::fs::File,
    len: u64,
    path: PathBuf,
}

impl FileSource {
    /// Open a file.
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let io = |source| SourceError::Io { what: path.display().to_string(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(FileSource { file, len, path: path.to_path_buf() })
    }
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), SourceError> {
        check_range(offset, buf.len(), self.len)?;
        read_exact_at(&self.file, offset, buf).map_err(|source| SourceError::Io { what: self.path.display().to_string(), source })
    }
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &std::fs::File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
