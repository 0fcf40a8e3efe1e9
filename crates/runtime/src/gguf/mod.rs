//! GGUF: llama.cpp's model file format (versions 2 and 3).
//!
//! Layout: magic `GGUF`, version, tensor count, metadata count; the metadata (typed
//! key/value pairs: architecture, hyper-parameters, the tokenizer's vocabulary and merges,
//! the chat template); the tensor infos (name, shape, type, offset); padding to
//! `general.alignment` (32 by default); then the tensor data.
//!
//! [`GgufFile::read`] parses everything up to the data through a [`ByteSource`], a window
//! at a time, and checks it before anything trusts it: every count and length against the
//! bytes that remain (no allocation larger than the file), every tensor's type (an
//! unsupported one is an error naming the type and the tensor), shape, alignment and extent
//! within the file. Tensor bytes are read later, one tensor at a time.

#[doc(hidden)]
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod types;
pub mod writer;

use std::collections::BTreeMap;

pub use types::{unsupported_type_name, GgmlType};

use crate::source::ByteSource;
use crate::Error;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// u8
    U8(u8),
    /// i8
    I8(i8),
    /// u16
    U16(u16),
    /// i16
    I16(i16),
    /// u32
    U32(u32),
    /// i32
    I32(i32),
    /// u64
    U64(u64),
    /// i64
    I64(i64),
    /// f32
    F32(f32),
    /// f64
    F64(f64),
    /// bool
    Bool(bool),
    /// UTF-8 string
    String(String),
    /// Array of values of one type.
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The value as an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, if it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The value as a flag: a boolean, or an integer (non-zero for true).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => self.as_u64().map(|v| v != 0),
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor's description.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`, …).
    pub name: String,
    /// Dimensions, innermost (row length) first, as GGML orders them.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Absolute byte offset of its data in the file.
    pub offset: u64,
    /// Size of its data in bytes.
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF header.
#[derive(Clone, Debug)]
pub struct GgufFile {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata by key.
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
    /// Data alignment.
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
}

/// Reads the header sequentially through a window over the source.
struct Cursor<'a> {
    src: &'a dyn ByteSource,
    pos: u64,
    window: Vec<u8>,
    window_start: u64,
    /// Metadata values read so far (array items included), against [`MAX_METADATA_VALUES`].
    values: u64,
}

const WINDOW: usize = 1 << 16;

/// The most metadata values (array items included) a header may hold. A value is read
/// into a [`MetaValue`] of 24 bytes or more, however few bytes it takes in the file (a
/// `u8` takes one), so a 200 MB array of them would cost about 5 GB before any check:
/// this caps the header's memory near 200 MB. Real models need far fewer: a vocabulary's
/// tokens, scores, types and merges are four arrays of at most a few hundred thousand.
pub const MAX_METADATA_VALUES: u64 = 1 << 23;

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        self.src.len().saturating_sub(self.pos)
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&[u8], Error> {
        if (n as u64) > self.remaining() {
            return Err(Error::Truncated { what });
        }
        let in_window = self.pos >= self.window_start && self.pos + n as u64 <= self.window_start + self.window.len() as u64;
        if !in_window {
            let len = (n.max(WINDOW) as u64).min(self.remaining()) as usize;
            self.window.resize(len, 0);
            // A source shorter than it said it was ends inside the header too.
            self.src.read_at(self.pos, &mut self.window).map_err(|e| match e {
                Error::OutOfRange { .. } => Error::Truncated { what },
                e => e,
            })?;
            self.window_start = self.pos;
        }
        let start = (self.pos - self.window_start) as usize;
        self.pos += n as u64;
        Ok(&self.window[start..start + n])
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items each at least `min_bytes` long, checked against what remains.
    fn count(&mut self, min_bytes: u64, what: &'static str) -> Result<usize, Error> {
        let n = self.u64(what)?;
        if n.saturating_mul(min_bytes.max(1)) > self.remaining() {
            return Err(Error::Implausible { what, value: n });
        }
        usize::try_from(n).map_err(|_| Error::Implausible { what, value: n })
    }

    fn string(&mut self, what: &'static str) -> Result<String, Error> {
        let n = self.count(1, what)?;
        let b = self.bytes(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::NotUtf8 { what })
    }

    fn value(&mut self, key: &str, type_id: u32, depth: u32) -> Result<MetaValue, Error> {
        const W: &str = "metadata value";
        Ok(match type_id {
            0 => MetaValue::U8(self.array::<1>(W)?[0]),
            1 => MetaValue::I8(self.array::<1>(W)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(W)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(W)?)),
            4 => MetaValue::U32(u32::from_le_bytes(self.array(W)?)),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(W)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(W)?)),
            7 => MetaValue::Bool(self.array::<1>(W)?[0] != 0),
            8 => MetaValue::String(self.string("metadata string")?),
            9 if depth == 0 => {
                let elem = self.u32("array type")?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    _ => return Err(Error::UnknownValueType { key: key.to_string(), type_id: elem }),
                };
                let n = self.count(min, "array length")?;
                self.values = self.values.saturating_add(n as u64);
                if self.values > MAX_METADATA_VALUES {
                    return Err(Error::Implausible { what: "metadata values (array items included)", value: self.values });
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(key, elem, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(u64::from_le_bytes(self.array(W)?)),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(W)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(W)?)),
            _ => return Err(Error::UnknownValueType { key: key.to_string(), type_id }),
        })
    }
}

