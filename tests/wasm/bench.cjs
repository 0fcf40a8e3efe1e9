// Decode speed of the wasm CPU backend (simd128, one thread) in Node, for the benchmark
// table: the model streams in through Lm.fromReader. Prints one JSON line per model.
//
//   node tests/wasm/bench.cjs PKG_DIR MODEL.gguf [MODEL.gguf ...]
// (scripts/wasm-bench.sh builds PKG_DIR and passes the fetched models.)
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const [pkgDir, ...models] = process.argv.slice(2);
const { Lm } = require(path.resolve(pkgDir, 'docmem_wasm.js'));

(async () => {
  for (const model of models) {
    const fd = fs.openSync(model, 'r');
    const t0 = performance.now();
    const lm = Lm.fromReader(fs.fstatSync(fd).size, (offset, length) => {
      const buf = new Uint8Array(length);
      fs.readSync(fd, buf, 0, length, offset);
      return buf;
    });
    const load = (performance.now() - t0) / 1000;
    const prompt = 'The history of printing in Europe began when';
    const g = JSON.parse(await lm.generate(prompt, JSON.stringify({ max_tokens: 32 })));
    console.log(JSON.stringify({
      model: path.basename(model),
      load_seconds: +load.toFixed(2),
      prompt_tokens: g.prompt_tokens,
      prefill_tok_s: +(g.prompt_tokens / g.prefill_seconds).toFixed(2),
      decode_tok_s: +(g.tokens.length / g.decode_seconds).toFixed(2),
    }));
    lm.free();
    fs.closeSync(fd);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
