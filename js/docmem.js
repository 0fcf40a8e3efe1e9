// The package's entry for browsers and the bundlers that build for them (the `browser`
// and `default` conditions of package.json's exports; Node gets node/docmem.js).
// It binds the DocMem client (client.js) to a browser's platform: the work runs in a
// module Web Worker (worker.js), the library is kept in IndexedDB and locked with a Web
// Lock, and the models live in the Origin Private File System. Nothing reachable from here
// names a Node builtin, so a bundler needs no fallback or external for them.
//
// The worker is started as `new Worker(new URL('./worker.js', import.meta.url), {type:
// 'module'})`, written out in full: the form webpack 5, Vite, Parcel and Next.js find,
// build as a worker of its own (with its imports, the wasm builds and PDF.js it names
// the same way) and point at the built file. An app bundled by a tool that does not
// (esbuild, Rollup) serves a copy of the package and names its worker with `workerUrl`.

import { DocMemClient } from './client.js';
import { lockLibrary } from './library-lock.js';

export { DocMemError, codes } from './errors.js';

/** The browser's side of what DocMemClient leaves to its platform (client.js). */
const browser = {
  defaultModels: () => new URL('/models/models.json', location.href).href,
  manifestUrl: async (models) => new URL(String(models), location.href).href,
  readManifest: async () => null,
  storage: () => ({}),
  lockLibrary: (name) => lockLibrary(name),
  askPersistence: () => import('./model-cache.js').then(({ requestPersistence }) => requestPersistence()),
  sharedMemory: () => globalThis.crossOriginIsolated === true,
  spawnWorker(workerUrl) {
    const wk = workerUrl
      ? new Worker(workerUrl, { type: 'module', name: 'docmem' })
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'docmem' });
    return {
      post: (m, transfer) => wk.postMessage(m, transfer ?? []),
      onMessage: (f) => wk.addEventListener('message', (e) => f(e.data)),
      onError: (f) => wk.addEventListener('error', (e) => f(new Error(e.message || 'the docmem worker failed to start'))),
      terminate: () => wk.terminate(),
    };
  },
};

export class DocMem extends DocMemClient {
  static platform = browser;
}
