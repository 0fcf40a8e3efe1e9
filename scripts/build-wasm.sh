#!/usr/bin/env bash
# Build the wasm packages, release, each in its own target dir (a flag change would
# otherwise rebuild the other's outputs), and bind them with wasm-bindgen:
#   wasm-pkg-web          simd128, one thread: any page, and Node (stable toolchain).
#   wasm-pkg-web-threads  simd128 + atomics + shared memory: the CPU kernels on Web Workers
#                         (js/threads.js), for cross-origin isolated pages and Node. Rust's
#                         std must itself be compiled with atomics, which only a nightly
#                         toolchain can do (-Zbuild-std); it is pinned in env.sh
#                         ($DOCMEM_THREADS_TOOLCHAIN) and installed by setup.sh.
#   wasm-pkg-node         the plain .wasm bound for Node's CommonJS tests (no second build).
# The two builds differ in their target features, so each is needed; nothing is built twice.
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
if [ "$what" != plain ]; then
  # Shared memory: imported (every thread instantiates on the same one), at most 4 GiB,
  # and the thread-local storage symbols wasm-bindgen needs to set up each thread.
  flags="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128"
  for a in --shared-memory --max-memory=4294967296 --import-memory \
    --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base; do
    flags="$flags -C link-arg=$a"
  done
  # `npm test` lints through clippy-driver as the workspace's compiler (test.sh); this
  # build needs the nightly's own driver.
  wrapper=""
  [ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ] || wrapper=$(rustup which --toolchain "$DOCMEM_THREADS_TOOLCHAIN" clippy-driver)
  RUSTC_WORKSPACE_WRAPPER="$wrapper" CARGO_TARGET_DIR="$DOCMEM_CACHE/target-wasm-threads" RUSTFLAGS="$flags" \
    cargo "+$DOCMEM_THREADS_TOOLCHAIN" build --release --locked -p docmem-wasm \
    --target wasm32-unknown-unknown -Z build-std=std,panic_abort
  wasm="$DOCMEM_CACHE/target-wasm-threads/wasm32-unknown-unknown/release/docmem_wasm.wasm"
  wasm-bindgen --target web --out-dir "$DOCMEM_CACHE/wasm-pkg-web-threads" "$wasm"
  echo '{ "type": "module" }' >"$DOCMEM_CACHE/wasm-pkg-web-threads/package.json"
  echo "wasm with threads: $(wc -c <"$DOCMEM_CACHE/wasm-pkg-web-threads/docmem_wasm_bg.wasm") bytes, $(gzip -9 -c "$DOCMEM_CACHE/wasm-pkg-web-threads/docmem_wasm_bg.wasm" | wc -c) gzipped"
fi