impl GgufFile {
    /// Parse and check the header of a GGUF file.
    pub fn read(src: &dyn ByteSource) -> Result<Self, Error> {
        let mut c = Cursor { src, pos: 0, window: Vec::new(), window_start: 0, values: 0 };
        if c.remaining() < 4 || c.bytes(4, "magic")? != b"GGUF" {
            return Err(Error::BadMagic);
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(Error::GgufVersion { version });
        }
        // A tensor info takes at least 8 (name) + 4 + 8 + 4 + 8 bytes; a key/value 8 + 4 + 1.
        let n_tensors = c.count(32, "tensor count")?;
        let n_kv = c.count(13, "metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let type_id = c.u32("metadata type")?;
            let value = c.value(&key, type_id, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(Error::DuplicateKey { key });
            }
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => v.as_u64().ok_or(Error::BadAlignment { alignment: 0 })?,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(Error::BadAlignment { alignment });
        }
        let mut raw = Vec::with_capacity(n_tensors);
        let mut names = std::collections::HashSet::new();
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let n_dims = c.u32("tensor rank")?;
            if n_dims == 0 || n_dims > 4 {
                return Err(Error::BadShape { tensor: name });
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(c.u64("tensor dimension")?);
            }
            let type_id = c.u32("tensor type")?;
            let offset = c.u64("tensor offset")?;
            if !names.insert(name.clone()) {
                return Err(Error::DuplicateTensor { name });
            }
            raw.push((name, dims, type_id, offset));
        }
        let data_offset = c.pos.div_ceil(alignment).saturating_mul(alignment);
        let file_len = src.len();
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, type_id, offset) in raw {
            let Some(ggml_type) = GgmlType::from_id(type_id) else {
                return Err(Error::UnsupportedTensorType { tensor: name, type_id });
            };
            let elements = dims.iter().try_fold(1u64, |acc, &d| if d == 0 { None } else { acc.checked_mul(d) });
            let block = ggml_type.block_elements();
            let (Some(elements), true) = (elements, dims[0].is_multiple_of(block)) else {
                return Err(Error::BadShape { tensor: name });
            };
            let size = (elements / block).checked_mul(ggml_type.block_bytes());
            let start = data_offset.checked_add(offset);
            match (size, start) {
                (Some(size), Some(start))
                    if offset.is_multiple_of(alignment) && start.checked_add(size).is_some_and(|end| end <= file_len) =>
                {
                    tensors.push(TensorInfo { name, dims, ggml_type, offset: start, size });
                }
                _ => return Err(Error::BadOffset { tensor: name }),
            }
        }
        Ok(GgufFile { version, metadata, tensors, alignment, data_offset })
    }

    /// A metadata value.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// `general.architecture` (e.g. `llama`, `qwen2`).
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(MetaValue::as_str)
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Read one tensor's raw bytes.
    pub fn tensor_bytes(&self, src: &dyn ByteSource, tensor: &TensorInfo) -> Result<Vec<u8>, Error> {
        let len = usize::try_from(tensor.size).map_err(|_| Error::Implausible { what: "tensor size", value: tensor.size })?;
        let mut buf = vec![0u8; len];
        src.read_at(tensor.offset, &mut buf)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests;
