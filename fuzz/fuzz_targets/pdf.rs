//! Bytes as a PDF a user dropped: the text of its pages or a typed error, never a panic,
//! an abort or a decompression bomb inflated.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_runtime::fuzz_harness::pdf));
