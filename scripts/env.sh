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
