#!/usr/bin/env bash
# `npm run build`: release builds of the CLI and the wasm crate.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh
step "docmem CLI (release)"
cargo build --release --locked -p docmem-cli
step "docmem-wasm (release, wasm32-unknown-unknown)"
cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
echo "CLI: $CARGO_TARGET_DIR/release/docmem"
