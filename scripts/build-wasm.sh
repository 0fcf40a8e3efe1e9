#!/usr/bin/env bash
# Build the wasm packages, release, each in its own target dir (a flag change would
# otherwise rebuild the other's outputs), and bind them with wasm-bindgen:
#   wasm-pkg-web          simd128, one thread: any page, and Node (stable toolchain).
#   wasm-pkg-web-threads  simd128 + atomics + shared memory: the CPU kernels on Web Workers
#                         (js/threads.js), for cross-origin isolated pages and Node. Rust's
#                         std must itself be compiled with atomics, which only a nightly
#                         toolchain can do (-Zbuild-std); it is pinned in env.sh
#                         ($DOCMEM_THREADS_TOOLCHAIN) and installed by setup.sh.
#   wasm-pkg-web-threads-relaxed  the threads build with relaxed SIMD's dot product, for
#                         engines that have it (chosen at load, after the kernel check).
#   wasm-pkg-node         the plain .wasm bound for Node's CommonJS tests (no second build).
# The builds differ in their target features, so each is needed; nothing is built twice.
#   bash scripts/build-wasm.sh [plain|threads|both]   (default both)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
what="${1:-both}"
if [ "$what" != threads ]; then
  CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-simd" RUSTFLAGS="-C target-feature=+simd128" \
    cargo build --release --locked -p docmem-wasm --target wasm32-unknown-unknown
  wasm="$DOCMEM_CACHE/target-wasm-simd/wasm32-unknown-unknown/release/docmem_wasm.wasm"
  wasm-bindgen --target web --out-dir "$DOCMEM_CACHE/wasm-pkg-web" "$wasm"
  echo '{ "type": "module" }' >"$DOCMEM_CACHE/wasm-pkg-web/package.json" # an ES module for Node too
  wasm-bindgen --target nodejs --out-dir "$DOCMEM_CACHE/wasm-pkg-node" "$wasm"
  echo "wasm for the web: $(wc -c <"$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm") bytes, $(gzip -9 -c "$DOCMEM_CACHE/wasm-pkg-web/docmem_wasm_bg.wasm" | wc -c) gzipped"
fi
# The threads builds: shared memory imported (every thread instantiates on the same one),
# at most 4 GiB, and the thread-local storage symbols wasm-bindgen needs to set up each
# thread. `npm test` lints through clippy-driver as the workspace's compiler (test.sh);
# these builds need the nightly's own driver.
threads_build() { # out-dir target-dir [cargo arguments]
  local flags="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128"
  for a in --shared-memory --max-memory=4294967296 --import-memory \
    --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base; do
    flags="$flags -C link-arg=$a"
  done
  local wrapper=""
  [ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ] || wrapper=$(rustup which --toolchain "$DOCMEM_THREADS_TOOLCHAIN" clippy-driver)
  RUSTC_WORKSPACE_WRAPPER="$wrapper" CARGO_TARGET_DIR="$DOCMEM_CACHE/$2" RUSTFLAGS="$flags" \
    cargo "+$DOCMEM_THREADS_TOOLCHAIN" build --release --locked -p docmem-wasm \
    --target wasm32-unknown-unknown -Z build-std=std,panic_abort "${@:3}"
  local wasm="$DOCMEM_CACHE/$2/wasm32-unknown-unknown/release/docmem_wasm.wasm"
  wasm-bindgen --target web --out-dir "$DOCMEM_CACHE/$1" "$wasm"
  echo '{ "type": "module" }' >"$DOCMEM_CACHE/$1/package.json"
  echo "$1: $(wc -c <"$DOCMEM_CACHE/$1/docmem_wasm_bg.wasm") bytes, $(gzip -9 -c "$DOCMEM_CACHE/$1/docmem_wasm_bg.wasm" | wc -c) gzipped"
}
if [ "$what" != plain ]; then
  threads_build wasm-pkg-web-threads target-wasm-threads
  # The same with relaxed SIMD's integer dot product (Chrome 114+, Firefox 125+, Node 22+;
  # not Safari): the Q4_K, Q6_K and Q4_1 kernels' products in two instructions instead of
  # seven. Chosen at load where it compiles and passes the kernel check (js/worker-ops.js).
  # The feature is enabled on those kernels alone (the crate feature turns on their
  # #[target_feature]), so no other relaxed instruction enters the module; the same
  # target dir and flags, so std and every dependency are compiled once for both.
  threads_build wasm-pkg-web-threads-relaxed target-wasm-threads --features relaxed-simd
fi
# The npm package finds its wasm builds beside js/docmem.js, in js/wasm/ (where the packed
# package carries them, scripts/pack.sh): in this repository they are links to the builds.
mkdir -p "$DOCMEM_ROOT/js/wasm"
ln -sfn "$DOCMEM_CACHE/wasm-pkg-web" "$DOCMEM_ROOT/js/wasm/plain"
ln -sfn "$DOCMEM_CACHE/wasm-pkg-web-threads" "$DOCMEM_ROOT/js/wasm/threads"
ln -sfn "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed" "$DOCMEM_ROOT/js/wasm/relaxed"
