//! Where model bytes come from.
//!
//! The loader reads through [`ByteSource`] by offset, never asking for the whole file, so a
//! 1 GB model can stream from disk, from memory, or (in the browser) from fetched HTTP
//! ranges straight into GPU buffers.
//!
//! - [`FileSource`]: positioned reads of a file (the default natively).
//! - [`MmapSource`]: a memory-mapped file (natively): pages come in as tensors are read.
//! - [`MemorySource`]: bytes already in memory.
//! - [`RangeSource`]: any `read(offset, buf)` function, such as a browser worker's
//!   synchronous `File.slice` / HTTP range reads, through a small chunk cache so that the
//!   header parser's many small reads become a few large ones.

// Unsafe code: `MmapSource` maps the model file: `memmap2::Mmap::map` is `unsafe` because
// the mapping is only sound while no one truncates or rewrites the file.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::Error;

/// Random-access bytes of known length.
pub trait ByteSource {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// True when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` with the bytes at `offset..offset + buf.len()`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error>;
}

fn check_range(offset: u64, len: usize, source_len: u64) -> Result<(), Error> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= source_len => Ok(()),
        _ => Err(Error::OutOfRange { offset, len: len as u64, source_len }),
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

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
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
    pub fn open(path: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io { what: path.display().to_string(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(FileSource { file, len, path: path.to_path_buf() })
    }
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        check_range(offset, buf.len(), self.len)?;
        read_exact_at(&self.file, offset, buf).map_err(|source| Error::Io { what: self.path.display().to_string(), source })
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

/// A memory-mapped file.
///
/// The map is read-only and private to us; like every memory map, it assumes no other
/// process truncates the file while the model loads.
#[cfg(not(target_arch = "wasm32"))]
pub struct MmapSource {
    map: memmap2::Mmap,
}

#[cfg(not(target_arch = "wasm32"))]
impl MmapSource {
    /// Map a file.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io { what: path.display().to_string(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: `Mmap::map` is unsafe because the file could change under the map while
        // the `&[u8]` it hands out is alive. The map is read-only (we never write through
        // it); the file staying unchanged while mapped is the documented assumption of this
        // type (there is no way to enforce it).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Ok(MmapSource { map })
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl ByteSource for MmapSource {
    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        check_range(offset, buf.len(), self.len())?;
        let start = offset as usize;
        buf.copy_from_slice(&self.map[start..start + buf.len()]);
        Ok(())
    }
}

/// A reader function: fill the buffer with the bytes at the offset.
pub type ReadFn = Box<dyn Fn(u64, &mut [u8]) -> Result<(), Error>>;

/// Bytes from a reader function (ranges fetched on demand), with a cache of the last few
/// chunks: reads smaller than a chunk are served from whole chunks, larger reads (tensors)
/// go straight to the reader.
pub struct RangeSource {
    read: ReadFn,
    len: u64,
    chunk: u64,
    cache: std::cell::RefCell<std::collections::VecDeque<(u64, Vec<u8>)>>,
    fetches: std::cell::Cell<u64>,
}

/// Chunks the cache of a [`RangeSource`] keeps.
const CACHED_CHUNKS: usize = 4;

impl RangeSource {
    /// A source of `len` bytes read by `read`, fetched in chunks of `chunk` bytes (at
    /// least 4 KiB) for small reads.
    pub fn new(len: u64, chunk: u64, read: ReadFn) -> Self {
        RangeSource { read, len, chunk: chunk.max(4096), cache: Default::default(), fetches: Default::default() }
    }

    /// How many times the reader function has been called.
    pub fn fetches(&self) -> u64 {
        self.fetches.get()
    }

    fn fetch(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        self.fetches.set(self.fetches.get() + 1);
        (self.read)(offset, buf)
    }

    /// Copy what chunk `index` holds of `offset..offset + buf.len()` into `buf`.
    fn copy_from_chunk(&self, index: u64, offset: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let start = index * self.chunk;
        let mut cache = self.cache.borrow_mut();
        let pos = match cache.iter().position(|(i, _)| *i == index) {
            Some(p) => p,
            None => {
                let end = (start + self.chunk).min(self.len);
                let mut data = vec![0u8; (end - start) as usize];
                self.fetch(start, &mut data)?;
                if cache.len() == CACHED_CHUNKS {
                    cache.pop_front();
                }
                cache.push_back((index, data));
                cache.len() - 1
            }
        };
        let data = &cache[pos].1;
        let from = (offset - start) as usize;
        let n = buf.len().min(data.len() - from);
        buf[..n].copy_from_slice(&data[from..from + n]);
        Ok(n)
    }
}

impl ByteSource for RangeSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        check_range(offset, buf.len(), self.len)?;
        if buf.len() as u64 >= self.chunk {
            return self.fetch(offset, buf);
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            done += self.copy_from_chunk(at / self.chunk, at, &mut buf[done..])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn every_source_reads_the_same_bytes() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let path = std::env::temp_dir().join(format!("docmem-source-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let shared = Rc::new(bytes.clone());
        let data = Rc::clone(&shared);
        let range = RangeSource::new(
            bytes.len() as u64,
            8192,
            Box::new(move |offset, buf| {
                buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
                Ok(())
            }),
        );
        let sources: Vec<Box<dyn ByteSource>> = vec![
            Box::new(MemorySource::new(bytes.clone())),
            Box::new(FileSource::open(&path).unwrap()),
            Box::new(MmapSource::open(&path).unwrap()),
            Box::new(range),
        ];
        for src in &sources {
            assert_eq!(src.len(), bytes.len() as u64);
            for (offset, len) in [(0usize, 10usize), (8190, 5), (12_345, 20_000), (99_990, 10), (50_000, 0)] {
                let mut buf = vec![0u8; len];
                src.read_at(offset as u64, &mut buf).unwrap();
                assert_eq!(buf, bytes[offset..offset + len]);
            }
            assert!(matches!(src.read_at(99_995, &mut [0u8; 10]), Err(Error::OutOfRange { .. })));
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn small_reads_share_chunks() {
        let calls = Rc::new(std::cell::Cell::new(0));
        let seen = Rc::clone(&calls);
        let src = RangeSource::new(
            1 << 20,
            65536,
            Box::new(move |_, buf| {
                seen.set(seen.get() + 1);
                buf.fill(1);
                Ok(())
            }),
        );
        // A header parse: thousands of tiny reads in the first chunks.
        for i in 0..5000u64 {
            src.read_at(i * 8, &mut [0u8; 8]).unwrap();
        }
        assert_eq!(src.fetches(), 1);
        // A tensor: one read of its own.
        src.read_at(200_000, &mut vec![0u8; 300_000]).unwrap();
        assert_eq!((src.fetches(), calls.get()), (2, 2));
    }
}
