# Sourced by the other scripts: one place for the build environment.
#
# Build output is cached outside the clone ($HOME/.cache/docmem) so repeat runs are fast;
# nothing depends on that cache being there.
set -euo pipefail

DOCMEM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DOCMEM_ROOT
export DOCMEM_CACHE="${DOCMEM_CACHE:-$HOME/.cache/docmem}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$DOCMEM_CACHE/target}"
# Test models (scripts/fetch-models.sh writes them; tests read this variable).
export DOCMEM_MODELS="${DOCMEM_MODELS:-$DOCMEM_CACHE/models}"
# The nightly toolchain that builds the wasm threads package (scripts/build-wasm.sh): only
# nightly can rebuild std with atomics (-Zbuild-std). Pinned, so a build is repeatable.
export DOCMEM_THREADS_TOOLCHAIN="nightly-2026-05-19"
# Node 22, for the relaxed-SIMD wasm build's tests (installed by setup.sh from npm).
export DOCMEM_NODE22_VERSION="22.23.3"
export DOCMEM_NODE22="$DOCMEM_CACHE/node22/node_modules/.bin/node"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$DOCMEM_CACHE"

# Each step prints how long the one before it took and the time since the run began
# (DOCMEM_T0 is inherited by the scripts a script runs), so a slow step shows in CI's log.
export DOCMEM_T0="${DOCMEM_T0:-$(date +%s)}"
_step_started=""
_step_name=""
step_done() {
  [ -n "$_step_started" ] || return 0
  local now
  now=$(date +%s)
  printf -- '-- %s: %ds (at %dm%02ds)\n' "$_step_name" $((now - _step_started)) $(((now - DOCMEM_T0) / 60)) $(((now - DOCMEM_T0) % 60))
  _step_started=""
}
step() {
  step_done
  _step_started=$(date +%s)
  _step_name="$*"
  printf '\n== %s\n' "$*"
}
trap step_done EXIT

# Run the commands given (each a string for `bash -c`), as many at once as the machine has
# cores (DOCMEM_JOBS to choose), for checks that use one core each: on CI's two cores this
# halves a run of single-threaded Node tests. Each command's output is printed whole, in the
# order given, once all have ended; fails naming every command that failed.
in_parallel() {
  local jobs="${DOCMEM_JOBS:-$(nproc)}" dir i k rc secs failed=0
  local cmds=("$@")
  dir="$(mktemp -d)"
  for ((i = 0; i < ${#cmds[@]}; i++)); do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    (
      started=$(date +%s)
      code=0
      bash -c "${cmds[i]}" >"$dir/$i.log" 2>&1 || code=$?
      echo "$code $(($(date +%s) - started))" >"$dir/$i.rc"
    ) &
  done
  wait
  for ((k = 0; k < ${#cmds[@]}; k++)); do
    cat "$dir/$k.log"
    read -r rc secs <"$dir/$k.rc"
    if [ "$rc" != 0 ]; then
      echo "FAILED (exit $rc after $secs s): ${cmds[k]}"
      failed=1
    fi
  done
  rm -rf "$dir"
  return "$failed"
}
