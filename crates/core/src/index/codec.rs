//! The binary container every index is stored in.
//!
//! Layout (little-endian):
//! `b"DMIX"` · kind (4 bytes, e.g. `b"FLAT"`) · version (u16) · payload length (u64) ·
//! payload · CRC-32 (IEEE) of everything before it (u32).
//!
//! The reader checks magic, kind, version, length and checksum before parsing anything, and
//! every length inside a payload is checked against the bytes that remain before anything is
//! allocated, so a hostile length cannot ask for gigabytes.

use alloc::vec::Vec;

use crate::Error;

/// The largest vector dimension an index file may declare (embedding models use up to a
/// few thousand).
pub const MAX_DIM: usize = 1 << 16;

const MAGIC: &[u8; 4] = b"DMIX";
const HEADER: usize = 4 + 4 + 2 + 8;

/// CRC-32 (IEEE 802.3, as zlib computes it).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Appends little-endian fields to a buffer.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }
    /// A byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// A u32.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A u64.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// An f32.
    pub fn f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    /// A length-prefixed run of u32.
    pub fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.u32(x);
        }
    }
    /// A length-prefixed run of f32.
    pub fn f32s(&mut self, v: &[f32]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.f32(x);
        }
    }
    /// A length-prefixed run of i8.
    pub fn i8s(&mut self, v: &[i8]) {
        self.u64(v.len() as u64);
        self.buf.extend(v.iter().map(|&x| x as u8));
    }
    /// Wrap the payload in the container.
    pub fn finish(self, kind: [u8; 4], version: u16) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.buf.len() + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&kind);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(self.buf.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.buf);
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

