// The CPU language model compiled to wasm32-unknown-unknown (simd128), run in Node:
// tokenizes and generates with SmolLM2 and checks both against llama.cpp's golden ids.
//
//   node tests/wasm/lm.cjs PKG_DIR MODEL.gguf GOLDEN.json [THREADS]
// Without THREADS, PKG_DIR is the plain build bound for Node (wasm-bindgen --target
// nodejs). With it, PKG_DIR is the threads build for the web, run on THREADS threads:
// js/threads.js starts THREADS - 1 helper workers first, and the check also asks the
// module how many threads the model ran on and whether helpers ran any of its tasks.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { loadPackage, countSimdOpcode, RELAXED_DOT } = require('./common.cjs');

const [pkgDir, modelPath, goldenPath, threadsArg] = process.argv.slice(2);
const threads = threadsArg === undefined ? 0 : Number(threadsArg);
const golden = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));

async function main() {
  if (path.basename(path.resolve(pkgDir)).includes('relaxed')) {
    const n = countSimdOpcode(pkgDir, RELAXED_DOT);
    if (n === 0) throw new Error(`${pkgDir} has no relaxed-SIMD dot product`);
    console.log(`relaxed build: ${n} relaxed dot products in the code`);
  }
  const w = await loadPackage(pkgDir, threads);
  const { Lm } = w;

  function same(a, b) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }

  let failures = 0;
  // The vector kernels against their portable loops: the simd128 integer kernels
  // (extremes included) and the vector exp and SwiGLU.
  console.log(`CPU kernel check: ${w.cpuKernelCheck()} cases agree`);
  const t0 = performance.now();
  const lm = new Lm(fs.readFileSync(modelPath));
  console.log(`loaded ${path.basename(modelPath)} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // The same model through a synchronous range reader: the file is never whole in JS memory.
  const fd = fs.openSync(modelPath, 'r');
  let reads = 0;
  const streamed = Lm.fromReader(fs.fstatSync(fd).size, (offset, length) => {
    reads++;
    const buf = new Uint8Array(length);
    fs.readSync(fd, buf, 0, length, offset);
    return buf;
  });
  const probe = 'The capital of France is';
  const a = JSON.parse(await lm.generate(probe, '{"max_tokens": 4}')).tokens;
  const b = JSON.parse(await streamed.generate(probe, '{"max_tokens": 4}')).tokens;
  console.log(`range reader: ${reads} reads`);
  if (!same(a, b)) {
    console.error(`the range-read model differs: ${b} vs ${a}`);
    failures++;
  }
  try {
    Lm.fromReader(1000, () => 'not bytes');
    console.error('a reader returning a string was accepted');
    failures++;
  } catch (e) {
    if (!String(e.message).includes('Uint8Array')) {
      console.error(`unclear reader error: ${e.message}`);
      failures++;
    }
  }

  for (const c of golden.tokenize) {
    const ids = Array.from(lm.tokenize(c.text));
    if (!same(ids, c.ids)) {
      console.error(`token ids of ${JSON.stringify(c.text)}: ${ids} vs llama.cpp ${c.ids}`);
      failures++;
    }
  }

  const n = 16;
  for (const c of golden.greedy.slice(0, 2)) {
    const g = JSON.parse(await lm.generate(c.prompt, JSON.stringify({ max_tokens: n })));
    const want = c.continuation.slice(0, n);
    const tps = g.tokens.length / g.decode_seconds;
    console.log(`${JSON.stringify(c.prompt)} -> ${JSON.stringify(g.text)} (${tps.toFixed(1)} tok/s decode, ${threads || 1} thread(s))`);
    if (!same(g.tokens, want)) {
      console.error(`greedy continuation differs: ${g.tokens} vs llama.cpp ${want}`);
      failures++;
    }
  }

  try {
    await lm.generate('x', '{"max_tokens": "many"}');
    console.error('bad sampling parameters were accepted');
    failures++;
  } catch (e) {
    if (!String(e.message).includes('sampling parameters')) {
      console.error(`unclear error: ${e.message}`);
      failures++;
    }
  }

  if (threads) {
    const stats = JSON.parse(w.threadStats());
    console.log(`thread stats: ${JSON.stringify(stats)}`);
    if (stats.threads !== threads) {
      console.error(`the model ran on ${stats.threads} thread(s), not ${threads}`);
      failures++;
    }
    if (threads > 1 && !(stats.helperTasks > 0)) {
      console.error('no helper thread ran any of the model\'s tasks');
      failures++;
    }
  }

  if (failures) {
    console.error(`wasm LM: ${failures} failure(s)`);
    process.exit(1);
  }
  console.log(`wasm LM${threads ? ` (threads build, ${threads} thread(s))` : ''}: ok`);
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
