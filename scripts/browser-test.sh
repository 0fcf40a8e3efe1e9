#!/usr/bin/env bash
# The web app in headless Chromium (playwright-core; scripts/setup.sh installs both):
# models, adding the example, a cited answer, persistence, offline, the CPU fallback.
# Needs the web wasm package that scripts/wasm-test.sh binds, and the test models.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
for pkg in wasm-pkg-web wasm-pkg-web-threads wasm-pkg-web-threads-relaxed; do
  if [ ! -f "$DOCMEM_CACHE/$pkg/docmem_wasm_bg.wasm" ]; then
    echo "docmem: no web wasm package in $DOCMEM_CACHE/$pkg; run bash scripts/wasm-test.sh first" >&2
    exit 1
  fi
done
# Each test has a ceiling well above its time on a slow 2-core machine, so a test that
# hangs (a child process left running, a page that never answers) fails the run in
# minutes, naming itself, instead of running into CI's limit.
within() {
  local minutes=$1
  shift
  timeout --kill-after=30 "$((minutes * 60))" node "$@" || {
    local rc=$?
    [ "$rc" = 124 ] && echo "docmem: $* did not finish within $minutes minutes" >&2
    exit "$rc"
  }
}
within 25 tests/browser/app.test.mjs
# Memories written in the background, resumed after a reload; a model file of the user's own,
# and a Hugging Face folder (SmolLM2 written out by the runtime's exporter, which npm test's
# cargo step builds; built here when this script runs alone).
export DOCMEM_GGUF_TO_HF="$CARGO_TARGET_DIR/debug/examples/gguf_to_hf"
[ -x "$DOCMEM_GGUF_TO_HF" ] || cargo build -q -p docmem-runtime --example gguf_to_hf --locked
# The CLI writes the synthetic Qwen3 the memories test chooses as the user's own model.
export DOCMEM_CLI="$CARGO_TARGET_DIR/debug/docmem"
[ -x "$DOCMEM_CLI" ] || cargo build -q -p docmem-cli --locked
within 15 tests/browser/memories.test.mjs
# Model downloads through the real worker: OPFS, an interrupted file resumed with a Range
# request after a reload, the worker never holding a file whole, the quota refusals.
within 5 tests/browser/downloads.test.mjs
