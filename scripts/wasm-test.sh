#!/usr/bin/env bash
# Build the wasm package (simd128, release: the one wasm build of `npm test`), bind it for
# Node and for the web from the same .wasm, and run the wasm checks: the LM on SmolLM2
# against llama.cpp, the embedder on all-MiniLM-L6-v2 against sentence-transformers, the
# document library (ingest, search, answers, persistence) on both, the npm package's
# DocMem client in Node, and every export called with bad arguments (an Error each time,
# never a trap; a panic's message reaches console.error and the next call).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pkg="$DOCMEM_CACHE/wasm-pkg-node"
wasm="$DOCMEM_CACHE/target-wasm-simd/wasm32-unknown-unknown/release/docmem_wasm.wasm"
# Its own target dir: the simd128 flag would otherwise rebuild the other wasm32 outputs.
CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-simd" RUSTFLAGS="-C target-feature=+simd128" \
  cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
wasm-bindgen --target nodejs --out-dir "$pkg" "$wasm"
# The browser app and the npm package load this one (ES module + .wasm); no second build.
wasm-bindgen --target web --out-dir "$DOCMEM_CACHE/wasm-pkg-web" "$wasm"
echo '{ "type": "module" }' >"$DOCMEM_CACHE/wasm-pkg-web/package.json"   # an ES module for Node too
echo "wasm for the web: $(wc -c <"$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm") bytes, $(gzip -9 -c "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" | wc -c) gzipped"
node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$pkg" "$DOCMEM_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$DOCMEM_ROOT/crates/runtime/tests/golden/lm-smollm2.json"
node "$DOCMEM_ROOT/tests/wasm/embed.cjs" "$pkg" "$DOCMEM_MODELS/all-MiniLM-L6-v2" \
  "$DOCMEM_ROOT/crates/runtime/tests/golden/embed-minilm.json"
node "$DOCMEM_ROOT/tests/wasm/library.cjs" "$pkg" "$DOCMEM_MODELS" "$DOCMEM_ROOT/examples/printing-press.md"
node "$DOCMEM_ROOT/tests/wasm/package.mjs" "$DOCMEM_MODELS" "$DOCMEM_ROOT/examples/printing-press.md"
node "$DOCMEM_ROOT/tests/wasm/bad-arguments.cjs" "$pkg" "$DOCMEM_MODELS"
