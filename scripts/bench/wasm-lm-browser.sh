#!/usr/bin/env bash
# docmem's wasm CPU backend against wllama (llama.cpp compiled to wasm) in one headless
# Chromium, on the same GGUF files (SmolLM2-135M Q4_1 and Qwen2.5-Coder-1.5B Q4_K_M, each
# skipped when missing), at 1 and 2 threads: prefill and decode tokens per second and the
# ratios ours / wllama's, as JSON lines and then a markdown table (stdout; progress on
# stderr). Exits 1 when a case failed.
#
#   bash scripts/bench/wasm-lm-browser.sh [--gen-tokens N] [--prompt-tokens N]
#        [--models SUBSTR,...] [--threads 1,2] [--engines docmem,docmem-relaxed,wllama]
#        [--case-timeout SECONDS]
#
# Needs the web wasm packages (plain and threads; scripts/build-wasm.sh, run by
# scripts/wasm-test.sh), playwright-core (scripts/setup.sh) and /usr/bin/chromium; installs
# wllama with scripts/bench/setup-peers.sh. The work is in wasm-lm-browser.mjs.
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$DOCMEM_ROOT"
bash scripts/bench/setup-peers.sh >&2
for pkg in wasm-pkg-web wasm-pkg-web-threads; do
  if [ ! -f "$DOCMEM_CACHE/$pkg/docmem_wasm_bg.wasm" ]; then
    echo "docmem: no web wasm package in $DOCMEM_CACHE/$pkg; run bash scripts/wasm-test.sh first" >&2
    exit 1
  fi
done
if [ ! -d node_modules/playwright-core ]; then
  echo "docmem: playwright-core is not installed; run bash scripts/setup.sh first" >&2
  exit 1
fi
node scripts/bench/wasm-lm-browser.mjs "$@"
