// The docmem worker in Node: a worker thread that node/docmem.js starts, serving the
// client's requests (worker-ops.js) with Node's platform: the wasm builds read from the
// package's wasm/ folder, the models and the library kept in directories, PDF.js from
// pdfjs-dist, hosted models' synchronous requests through a helper thread.

import fs from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { DocMemError, codes } from '../errors.js';
import { serveRequests } from '../worker-ops.js';
import { DirStore } from './dir-store.js';
import { FsModelCache } from './fs-model-cache.js';
import { pdfToText } from './pdf.js';
import { nodeSyncPost } from './sync-post.js';
import { defaultThreadCount, startThreads, threadSupport } from './threads.js';

const bytesOf = (url) => fs.readFileSync(new URL(url));

serveRequests({
  port: { post: (m) => parentPort.postMessage(m), on: (f) => parentPort.on('message', f) },
  builds: {
    plain: { name: 'plain', glue: () => import('../wasm/plain/docmem_wasm.js'), wasm: new URL('../wasm/plain/docmem_wasm_bg.wasm', import.meta.url).href },
    threads: { name: 'threads', glue: () => import('../wasm/threads/docmem_wasm.js'), wasm: new URL('../wasm/threads/docmem_wasm_bg.wasm', import.meta.url).href },
    relaxed: { name: 'relaxed', glue: () => import('../wasm/relaxed/docmem_wasm.js'), wasm: new URL('../wasm/relaxed/docmem_wasm_bg.wasm', import.meta.url).href },
  },
  compileWasm: async (url) => WebAssembly.compile(bytesOf(url)),
  wasmSource: async (url) => bytesOf(url),
  threadSupport,
  defaultThreadCount,
  startThreads,
  modelCache: (dir) => new FsModelCache(dir),
  withModelStore: (_mode, fn) => fn(),
  userFile(_blob, model) {
    throw new DocMemError(codes.BAD_ARGUMENT, `${model}: a model given as a File is for browsers; in Node give its path as a file: URL`);
  },
  openStore: (args, suffix) => DirStore.open(`${args.storageDir}${suffix}`),
  setAsideBase: (args) => args.storageDir,
  pdfToText,
  syncPost: nodeSyncPost,
});
