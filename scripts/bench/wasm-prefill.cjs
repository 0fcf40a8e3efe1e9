// One prompt's prefill in a wasm threads build, in Node: the seconds the model took to read
// a ~490-token prompt (the first four paragraphs of the SQuAD sample's first article) and
// its next token, so that two builds can be timed against each other on the same machine
// (alternate them: this VM's speed moves between runs). A benchmark, not a test.
//
//   "$DOCMEM_NODE22" scripts/bench/wasm-prefill.cjs PKG_DIR MODEL.gguf [THREADS]
// (PKG_DIR: a threads build for the web, e.g. $DOCMEM_CACHE/wasm-pkg-web-threads-relaxed.)
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { loadPackage } = require('../../tests/wasm/common.cjs');

async function main() {
  const [pkg, model, threads = '2'] = process.argv.slice(2);
  const w = await loadPackage(pkg, Number(threads));
  const lm = new w.Lm(fs.readFileSync(model));
  const squad = path.resolve(__dirname, '../../../shared/eval/squad-v2-dev-sample.json');
  const article = JSON.parse(fs.readFileSync(squad, 'utf8')).data[0];
  const prompt = article.paragraphs.slice(0, 4).map((p) => p.context).join('\n\n').slice(0, 2300);
  const g = JSON.parse(await lm.generate(prompt, '{"max_tokens": 1}'));
  console.log(JSON.stringify({ build: path.basename(path.resolve(pkg)), threads: Number(threads), prompt_tokens: g.prompt_tokens,
    prefill_seconds: Number(g.prefill_seconds.toFixed(2)), next_token: g.tokens[0] }));
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
