//! Small GGUF files built byte by byte, for tests, fuzz seeds and the fuzz harness. Not a
//! public API.

use super::GgufFile;
use crate::source::MemorySource;

/// Builds GGUF bytes.
#[derive(Default)]
pub struct Builder {
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

impl Builder {
    pub fn kv_u32(mut self, key: &str, v: u32) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&4u32.to_le_bytes());
        self.kv.extend_from_slice(&v.to_le_bytes());
        self.n_kv += 1;
        self
    }

    pub fn kv_str(mut self, key: &str, v: &str) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&8u32.to_le_bytes());
        string(&mut self.kv, v);
        self.n_kv += 1;
        self
    }

    pub fn kv_str_array(mut self, key: &str, items: &[&str]) -> Self {
        string(&mut self.kv, key);
        self.kv.extend_from_slice(&9u32.to_le_bytes());
        self.kv.extend_from_slice(&8u32.to_le_bytes());
        self.kv.extend_from_slice(&(items.len() as u64).to_le_bytes());
        for i in items {
            string(&mut self.kv, i);
        }
        self.n_kv += 1;
        self
    }

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

/// A small, valid file: llama metadata, a vocabulary, three tensors of three types.
pub fn sample() -> Vec<u8> {
    Builder::default()
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 2)
        .kv_str_array("tokenizer.ggml.tokens", &["<s>", "a", "文"])
        .tensor("token_embd.weight", &[64, 3], 8, 2 * 3 * 34)
        .tensor("output_norm.weight", &[64], 0, 256)
        .tensor("blk.0.ffn_down.weight", &[256, 2], 12, 2 * 144)
        .build(3)
}

/// The fuzz harness: parse `data` as a GGUF file; whatever parses must describe tensors
/// that lie inside the data.
pub fn fuzz_read(data: &[u8]) {
    let src = MemorySource::new(data.to_vec());
    if let Ok(f) = GgufFile::read(&src) {
        for t in &f.tensors {
            assert!(t.offset >= f.data_offset && t.offset + t.size <= data.len() as u64);
        }
    }
}
