#!/usr/bin/env bash
# `npm run build`: release builds of the CLI and the wasm packages.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh
step "docmem CLI (release)"
cargo build --release --locked -p docmem-cli
step "wasm packages (release, simd128; with threads; with threads and relaxed SIMD)"
bash scripts/build-wasm.sh
echo "CLI: $CARGO_TARGET_DIR/release/docmem"
