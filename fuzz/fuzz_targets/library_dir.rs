//! A library's files truncated, corrupted, removed or added, then opened, searched, added
//! to and removed from: a value or a typed error every time, never a panic.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_core::fuzz_harness::library_dir));
