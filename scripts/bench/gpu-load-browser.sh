#!/usr/bin/env bash
# Issue #6's benchmark: in headless Chromium (WebGPU on SwiftShader where there is no GPU),
# the time to load a GGUF model straight onto the WebGPU device from a local URL
# (docmem's Device.loadLm over synchronous HTTP Range reads in a worker) and the wasm
# heap (linear memory) before and after, for SmolLM2-135M Q4_1 and Qwen2.5-Coder-1.5B
# Q4_K_M (each skipped when missing; the target is a heap under 300 MiB with the 1.5B
# model loaded), plus the first greedy token to show the model works. JSON lines and then
# a markdown table on stdout, progress on stderr; exits 1 when a case failed. Not part of
# npm test: a 1.5B load on SwiftShader takes minutes.
#
#   bash scripts/bench/gpu-load-browser.sh [--models SUBSTR,...] [--case-timeout SECONDS]
#        [--prompt TEXT] [--tokens N (0: skip the first call)] [--trace FILE]
#        [--synthetic SPEC,...]
#
# --synthetic llama3-3b:q4_k_m,qwen3-4b:q4_k_m,... writes those synthetic models (docmem
# synth-gguf: a real model's tensor names, shapes and formats, drawn values; about 2-2.5 GB
# each at 3-4B) to $DOCMEM_CACHE/synthetic-models once and runs them instead: the models
# a user brings that do not fit a page's CPU, loaded onto WebGPU.
#
# Needs the web wasm package built with the gpu feature ($DOCMEM_CACHE/wasm-pkg-web;
# scripts/build-wasm.sh), playwright-core (scripts/setup.sh) and /usr/bin/chromium. The
# work is in gpu-load-browser.mjs.
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$DOCMEM_ROOT"
if [ ! -f "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" ]; then
  echo "docmem: no web wasm package in $DOCMEM_CACHE/wasm-pkg-web; run bash scripts/wasm-test.sh first" >&2
  exit 1
fi
if [ ! -d node_modules/playwright-core ]; then
  echo "docmem: playwright-core is not installed; run bash scripts/setup.sh first" >&2
  exit 1
fi
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = --synthetic ]; then
    [ -n "${2:-}" ] || { echo "docmem: --synthetic needs SPEC,... (llama3-3b:q4_k_m)" >&2; exit 1; }
    synth="$DOCMEM_CACHE/synthetic-models"
    mkdir -p "$synth"
    # (The debug CLI, which npm test builds anyway: writing the files is not timed.)
    cargo build --locked -q -p docmem-cli
    files=()
    IFS=, read -ra specs <<<"$2"
    for spec in "${specs[@]}"; do
      f="$synth/${spec/:/-}.gguf"
      # (Written under another name and moved: a run cut short leaves no partial file.)
      [ -f "$f" ] || { "$CARGO_TARGET_DIR/debug/docmem" synth-gguf "$spec" "$f.part" >&2 && mv "$f.part" "$f"; }
      files+=("$f")
    done
    args+=(--files "$(IFS=,; echo "${files[*]}")")
    shift 2
  else
    args+=("$1")
    shift
  fi
done
node scripts/bench/gpu-load-browser.mjs "${args[@]}"
