#!/usr/bin/env bash
# The peers `docmem bench embed` compares with, installed once into $DOCMEM_CACHE by the
# registries' own clients (benchmarks only; tests never need them):
# - sentence-transformers on PyTorch's CPU build (a virtualenv, pinned versions): also
#   what scripts/golden/embed.py runs;
# - transformers.js (`@huggingface/transformers`, npm) for Node, and all-MiniLM-L6-v2
#   exported to ONNX for it by scripts/bench/export_onnx.py (same model files). Install
#   scripts are skipped: onnxruntime-node's would download CUDA binaries from outside the
#   registry, and the benchmark runs transformers.js on onnxruntime-web (wasm) anyway.
# - wllama (`@wllama/wllama`, npm), llama.cpp in wasm, for the browser LM benchmark
#   (scripts/bench/wasm-lm-browser.sh).
# Idempotent. Prints nothing but progress.
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$DOCMEM_ROOT"
venv="$DOCMEM_CACHE/bench-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sentence_transformers, onnx' 2>/dev/null; then
  step "sentence-transformers and onnx into $venv (PyPI; a large download once)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    sentence-transformers==5.1.2 torch==2.15.0 onnx==1.23.2
fi
node_dir="$DOCMEM_CACHE/bench-node"
if [ ! -d "$node_dir/node_modules/@huggingface/transformers" ]; then
  step "transformers.js into $node_dir (npm)"
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm init -y >/dev/null && npm install --silent --ignore-scripts --no-audit --no-fund @huggingface/transformers@3.8.0)
fi
# wllama (llama.cpp compiled to wasm) for scripts/bench/wasm-lm-browser.sh: the peer of
# the wasm CPU backend's language models, run in the same headless Chromium page.
if [ ! -f "$node_dir/node_modules/@wllama/wllama/package.json" ] \
  || [ "$(node -p 'require(process.argv[1]).version' "$node_dir/node_modules/@wllama/wllama/package.json")" != "3.8.1" ]; then
  step "wllama into $node_dir (npm)"
  mkdir -p "$node_dir"
  (cd "$node_dir" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --silent --ignore-scripts --no-audit --no-fund @wllama/wllama@3.8.1)
fi
onnx_dir="$DOCMEM_CACHE/bench-onnx/all-MiniLM-L6-v2"
if [ ! -f "$onnx_dir/onnx/model.onnx" ]; then
  step "all-MiniLM-L6-v2 to ONNX for transformers.js ($onnx_dir)"
  "$venv/bin/python" scripts/bench/export_onnx.py "$DOCMEM_MODELS/all-MiniLM-L6-v2" "$onnx_dir"
fi
