//! Writing GGUF files: metadata, tensor infos and tensor data, in the layout
//! [`super::GgufFile::read`] reads (version 3, data aligned to 32 bytes).
//!
//! Used by the synthetic models ([`crate::synthetic`]: benchmark weights of a real model's
//! shapes, which llama.cpp loads too) and by the tests' small files. The whole file is
//! built in memory: the largest written here is a 1.5B model of about 1.1 GB, on a machine
//! with memory to spare, and one buffer keeps the offsets trivially right.

/// Builds a GGUF file in memory.
#[derive(Default)]
pub struct GgufWriter {
    kv: Vec<u8>,
    n_kv: u64,
    tensors: Vec<u8>,
    n_tensors: u64,
    data: Vec<u8>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl GgufWriter {
    /// The start of an array value: its key, GGUF's array type (9), the items' type and
    /// their count.
    fn array_header(&mut self, key: &str, item_type: u32, len: usize) {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&9u32.to_le_bytes());
        self.kv.extend_from_slice(&item_type.to_le_bytes());
        self.kv.extend_from_slice(&(len as u64).to_le_bytes());
    }

    /// A `u32` metadata value.
    pub fn kv_u32(mut self, key: &str, v: u32) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&4u32.to_le_bytes());
        self.kv.extend_from_slice(&v.to_le_bytes());
        self.n_kv += 1;
        self
    }

    /// A string metadata value.
    pub fn kv_str(mut self, key: &str, v: &str) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&8u32.to_le_bytes());
        string(&mut self.kv, v);
        self.n_kv += 1;
        self
    }

    /// An array of strings.
    pub fn kv_str_array(mut self, key: &str, items: &[&str]) -> Self {
        self.array_header(key, 8, items.len());
        for i in items {
            string(&mut self.kv, i);
        }
        self.n_kv += 1;
        self
    }

    /// An array of `i32`.
    pub fn kv_i32_array(mut self, key: &str, items: &[i32]) -> Self {
        self.array_header(key, 5, items.len());
        for i in items {
            self.kv.extend_from_slice(&i.to_le_bytes());
        }
        self.n_kv += 1;
        self
    }

    /// An array of `f32`.
    pub fn kv_f32_array(mut self, key: &str, items: &[f32]) -> Self {
        self.array_header(key, 6, items.len());
        for i in items {
            self.kv.extend_from_slice(&i.to_le_bytes());
        }
        self.n_kv += 1;
        self
    }

    /// A boolean metadata value.
    pub fn kv_bool(mut self, key: &str, v: bool) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&7u32.to_le_bytes());
        self.kv.push(u8::from(v));
        self.n_kv += 1;
        self
    }

    /// An `f32` metadata value.
    pub fn kv_f32(mut self, key: &str, v: f32) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&6u32.to_le_bytes());
        self.kv.extend_from_slice(&v.to_le_bytes());
        self.n_kv += 1;
        self
    }

    fn tensor_info(&mut self, name: &str, dims: &[u64], type_id: u32) {
        string(&mut self.tensors, name);
        self.tensors.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.tensors.extend_from_slice(&d.to_le_bytes());
        }
        self.tensors.extend_from_slice(&type_id.to_le_bytes());
        self.tensors.extend_from_slice(&(self.data.len() as u64).to_le_bytes());
        self.n_tensors += 1;
    }

    /// A tensor whose `bytes` bytes of data are a filler pattern (byte `i` of the data
    /// section is `i as u8`).
    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, bytes: u64) -> Self {
        self.tensor_info(name, dims, type_id);
        let end = self.data.len() as u64 + bytes.div_ceil(32) * 32;
        self.data.extend((self.data.len() as u64..end).map(|i| i as u8));
        self
    }

    /// A tensor with the given data (GGML dimension order, innermost first).
    pub fn tensor_data(mut self, name: &str, dims: &[u64], type_id: u32, bytes: &[u8]) -> Self {
        self.tensor_info(name, dims, type_id);
        self.data.extend_from_slice(bytes);
        while !self.data.len().is_multiple_of(32) {
            self.data.push(0);
        }
        self
    }

    /// A tensor of type `ty` and shape `dims` (innermost first) whose data `fill` writes
    /// into a zeroed buffer of exactly the size the type's blocks take.
    ///
    /// Panics if the row length is not a whole number of the type's blocks: the caller
    /// chooses shapes, never a file.
    pub fn tensor_with(mut self, name: &str, dims: &[u64], ty: super::GgmlType, fill: impl FnOnce(&mut [u8])) -> Self {
        let elements: u64 = dims.iter().product();
        assert!(dims.first().is_some_and(|d| d % ty.block_elements() == 0), "{name}: rows of {dims:?} are not whole {ty} blocks");
        let bytes = (elements / ty.block_elements() * ty.block_bytes()) as usize;
        self.tensor_info(name, dims, ty.id());
        let at = self.data.len();
        self.data.resize(at + bytes, 0);
        fill(&mut self.data[at..]);
        while !self.data.len().is_multiple_of(32) {
            self.data.push(0);
        }
        self
    }

    /// Bytes of tensor data so far (alignment padding included).
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// The file: header, metadata, tensor infos, padding to 32 bytes, tensor data.
    pub fn build(self, version: u32) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&self.n_tensors.to_le_bytes());
        out.extend_from_slice(&self.n_kv.to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.tensors);
        while !out.len().is_multiple_of(32) {
            out.push(0);
        }
        out.extend_from_slice(&self.data);
        out
    }
}
