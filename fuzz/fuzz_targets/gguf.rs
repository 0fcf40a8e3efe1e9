//! Parse arbitrary bytes as a GGUF header.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_runtime::gguf::testing::fuzz_read));
