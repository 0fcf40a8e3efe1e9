// One helper thread of the wasm CPU backend (started by threads.js): instantiate the
// threads build's module on the shared memory it was sent, say so, then serve the
// kernels' tasks in threadServe() for as long as this worker lives (it never returns).

const isNode = typeof self === 'undefined' && typeof process !== 'undefined';

let port;
if (isNode) {
  const { parentPort } = await import('node:worker_threads');
  port = { post: (m) => parentPort.postMessage(m), once: (f) => parentPort.once('message', f) };
} else {
  port = { post: (m) => self.postMessage(m), once: (f) => self.addEventListener('message', (e) => f(e.data), { once: true }) };
}

port.once(async ({ glueUrl, module, memory }) => {
  let w;
  try {
    w = await import(/* @vite-ignore */ /* webpackIgnore: true */ glueUrl);
    await w.default({ module_or_path: module, memory });
  } catch (e) {
    port.post({ error: `a docmem thread could not start: ${e && e.message ? e.message : e}` });
    return;
  }
  port.post({ ready: true });
  w.threadServe();
});