/// Reads little-endian fields, checking every length against what remains.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Open a container: check magic, kind, version (≤ `max_version`), length and checksum.
    /// Returns the version found and a reader over the payload.
    pub fn open(bytes: &'a [u8], kind: [u8; 4], max_version: u16) -> Result<(u16, Reader<'a>), Error> {
        if bytes.len() < 4 {
            return Err(Error::Truncated);
        }
        if &bytes[..4] != MAGIC {
            return Err(Error::BadMagic);
        }
        if bytes.len() < HEADER + 4 {
            return Err(Error::Truncated);
        }
        let mut found = [0u8; 4];
        found.copy_from_slice(&bytes[4..8]);
        if found != kind {
            return Err(Error::WrongIndexKind { expected: kind, found });
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&bytes[10..18]);
        let len = u64::from_le_bytes(len);
        let available = (bytes.len() - HEADER - 4) as u64;
        if len > available {
            return Err(Error::Truncated);
        }
        if len < available {
            return Err(Error::TrailingBytes);
        }
        let body_end = HEADER + len as usize;
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&bytes[body_end..body_end + 4]);
        if crc32(&bytes[..body_end]) != u32::from_le_bytes(crc) {
            return Err(Error::ChecksumMismatch);
        }
        if version == 0 || version > max_version {
            return Err(Error::IndexVersion { found: version });
        }
        Ok((version, Reader { buf: &bytes[HEADER..body_end], pos: 0 }))
    }

    /// A reader over raw bytes (no container).
    pub fn raw(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        // `let … else` rather than `ok_or`: this runs for every field read, and an error
        // built eagerly is dropped on every call.
        let Some(end) = self.pos.checked_add(n) else { return Err(Error::Truncated) };
        let Some(s) = self.buf.get(self.pos..end) else { return Err(Error::Truncated) };
        self.pos = end;
        Ok(s)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    /// A u32.
    pub fn u32(&mut self) -> Result<u32, Error> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A vector dimension: a u32 in `1..=MAX_DIM`. Checked here, before anything sized by
    /// it is allocated (an empty index with a 4-billion dimension is otherwise consistent,
    /// and a query vector for it would take 16 GB).
    pub fn dim(&mut self) -> Result<usize, Error> {
        let d = self.u32()? as usize;
        if d == 0 || d > MAX_DIM {
            return Err(Error::InvalidField { what: "dimension" });
        }
        Ok(d)
    }
    /// A u64.
    pub fn u64(&mut self) -> Result<u64, Error> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// A u64 that must fit a usize.
    pub fn usize(&mut self) -> Result<usize, Error> {
        usize::try_from(self.u64()?).map_err(|_| Error::InvalidField { what: "size" })
    }
    /// An f32.
    pub fn f32(&mut self) -> Result<f32, Error> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// A length prefix for `elem` bytes per element, checked against what remains.
    fn len(&mut self, elem: usize) -> Result<usize, Error> {
        let n = self.usize()?;
        let bytes = n.checked_mul(elem).ok_or(Error::Truncated)?;
        if bytes > self.buf.len() - self.pos {
            return Err(Error::Truncated);
        }
        Ok(n)
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.len(1)?;
        self.take(n)
    }
    /// A length-prefixed UTF-8 string.
    pub fn str(&mut self) -> Result<&'a str, Error> {
        core::str::from_utf8(self.bytes()?).map_err(|_| Error::InvalidField { what: "UTF-8 string" })
    }
    /// A length-prefixed run of u32 (taken as one slice: the arrays of a large index
    /// are read at memory speed, not a checked read per value).
    pub fn u32s(&mut self) -> Result<Vec<u32>, Error> {
        let n = self.len(4)?;
        Ok(self.take(n * 4)?.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
    /// Append a length-prefixed run of at most `max` u32 to `out` (no allocation of its
    /// own); returns how many.
    pub fn u32s_into(&mut self, max: usize, out: &mut [u32]) -> Result<usize, Error> {
        let n = self.len(4)?;
        if n > max || n > out.len() {
            return Err(Error::InvalidField { what: "list length" });
        }
        for (o, b) in out.iter_mut().zip(self.take(n * 4)?.chunks_exact(4)) {
            *o = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(n)
    }
    /// A length-prefixed run of f32.
    pub fn f32s(&mut self) -> Result<Vec<f32>, Error> {
        let n = self.len(4)?;
        Ok(self.take(n * 4)?.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
    /// A length-prefixed run of i8.
    pub fn i8s(&mut self) -> Result<Vec<i8>, Error> {
        let n = self.len(1)?;
        Ok(self.take(n)?.iter().map(|&b| b as i8).collect())
    }
    /// A count of items each at least `min_bytes` long, checked against what remains.
    pub fn count(&mut self, min_bytes: usize) -> Result<usize, Error> {
        self.len(min_bytes.max(1))
    }
    /// Fail unless every byte was read.
    pub fn finish(&self) -> Result<(), Error> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(Error::TrailingBytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_zlib() {
        // zlib.crc32(b"123456789") == 0xCBF43926
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn container_checks() {
        let mut w = Writer::new();
        w.str("hi");
        w.f32s(&[1.0, 2.0]);
        let bytes = w.finish(*b"TEST", 1);
        let (v, mut r) = Reader::open(&bytes, *b"TEST", 1).unwrap();
        assert_eq!(v, 1);
        assert_eq!(r.str().unwrap(), "hi");
        assert_eq!(r.f32s().unwrap(), [1.0, 2.0]);
        r.finish().unwrap();
        assert_eq!(Reader::open(&bytes, *b"FLAT", 1).err(), Some(Error::WrongIndexKind { expected: *b"FLAT", found: *b"TEST" }));
        assert_eq!(Reader::open(&bytes[..bytes.len() - 1], *b"TEST", 1).err(), Some(Error::Truncated));
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert_eq!(Reader::open(&bad, *b"TEST", 1).err(), Some(Error::ChecksumMismatch));
        assert_eq!(Reader::open(b"nope", *b"TEST", 1).err(), Some(Error::BadMagic));
    }

    /// A 30-byte index file declaring a 4-billion dimension once made the fuzz harness's
    /// probe query (and any caller's) ask for 16 GB.
    #[test]
    fn a_huge_declared_dimension_is_refused_before_anything_is_sized_by_it() {
        use crate::index::{FlatIndex, SegmentParams, SegmentedIndex};
        let flat = |dim: u32| {
            let mut w = Writer::new();
            w.u32(dim);
            w.u8(0);
            w.u32s(&[]);
            w.f32s(&[]);
            w.finish(*b"FLAT", 1)
        };
        for dim in [0, u32::MAX, MAX_DIM as u32 + 1] {
            assert_eq!(FlatIndex::from_bytes(&flat(dim)).err(), Some(Error::InvalidField { what: "dimension" }), "dim {dim}");
        }
        assert!(FlatIndex::from_bytes(&flat(384)).is_ok());
        let mut w = Writer::new();
        w.u32(u32::MAX);
        let seg = w.finish(*b"SEGX", 1);
        assert_eq!(SegmentedIndex::from_bytes(&seg, SegmentParams::default()).err(), Some(Error::InvalidField { what: "dimension" }));
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        let mut w = Writer::new();
        w.u64(u64::MAX / 2);
        let bytes = w.finish(*b"TEST", 1);
        let (_, mut r) = Reader::open(&bytes, *b"TEST", 1).unwrap();
        assert_eq!(r.f32s().err(), Some(Error::Truncated));
    }
}
