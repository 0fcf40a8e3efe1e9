// The docmem worker in a browser: a module Web Worker that docmem.js starts, serving the
// client's requests (worker-ops.js) with a browser's platform. The wasm builds' glue
// modules are imported by literal paths and the .wasm files named as `new URL('./…',
// import.meta.url)`, the forms a bundler builds into this worker and copies beside it;
// unbundled, the browser finds them beside this file (wasm/, in the package).
//
// The three builds (scripts/build-wasm.sh): plain (simd128, one thread), threads (shared
// memory) and relaxed (threads + relaxed SIMD's dot product); worker-ops.js picks one.

import { IdbStore } from './idb-store.js';
import { pdfToText } from './pdf.js';
import { defaultThreadCount, startThreads, threadSupport } from './threads.js';
import { serveRequests } from './worker-ops.js';

// The model cache is imported when the models load, not with the worker, so that what
// watches the worker (tests/browser/downloads.test.mjs: its allocations) is in place
// before the cache's first line runs.
const modelCacheModule = () => import('./model-cache.js');

// Bound now: PDF.js's loader hides self.postMessage while it imports PDF.js's worker
// module (pdf.js), and a reply may be posted meanwhile.
const post = self.postMessage.bind(self);

serveRequests({
  port: { post, on: (f) => self.addEventListener('message', (e) => f(e.data)) },
  builds: {
    plain: { name: 'plain', glue: () => import('./wasm/plain/docmem_wasm.js'), wasm: new URL('./wasm/plain/docmem_wasm_bg.wasm', import.meta.url).href },
    threads: { name: 'threads', glue: () => import('./wasm/threads/docmem_wasm.js'), wasm: new URL('./wasm/threads/docmem_wasm_bg.wasm', import.meta.url).href },
    relaxed: { name: 'relaxed', glue: () => import('./wasm/relaxed/docmem_wasm.js'), wasm: new URL('./wasm/relaxed/docmem_wasm_bg.wasm', import.meta.url).href },
  },
  compileWasm: (url) => WebAssembly.compileStreaming(fetch(url)),
  wasmSource: async (url) => url,
  threadSupport,
  defaultThreadCount,
  startThreads,
  modelCache: async (_dir, hasher) => new (await modelCacheModule()).WebModelCache({ hasher }),
  withModelStore: async (mode, fn) => (await modelCacheModule()).withModelStore(mode, fn),
  userFile: async (blob) => new (await modelCacheModule()).BlobFile(blob),
  openStore: (args, suffix) => IdbStore.open(`${args.libraryName}${suffix}`),
  setAsideBase: (args) => args.libraryName,
  pdfToText,
  syncPost: undefined, // remote.js's own: a synchronous XMLHttpRequest
});
