// docmem's wasm side of `docmem bench embed`: the embedder built for Node (one thread,
// simd128, the default precision) on the benchmark's texts.
//
//   node wasm_embed.cjs PKG_DIR MODEL_DIR TEXTS.json REPEATS
// Prints {"batch1": sentences/s, "batch32": sentences/s}, best of REPEATS runs each.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const [pkgDir, modelDir, textsPath, repeatsArg] = process.argv.slice(2);
const { Embedder } = require(path.resolve(pkgDir, 'docmem_wasm.js'));
const texts = JSON.parse(fs.readFileSync(textsPath, 'utf8'));
const repeats = Number(repeatsArg);

const files = {};
for (const name of ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']) {
  const p = path.join(modelDir, name);
  if (fs.existsSync(p)) files[name] = new Uint8Array(fs.readFileSync(p));
}
(async () => {
  const e = new Embedder(files, path.basename(modelDir), '');
  // `embed` is a Promise for every embedder; in wasm it is ready when first polled, so a
  // batch's time is its work.
  await e.embed(texts.slice(0, 4), false); // warm-up

  async function best(batch, n) {
    let top = 0;
    for (let r = 0; r < repeats; r++) {
      const t = performance.now();
      for (let i = 0; i < n; i += batch) await e.embed(texts.slice(i, Math.min(i + batch, n)), false);
      top = Math.max(top, n / ((performance.now() - t) / 1000));
    }
    return top;
  }
  console.log(JSON.stringify({ precision: e.precision(), batch1: await best(1, Math.min(32, texts.length)), batch32: await best(32, texts.length) }));
})();
