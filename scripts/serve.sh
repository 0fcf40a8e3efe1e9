#!/usr/bin/env bash
# `npm run serve`: the browser app at http://127.0.0.1:8080/ (PORT to change it). Builds
# the wasm package first when it is missing (always with DOCMEM_REBUILD=1, as `npm start`
# does) and fetches the demo models when they are missing.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
if [ -n "${DOCMEM_REBUILD:-}" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web-threads/docmem_wasm_bg.wasm" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed/docmem_wasm_bg.wasm" ]; then
  bash scripts/setup.sh
  step "wasm packages (release, simd128; with threads; with threads and relaxed SIMD) for the web"
  bash scripts/build-wasm.sh
fi
bash scripts/fetch-models.sh
step_done
exec node scripts/serve.mjs "$@"
