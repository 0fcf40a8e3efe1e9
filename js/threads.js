// Threads for the wasm CPU backend: helper workers on the module's shared memory.
//
// The threads build of the wasm package (shared memory, atomics) runs its kernels on a
// pool of threads, but a wasm thread is a JavaScript worker, and only JavaScript can start
// one (see crates/runtime/src/cpu/web_workers.rs). So before any model loads, this starts
// `count - 1` helper workers (thread-worker.js); each instantiates the same compiled module
// on the same memory and calls `threadServe()`, where it waits for the kernels' tasks.
// Models loaded afterwards share them. This file is the browser's (a worker may start
// workers); node/threads.js starts them as worker threads, through the same startThreads.
//
// Shared memory needs SharedArrayBuffer: in a browser only when the page is cross-origin
// isolated (COOP/COEP headers). `threadSupport()` says whether, and why not.

/** {ok, reason}: whether this context can run the threads build. */
export function threadSupport() {
  // Checked first: a browser hides SharedArrayBuffer itself from pages that are not.
  if (globalThis.crossOriginIsolated !== true) {
    return { ok: false, reason: 'the page is not cross-origin isolated (it needs the COOP and COEP headers), so wasm cannot share memory between threads' };
  }
  return sharedMemorySupport();
}

/** {ok, reason}: whether this engine has SharedArrayBuffer and Atomics at all. */
export function sharedMemorySupport() {
  if (typeof SharedArrayBuffer === 'undefined' || typeof Atomics === 'undefined') {
    return { ok: false, reason: 'this JavaScript engine has no SharedArrayBuffer' };
  }
  return { ok: true, reason: '' };
}

/** Threads to use when no setting says: the cores the platform reports, at most 8 (a
 * decode step is bound by memory bandwidth well before that). */
export async function defaultThreadCount() {
  return threadCount(globalThis.navigator?.hardwareConcurrency ?? 1);
}

/** `cores`, at most 8 and at least 1. */
export const threadCount = (cores) => Math.max(1, Math.min(8, cores | 0));

/** A helper worker: {post, once, onError, terminate}. */
function spawnWebThread() {
  // Written out in full, the form bundlers recognise and build as a worker of its own (a
  // bare `new URL` may be inlined as a data: URL, whose opaque origin cannot share memory).
  const wk = new Worker(new URL('./thread-worker.js', import.meta.url), { type: 'module', name: 'docmem-thread' });
  return {
    post: (m) => wk.postMessage(m),
    once: (f) => wk.addEventListener('message', (e) => f(e.data), { once: true }),
    onError: (f) => wk.addEventListener('error', (e) => f(new Error(e.message || 'a docmem thread failed to start')), { once: true }),
    terminate: () => wk.terminate(),
  };
}

/**
 * Start `count - 1` helpers for the threads package `w` (its glue module, already
 * initialised from `module` on `memory`). A helper imports the same glue: the package's
 * own build named `build` ('threads' or 'relaxed'), or the one at `glueUrl` (a build the
 * app gave by URL). `spawn` starts a helper (default: a module Web Worker).
 * Resolves with the number of threads (the caller's included) once every helper waits
 * in `threadServe()`. Rejects if one fails to start or they are not all waiting within
 * `timeoutMs`, having terminated every helper: the module must then not be used with
 * threads (a pool could count a helper that is gone), so the caller loads the plain build.
 */
export async function startThreads(w, { build = 'threads', glueUrl, module, memory, count, timeoutMs = 30000, spawn = spawnWebThread }) {
  const helpers = Math.max(0, (count | 0) - 1);
  const workers = [];
  const deadline = Date.now() + timeoutMs;
  const late = () => new Error(`the ${helpers} docmem thread(s) did not all start within ${timeoutMs} ms`);
  try {
    const started = [];
    for (let i = 0; i < helpers; i++) {
      const wk = await spawn();
      workers.push(wk);
      started.push(
        new Promise((resolve, reject) => {
          wk.onError(reject);
          wk.once((m) => (m && m.ready ? resolve() : reject(new Error(m && m.error ? m.error : 'a docmem thread failed to start'))));
        }),
      );
      wk.post({ build, glueUrl, module, memory });
    }
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(late()), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(started), timeout]);
    } finally {
      clearTimeout(timer);
    }
    // Each helper reported before entering threadServe(); wait until all are inside it.
    while (w.threadsIdle() < helpers) {
      if (Date.now() > deadline) throw late();
      await new Promise((r) => setTimeout(r, 2));
    }
    return helpers + 1;
  } catch (e) {
    for (const wk of workers) wk.terminate();
    throw e;
  }
}
