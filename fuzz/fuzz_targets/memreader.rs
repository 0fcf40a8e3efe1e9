//! Parse and align arbitrary MemReader output against an arbitrary document.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_core::fuzz_harness::memreader));
