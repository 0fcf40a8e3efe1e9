#!/usr/bin/env bash
# `npm run release [-- --dry-run]`: publish the npm package. It is staged as `npm run pack`
# stages it, then `npm publish` is run on the staged folder, whose prepublishOnly
# (js/package.json) runs scripts/package-test.sh on that very folder: the consumer apps
# (webpack, esbuild, Rollup, Vite, Next.js) and the Node project are built on it and must
# answer. Published only if they pass. Needs the wasm builds (scripts/build-wasm.sh) and
# the test models (scripts/fetch-models.sh).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
out="$DOCMEM_CACHE/npm-release"
rm -rf "$out"
bash scripts/pack.sh "$out" >/dev/null
npm publish "$out/package" "$@"
