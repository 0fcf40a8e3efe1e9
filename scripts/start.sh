#!/usr/bin/env bash
# `npm start`: the main job. Until the browser app exists, it indexes the bundled example
# document with the sentence chunker and answers a question by retrieval alone.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh

step "building docmem (release)"
cargo build --release --locked -p docmem-cli
question="${1:-Who brought printing to England, and what did he print?}"
step "docmem retrieve examples/printing-press.md --query \"$question\""
"$CARGO_TARGET_DIR/release/docmem" retrieve examples/printing-press.md --chunker sentence --k 3 --query "$question"
