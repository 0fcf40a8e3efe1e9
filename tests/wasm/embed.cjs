// The sentence embedder compiled to wasm32-unknown-unknown (simd128), run in Node, against
// sentence-transformers: cosine >= 0.999 on every text of the golden set, in each
// precision, and the truncated count. The native build runs the same check
// (crates/runtime/tests/embed_parity.rs).
//
//   node tests/wasm/embed.cjs PKG_DIR MODEL_DIR GOLDEN.json [THREADS]
// Without THREADS, PKG_DIR is the plain build bound for Node (wasm-bindgen --target
// nodejs). With it, a threads build for the web on THREADS threads: the relaxed-SIMD one
// is the build the page prefers, whose f32 matrix product fuses its multiply-adds
// (f32x4.relaxed_madd), so its encoder is checked here too.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { readTree, loadPackage, countSimdOpcode, RELAXED_MADD } = require('./common.cjs');

const [pkgDir, modelDir, goldenPath, threadsArg] = process.argv.slice(2);
const threads = threadsArg === undefined ? 0 : Number(threadsArg);

async function main() {
  if (path.basename(path.resolve(pkgDir)).includes('relaxed')) {
    const n = countSimdOpcode(pkgDir, RELAXED_MADD);
    if (n === 0) throw new Error(`${pkgDir} has no relaxed-SIMD multiply-add`);
    console.log(`relaxed build: ${n} relaxed multiply-adds in the code`);
  }
  const { Embedder } = await loadPackage(pkgDir, threads);
  const golden = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));
  const MIN_COSINE = 0.999;

  const files = readTree(modelDir);
  const texts = golden.cases.map((c) => c.text);
  const truncatedWanted = golden.cases.filter((c) => c.tokens > golden.max_seq_length).length;
  let failures = 0;
  for (const precision of ['f32', 'f16', 'bf16', 'q8_0']) {
    const t0 = performance.now();
    const e = new Embedder(files, 'all-MiniLM-L6-v2', precision);
    const t1 = performance.now();
    const { vectors, truncated } = await e.embed(texts, false);
    const seconds = (performance.now() - t1) / 1000;
    const dim = e.dim();
    let worst = { cos: 1, i: -1 };
    golden.cases.forEach((c, i) => {
      let dot = 0, want = 0, got = 0;
      for (let k = 0; k < dim; k++) {
        const a = vectors[i * dim + k], b = c.embedding[k];
        dot += a * b; want += b * b; got += a * a;
      }
      const cos = dot / Math.sqrt(want * got);
      if (cos < worst.cos) worst = { cos, i };
    });
    const ok = worst.cos >= MIN_COSINE && truncated === truncatedWanted && vectors.length === texts.length * dim;
    console.log(`${precision}: worst cosine ${worst.cos.toFixed(6)} (text ${worst.i}) over ${texts.length} texts, ` +
      `${truncated} truncated, load ${((t1 - t0) / 1000).toFixed(1)} s, embed ${seconds.toFixed(1)} s ${ok ? 'ok' : 'FAILED'}`);
    if (!ok) failures++;
    // A text embeds to the same bits alone as in a batch (a query and the same sentence
    // stored), whichever rows of the matrix product's tiles it lands in.
    for (const i of [0, 5, 222]) {
      const alone = (await e.embed([texts[i]], false)).vectors;
      const inBatch = vectors.subarray(i * dim, (i + 1) * dim);
      if (!alone.every((x, k) => Object.is(x, inBatch[k]))) {
        console.error(`${precision}: text ${i} embeds differently alone than in its batch`);
        failures++;
      }
    }
  }
  // Bad input is a JS error that names the problem, not a crash of the instance.
  try {
    new Embedder({ 'config.json': files['config.json'] }, 'broken', '');
    console.error('a model without weights loaded');
    failures++;
  } catch (err) {
    if (!String(err.message).includes('model.safetensors')) {
      console.error(`unexpected error: ${err.message}`);
      failures++;
    }
  }
  if (failures) {
    console.error(`wasm embedder: ${failures} failure(s)`);
    process.exit(1);
  }
  console.log('wasm embedder: ok');
  // Threads builds keep helper workers alive.
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
