#!/usr/bin/env bash
# A library at scale in headless Chromium: documents added one at a time into IndexedDB
# as the npm package's worker adds them (sentence chunks, the hashing embedder), with the
# seconds and bytes per document as it grows, the merges, the reload's open and search
# times and the wasm heap, as JSON and a markdown table (stdout; progress on stderr).
#
#   bash scripts/bench/library-browser.sh [--docs 2000] [--every 250] [--queries 100]
#        [--slice-ms 50] [--hotpot FILE] [--case-timeout SECONDS] [--keep-index]
#
# Needs the web wasm package (scripts/build-wasm.sh, run by scripts/wasm-test.sh),
# playwright-core (scripts/setup.sh) and /usr/bin/chromium. The work is in
# library-browser.mjs and library-browser-worker.js.
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
node scripts/bench/library-browser.mjs "$@"
