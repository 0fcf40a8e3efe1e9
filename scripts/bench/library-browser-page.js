// The page of scripts/bench/library-browser.sh: runs one case in a dedicated module worker
// (library-browser-worker.js), where the npm package keeps its library too, and logs the
// worker's progress lines to the console for the driver.
function run(c) {
  return new Promise((resolve, reject) => {
    const wk = new Worker('/bench/library-browser-worker.js', { type: 'module', name: 'docmem-library-bench' });
    wk.addEventListener('message', (e) => {
      const m = e.data || {};
      if (m.progress) {
        console.log(`[library] ${m.progress}`);
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
  info: () => ({ userAgent: navigator.userAgent, cores: navigator.hardwareConcurrency }),
  run,
};
document.body.dataset.ready = 'true';
