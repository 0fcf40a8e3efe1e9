// docmem's side of scripts/bench/wasm-lm-browser.sh: one case in a dedicated module worker
// (a wasm thread blocks in Atomics.wait, which a page's main thread may not do, so the
// threads package must run here; the one-thread case runs here too, for fairness).
//
// Message in: {model: URL of the GGUF, threads, prompt (null: build one), promptTokens,
// genTokens}. Message out: {ok: true, result} or {ok: false, error}.
//
// How the figures are taken: `Lm.generate` times itself inside the wasm module
// (crates/runtime/src/lm/mod.rs): prefill_seconds covers tokenising the prompt and the
// forward pass over all of it (to the last position's logits); decode_seconds covers
// sampling the `tokens.length` new tokens and the forward passes between them (one per
// token but the last). prefill tok/s = prompt_tokens / prefill_seconds, decode tok/s =
// tokens.length / decode_seconds: the same convention as llama.cpp's server timings
// (predicted_n tokens over the time from the first sampled token to the last). wall_s is
// the whole timed call as JavaScript saw it.

// Text the prompt is made of (repeated as needed); plain English, no chat template.
const PARAGRAPH =
  'The printing press changed how knowledge moved through Europe. Before it, a book was ' +
  'copied by hand, letter by letter, and a single volume could take a scribe many months. ' +
  'Movable metal type let a workshop set a page once and print hundreds of copies, so ' +
  'books became cheaper, more uniform and far more common. Scholars could compare the ' +
  'same text in different cities, errors could be corrected in later editions, and ' +
  'pamphlets carried new ideas faster than any messenger. Within fifty years presses ' +
  'were running in more than two hundred towns, and the habit of reading spread from ' +
  'monasteries and universities to merchants, craftsmen and their families.';

let w = null;
let memory = null; // the module's linear memory (it only grows: its size is the peak)

self.onmessage = async (e) => {
  try {
    const result = await runCase(e.data);
    self.postMessage({ ok: true, result });
  } catch (err) {
    let panic;
    try {
      panic = w && typeof w.lastPanic === 'function' ? w.lastPanic() : undefined;
    } catch {
      panic = undefined;
    }
    const message = err && err.stack ? err.stack : String(err && err.message ? err.message : err);
    self.postMessage({ ok: false, error: panic ? `${message}\nwasm panic: ${panic}` : message });
  }
};

async function loadPackage(threads, relaxed) {
  if (relaxed) {
    // The threads build with relaxed SIMD's dot product, at any thread count (one: no
    // helpers); kept only if its kernels pass the check, as the package keeps it.
    const glueUrl = new URL('/pkg-threads-relaxed/docmem_wasm.js', location.origin).href;
    w = await import(glueUrl);
    const module = await WebAssembly.compileStreaming(fetch('/pkg-threads-relaxed/docmem_wasm_bg.wasm'));
    const exports = await w.default({ module_or_path: module });
    memory = exports.memory;
    w.cpuKernelCheck();
    const { startThreads } = await import('/js/threads.js');
    if (threads > 1) await startThreads(w, { glueUrl, module, memory: exports.memory, count: threads });
    return;
  }
  if (threads === 1) {
    // The plain package (no shared memory): runs on this worker's thread only.
    w = await import('/pkg/docmem_wasm.js');
    memory = (await w.default({ module_or_path: '/pkg/docmem_wasm_bg.wasm' })).memory;
    return;
  }
  // The threads package: its helpers must be waiting before the model loads.
  const glueUrl = new URL('/pkg-threads/docmem_wasm.js', location.origin).href;
  w = await import(glueUrl);
  const module = await WebAssembly.compileStreaming(fetch('/pkg-threads/docmem_wasm_bg.wasm'));
  const exports = await w.default({ module_or_path: module });
  memory = exports.memory;
  const { startThreads, threadSupport } = await import('/js/threads.js');
  const support = threadSupport();
  if (!support.ok) throw new Error(`docmem threads unavailable: ${support.reason}`);
  await startThreads(w, { glueUrl, module, memory: exports.memory, count: threads });
}

function countTokens(lm, text) {
  return lm.tokenize(text).length;
}

// The shortest run of PARAGRAPH's words (repeated) that this model's tokenizer makes at
// least `target` tokens of (no BOS counted): found by bisection on the word count.
function buildPrompt(lm, target) {
  const words = PARAGRAPH.split(/\s+/);
  const text = (k) => {
    const out = [];
    for (let i = 0; i < k; i++) out.push(words[i % words.length]);
    return out.join(' ');
  };
  let lo = 1;
  let hi = words.length;
  while (countTokens(lm, text(hi)) < target) hi *= 2;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (countTokens(lm, text(mid)) >= target) hi = mid;
    else lo = mid + 1;
  }
  const prompt = text(lo);
  return { prompt, tokens: countTokens(lm, prompt) };
}

async function runCase(c) {
  if (!self.crossOriginIsolated && c.threads > 1) {
    throw new Error('the worker is not cross-origin isolated (COOP/COEP headers missing)');
  }
  await loadPackage(c.threads, c.engine === 'docmem-relaxed');
  const buildsThreads = typeof w.threadsBuild === 'function' ? w.threadsBuild() : false;
  if (c.threads > 1 && !buildsThreads) throw new Error('the /pkg-threads/ package is not a threads build');

  const t0 = performance.now();
  const response = await fetch(c.model);
  if (!response.ok) throw new Error(`fetching ${c.model}: HTTP ${response.status}`);
  // Loaded as the app loads it: read a block at a time (FileReaderSync over the file),
  // so the weights are in linear memory once and the file never is.
  const file = await response.blob();
  const reader = new FileReaderSync();
  const lm = w.Lm.fromReader(file.size, (offset, length) => new Uint8Array(reader.readAsArrayBuffer(file.slice(offset, offset + length))));
  const loadSeconds = (performance.now() - t0) / 1000;

  if (c.prompt == null) {
    // The prompt job: no timing, only the text both engines will be given.
    const built = buildPrompt(lm, c.promptTokens);
    lm.free();
    return { ...built, load_s: loadSeconds };
  }

  const params = (n) => JSON.stringify({ max_tokens: n, temperature: 0 });
  // Warm-up on the first quarter of the prompt, as for wllama (the batched prefill kernels
  // and the one-token decode kernels both run, so the engine's code is compiled and tiered
  // up and its buffers are allocated).
  JSON.parse(await lm.generate(c.warmup, params(2)));
  const t1 = performance.now();
  const g = JSON.parse(await lm.generate(c.prompt, params(c.genTokens)));
  const wall = (performance.now() - t1) / 1000;
  const stats = JSON.parse(w.threadStats());
  lm.free();
  return {
    prompt_tokens: g.prompt_tokens,
    gen_tokens: g.tokens.length,
    prefill_seconds: g.prefill_seconds,
    decode_seconds: g.decode_seconds,
    wall_s: wall,
    load_s: loadSeconds,
    wasm_memory_mb: Math.round(memory.buffer.byteLength / 2 ** 20), // after generating: the peak
    file_mb: Math.round(file.size / 2 ** 20),
    finish: g.finish,
    text: g.text,
    thread_stats: stats,
    threads_build: buildsThreads,
  };
}
