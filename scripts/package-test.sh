#!/usr/bin/env bash
# The npm package as another project installs it (tests/package/package.test.mjs): packed,
# its file list and browser entry checked, installed into fresh apps built by webpack 5,
# esbuild, Rollup, Vite and Next.js (each loaded in headless Chromium with and without
# cross-origin isolation) and into a fresh Node project, each answering with a citation.
# Needs the wasm builds (wasm-test.sh builds them), the test models and npm's registry
# (the bundlers and pdfjs-dist are installed into the scratch projects). The CLI, where
# it is built, checks that its manifest writer agrees with the package's.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bin="$CARGO_TARGET_DIR/debug/docmem"
[ -x "$bin" ] || bin=""
node tests/package/package.test.mjs "$DOCMEM_MODELS" $bin
