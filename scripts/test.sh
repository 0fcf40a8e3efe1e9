#!/usr/bin/env bash
# `npm test`: every check, on a fresh machine or a warm one.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh

step "format"
cargo fmt --all --check

step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "no_std: docmem-core for thumbv7m-none-eabi (a target without std)"
cargo build -p docmem-core --no-default-features --target thumbv7m-none-eabi --locked

step "wasm: the wasm-bindgen crate for wasm32-unknown-unknown"
cargo build -p docmem-wasm --target wasm32-unknown-unknown --locked

step "tests: unit, property, fuzz-corpus regression and CLI tests"
cargo test --workspace --locked
