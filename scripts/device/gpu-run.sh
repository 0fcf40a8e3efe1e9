#!/usr/bin/env bash
# The GPU benchmark run: everything a lent GPU machine is for, in one call of at most
# eight minutes, from what `scripts/device/prepare.sh` gathered into .device/ (that machine
# has no network, and a model file cannot travel there: the models are synthetic, real
# shapes and block formats with seeded values, built in memory by docmem itself).
#
#   1. the Vulkan loader from the carried .debs; the adapter's name, driver and limits
#   2. the twelve kernel checks on the adapter, f16 and f32 paths (docmem gpu-check)
#   3. bench lm --backend gpu --synthetic qwen2-1.5b:q4_k_m: prefill 512, decode 128, per-
#      kernel timestamps, f16 and f32 paths; four paths decoded as one batch; prompt-lookup
#      drafts on a copy-heavy prompt
#   4. bench embed --gpu-only --synthetic minilm: sentences/s at batch 1 and 32, 128 tokens
#   5. llama.cpp built with CUDA for this GPU alone (in the background from the start, on
#      cores the benchmarks leave free), then llama-bench on the same synthetic GGUF bytes,
#      once our timings are done (never both on the GPU at once)
# Output in $OUT (the device tool's folder; --out elsewhere): gpu-run.json (every figure),
# gpu-run.md (the table), gpu-run.log, llamacpp-build.log.
#
# On the device (its README's recipe; the run's `carry` names .device):
#   bash scripts/device/gpu-run.sh
# Here, before any device minute is spent (npm test runs this on llvmpipe, tiny shapes):
#   bash scripts/device/gpu-run.sh --smoke [--bin target/debug/docmem]
# A second call in one session can leave llama.cpp out (--skip-llamacpp: its figures do not
# change with ours) and time an earlier build beside this one (--baseline BIN: prefill and
# decode alone, on the same card in the same call).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
t_start=$(date +%s)
smoke=0 bin="" out="${OUT:-}" budget=470 skip_llamacpp=0 baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; shift ;;
    --bin) bin="${2-}"; shift 2 ;;
    --out) out="${2-}"; shift 2 ;;
    --budget) budget="${2-}"; shift 2 ;;
    --skip-llamacpp) skip_llamacpp=1; shift ;;
    --baseline) baseline="${2-}"; shift 2 ;;
    *) echo "usage: gpu-run.sh [--smoke] [--bin DOCMEM] [--out DIR] [--budget SECONDS] [--skip-llamacpp] [--baseline DOCMEM]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$root/tests/output/gpu-run"
mkdir -p "$out"
work="$(mktemp -d)"
deadline=$((t_start + budget))
log="$out/gpu-run.log"
: >"$log"
say() { printf '[%4ds] %s\n' $(($(date +%s) - t_start)) "$*" | tee -a "$log" >&2; }
left() { echo $((deadline - $(date +%s))); }

if [ "$smoke" = 1 ]; then
  # Tiny shapes on whatever adapter is here (llvmpipe): the same steps, in seconds.
  : "${bin:=${CARGO_TARGET_DIR:-$HOME/.cache/docmem/target}/debug/docmem}"
  lm_spec=qwen2-tiny:q4_k_m lm_args=(--prompt-tokens 32 --gen-tokens 8 --rounds 1)
  embed_args=(--texts 4 --tokens 16 --repeats 1) cpu_ok=(--allow-cpu) jobs=1
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$work/xdg}"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
else
  : "${bin:=$root/.device/bin/docmem}"
  lm_spec=qwen2-1.5b:q4_k_m lm_args=(--prompt-tokens 512 --gen-tokens 128 --rounds 2)
  embed_args=(--texts 128 --tokens 128 --repeats 3) cpu_ok=() jobs=12
fi
[ -x "$bin" ] || { say "no docmem binary at $bin (scripts/device/prepare.sh, or --bin)"; exit 1; }

# --- 1. Vulkan and the adapter ------------------------------------------------------------
if [ "$smoke" = 0 ]; then
  if ! ldconfig -p | grep -q 'libvulkan.so.1'; then
    for f in "$root"/.device/deb/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ] && ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES="$icd" __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.memory,compute_cap --format=csv \
    >"$work/nvidia-smi.csv" 2>>"$log" || true
  say "GPU: $(tail -n 1 "$work/nvidia-smi.csv" 2>/dev/null)"
fi

# A GPU's peak memory bandwidth (GB/s), by name, for the share decode reaches.
gpu_name=$(tail -n 1 "$work/nvidia-smi.csv" 2>/dev/null | cut -d, -f1)
case "$gpu_name" in
  *H200*) peak=4800 ;;
  *H100*PCIe*) peak=2000 ;;
  *H100*NVL*) peak=3900 ;;
  *H100*) peak=3350 ;;
  *A100*80GB*) peak=2039 ;;
  *A100*) peak=1555 ;;
  *) peak="" ;;
esac
peak_args=()
[ -n "$peak" ] && peak_args=(--peak-gbs "$peak")

