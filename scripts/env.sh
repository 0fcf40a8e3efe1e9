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
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$DOCMEM_CACHE"

step() { printf '\n== %s\n' "$*"; }
