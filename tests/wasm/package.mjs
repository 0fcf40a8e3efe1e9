// The npm package's DocMem client in Node (worker thread, CPU backend): models from a
// local HTTP server (downloaded, sha256-checked, cached in a directory; a wrong checksum
// is refused) and from file: URLs, documents added by a chunker and by MoM (SmolLM2 as
// reader) with progress, cancellation both ways (the shared flag, and a restarted worker
// for the chunker call), a streamed answer whose citation spans index the document text,
// persistence across reopening, export/import, removal, and error codes.
//
//   node tests/wasm/package.mjs MODELS_DIR EXAMPLE.md   (after scripts/wasm-test.sh bound the web package)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DocMem } from '../../js/node/docmem.js';

const [modelsDir, examplePath] = process.argv.slice(2);
const t0 = performance.now();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-package-'));
const sha256 = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

// The embedder's files over HTTP, as the browser gets them.
const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
const server = http.createServer((req, res) => {
  const file = path.join(minilm, decodeURIComponent(new URL(req.url, 'http://x').pathname));
  if (!file.startsWith(minilm) || !fs.existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-length': fs.statSync(file).size });
  fs.createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}/`;
const embedderFiles = ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']
  .filter((f) => fs.existsSync(path.join(minilm, f)))
  .map((f) => ({ path: f, url: base + f, size: fs.statSync(path.join(minilm, f)).size, sha256: sha256(path.join(minilm, f)) }));
const smol = path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf');
const reader = { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', files: [{ path: 'model.gguf', url: pathToFileURL(smol).href, size: fs.statSync(smol).size }] };
const models = { embedder: { name: 'all-MiniLM-L6-v2', files: embedderFiles }, reader, answerer: reader };
const options = { models, storageDir: path.join(tmp, 'library'), modelCacheDir: path.join(tmp, 'models') };

// A wrong checksum is refused with its code, and nothing is cached.
const bad = structuredClone(models);
bad.embedder.files[0].sha256 = '0'.repeat(64);
await assert.rejects(DocMem.open('bad', { ...options, models: bad }), { code: 'MODEL_CHECKSUM_MISMATCH' });
await assert.rejects(DocMem.open('bad', { ...options, backend: 'webgpu' }), { code: 'WEBGPU_UNAVAILABLE' });

let downloads = 0;
// Two threads: the threads build, its helper workers on shared memory.
let dm = await DocMem.open('test', {
  ...options,
  threads: 2,
  onProgress: (p) => {
    if (p.stage === 'download') downloads += 1;
  },
});
assert.ok(downloads > 0);
// The relaxed-SIMD threads build where the engine has relaxed SIMD (Node 22+); Node 20
// cannot compile it, and the package says so and runs the plain threads build.
const relaxedEngine = Number(process.versions.node.split('.')[0]) >= 22;
assert.equal(dm.backend.kernels, relaxedEngine ? 'relaxed-simd' : 'simd128', dm.backend.kernelsNote);
if (!relaxedEngine) assert.match(dm.backend.kernelsNote, /^relaxed SIMD not used: /);
assert.equal(dm.backend.label, `CPU (wasm simd128${relaxedEngine ? ' + relaxed SIMD' : ''}, 2 threads)`);
assert.equal(dm.backend.threads, 2);
assert.equal(dm.backend.reason, 'no WebGPU adapter (navigator.gpu is missing)');
assert.equal(dm.backend.embedder, 'cpu', 'the embedder runs in wasm beside the CPU models');
assert.equal(dm.models.reader, 'SmolLM2-135M-Instruct.Q4_1.gguf');
assert.equal(dm.models.embedder, 'all-MiniLM-L6-v2');
// The weights are held once: linear memory is above the model files' size and below twice it.
const modelBytes = fs.statSync(smol).size + embedderFiles.reduce((n, f) => n + f.size, 0);
const linear = dm.models.wasmMemoryBytes;
console.log(`wasm memory with the models loaded: ${(linear / 2 ** 20).toFixed(0)} MB (model files ${(modelBytes / 2 ** 20).toFixed(0)} MB)`);
assert.ok(linear > modelBytes && linear < 2 * modelBytes, `linear memory ${linear} for ${modelBytes} bytes of models`);

// A chunker document from a string, and a MoM one from a File, with progress.
const example = fs.readFileSync(examplePath, 'utf8');
const stages = new Set();
const first = await dm.addDocument(example, { title: 'printing-press.md', method: 'sentence', onProgress: (p) => stages.add(p.stage) });
assert.equal(first.added, true);
assert.ok(first.chunks > 3, JSON.stringify(first));
assert.ok(stages.has('indexing'));
const bells = 'The bell of Saint Paul rang at noon and again at dusk. In 1666 the great fire melted it.';
stages.clear();
const mom = await dm.addDocument(new File([bells], 'bells.txt'), { method: 'mom', samples: 0, onProgress: (p) => stages.add(p.stage) });
assert.equal(mom.added, true);
assert.equal(mom.title, 'bells.txt');
assert.ok(stages.has('reading') && stages.has('indexing'), [...stages].join());
const stats = await dm.threadStats();
assert.ok(stats.threads === 2 && stats.helperTasks > 0, `a helper thread did work: ${JSON.stringify(stats)}`);
const docs = await dm.documents();
assert.deepEqual(docs.map((d) => d.title), ['printing-press.md', 'bells.txt']);

// Cancel MoM through the shared flag, set as soon as the request is sent: the reader's
// first progress report sees it (its reports come per window and candidate, not per
// token, so a later cancel waits for the window to finish). Nothing changes.
let controller = new AbortController();
const clocks = dm.addDocument('A new text about clocks and their bells.', { title: 'clocks.txt', method: 'mom', samples: 0, signal: controller.signal });
controller.abort();
await assert.rejects(clocks, { code: 'ABORTED' });
// Cancel a chunker call (no callback to read a flag): the worker is replaced, the library
// comes back from storage as it was, and later requests go to the new worker.
controller = new AbortController();
const chunked = dm.addDocument(example.repeat(3), { title: 'long.md', method: 'sentence', signal: controller.signal });
setTimeout(() => controller.abort(), 50);
await assert.rejects(chunked, { code: 'ABORTED' });
assert.deepEqual((await dm.documents()).map((d) => d.title), ['printing-press.md', 'bells.txt']);

// HTML goes through the runtime's text extraction; bad documents are named.
const page = await dm.addDocument(new File(['<html><body><h1>Clocks</h1><script>x()</script><p>The clock struck one at noon.</p></body></html>'], 'clock.html'), { method: 'sentence' });
const pageText = (await dm.memory(page.id)).text;
assert.ok(pageText.includes('The clock struck one') && !pageText.includes('x()') && !pageText.includes('<p>'), pageText);
await assert.rejects(dm.addDocument(new File(['%PDF'], 'scan.pdf')), { code: 'BAD_DOCUMENT' });
await assert.rejects(dm.addDocument('   ', { title: 'empty.txt', method: 'sentence' }), { code: 'BAD_DOCUMENT' });
// Codes come from the Rust error's type (core's ErrorCode), not from its message.
await assert.rejects(dm.addDocument('Some text.', { title: 'odd.txt', method: 'paragraphs' }), { code: 'BAD_ARGUMENT', message: /paragraphs/ });

// A streamed answer; each citation's span is its text inside the document.
let streamed = '';
const progress = [];
const answer = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 16, onToken: (t) => (streamed += t), onProgress: (p) => progress.push(p) });
assert.ok(answer.answer.length > 0 && streamed.length > 0, JSON.stringify(answer));
// Before it was written, the answer's passages came with the 'read' stage, as the answer gives them.
assert.deepEqual(progress.map((p) => p.stage), ['search', 'read', 'write']);
const read = progress[1];
assert.equal(read.passages, answer.sources.length);
assert.deepEqual(read.sources, answer.sources);
assert.ok(read.found >= read.passages && read.found <= 2, `found ${read.found} pieces for k = 2`);
// SmolLM2's answers are not judged by the answerability check (it is fitted to the 1.5B's): no draft.
assert.strictEqual(answer.draft, null, 'an answer the check did not replace has no draft');
assert.ok(answer.sources.some((s) => s.text.includes('Caxton')));
for (const s of answer.sources) {
  const { text } = await dm.memory(s.document.id);
  assert.equal(text.slice(s.span.start, s.span.end).slice(0, 200), s.text.slice(0, 200));
}
assert.ok(answer.citations.every((c) => answer.sources.includes(c) || answer.sources.some((s) => s.n === c.n)));
const memory = await dm.memory(first.id);
assert.equal(memory.scenarios.length, first.chunks);
assert.equal(memory.scenarios[0].span.start, 0);
assert.equal(memory.scenarios.at(-1).span.end, memory.text.trimEnd().length, 'the spans cover the text');
await assert.rejects(dm.ask('   '), { code: 'BAD_QUESTION' });
controller = new AbortController();
await assert.rejects(dm.ask('When was the Gutenberg Bible printed?', { k: 1, signal: controller.signal, onToken: () => controller.abort() }), { code: 'ABORTED' });

// Reopened: the same documents; the downloaded embedder comes from the cache directory.
dm.close();
downloads = 0;
dm = await DocMem.open('test', options);
assert.equal((await dm.documents()).length, 3);

// Collections, routing and clues (#9): a document in its own collection; the router sends
// a question about it there and says why; clues come back with the sources they found.
const engines = await dm.addDocument('James Watt added a separate condenser to the steam engine in 1765. It saved fuel.', {
  title: 'engines.txt',
  method: 'sentence',
  collection: 'engineering',
});
assert.deepEqual(await dm.collections(), [{ name: 'default', documents: 3 }, { name: 'engineering', documents: 1 }]);
assert.equal((await dm.documents()).find((d) => d.id === engines.id).collection, 'engineering');
const routed = await dm.ask('Who added a separate condenser to the steam engine?', { k: 2, maxTokens: 12, route: 'auto' });
assert.equal(routed.route.segments[0].collection, 'engineering', JSON.stringify(routed.route));
assert.match(routed.route.segments[0].chosenBy, /^descriptor/);
assert.ok(routed.sources.length > 0 && routed.answer.length > 0);
const fixed = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 8, route: 'default' });
assert.ok(fixed.route.segments.every((g) => g.collection === 'default' && g.chosenBy === 'fixed'));
const clued = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 12, clues: 'on' });
assert.deepEqual(clued.clues.queries[0], { kind: 'question', text: 'Who brought printing to England?' });
assert.equal(clued.clues.foundBy.length, clued.sources.length);
await assert.rejects(dm.ask('Who?', { clues: 'sometimes' }), { code: 'BAD_ARGUMENT' });
await assert.rejects(dm.ask('Who?', { route: 'nowhere' }), { code: 'NOT_FOUND' });
assert.equal(await dm.removeDocument(engines.id), true);

// Export, remove, import: back as exported.
const bytes = await dm.exportLibrary();
assert.equal(await dm.removeDocument(mom.id), true);
await assert.rejects(dm.memory(mom.id), { code: 'NOT_FOUND' });
assert.equal((await dm.documents()).length, 2);
await dm.importLibrary(bytes);
assert.equal((await dm.documents()).length, 3);
await assert.rejects(dm.importLibrary(new Uint8Array([1, 2, 3])), { code: 'BAD_LIBRARY' });
dm.close();
// One thread: the plain build, and the backend says why.
dm = await DocMem.open('test', { ...options, threads: 1 });
assert.equal((await dm.documents()).length, 3, 'the import was stored');
assert.equal(dm.backend.label, 'CPU (wasm simd128, 1 thread)');
assert.equal(dm.backend.threadsNote, 'one thread was asked for');
assert.equal((await dm.threadStats()).helperTasks, 0);
dm.close();

server.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`npm package (DocMem in Node): models over HTTP and file:, chunker and MoM ingest, cancel by flag and by restart, cited answer, collections, routing and clues, persistence, export/import, 2 threads and 1: ok (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
