#!/usr/bin/env bash
# wasm (simd128, one thread, Node) prefill/decode figures for the fetched models: the wasm
# column of the LM benchmark table. A benchmark, not a test: `bash scripts/wasm-bench.sh`.
# Threads, and wllama side by side in Chromium: scripts/bench/wasm-lm-browser.sh.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pkg="$DOCMEM_CACHE/wasm-pkg-node"
bash "$DOCMEM_ROOT/scripts/build-wasm.sh" plain
models=()
for m in SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-1.5b-instruct-q4_k_m.gguf; do
  [ -f "$DOCMEM_MODELS/$m" ] && models+=("$DOCMEM_MODELS/$m")
done
node "$DOCMEM_ROOT/tests/wasm/bench.cjs" "$pkg" "${models[@]}"
