#!/usr/bin/env bash
# `npm run serve`: the browser app at http://127.0.0.1:8080/ (PORT to change it). Builds
# the wasm package first when it is missing (always with DOCMEM_REBUILD=1, as `npm start`
# does) and fetches the demo models when they are missing.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
if [ -n "${DOCMEM_REBUILD:-}" ] || [ ! -f "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" ]; then
  bash scripts/setup.sh
  step "wasm package (release, simd128) for the web"
  CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-simd" RUSTFLAGS="-C target-feature=+simd128" \
    cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
  wasm-bindgen --target web --out-dir "$DOCMEM_CACHE/wasm-pkg-web" \
    "$DOCMEM_CACHE/target-wasm-simd/wasm32-unknown-unknown/release/docmem_wasm.wasm"
  echo '{ "type": "module" }' >"$DOCMEM_CACHE/wasm-pkg-web/package.json"
fi
bash scripts/fetch-models.sh
step_done
exec node scripts/serve.mjs "$@"
