//! The GGUF parser on a real model file (fetched by `scripts/fetch-models.sh`, which
//! `npm test` runs first). (The GGUF fuzz corpus runs in `tests/fuzz_corpus.rs`.)

mod common;

use common::model;

use docmem_runtime::gguf::{GgmlType, GgufFile, MetaValue};
use docmem_runtime::source::FileSource;

#[test]
fn smollm2_header() {
    let src = FileSource::open(&model("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    let f = GgufFile::read(&src).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.architecture(), Some("llama"));
    let u = |k: &str| f.get(k).and_then(MetaValue::as_u64);
    assert_eq!((u("llama.block_count"), u("llama.embedding_length"), u("llama.attention.head_count_kv")), (Some(30), Some(576), Some(3)));
    assert_eq!(f.get("tokenizer.ggml.pre").and_then(MetaValue::as_str), Some("smollm"));
    assert_eq!(f.get("tokenizer.ggml.tokens").and_then(MetaValue::as_array).map(<[_]>::len), Some(49152));
    assert_eq!(f.tensors.len(), 272);
    // 30 blocks × 9 tensors + token embeddings + output norm; no output.weight (tied).
    assert!(f.tensor("output.weight").is_none());
    assert_eq!(f.tensor("token_embd.weight").map(|t| (t.ggml_type, t.dims.clone())), Some((GgmlType::Q8_0, vec![576, 49152])));
    assert_eq!(f.tensor("blk.29.ffn_up.weight").map(|t| t.ggml_type), Some(GgmlType::Q4_1));
    // Tensors lie back to back, aligned, inside the file.
    let end = f.tensors.iter().map(|t| t.offset + t.size).max().unwrap();
    assert!(end <= std::fs::metadata(model("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap().len());
    assert!(f.tensors.iter().all(|t| (t.offset - f.data_offset).is_multiple_of(f.alignment)));
}
