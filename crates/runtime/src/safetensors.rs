//! Hugging Face `safetensors` files, read through a [`ByteSource`].
//!
//! The format is an 8-byte little-endian header length, a JSON header mapping tensor names
//! to `{dtype, shape, data_offsets}`, then the raw data. Published checkpoints (the MemReader
//! among them) ship this way in F32, F16 or BF16; the loader reads the header once and then
//! one tensor at a time, so a model is never in memory twice. Every offset and size is
//! checked against the file before anything is allocated.

use std::collections::BTreeMap;

use crate::source::ByteSource;
use crate::Error;

/// The largest header accepted (the largest published checkpoints have headers of a few MB).
pub(crate) const MAX_HEADER: u64 = 100 << 20;

/// The floating-point formats loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// A type that is indexed but not read as floats (integers, bools, f64, f8), such as
    /// BERT's `position_ids` buffer of I64: a file may hold such tensors beside the
    /// weights; reading one is the error [`Error::UnsupportedDtype`].
    Other {
        /// The safetensors name (`I64`, `BOOL`, ...).
        name: &'static str,
        /// Bytes per element.
        size: u64,
    },
}

impl Dtype {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "F32" => Some(Dtype::F32),
            "F16" => Some(Dtype::F16),
            "BF16" => Some(Dtype::BF16),
            _ => {
                const OTHERS: [(&str, u64); 12] = [
                    ("BOOL", 1),
                    ("U8", 1),
                    ("I8", 1),
                    ("F8_E5M2", 1),
                    ("F8_E4M3", 1),
                    ("I16", 2),
                    ("U16", 2),
                    ("I32", 4),
                    ("U32", 4),
                    ("I64", 8),
                    ("U64", 8),
                    ("F64", 8),
                ];
                OTHERS.iter().find(|(n, _)| *n == s).map(|&(name, size)| Dtype::Other { name, size })
            }
        }
    }

    /// The safetensors name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::Other { name, .. } => name,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
            Dtype::Other { size, .. } => size,
        }
    }
}

/// One tensor's entry in the header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Element type.
    pub dtype: Dtype,
    /// Shape, outermost first (as PyTorch writes it).
    pub shape: Vec<u64>,
    /// Absolute offset of the data in the file.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
}

/// A parsed safetensors header.
#[derive(Clone, Debug, Default)]
pub struct SafetensorsFile {
    tensors: BTreeMap<String, TensorInfo>,
}

impl SafetensorsFile {
    /// Read and check the header.
    pub fn read(src: &dyn ByteSource) -> Result<Self, Error> {
        let file = src.len();
        let mut len = [0u8; 8];
        src.read_at(0, &mut len)?;
        let declared = u64::from_le_bytes(len);
        if declared > MAX_HEADER || declared > file.saturating_sub(8) {
            return Err(Error::HeaderSize { declared, file });
        }
        let mut header = vec![0u8; declared as usize];
        src.read_at(8, &mut header)?;
        Self::parse(&header, 8 + declared, file)
    }

    fn parse(header: &[u8], data_start: u64, file: u64) -> Result<Self, Error> {
        let bad = |reason: String| Error::SafetensorsHeader { reason };
        let json: serde_json::Value = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
        let obj = json.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
        let mut tensors = BTreeMap::new();
        for (name, entry) in obj {
            if name == "__metadata__" {
                continue;
            }
            let bad_tensor = |reason: &str| Error::BadTensor { name: name.clone(), reason: reason.to_owned() };
            let dtype_name = entry.get("dtype").and_then(|v| v.as_str()).ok_or_else(|| bad_tensor("no dtype"))?;
            let dtype =
                Dtype::parse(dtype_name).ok_or_else(|| Error::UnsupportedDtype { name: name.clone(), dtype: dtype_name.to_owned() })?;
            let shape = entry
                .get("shape")
                .and_then(|v| v.as_array())
                .ok_or_else(|| bad_tensor("no shape"))?
                .iter()
                .map(|d| d.as_u64().ok_or_else(|| bad_tensor("a dimension is not a non-negative integer")))
                .collect::<Result<Vec<u64>, _>>()?;
            let offsets = entry.get("data_offsets").and_then(|v| v.as_array()).ok_or_else(|| bad_tensor("no data_offsets"))?;
            let (start, end) = match offsets.as_slice() {
                [a, b] => (a.as_u64(), b.as_u64()),
                _ => (None, None),
            };
            let (Some(start), Some(end)) = (start, end) else { return Err(bad_tensor("data_offsets is not [start, end]")) };
            let elements = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).ok_or_else(|| bad_tensor("shape overflows"))?;
            let bytes = elements.checked_mul(dtype.size()).ok_or_else(|| bad_tensor("shape overflows"))?;
            if end < start || end - start != bytes {
                return Err(bad_tensor(&format!("data_offsets [{start}, {end}] do not hold {elements} {dtype_name} values")));
            }
            match data_start.checked_add(end) {
                Some(last) if last <= file => {}
                _ => return Err(bad_tensor("data runs past the end of the file")),
            }
            tensors.insert(name.clone(), TensorInfo { dtype, shape, offset: data_start + start, bytes });
        }
        Ok(SafetensorsFile { tensors })
    }

    /// A tensor's entry.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    /// All tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// A tensor's values in f32, checked against the shape expected (outermost first).
    pub fn read_f32(&self, src: &dyn ByteSource, name: &str, shape: &[u64]) -> Result<Vec<f32>, Error> {
        let t = self.tensor(name).ok_or_else(|| Error::MissingTensor { name: name.to_owned() })?;
        if let Dtype::Other { name: dtype, .. } = t.dtype {
            return Err(Error::UnsupportedDtype { name: name.to_owned(), dtype: dtype.to_owned() });
        }
        if t.shape != shape {
            return Err(Error::BadTensor { name: name.to_owned(), reason: format!("shape {:?}, expected {shape:?}", t.shape) });
        }
        let mut raw = vec![0u8; t.bytes as usize];
        src.read_at(t.offset, &mut raw)?;
        Ok(match t.dtype {
            Dtype::F32 => raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => raw.chunks_exact(2).map(|b| crate::quant::f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
            Dtype::BF16 => raw.chunks_exact(2).map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)).collect(),
            Dtype::Other { .. } => Vec::new(), // rejected above
        })
    }
}

