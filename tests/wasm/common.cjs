// Helpers shared by the Node checks of the wasm package.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

// Every file under `dir`, keyed by its path relative to `dir` ('/'-separated), as bytes:
// a model directory for `new Embedder(files, …)`, or a stored library for `Library.open`.
function readTree(dir) {
  const files = {};
  const walk = (sub) => {
    for (const entry of fs.readdirSync(path.join(dir, sub), { withFileTypes: true })) {
      const name = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(name);
      else files[name] = new Uint8Array(fs.readFileSync(path.join(dir, name)));
    }
  };
  walk('');
  return files;
}

/** The package in `pkgDir`: with `threads` 0, the CommonJS build (wasm-bindgen --target
 * nodejs); otherwise the threads build for the web, instantiated on shared memory with
 * `threads - 1` helper workers started (js/threads.js), as the page's worker does. */
async function loadPackage(pkgDir, threads) {
  if (!threads) return require(path.resolve(pkgDir, 'docmem_wasm.js'));
  const glueUrl = pathToFileURL(path.resolve(pkgDir, 'docmem_wasm.js')).href;
  const w = await import(glueUrl);
  const module = await WebAssembly.compile(fs.readFileSync(path.resolve(pkgDir, 'docmem_wasm_bg.wasm')));
  const exports = await w.default({ module_or_path: module });
  const { startThreads } = await import(pathToFileURL(path.resolve(__dirname, '../../js/node/threads.js')).href);
  const started = await startThreads(w, { glueUrl, module, memory: exports.memory, count: threads });
  console.log(`threads build: ${started} thread(s) started`);
  return w;
}

/** How many times the wasm in `pkgDir` holds the instruction whose prefix-0xFD opcode is
 * `opcode` (its LEB128 bytes): a relaxed build must hold the relaxed instructions its
 * check is meant to test, or it would test the simd128 kernels again. */
function countSimdOpcode(pkgDir, opcode) {
  const bytes = fs.readFileSync(path.resolve(pkgDir, 'docmem_wasm_bg.wasm'));
  const leb = [];
  for (let v = opcode; ; v >>= 7) {
    const b = v & 0x7f;
    if (v >> 7) leb.push(b | 0x80);
    else { leb.push(b); break; }
  }
  let n = 0;
  for (let i = 0; i + leb.length < bytes.length; i++) {
    if (bytes[i] === 0xfd && leb.every((b, j) => bytes[i + 1 + j] === b)) n++;
  }
  return n;
}

/** Relaxed SIMD's opcodes used by the relaxed build: i32x4.relaxed_dot_i8x16_i7x16_add_s
 * (0x113, the K-quant kernels' dot product, as js/worker-ops.js names it) and
 * f32x4.relaxed_madd (0x105, the encoder's matrix product). */
const RELAXED_DOT = 0x113;
const RELAXED_MADD = 0x105;

module.exports = { readTree, loadPackage, countSimdOpcode, RELAXED_DOT, RELAXED_MADD };
