//! Load arbitrary bytes as a GGUF model from memory, the whole path (header,
//! hyper-parameters, tokenizer from the metadata, chat template, tensors); render a short
//! chat, tokenize it and run a few tokens through a model that loads.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_runtime::fuzz_harness::gguf_load));
