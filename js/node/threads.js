// Threads for the wasm CPU backend in Node: the helpers of threads.js as worker threads
// (node/thread-worker.js). Node always has SharedArrayBuffer; no isolation is needed.

import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { sharedMemorySupport, startThreads as start, threadCount } from '../threads.js';

/** {ok, reason}: whether this context can run the threads build (no isolation needed). */
export const threadSupport = sharedMemorySupport;

/** Threads to use when no setting says: the cores Node reports, at most 8. */
export async function defaultThreadCount() {
  return threadCount(typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length);
}

function spawnNodeThread() {
  const wk = new Worker(new URL('./thread-worker.js', import.meta.url));
  wk.unref(); // a helper never keeps Node alive
  return {
    post: (m) => wk.postMessage(m),
    once: (f) => wk.once('message', f),
    onError: (f) => wk.once('error', f),
    terminate: () => wk.terminate(),
  };
}

/** threads.js's startThreads, with worker threads for helpers. */
export const startThreads = (w, options) => start(w, { ...options, spawn: spawnNodeThread });
