// The package's entry for Node >= 20 (the `node` condition of package.json's exports). It
// binds the DocMem client (client.js) to Node: the work runs in a worker thread
// (node/worker.js), the library is a directory locked by a `.lock` file, the models are
// kept in a directory, and a manifest may be a path or a file: URL.

import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DocMemClient } from '../client.js';
import { DocMemError, codes } from '../errors.js';
import { lockDir } from './dir-lock.js';

export { DocMemError, codes } from '../errors.js';

/** Node's side of what DocMemClient leaves to its platform (client.js). */
const node = {
  defaultModels: () => undefined,
  async manifestUrl(models) {
    if (models instanceof URL || /^[a-z][a-z0-9+.-]*:\/\//i.test(models)) return String(models);
    return pathToFileURL(models).href;
  },
  readManifest: async (url) => (url.startsWith('file:') ? JSON.parse(await fs.readFile(new URL(url), 'utf8')) : null),
  storage(name, o) {
    const cache = process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem');
    // '.' and '..' are their own encoding: as folder names they would leave 'libraries'.
    if (!o.storageDir && ['', '.', '..'].includes(name)) {
      throw new DocMemError(codes.BAD_ARGUMENT, `'${name}' cannot name a library (it names no folder of its own); choose another name, or give storageDir`);
    }
    return {
      storageDir: o.storageDir ?? path.join(cache, 'libraries', encodeURIComponent(name)),
      modelCacheDir: o.modelCacheDir ?? path.join(cache, 'model-cache'),
    };
  },
  lockLibrary: (_name, dir) => lockDir(dir),
  askPersistence: () => null,
  sharedMemory: () => true,
  spawnWorker(workerUrl) {
    const wk = new Worker(workerUrl ?? new URL('./worker.js', import.meta.url));
    return {
      post: (m, transfer) => wk.postMessage(m, transfer),
      onMessage: (f) => wk.on('message', f),
      onError: (f) => wk.on('error', f),
      terminate: () => wk.terminate(),
    };
  },
};

export class DocMem extends DocMemClient {
  static platform = node;
}
