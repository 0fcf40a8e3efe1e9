//! GGUF header tests on files built here, byte by byte.

use super::testing::{sample, Builder};
use super::*;
use crate::source::MemorySource;

#[test]
fn reads_metadata_and_tensors() {
    let bytes = sample();
    let src = MemorySource::new(bytes);
    let f = GgufFile::read(&src).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.get("llama.block_count").and_then(MetaValue::as_u64), Some(2));
    let tokens = f.get("tokenizer.ggml.tokens").and_then(MetaValue::as_array).unwrap();
    assert_eq!(tokens[2].as_str(), Some("文"));
    assert_eq!(f.tensors.len(), 3);
    let t = f.tensor("token_embd.weight").unwrap();
    assert_eq!((t.ggml_type, t.elements(), t.size), (GgmlType::Q8_0, 192, 204));
    assert_eq!(t.offset, f.data_offset);
    let k = f.tensor("blk.0.ffn_down.weight").unwrap();
    assert_eq!((k.ggml_type, k.size), (GgmlType::Q4K, 288));
    let data = f.tensor_bytes(&src, f.tensor("output_norm.weight").unwrap()).unwrap();
    assert_eq!(data.len(), 256);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample();
    for cut in 0..bytes.len() - 1 {
        let src = MemorySource::new(bytes[..cut].to_vec());
        assert!(GgufFile::read(&src).is_err(), "cut at {cut} was accepted");
    }
}

#[test]
fn bad_files_get_named_errors() {
    let err = |b: Vec<u8>| GgufFile::read(&MemorySource::new(b)).unwrap_err().to_string();
    assert!(err(b"GGML....".to_vec()).contains("not a GGUF file"));
    assert!(err(Builder::default().build(1)).contains("version 1"));
    let iq = Builder::default().tensor("blk.3.attn_k.weight", &[256], 19, 256).build(3);
    let e = err(iq);
    assert!(e.contains("blk.3.attn_k.weight") && e.contains("IQ"), "{e}");
    let ragged = Builder::default().tensor("w", &[33], 2, 18).build(3);
    assert!(err(ragged).contains("invalid shape"));
    // An absurd tensor count is refused before anything is allocated.
    let mut huge = b"GGUF".to_vec();
    huge.extend_from_slice(&3u32.to_le_bytes());
    huge.extend_from_slice(&u64::MAX.to_le_bytes());
    huge.extend_from_slice(&0u64.to_le_bytes());
    assert!(err(huge).contains("implausible tensor count"));
    // A tensor whose data would run past the end.
    let mut short = sample();
    short.truncate(short.len() - 40);
    assert!(err(short).contains("past the end"));
}

#[test]
fn a_header_of_millions_of_tiny_values_is_refused_before_they_are_built() {
    // A u8 array of 9 M items: 9 MB in the file, but ~216 MB of MetaValues, and a 200 MB
    // one would be ~5 GB. Built by hand: version 3, no tensors, one key.
    let n: u64 = MAX_METADATA_VALUES + 1;
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes()); // tensors
    b.extend_from_slice(&1u64.to_le_bytes()); // key/values
    let key = b"junk.bytes";
    b.extend_from_slice(&(key.len() as u64).to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(&9u32.to_le_bytes()); // array
    b.extend_from_slice(&0u32.to_le_bytes()); // of u8
    b.extend_from_slice(&n.to_le_bytes());
    b.resize(b.len() + n as usize, 7);
    let e = GgufFile::read(&MemorySource::new(b)).unwrap_err().to_string();
    assert!(e.contains("metadata values"), "{e}");
}

/// A source that says it is longer than the bytes it can give (a file truncated while it
/// was read, a range reader over a shorter file).
struct ShorterThanItSays(Vec<u8>);

impl crate::source::ByteSource for ShorterThanItSays {
    fn len(&self) -> u64 {
        1 << 20
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        MemorySource::new(self.0.clone()).read_at(offset, buf)
    }
}

#[test]
fn a_source_shorter_than_it_says_ends_inside_the_header() {
    let mut bytes = sample();
    bytes.truncate(40);
    let err = GgufFile::read(&ShorterThanItSays(bytes)).unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err}");
    assert!(err.to_string().starts_with("the file ends inside the header"), "{err}");
}
