// The document library compiled to wasm32 (simd128), in Node on the CPU backend: add
// documents (a baseline chunker, and MoM with SmolLM2 as reader), search, a streamed cited
// answer, persistence through the journal (applied to files here, as the browser applies
// it to IndexedDB), reopening, export/import, removal, cancel, and errors that name the
// problem.
//
//   node tests/wasm/library.cjs PKG_DIR MODELS_DIR EXAMPLE.md
// (scripts/wasm-test.sh builds PKG_DIR with wasm-bindgen --target nodejs.)
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { readTree } = require('./common.cjs');

const [pkgDir, modelsDir, examplePath] = process.argv.slice(2);
const { Embedder, Library, Lm } = require(path.resolve(pkgDir, 'docmem_wasm.js'));


// The storage: a directory, one file per key. The journal is applied in order (the
// library puts the manifest last), each file written to a temporary name and renamed.
function persist(dir, writes) {
  for (const [key, bytes] of writes) {
    const file = path.join(dir, key);
    if (bytes === null) {
      fs.rmSync(file, { force: true });
    } else {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(`${file}.tmp`, bytes);
      fs.renameSync(`${file}.tmp`, file);
    }
  }
  return writes.length;
}


async function main() {
const t0 = performance.now();
const embedder = new Embedder(readTree(path.join(modelsDir, 'all-MiniLM-L6-v2')), 'all-MiniLM-L6-v2', '');
const lm = new Lm(new Uint8Array(fs.readFileSync(path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf'))));
lm.setName('SmolLM2-135M-Instruct.Q4_1.gguf');
const store = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-wasm-library-'));

// A new library (nothing is written until the first document).
let lib = Library.open({}, embedder);
persist(store, lib.takeWrites());

// A baseline document, then the same content again: a no-op that writes nothing.
const example = fs.readFileSync(examplePath, 'utf8');
const first = await lib.addDocument({ title: 'printing-press.md', text: example }, { embedder, chunker: 'sentence' });
assert.equal(first.added, true);
assert.ok(first.chunks > 3, JSON.stringify(first));
const writes = lib.takeWrites();
assert.equal(writes[writes.length - 1][0], 'manifest.json', 'the manifest is written last');
persist(store, writes);
const again = await lib.addDocument({ title: 'printing-press.md', text: example }, { embedder, chunker: 'sentence' });
assert.equal(again.added, false);
assert.equal(lib.takeWrites().length, 0);

// MoM with SmolLM2 as reader (greedy only): progress is reported; the memory goes in.
const bells = 'The bell of Saint Paul rang at noon and again at dusk. In 1666 the great fire melted it.';
let reports = 0;
const progress = (p) => {
  reports += 1;
  assert.ok(p.fraction >= 0 && p.fraction <= 1 && typeof p.stage === 'string', JSON.stringify(p));
  return true;
};
// The chunker defaults to MoM when a reader is given.
const mom = await lib.addDocument({ title: 'bells.txt', text: bells }, { embedder, reader: lm, samples: 0, progress });
assert.equal(mom.added, true);
assert.ok(reports > 0);
assert.ok(mom.chunks >= 1);
const memory = lib.memory(mom.id);
assert.equal(memory.scenarios.length, mom.chunks);
persist(store, lib.takeWrites());

// A cancelled ingest changes nothing and leaves nothing to write.
const before = lib.documents();
await assert.rejects(lib.addDocument({ title: 'clocks.txt', text: 'A new text about clocks and their bells.' }, { embedder, reader: lm, progress: () => false }), /cancelled/);
// Options that do not fit are named.
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder, chunker: 'mom' }), /options\.reader: chunker 'mom' needs a reader/);
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder, chunker: 'sentence', reader: lm }), /options\.reader/);
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder: lm }), /options\.embedder is a model; it must be an Embedder/);
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder, reader: embedder }), /options\.reader is an Embedder/);
await assert.rejects(lib.addDocument({ title: 'x.txt' }, { embedder }), /doc\.text must be a string/);
await assert.rejects(lib.ask('Who?', { embedder }), /options\.answerer must be a model/);
// A misspelt or another call's option is named, not ignored.
await assert.rejects(lib.ask('Who?', { embedder, answerer: lm, maxtokens: 3 }), /options\.maxtokens is not an option here/);
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder, onProgress: () => true }), /options\.onProgress is not an option here/);
await assert.rejects(lib.addDocument({ title: 'x.txt', text: 'Some text.' }, { embedder, chunker: 'sentence', samples: 2 }), /options\.samples: chunker 'sentence'/);
assert.deepEqual(lib.documents(), before);
assert.equal(lib.takeWrites().length, 0);

