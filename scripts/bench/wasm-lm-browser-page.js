// The page of scripts/bench/wasm-lm-browser.sh. The driver opens a fresh page per case and
// calls `window.bench.run(case)`:
//   {engine: 'docmem' | 'wllama', model: URL, threads, prompt (null: build one, docmem
//    only), warmup (the warm-up's prompt: the first quarter of the prompt's words),
//    promptTokens, genTokens}
// and gets the engine's raw figures back (the driver computes the rates).
//
// docmem runs in a dedicated module worker (wasm-lm-browser-worker.js; its header says how
// its figures are taken). wllama runs as its README shows: the Wllama object on the page,
// which starts its own worker (and, for n_threads > 1, its pthread workers).
//
// How wllama's figures are taken: wllama 3 runs llama.cpp's server context
// (server-context.cpp), whose final result carries llama.cpp's own `timings`:
// prompt_n / prompt_ms (the prompt's tokens and the time from starting on it to sampling
// the first new token) and predicted_n / predicted_ms (the new tokens and the time from the
// first sampled token to the last). prefill tok/s = prompt_n / prompt_ms, decode tok/s =
// predicted_n / predicted_ms: llama.cpp's prompt_per_second and predicted_per_second, the
// same convention as docmem's own timers. cache_prompt is off so every request processes
// the whole prompt (timings.cache_n must be 0). As a cross-check, the page also records
// what JavaScript saw of the streamed completion: wall_s (the whole call) and first_s (from
// the call to the first streamed text).

const WLLAMA_ESM = '/wllama/index.js';
const WLLAMA_WASM = '/wllama/wasm/wllama.wasm';

function runDocmem(c) {
  return new Promise((resolve, reject) => {
    const wk = new Worker('/bench/wasm-lm-browser-worker.js', { type: 'module', name: 'docmem-bench' });
    wk.addEventListener('message', (e) => {
      wk.terminate();
      if (e.data && e.data.ok) resolve(e.data.result);
      else reject(new Error(e.data && e.data.error ? e.data.error : 'the docmem worker failed'));
    });
    wk.addEventListener('error', (e) => {
      wk.terminate();
      reject(new Error(`the docmem worker failed: ${e.message || 'no message'} (${e.filename || '?'}:${e.lineno || '?'})`));
    });
    wk.postMessage(c);
  });
}

const quietLogger = {
  debug: () => {},
  log: () => {},
  warn: (...a) => console.warn('[wllama]', ...a),
  error: (...a) => console.error('[wllama]', ...a),
};

async function runWllama(c) {
  if (typeof c.prompt !== 'string') throw new Error('wllama needs the prompt text');
  // wllama 3 without JSPI or memory64 falls back to a "compat" build fetched from a CDN;
  // that is not what we measure (and nothing outside is reachable), so refuse instead.
  if (!WebAssembly.Suspending) throw new Error('this browser has no JSPI (WebAssembly.Suspending); wllama would need its compat build');
  if (c.threads > 1 && !self.crossOriginIsolated) throw new Error('the page is not cross-origin isolated; wllama cannot use threads');
  const { Wllama } = await import(WLLAMA_ESM);
  const wllama = new Wllama({ default: WLLAMA_WASM }, { logger: quietLogger });
  wllama.setCompat(null);

  const t0 = performance.now();
  const response = await fetch(c.model);
  if (!response.ok) throw new Error(`fetching ${c.model}: HTTP ${response.status}`);
  const blob = await response.blob();
  await wllama.loadModel([blob], {
    n_threads: c.threads,
    n_gpu_layers: 0, // the CPU path (and no WebGPU in this headless Chromium anyway)
    n_ctx: Math.max(1024, 2 * (c.promptTokens + c.genTokens) + 64),
    log_level: 3, // warnings and errors only
  });
  const loadSeconds = (performance.now() - t0) / 1000;
  const multithread = wllama.isMultithread();
  const nThreads = wllama.getNumThreads();
  if (nThreads !== c.threads || multithread !== c.threads > 1) {
    throw new Error(`wllama runs ${nThreads} thread(s) (multithread ${multithread}), not ${c.threads}`);
  }

  // Greedy, no penalties, raw text (createCompletion applies no chat template).
  const sampling = { temperature: 0, top_k: 1, top_p: 1, min_p: 0, cache_prompt: false };
  // Warm-up on the first quarter of the prompt, as for docmem.
  await wllama.createCompletion({ prompt: c.warmup, max_tokens: 2, ...sampling });

  let text = '';
  let first = null;
  let timings = null;
  let usage = null;
  let finish = null;
  const t1 = performance.now();
  await wllama.createCompletion({
    prompt: c.prompt,
    max_tokens: c.genTokens,
    ...sampling,
    stream: true,
    onData: (chunk) => {
      const choice = chunk.choices && chunk.choices[0];
      if (choice && choice.text) {
        if (first === null) first = performance.now();
        text += choice.text;
      }
      if (choice && choice.finish_reason) finish = choice.finish_reason;
      if (chunk.timings) timings = chunk.timings;
      if (chunk.usage) usage = chunk.usage;
    },
  });
  const wall = (performance.now() - t1) / 1000;
  await wllama.exit();
  if (!timings) throw new Error('wllama returned no timings');
  if (timings.cache_n) throw new Error(`wllama reused ${timings.cache_n} cached prompt tokens`);
  return {
    prompt_tokens: timings.prompt_n,
    gen_tokens: timings.predicted_n,
    prefill_seconds: timings.prompt_ms / 1000,
    decode_seconds: timings.predicted_ms / 1000,
    wall_s: wall,
    first_s: first === null ? null : (first - t1) / 1000,
    load_s: loadSeconds,
    finish,
    text,
    usage,
    timings,
    libllama: Wllama.getLibllamaVersion(),
  };
}

window.bench = {
  info: () => ({
    userAgent: navigator.userAgent,
    cores: navigator.hardwareConcurrency,
    crossOriginIsolated: self.crossOriginIsolated,
    jspi: !!WebAssembly.Suspending,
  }),
  run: (c) => (c.engine === 'docmem' || c.engine === 'docmem-relaxed' ? runDocmem(c) : c.engine === 'wllama' ? runWllama(c) : Promise.reject(new Error(`no engine ${c.engine}`))),
};
document.body.dataset.ready = 'true';
