// One helper thread of the wasm CPU backend in Node (a worker thread started by
// node/threads.js; what it does: thread-serve.js).

import { parentPort } from 'node:worker_threads';
import { serveThread } from '../thread-serve.js';

serveThread({ post: (m) => parentPort.postMessage(m), once: (f) => parentPort.once('message', f) }, (build, glueUrl) => {
  if (glueUrl) return import(glueUrl);
  return build === 'relaxed' ? import('../wasm/relaxed/docmem_wasm.js') : import('../wasm/threads/docmem_wasm.js');
});
