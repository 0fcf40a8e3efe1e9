#!/usr/bin/env bash
# The npm package as another project installs it (tests/package/package.test.mjs): packed,
# its file list checked, installed into a fresh Vite app (built, then loaded in headless
# Chromium with and without cross-origin isolation) and into a fresh Node project, each
# answering with a citation. Needs the wasm builds (wasm-test.sh builds them), the test
# models and npm's registry (Vite and pdfjs-dist are installed into the scratch projects).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
node tests/package/package.test.mjs "$DOCMEM_MODELS" "$CARGO_TARGET_DIR/debug/docmem"
