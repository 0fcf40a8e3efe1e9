// The docmem worker (js/node/worker.js, in a worker thread as the npm package runs it) adding
// documents from a file's bytes: a .pdf, and bytes that start with %PDF- whatever their
// name, go through js/node/pdf.js (PDF.js) and are stored as its text with a form feed on its
// own line between pages (the engine's page mark, which citations count); a scan and a password-protected PDF are refused
// with BAD_DOCUMENT and add nothing; other bytes are read as UTF-8 text (HTML by name).
// Talks the worker's own protocol ({id, op, args}), below the DocMem client.
//
//   node tests/wasm/pdf-worker.mjs MODELS_DIR   (after scripts/wasm-test.sh bound the web package)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { pdfToText } from '../../js/node/pdf.js';

const [modelsDir] = process.argv.slice(2);
const t0 = performance.now();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cache = process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-pdf-worker-'));
const fixture = (name) => new Uint8Array(fs.readFileSync(path.join(root, 'tests/fixtures/pdf', name)));

const local = (file) => ({ path: path.basename(file), url: pathToFileURL(file).href, size: fs.statSync(file).size });
const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
const embedderFiles = ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']
  .filter((f) => fs.existsSync(path.join(minilm, f)))
  .map((f) => ({ ...local(path.join(minilm, f)), path: f }));
const reader = { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', files: [local(path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf'))] };
const pkg = (dir) => ({ js: pathToFileURL(path.join(cache, dir, 'docmem_wasm.js')).href, wasm: pathToFileURL(path.join(cache, dir, 'docmem_wasm_bg.wasm')).href });

const worker = new Worker(path.join(root, 'js/node/worker.js'));
const results = new Map();
let nextId = 1;
worker.on('message', (m) => {
  if (m.type === 'result' || m.type === 'error') results.get(m.id)?.(m);
});
const ready = new Promise((resolve) => worker.once('message', resolve));
const call = (op, args, transfer = []) => {
  const id = nextId++;
  const done = new Promise((resolve) => results.set(id, resolve));
  worker.postMessage({ id, op, args }, transfer);
  return done.then((m) => {
    if (m.type === 'error') throw Object.assign(new Error(m.error.message), { code: m.error.code });
    return m.data;
  });
};
try {
  assert.equal((await ready).type, 'ready');
  await call('init', {
    models: { embedder: { name: 'all-MiniLM-L6-v2', files: embedderFiles }, reader, answerer: reader },
    wasm: { ...pkg('wasm-pkg-web'), threads: null, relaxed: null },
    backend: 'cpu',
    threads: 1,
    storageDir: path.join(tmp, 'library'),
    modelCacheDir: path.join(tmp, 'models'),
    cancel: null,
  });

  // A PDF from its bytes (moved to the worker, as the client sends a File's): stored as
  // js/node/pdf.js reads it, pages and all.
  const expected = await pdfToText(fixture('two-pages.pdf'), { separator: '\n\f\n' });
  const bytes = fixture('two-pages.pdf');
  const added = await call('add', { title: 'two-pages.pdf', name: 'two-pages.pdf', bytes, method: 'sentence' }, [bytes.buffer]);
  assert.equal(added.added, true);
  assert.ok(added.chunks >= 1, JSON.stringify(added));
  const memory = await call('memory', { id: added.id });
  assert.equal(memory.text, expected.text);
  assert.ok(memory.text.includes('The Gutenberg Bible') && memory.text.includes('\u{1F4D6}'));
  assert.ok(memory.text.indexOf('\n\f\n') < memory.text.indexOf('The Gutenberg Bible'), 'page 2 follows the page mark');

  // Named otherwise, bytes that start with %PDF- are still a PDF (and, being the same
  // text, the same document).
  const again = await call('add', { title: 'download', name: 'download', bytes: fixture('two-pages.pdf'), method: 'sentence' });
  assert.equal(again.id, added.id);
  assert.equal(again.added, false);

  // Refused, naming the file; nothing is added.
  await assert.rejects(call('add', { title: 'scan.pdf', name: 'scan.pdf', bytes: fixture('scan.pdf'), method: 'sentence' }), {
    code: 'BAD_DOCUMENT',
    message: "'scan.pdf': this PDF has no text layer (scanned pages are images); docmem does no OCR",
  });
  await assert.rejects(call('add', { title: 'locked.pdf', name: 'locked.pdf', bytes: fixture('encrypted.pdf'), method: 'sentence' }), {
    code: 'BAD_DOCUMENT',
    message: /^'locked\.pdf': this PDF is password-protected/,
  });
  await assert.rejects(call('add', { title: 'notes.pdf', name: 'notes.pdf', bytes: new TextEncoder().encode('just text'), method: 'sentence' }), {
    code: 'BAD_DOCUMENT',
    message: /^'notes\.pdf': this file is not a readable PDF/,
  });

  // Other bytes are text (UTF-8; HTML by its name), and a string is as before.
  const note = await call('add', { title: 'n.txt', name: 'n.txt', bytes: new TextEncoder().encode('Caf\u00e9 notes about the abbey press.'), method: 'sentence' });
  assert.equal((await call('memory', { id: note.id })).text, 'Caf\u00e9 notes about the abbey press.');
  const html = await call('add', { title: 'p.html', name: 'p.html', bytes: new TextEncoder().encode('<p>The press <b>printed</b> books.</p><script>x()</script>'), method: 'sentence' });
  const htmlText = (await call('memory', { id: html.id })).text;
  assert.ok(htmlText.includes('The press printed books.') && !htmlText.includes('x()'), htmlText);
  const titles = (await call('documents', {})).map((d) => d.title);
  assert.deepEqual(titles.sort(), ['n.txt', 'p.html', 'two-pages.pdf']);
} finally {
  await worker.terminate();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`tests/wasm/pdf-worker.mjs: PDF and text bytes through the worker in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