/// Write a safetensors file of `tensors` (name, shape outermost first) in `dtype`, asking
/// `values(i)` for tensor `i`'s data only when it is written (so a whole model is never held
/// in f32 at once). Used by conversions and tests.
pub fn write<E: From<std::io::Error>>(
    tensors: &[(String, Vec<u64>)],
    dtype: Dtype,
    out: &mut impl std::io::Write,
    mut values: impl FnMut(usize) -> Result<Vec<f32>, E>,
) -> Result<(), E> {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    if let Dtype::Other { name, .. } = dtype {
        let msg = format!("cannot write float values as {name}");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg).into());
    }
    let name = dtype.name();
    for (tensor, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * dtype.size();
        header.insert(tensor.clone(), serde_json::json!({ "dtype": name, "shape": shape, "data_offsets": [offset, offset + bytes] }));
        offset += bytes;
    }
    let mut text = serde_json::to_vec(&serde_json::Value::Object(header)).map_err(std::io::Error::from)?;
    // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
    while !(text.len() + 8).is_multiple_of(8) {
        text.push(b' ');
    }
    out.write_all(&(text.len() as u64).to_le_bytes())?;
    out.write_all(&text)?;
    for (i, (tensor, shape)) in tensors.iter().enumerate() {
        let v = values(i)?;
        if v.len() as u64 != shape.iter().product::<u64>() {
            let msg = format!("{tensor}: {} values for shape {shape:?}", v.len());
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg).into());
        }
        let mut buf = Vec::with_capacity(v.len() * dtype.size() as usize);
        for x in v {
            match dtype {
                Dtype::F32 => buf.extend_from_slice(&x.to_le_bytes()),
                Dtype::F16 => buf.extend_from_slice(&crate::quant::f32_to_f16(x).to_le_bytes()),
                Dtype::BF16 => buf.extend_from_slice(&f32_to_bf16(x).to_le_bytes()),
                Dtype::Other { .. } => {}
            }
        }
        out.write_all(&buf)?;
    }
    Ok(())
}

/// Round to bfloat16, nearest with ties to even (NaN stays NaN).
fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemorySource;

    fn file(header: &str, data: &[u8]) -> MemorySource {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        MemorySource::new(bytes)
    }

    #[test]
    fn round_trips_every_dtype() {
        let values = vec![1.0f32, -2.5, 0.333, 65504.0, -0.0, 1e-3];
        for dtype in [Dtype::F32, Dtype::F16, Dtype::BF16] {
            let mut out = Vec::new();
            write::<std::io::Error>(&[("a.weight".into(), vec![2, 3])], dtype, &mut out, |_| Ok(values.clone())).unwrap();
            let src = MemorySource::new(out);
            let st = SafetensorsFile::read(&src).unwrap();
            let got = st.read_f32(&src, "a.weight", &[2, 3]).unwrap();
            for (g, w) in got.iter().zip(&values) {
                assert!((g - w).abs() <= w.abs() / 128.0, "{dtype:?}: {g} vs {w}");
            }
            assert!(matches!(st.read_f32(&src, "a.weight", &[3, 2]), Err(Error::BadTensor { .. })));
            assert!(matches!(st.read_f32(&src, "b", &[1]), Err(Error::MissingTensor { .. })));
        }
    }

    #[test]
    fn malformed_files_are_errors() {
        let ok = r#"{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert!(SafetensorsFile::read(&file(ok, &[0; 8])).is_ok());
        // Data past the end.
        assert!(matches!(SafetensorsFile::read(&file(ok, &[0; 4])), Err(Error::BadTensor { .. })));
        // Offsets that disagree with the shape.
        let wrong = r#"{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
        assert!(matches!(SafetensorsFile::read(&file(wrong, &[0; 12])), Err(Error::BadTensor { .. })));
        // An integer tensor is indexed (BERT files carry one beside the weights), but
        // reading it as floats is an error that names it; an unknown dtype is one at once.
        let int = r#"{"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}"#;
        let src = file(int, &[0; 8]);
        let f = SafetensorsFile::read(&src).unwrap();
        let err = f.read_f32(&src, "t", &[1]).unwrap_err();
        assert!(err.to_string().contains("I64") && err.to_string().contains("'t'"), "{err}");
        let odd = r#"{"t":{"dtype":"Q9","shape":[1],"data_offsets":[0,8]}}"#;
        assert!(matches!(SafetensorsFile::read(&file(odd, &[0; 8])), Err(Error::UnsupportedDtype { .. })));
        // Not JSON; a header longer than the file; absurd shapes.
        assert!(matches!(SafetensorsFile::read(&file("{nope", &[])), Err(Error::SafetensorsHeader { .. })));
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(matches!(SafetensorsFile::read(&MemorySource::new(huge)), Err(Error::HeaderSize { .. })));
        let overflow = r#"{"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}"#;
        assert!(matches!(SafetensorsFile::read(&file(overflow, &[0; 8])), Err(Error::BadTensor { .. })));
        assert!(SafetensorsFile::read(&MemorySource::new(vec![1, 2])).is_err());
    }
}