# The benchmarks on cores 0-3, llama.cpp's build on the others (where taskset exists).
ours=() pin_build=()
if [ "$smoke" = 0 ] && command -v taskset >/dev/null; then
  ours=(taskset -c 0-3) pin_build=(taskset -c 4-15)
fi

# --- 5, started first: llama.cpp's CUDA build, in the background on the other cores ---------
llama_pid=""
if [ "$skip_llamacpp" = 1 ]; then
  echo '{"status": "skipped", "skipped": "--skip-llamacpp"}' >"$work/llamacpp-cuda.json"
elif [ "$smoke" = 0 ] && [ -d "$root/.device/llama.cpp" ]; then
  say "writing the synthetic GGUF for llama.cpp"
  "$bin" synth-gguf "$lm_spec" "$work/model.gguf" >>"$log" 2>&1
  # Kept in /tmp, not $work: a second call on the still-warm machine builds incrementally.
  (cd "$root" && exec nice -n 10 "${pin_build[@]}" bash scripts/device/llamacpp-cuda.sh --src .device/llama.cpp --build /tmp/docmem-llamacpp \
    --gguf "$work/model.gguf" --out "$work" --jobs "$jobs" --deadline $((deadline - 15)) --reserve 45 --wait-for "$work/ours-done") \
    >>"$log" 2>&1 &
  llama_pid=$!
  say "llama.cpp build started in the background (pid $llama_pid)"
else
  # The smoke run checks the script's failure report instead (no source here).
  bash "$root/scripts/device/llamacpp-cuda.sh" --src "$work/no-source" --build "$work/llamacpp" --gguf "$work/none.gguf" \
    --out "$work" --jobs 1 --deadline $((deadline - 15)) >>"$log" 2>&1
fi

# Runs one docmem step, its JSON to $work/NAME.json, bounded by the time left
# (`run_step NAME MARGIN ARGS…`; `BIN=… run_step …` runs another docmem).
run_step() {
  local name="$1" margin="$2" program="${BIN:-$bin}"
  shift 2
  local t0 rc limit
  limit=$(($(left) - margin))
  if [ "$limit" -le 5 ]; then
    say "$name: skipped (no time left)"
    echo '{"skipped": "no time left"}' >"$work/$name.json"
    return
  fi
  t0=$(date +%s)
  "${ours[@]}" timeout -k 10 "$limit" "$program" "$@" >"$work/$name.json" 2>"$work/$name.err"
  rc=$?
  grep -v XDG_RUNTIME_DIR "$work/$name.err" | tail -n 20 >>"$log"
  say "$name: exit $rc in $(($(date +%s) - t0)) s"
  if [ "$rc" != 0 ] && ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/$name.json" 2>/dev/null; then
    printf '{"failed": "exit %s", "stderr": %s}\n' "$rc" "$(tail -n 5 "$work/$name.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" \
      >"$work/$name.json"
  fi
}

# --- 2. the kernel checks -------------------------------------------------------------------
run_step checks 300 gpu-check --json "${cpu_ok[@]}"
# --- 3. the decoder -------------------------------------------------------------------------
run_step lm-f16 200 bench lm --backend gpu --synthetic "$lm_spec" "${lm_args[@]}" --paths 4 --drafts --draft-paths 1 --json "${peak_args[@]}"
run_step lm-f32 120 bench lm --backend gpu --gpu-f32 --synthetic "$lm_spec" "${lm_args[@]}" --json "${peak_args[@]}"
if [ -n "$baseline" ]; then
  BIN="$baseline" run_step lm-baseline 100 bench lm --backend gpu --synthetic "$lm_spec" "${lm_args[@]}" --json "${peak_args[@]}"
fi
# --- 4. the embedder ------------------------------------------------------------------------
run_step embed 90 bench embed --gpu-only --synthetic minilm "${embed_args[@]}" --json
touch "$work/ours-done"

# A device-to-device copy through PyTorch, where it is installed: what the card's memory
# moves in practice, beside its nominal peak.
if [ "$smoke" = 0 ] && [ "$(left)" -gt 60 ]; then
  timeout 40 python3 - >"$work/copy.json" 2>>"$log" <<'PY' || echo '{}' >"$work/copy.json"
import json, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
torch.cuda.synchronize(); s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(20): y.copy_(x)
e.record(); torch.cuda.synchronize()
print(json.dumps({"copy_gbs_read_plus_write": 2 * 20 * x.numel() / (s.elapsed_time(e) / 1e3) / 1e9}))
PY
fi

# --- 5. llama.cpp, once built -----------------------------------------------------------------
if [ -n "$llama_pid" ]; then
  say "waiting for llama.cpp (build and llama-bench) until the deadline"
  wait "$llama_pid"
fi
cp "$work/llamacpp-build.log" "$out/" 2>/dev/null || true

# --- the report ---------------------------------------------------------------------------------
python3 "$root/scripts/device/summarize.py" "$work" "$out" "$lm_spec" "${peak:-}" >>"$log" 2>&1
rc=$?
say "done in $(($(date +%s) - t_start)) s (summary exit $rc)"
cat "$out/gpu-run.md" 2>/dev/null
rm -rf "$work"
exit "$rc"
