#!/usr/bin/env bash
# `npm run serve`: the browser app at http://127.0.0.1:8080/ (PORT to change it). Builds
# the wasm package first when it is missing (always with DOCMEM_REBUILD=1, as `npm start`
# does) and fetches the app's models when they are missing: the default reader and
# answerer, Qwen2.5-Coder-1.5B Q4_K_M (1.1 GB, once), SmolLM2-135M (the small choice) and
# the all-MiniLM-L6-v2 embedder, each sha256-checked.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
if [ -n "${DOCMEM_REBUILD:-}" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web-threads/docmem_wasm_bg.wasm" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed/docmem_wasm_bg.wasm" ]; then
  bash scripts/setup.sh
  step "wasm packages (release, simd128; with threads; with threads and relaxed SIMD) for the web"
  bash scripts/build-wasm.sh
fi
bash scripts/fetch-models.sh default
step_done
exec node scripts/serve.mjs "$@"
