//! Decode arbitrary bytes as every serialized index kind.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_core::fuzz_harness::index_decode));
