//! Parse and align MemReader output against a document at adversarial sizes: both are
//! expanded from the input's repeat notation (megabyte-long `[MASK]` prefixes, thousands
//! of tags, missing closers), aligned as `[MASK]` patterns and on numbered units.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(
    data,
    docmem_core::fuzz_harness::memreader_adversarial
));
