// transformers.js's side of `docmem bench embed`: the feature-extraction pipeline (mean
// pooling, normalised: what sentence-transformers does for all-MiniLM-L6-v2) on its
// WebAssembly backend (onnxruntime-web) in Node, one thread, fp32, on the model exported
// by scripts/bench/export_onnx.py.
//
//   node tjs_embed.mjs NODE_DIR ONNX_MODEL_DIR TEXTS.json REPEATS
// NODE_DIR holds node_modules/@huggingface/transformers (scripts/bench/setup-peers.sh).
// Prints {"batch1": sentences/s, "batch32": sentences/s}, best of REPEATS runs each.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [nodeDir, modelDir, textsPath, repeatsArg] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(nodeDir), 'package.json'));
// In Node, transformers.js runs on onnxruntime-node (native code) and refuses
// `device: 'wasm'`, unless the JS runtime hands it an ONNX runtime under
// Symbol.for('onnxruntime'): here onnxruntime-web (its Node build), the WebAssembly runtime
// a browser gets, loading its .wasm from the package rather than a CDN, one thread.
const ortWeb = require('onnxruntime-web');
ortWeb.env.wasm.numThreads = 1;
ortWeb.env.wasm.wasmPaths = path.join(path.dirname(require.resolve('onnxruntime-web')), '/');
globalThis[Symbol.for('onnxruntime')] = ortWeb;
const { pipeline, env } = require('@huggingface/transformers');
const texts = JSON.parse(fs.readFileSync(textsPath, 'utf8'));
const repeats = Number(repeatsArg);

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(modelDir)) + '/';
const extract = await pipeline('feature-extraction', path.basename(modelDir), {
  device: 'auto', // the runtime handed over has no device list; its wasm provider is named here:
  session_options: { executionProviders: ['wasm'] },
  dtype: 'fp32',
});
const run = (batch) => extract(batch, { pooling: 'mean', normalize: true });
await run(texts.slice(0, 4)); // warm-up

async function best(batch, n) {
  let top = 0;
  for (let r = 0; r < repeats; r++) {
    const t = performance.now();
    for (let i = 0; i < n; i += batch) await run(texts.slice(i, Math.min(i + batch, n)));
    top = Math.max(top, n / ((performance.now() - t) / 1000));
  }
  return top;
}
console.log(JSON.stringify({ batch1: await best(1, Math.min(32, texts.length)), batch32: await best(32, texts.length) }));
