//! Compile arbitrary text as a model's chat template and render a four-turn chat with it:
//! every render ends with a prompt or a typed error, inside the time and memory limits.
#![no_main]
docmem_core::counting_allocator!();
libfuzzer_sys::fuzz_target!(|data: &[u8]| docmem_core::fuzz_harness::meter::fuzz_one(data, docmem_runtime::fuzz_harness::chat_template));
