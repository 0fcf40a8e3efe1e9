#!/usr/bin/env bash
# Build the wasm packages (build-wasm.sh: simd128 and, with threads, simd128 + atomics;
# release, the only wasm32 builds of `npm test`) and run the wasm checks: the LM on SmolLM2
# against llama.cpp (at one thread, and in the threads build at one and two), on the
# default 1.5B (its K-quant kernels, simd128 and relaxed SIMD) and on synthetic Llama 3 and
# Qwen3 models (their RoPE scaling, per-head norms and wide heads), the embedder on
# all-MiniLM-L6-v2 against sentence-transformers, the document library (ingest, search, answers, persistence) on both, the npm package's
# DocMem client in Node, with local models and with hosted ones (a fake OpenAI-compatible
# host), PDFs' text through PDF.js (js/node/pdf.js alone, then the worker adding a PDF from its
# bytes), and every export called with bad arguments (an Error each time,
# never a trap; a panic's message reaches console.error and the next call).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
pkg="$DOCMEM_CACHE/wasm-pkg-node"
bash "$DOCMEM_ROOT/scripts/build-wasm.sh"
golden="$DOCMEM_ROOT/crates/runtime/tests/golden"
smol="$DOCMEM_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
qwen="$DOCMEM_MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
example="$DOCMEM_ROOT/examples/printing-press.md"
# The default model, Qwen2.5 1.5B (Q4_K and Q6_K blocks: the wasm kernels of cpu/simd128.rs,
# which SmolLM2's Q4_1 does not reach), is checked against llama.cpp's greedy tokens too.
# `npm test` fetched it for the K-quant parity step.
bash "$DOCMEM_ROOT/scripts/fetch-models.sh" default >/dev/null
# Synthetic models of the architectures no registry ships (Llama 3's scaled RoPE, Qwen3,
# Phi-3; not yet Gemma 3: in wasm its greedy tokens leave llama.cpp's at the eleventh of
# one prompt, where RoPE's cos and sin, from Rust's libm here and glibc natively, round a
# few angles apart),
# written by the CLI as the goldens' files were (scripts/golden/lm.py --synthetic).
synth="$DOCMEM_CACHE/synthetic-models"
mkdir -p "$synth"
cli="$CARGO_TARGET_DIR/debug/docmem"
cargo build --locked -q -p docmem-cli  # (a no-op when fresh; a cached binary may be older)
for m in llama3-tiny qwen3-tiny gemma3-tiny phi3-tiny phi4-tiny; do "$cli" synth-gguf "$m:q4_k_m" "$synth/$m.gguf" >/dev/null; done
export pkg golden smol qwen example synth

# Checks that run on one thread, side by side (one per core): the LM on SmolLM2 in the
# simd128 build, in the threads build and in the relaxed-SIMD build (on Node 22) at one
# thread; the 1.5B in the simd128 build; the embedder against sentence-transformers; the
# library; the rebuild of a damaged one; merges made a slice at a time; PDFs' text; every
# export with bad arguments; model downloads (streamed and hashed as they arrive, resumed
# with a Range request, mismatches deleted, free space checked).
in_parallel \
  'node "$DOCMEM_ROOT/tests/wasm/library.cjs" "$pkg" "$DOCMEM_MODELS" "$example"' \
  'node "$DOCMEM_ROOT/tests/wasm/embed.cjs" "$pkg" "$DOCMEM_MODELS/all-MiniLM-L6-v2" "$golden/embed-minilm.json"' \
  'node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$pkg" "$qwen" "$golden/lm-qwen2.5-1.5b.json"' \
  'node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$pkg" "$smol" "$golden/lm-smollm2.json"' \
  'for m in llama3-tiny qwen3-tiny phi3-tiny phi4-tiny; do node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$pkg" "$synth/$m.gguf" "$golden/lm-synthetic-$m-q4_k_m.json" || exit 1; done' \
  'node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads" "$smol" "$golden/lm-smollm2.json" 1' \
  '"$DOCMEM_NODE22" "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed" "$smol" "$golden/lm-smollm2.json" 1' \
  'node "$DOCMEM_ROOT/tests/wasm/rebuild.mjs" "$DOCMEM_MODELS" && node "$DOCMEM_ROOT/tests/wasm/merges.cjs" "$pkg"' \
  'node "$DOCMEM_ROOT/tests/wasm/bad-arguments.cjs" "$pkg" "$DOCMEM_MODELS"' \
  'node "$DOCMEM_ROOT/tests/js/storage.mjs" && node "$DOCMEM_ROOT/tests/js/serve.mjs" && node "$DOCMEM_ROOT/tests/js/manifest.mjs"' \
  'node "$DOCMEM_ROOT/tests/pdf/pdf.mjs" && node "$DOCMEM_ROOT/tests/wasm/pdf-worker.mjs" "$DOCMEM_MODELS"' \
  'node "$DOCMEM_ROOT/tests/wasm/model-cache.mjs"'

# Checks that use both cores, or time a cancel, one at a time: the threads builds at two
# threads (helper workers on shared memory; the 1.5B and the embedder in the relaxed-SIMD
# build the page prefers, whose encoder fuses its multiply-adds), the npm package's DocMem
# client in Node with local models, background memories, and hosted models (a fake
# OpenAI-compatible host).
node "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads" "$smol" "$golden/lm-smollm2.json" 2
"$DOCMEM_NODE22" "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed" "$smol" "$golden/lm-smollm2.json" 2
"$DOCMEM_NODE22" "$DOCMEM_ROOT/tests/wasm/lm.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed" "$qwen" "$golden/lm-qwen2.5-1.5b.json" 2
"$DOCMEM_NODE22" "$DOCMEM_ROOT/tests/wasm/embed.cjs" "$DOCMEM_CACHE/wasm-pkg-web-threads-relaxed" "$DOCMEM_MODELS/all-MiniLM-L6-v2" "$golden/embed-minilm.json" 2
node "$DOCMEM_ROOT/tests/wasm/package.mjs" "$DOCMEM_MODELS" "$example"
node "$DOCMEM_ROOT/tests/wasm/background-memory.mjs" "$DOCMEM_MODELS" "$example"
node "$DOCMEM_ROOT/tests/wasm/remote.mjs" "$DOCMEM_MODELS"
