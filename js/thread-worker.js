// One helper thread of the wasm CPU backend in a browser (started by threads.js; what it
// does: thread-serve.js). The package's glue modules are imported by literal paths, so a
// bundler builds them into this worker with the same code as the docmem worker's.

import { serveThread } from './thread-serve.js';

serveThread({ post: (m) => self.postMessage(m), once: (f) => self.addEventListener('message', (e) => f(e.data), { once: true }) }, (build, glueUrl) => {
  if (glueUrl) return import(/* webpackIgnore: true */ /* @vite-ignore */ glueUrl);
  return build === 'relaxed' ? import('./wasm/relaxed/docmem_wasm.js') : import('./wasm/threads/docmem_wasm.js');
});
