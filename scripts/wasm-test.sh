#!/usr/bin/env bash
# Build the wasm package for Node (simd128, release: the one wasm build of `npm test`) and
# run the wasm checks: the LM on SmolLM2 against llama.cpp, the embedder on
# all-MiniLM-L6-v2 against sentence-transformers, the document library (ingest, search,
# answers, persistence) on both.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pkg="$DOCMEM_CACHE/wasm-pkg-node"
# Its own target dir: the simd128 flag would otherwise rebuild the other wasm32 outputs.
CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-simd" RUSTFLAGS="-C target-feature=+simd128" \
  cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
wasm-bindgen --target nodejs --out-dir "$pkg" "$DOCMEM_CACHE/target-wasm-simd/wasm32-unknown-unknown/release/docmem_wasm.wasm"
node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$pkg" "$DOCMEM_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$DOCMEM_ROOT/crates/runtime/tests/golden/lm-smollm2.json"
node "$DOCMEM_ROOT/tests/wasm/embed.cjs" "$pkg" "$DOCMEM_MODELS/all-MiniLM-L6-v2" \
  "$DOCMEM_ROOT/crates/runtime/tests/golden/embed-minilm.json"
node "$DOCMEM_ROOT/tests/wasm/library.cjs" "$pkg" "$DOCMEM_MODELS" "$DOCMEM_ROOT/examples/printing-press.md"
