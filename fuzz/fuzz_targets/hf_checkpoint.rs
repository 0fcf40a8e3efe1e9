//! Load arbitrary bytes, split into `model.safetensors`, `config.json`, `tokenizer.json`
//! and `tokenizer_config.json`, as a Hugging Face decoder and as a sentence embedder, from
//! memory; run what loads.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_runtime::fuzz_harness::hf_checkpoint));