// Retrieval alone, and a streamed answer with its sources.
const hits = await lib.search('Who brought printing to England?', { embedder, k: 3 });
assert.equal(hits.length, 3);
assert.ok(hits.some((h) => h.text.includes('Caxton')), JSON.stringify(hits));
let streamed = '';
const onToken = (piece) => {
  streamed += piece;
  return true;
};
const answer = await lib.ask('Who brought printing to England?', { embedder, answerer: lm, k: 3, maxTokens: 24, onToken });
assert.ok(answer.answer.length > 0 && streamed.trim().startsWith(answer.answer.slice(0, 5)), JSON.stringify(answer));
assert.ok(answer.sources.some((s) => s.text.includes('Caxton')));
// onRead gets the passages before the model reads them (the answer's own sources); a false
// from it stops the answer there, before a token is written; an exception it throws is ignored.
let read = null;
const withRead = await lib.ask('Who brought printing to England?', { embedder, answerer: lm, k: 3, maxTokens: 4, onRead: (passages) => { read = passages; throw new Error('a broken page'); } });
assert.deepEqual(read, withRead.sources);
let tokens = 0;
await assert.rejects(
  lib.ask('Who brought printing to England?', { embedder, answerer: lm, k: 3, maxTokens: 4, onRead: () => false, onToken: () => (tokens += 1) }),
  (e) => e.code === 'ABORTED',
);
assert.equal(tokens, 0, 'nothing was written after onRead said to stop');
await assert.rejects(lib.search('   ', { embedder, k: 3 }), /empty/);
await assert.rejects(lib.search('Who?', { embedder: lm }), /options\.embedder is a model/);

// Reopened from storage: the same documents.
const reopened = Library.open(readTree(store), embedder);
assert.deepEqual(reopened.documents(), lib.documents());
assert.equal(reopened.documents().length, 2);

// Export and import: the same library, every entry in the journal for the new storage.
const bytes = lib.exportLibrary();
const imported = Library.importLibrary(bytes, embedder);
assert.deepEqual(imported.documents(), lib.documents());
assert.equal(imported.takeWrites().length, Object.keys(readTree(store)).length);
assert.throws(() => Library.importLibrary(bytes.slice(0, bytes.length - 3), embedder), /damaged/);
assert.throws(() => Library.importLibrary(new Uint8Array([1, 2, 3]), embedder), /not an exported docmem library/);

// Removal from every layer; unknown ids are named.
assert.equal(lib.removeDocument(mom.id), true);
persist(store, lib.takeWrites());
assert.throws(() => lib.memory(mom.id), /no document/);
assert.throws(() => lib.removeDocument('nope'), /no document 'nope'/);
assert.equal(Library.open(readTree(store), embedder).documents().length, 1);
// A library entry that is not bytes is refused, naming the key.
assert.throws(() => Library.open({ 'manifest.json': 'text' }, embedder), /manifest.json/);

fs.rmSync(store, { recursive: true, force: true });
console.log(`wasm library: baseline and MoM ingest, search, streamed cited answer, persistence, export/import, removal, cancel: ok (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
