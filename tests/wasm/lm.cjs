// The CPU language model compiled to wasm32-unknown-unknown (simd128), run in Node:
// tokenizes and generates with SmolLM2 and checks both against llama.cpp's golden ids.
//
//   node tests/wasm/lm.cjs PKG_DIR MODEL.gguf GOLDEN.json
// (scripts/wasm-test.sh builds PKG_DIR with wasm-bindgen --target nodejs.)
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const [pkgDir, modelPath, goldenPath] = process.argv.slice(2);
const { Lm } = require(path.resolve(pkgDir, 'docmem_wasm.js'));
const golden = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

let failures = 0;
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
const a = JSON.parse(lm.generate(probe, '{"max_tokens": 4}')).tokens;
const b = JSON.parse(streamed.generate(probe, '{"max_tokens": 4}')).tokens;
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
  const ids = JSON.parse(lm.tokenize(c.text));
  if (!same(ids, c.ids)) {
    console.error(`token ids of ${JSON.stringify(c.text)}: ${ids} vs llama.cpp ${c.ids}`);
    failures++;
  }
}

const n = 16;
for (const c of golden.greedy.slice(0, 2)) {
  const g = JSON.parse(lm.generate(c.prompt, JSON.stringify({ max_tokens: n })));
  const want = c.continuation.slice(0, n);
  const tps = g.tokens.length / g.decode_seconds;
  console.log(`${JSON.stringify(c.prompt)} -> ${JSON.stringify(g.text)} (${tps.toFixed(1)} tok/s decode, one thread)`);
  if (!same(g.tokens, want)) {
    console.error(`greedy continuation differs: ${g.tokens} vs llama.cpp ${want}`);
    failures++;
  }
}

try {
  lm.generate('x', '{"max_tokens": "many"}');
  console.error('bad sampling parameters were accepted');
  failures++;
} catch (e) {
  if (!String(e.message).includes('sampling parameters')) {
    console.error(`unclear error: ${e.message}`);
    failures++;
  }
}

if (failures) {
  console.error(`wasm LM: ${failures} failure(s)`);
  process.exit(1);
}
console.log('wasm LM: ok');
