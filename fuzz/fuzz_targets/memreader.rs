//! Parse and align arbitrary MemReader output against an arbitrary document.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::memreader(data));
