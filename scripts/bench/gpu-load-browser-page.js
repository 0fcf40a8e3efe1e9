// The page of scripts/bench/gpu-load-browser.sh. The driver opens a fresh browser per case
// and calls `window.bench.run(case)`:
//   {model: URL of the GGUF (served with Range support), name, size (bytes), prompt,
//    tokens (how many greedy tokens the timed first call makes)}
// and gets the worker's figures back. The work runs in a dedicated module worker
// (gpu-load-browser-worker.js) because Device.loadLm needs a *synchronous* reader, and
// synchronous XMLHttpRequest with an ArrayBuffer response is allowed only in a worker.
// The worker's progress messages are logged to the console (the driver copies them to
// stderr), so a load of minutes on SwiftShader shows that it moves.

function run(c) {
  return new Promise((resolve, reject) => {
    const wk = new Worker('/bench/gpu-load-browser-worker.js', { type: 'module', name: 'docmem-gpu-load' });
    wk.addEventListener('message', (e) => {
      const m = e.data || {};
      if (m.progress) {
        console.log(`[gpu-load] ${m.progress}`);
        return;
      }
      wk.terminate();
      if (m.ok) resolve(m.result);
      else reject(new Error(m.error || 'the worker failed'));
    });
    wk.addEventListener('error', (e) => {
      wk.terminate();
      reject(new Error(`the worker failed: ${e.message || 'no message'} (${e.filename || '?'}:${e.lineno || '?'})`));
    });
    wk.postMessage(c);
  });
}

window.bench = {
  info: () => ({
    userAgent: navigator.userAgent,
    cores: navigator.hardwareConcurrency,
    webgpu: !!navigator.gpu,
  }),
  run,
};
document.body.dataset.ready = 'true';
