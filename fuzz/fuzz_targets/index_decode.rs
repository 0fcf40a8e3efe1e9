//! Decode arbitrary bytes as every serialized index kind.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::index_decode(data));
