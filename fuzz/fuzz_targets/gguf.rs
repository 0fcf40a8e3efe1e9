//! Parse arbitrary bytes as a GGUF header.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_runtime::gguf::testing::fuzz_read(data));
