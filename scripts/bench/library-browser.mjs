// A library at scale in the browser: in headless Chromium, documents added one at a time
// to a library in IndexedDB, the way the npm package's worker adds them (the wasm
// `Library`, its journal applied by the package's IdbStore, merges in slices between
// changes), with sentence chunks and the hashing embedder so that the library's own work
// is what is timed; the CLI's figures for the same are `docmem bench library`.
// A benchmark, not a test: it prints figures and asserts only that searches find passages.
//
//   node scripts/bench/library-browser.mjs [--docs N] [--every N] [--queries N]
//        [--slice-ms MS] [--hotpot FILE] [--case-timeout SECONDS] [--keep-index]
// (scripts/bench/library-browser.sh checks the packages first.) `--keep-index`: the library
// keeps a copy of its index's entries, as it did before `releaseIndex`, to compare.
//
// Documents are ten paragraphs drawn at random (seeded) from HotpotQA's distractor
// contexts (../shared/eval/hotpotqa-dev-distractor-sample.json by default), about 5.7 KB
// each, as `docmem bench library --hotpot` draws them; queries are first sentences of
// added documents. Output (stdout): the JSON result, then a markdown table.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { browserLabel, cache, launchOptions, parseArgs, reporter, root, round, runBenchPage, startServer } from './browser-bench.mjs';

const { die, log } = reporter('library-browser');
const opts = { docs: 2000, every: 250, queries: 100, sliceMs: 50, k: 8, timeoutS: 3600, releaseIndex: true, hotpot: path.join(root, '..', 'shared', 'eval', 'hotpotqa-dev-distractor-sample.json') };
parseArgs(process.argv.slice(2), {
  die,
  usage: 'node scripts/bench/library-browser.mjs [--docs N] [--every N] [--queries N] [--slice-ms MS] [--hotpot FILE] [--case-timeout SECONDS] [--keep-index]',
  handle(a, value, int) {
    if (a === '--docs') opts.docs = int(value());
    else if (a === '--every') opts.every = int(value());
    else if (a === '--queries') opts.queries = int(value());
    else if (a === '--slice-ms') opts.sliceMs = int(value(), 0, '--slice-ms');
    else if (a === '--hotpot') opts.hotpot = value();
    else if (a === '--case-timeout') opts.timeoutS = int(value());
    else if (a === '--keep-index') opts.releaseIndex = false;
    else return false;
    return true;
  },
});

const pkgDir = path.join(cache, 'wasm-pkg-web');
if (!fs.existsSync(path.join(pkgDir, 'docmem_wasm_bg.wasm'))) die(`no web wasm package in ${pkgDir}`);
if (!fs.readFileSync(path.join(pkgDir, 'docmem_wasm.d.ts'), 'utf8').includes('mergeStep')) {
  die(`the wasm package in ${pkgDir} predates Library.mergeStep; rebuild it (bash scripts/build-wasm.sh)`);
}

// Paragraphs as the CLI's bench reads them: every context paragraph, sentences joined,
// sorted and de-duplicated.
let rows;
try {
  rows = JSON.parse(fs.readFileSync(opts.hotpot, 'utf8'));
} catch (e) {
  die(`--hotpot ${opts.hotpot}: ${e.message}`);
}
const paragraphs = [...new Set(rows.flatMap((r) => (r.context || []).map((p) => (p[1] || []).join(''))).filter((p) => p.trim()))].sort();
if (paragraphs.length < 10) die(`--hotpot ${opts.hotpot}: fewer than 10 paragraphs`);

// mulberry32: a small seeded generator, so every run draws the same documents.
let seed = 7;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const docs = Array.from({ length: opts.docs }, (_, i) => ({
  title: `doc-${String(i).padStart(5, '0')}.txt`,
  text: Array.from({ length: 10 }, () => paragraphs[Math.floor(random() * paragraphs.length)]).join('\n\n'),
}));
const queries = Array.from({ length: opts.queries }, () => {
  const d = docs[Math.floor(random() * docs.length)];
  return d.text.split(/(?<=[.!?])\s/)[0].slice(0, 300);
});

const { server, origin } = await startServer({ page: 'library-browser', models: [], mounts: [['/pkg/', pkgDir], ['/js/', path.join(root, 'js')]] });
const browser = await chromium.launch(launchOptions());
let outcome;
try {
  const page = await (await browser.newContext()).newPage();
  outcome = await runBenchPage(page, {
    url: `${origin}/bench/`,
    c: { docs, every: opts.every, queries, sliceMs: opts.sliceMs, k: opts.k, releaseIndex: opts.releaseIndex },
    timeoutMs: opts.timeoutS * 1000,
    readyTimeoutMs: 30_000,
    progressPrefix: '[library] ',
    onProgress: (line) => log(line),
  });
} finally {
  await browser.close();
  server.close();
}
if (!outcome.ok) {
  console.error(outcome.console.join('\n'));
  die(outcome.error);
}
const r = outcome.result;
console.log(JSON.stringify({ bench: 'library-browser', browser: browserLabel(outcome.info), documents: opts.docs, slice_ms: opts.sliceMs, ...r }));
console.log(`\n${opts.docs} documents of HotpotQA paragraphs in ${browserLabel(outcome.info)}, sentence chunks, hashing embedder, IndexedDB\n`);
console.log('| documents | s per document | bytes written per document | merges so far |');
console.log('| ---: | ---: | ---: | ---: |');
for (const row of r.rows) console.log(`| ${row.documents} | ${round(row.s_per_document, 4)} | ${row.bytes_per_document} | ${row.merges} |`);
const first = r.rows[0].s_per_document;
const last = r.rows[r.rows.length - 1].s_per_document;
console.log(
  `\nlast step over first: ${round(last / first)}×; merges between adds ${round(r.merge_s_between_adds, 1)} s, then ${round(r.idle_merge_s, 1)} s when idle; ` +
    `${r.entries} entries (${r.parts} parts), ${round(r.stored_mib, 1)} MiB stored; reload: entries read ${round(r.read_entries_s)} s, open ${round(r.open_s)} s, ` +
    `with one search ${round(r.open_and_search_s)} s; search p50 ${round(r.search_p50_ms, 1)} ms, p99 ${round(r.search_p99_ms, 1)} ms; ` +
    `wasm heap ${round(r.wasm_heap_mib)} MiB (${r.release_index ? 'the index given up to IndexedDB' : 'a copy of the index kept'})`,
);
