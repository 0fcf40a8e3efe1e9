#!/usr/bin/env bash
# Parity with llama.cpp on a K-quant model, on this CPU's best x86 kernel path and on AVX2:
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Q4_K and Q6_K blocks: the default reader and
# answerer, which the app fetches anyway) against its golden file
# (crates/runtime/tests/golden/lm-qwen2.5-1.5b.json, from scripts/golden/lm.py): token ids,
# top-20 log-probabilities and top-1 over a long text, and five greedy continuations.
# SmolLM2 (Q4_1) is checked on every path by `cargo test` (tests/lm_parity.rs); its blocks
# are not K-quants, and a CPU without AVX-512 takes other K-quant kernels (cpu/avx2.rs)
# than one with it (cpu/x8), so this runs both families the machine has, capped with
# DOCMEM_CPU (crates/runtime/src/cpu/isa.rs). The portable path is checked on SmolLM2
# only: on the 1.5B it reads about a token a second (see the closing figure of each run).
#   bash scripts/kquant-parity.sh [DOCMEM_BINARY]
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"
bin=${1:-$CARGO_TARGET_DIR/debug/docmem}
[ -x "$bin" ] || cargo build --locked -p docmem-cli
bash scripts/fetch-models.sh default >/dev/null
model="$DOCMEM_MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
golden=crates/runtime/tests/golden/lm-qwen2.5-1.5b.json
# The best path, as crates/runtime/src/cpu/isa.rs detects it (each run below checks that
# the path it asked for is the one that ran).
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
best=portable
has avx2 fma f16c && best=avx2
[ $best = avx2 ] && has avx512f avx512bw avx512vl && best=avx512
[ $best = avx512 ] && has avx512_vnni && best=vnni
# With VNNI, the AVX-512 path is not run apart: its kernels differ from the VNNI ones only
# in the instructions that form each block's integer sums (the same integers), and the
# float order after them is shared; the cargo tests compare the two kernels bit for bit.
# That keeps this step to two runs of the 1.5B (about 70 s each on two cores).
case "$best" in
  vnni) paths="vnni avx2" ;;
  avx512) paths="avx512 avx2" ;;
  avx2) paths="avx2" ;;
  *) echo "kquant parity: this CPU takes the $best path only; the 1.5B is not checked there (SmolLM2 is, by cargo test)"; exit 0 ;;
esac
for path in $paths; do
  t0=$(date +%s)
  out=$(DOCMEM_CPU=$path "$bin" bench lm --model "$model" --golden "$golden" --prompt-tokens 8 --gen-tokens 2 2>&1) || {
    echo "$out" >&2
    echo "kquant parity: the 1.5B does not match llama.cpp on the $path path" >&2
    exit 1
  }
  grep -q "CPU kernels: $path " <<<"$out" || { echo "$out" >&2; echo "kquant parity: DOCMEM_CPU=$path did not take the $path path" >&2; exit 1; }
  # The probe is matched by the file's identity: the default model must still get it.
  grep -q "answerability probe: fitted on this file" <<<"$out" || { echo "$out" >&2; echo "kquant parity: the default model's file did not get its answerability probe" >&2; exit 1; }
  echo "$path: $(grep '^parity with llama.cpp' <<<"$out") ($(($(date +%s) - t0)) s)"
done
