#!/usr/bin/env bash
# wasm (simd128, one thread, Node) prefill/decode figures for the fetched models: the wasm
# column of the LM benchmark table. A benchmark, not a test: `bash scripts/wasm-bench.sh`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pkg="$DOCMEM_CACHE/wasm-pkg-node"
CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-simd" RUSTFLAGS="-C target-feature=+simd128" \
  cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
wasm-bindgen --target nodejs --out-dir "$pkg" "$DOCMEM_CACHE/target-wasm-simd/wasm32-unknown-unknown/release/docmem_wasm.wasm"
models=()
for m in SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; do
  [ -f "$DOCMEM_MODELS/$m" ] && models+=("$DOCMEM_MODELS/$m")
done
node "$DOCMEM_ROOT/tests/wasm/bench.cjs" "$pkg" "${models[@]}"
