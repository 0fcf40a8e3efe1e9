// A library that no longer opens, through the npm package in Node: DocMem.open refuses it
// with BAD_LIBRARY and changes nothing on disk; with {damaged: 'rebuild'} the damaged
// library is copied, byte for byte, beside itself, and a new one is built from the
// documents that still read back (their collections kept; an unreadable one reported).
//
//   node tests/wasm/rebuild.mjs MODELS_DIR   (after scripts/wasm-test.sh bound the web package)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DocMem } from '../../js/node/docmem.js';

const [modelsDir] = process.argv.slice(2);
const t0 = performance.now();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-rebuild-'));
const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
const local = (dir, f) => ({ path: f, url: pathToFileURL(path.join(dir, f)).href, size: fs.statSync(path.join(dir, f)).size });
const embedder = { name: 'all-MiniLM-L6-v2', files: ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json'].map((f) => local(minilm, f)) };
const reader = { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', files: [local(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf')] };
const storageDir = path.join(tmp, 'library');
const options = { models: { embedder, reader, answerer: reader }, storageDir, modelCacheDir: path.join(tmp, 'models') };

/** Every file under `dir`, relative path → bytes. */
function snapshot(dir) {
  const out = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[path.relative(dir, path.join(e.parentPath ?? e.path, e.name))] = fs.readFileSync(path.join(e.parentPath ?? e.path, e.name));
  }
  return out;
}

let dm = await DocMem.open('rebuild', options);
await dm.addDocument('The Danube flows through ten countries and four capitals.', { title: 'rivers', method: 'sentence' });
await dm.addDocument('Lake Baikal holds a fifth of the fresh water on the surface of the Earth.', { title: 'lakes', method: 'sentence', collection: 'notes' });
await dm.addDocument('The Dead Sea lies more than four hundred metres below sea level.', { title: 'seas', method: 'sentence' });
dm.close();

/** Lose the index entries of the document added last (its fresh key, the newest). The
 * catalog of the others, kept with their entries, still gives their order and collections. */
function loseLastIndexEntries() {
  const dir = path.join(storageDir, 'index', 'fresh');
  const newest = fs.readdirSync(dir).sort((a, b) => parseInt(a, 10) - parseInt(b, 10)).at(-1);
  fs.rmSync(path.join(dir, newest));
}

// Index entries are lost: the library no longer opens, and refusing it changes nothing.
loseLastIndexEntries();
const damaged = snapshot(storageDir);
await assert.rejects(DocMem.open('rebuild', options), (e) => {
  assert.equal(e.code, 'BAD_LIBRARY');
  assert.match(e.message, /cannot be opened: .*index\/(fresh|parts)\/\d+\.bin.*damaged: 'rebuild'/);
  return true;
});
assert.deepEqual(snapshot(storageDir), damaged, 'a refused library is left as it was');
await assert.rejects(DocMem.open('rebuild', { ...options, damaged: 'yes' }), { code: 'BAD_ARGUMENT' });

// Rebuilt: every document back, its collection kept, the damaged copy beside it.
dm = await DocMem.open('rebuild', { ...options, damaged: 'rebuild' });
const r = dm.rebuilt;
assert.equal(r.documents, 3);
assert.deepEqual(r.unreadable, []);
assert.match(r.reason, /index\/(fresh|parts)\/\d+\.bin/);
assert.ok(r.setAside.startsWith(`${storageDir}~damaged-`), r.setAside);
assert.deepEqual(snapshot(r.setAside), damaged, 'the set-aside copy is the damaged library, byte for byte');
const docs = await dm.documents();
assert.deepEqual(docs.map((d) => [d.title, d.collection]), [['rivers', 'default'], ['lakes', 'notes'], ['seas', 'default']]);
const { answer, sources } = await dm.ask('How much fresh water does Lake Baikal hold?', { maxTokens: 8 });
assert.match(sources[0]?.text ?? '', /Baikal/, `the rebuilt index finds the passage first: ${answer}`);
dm.close();

// A library that opens is not touched by 'rebuild'.
dm = await DocMem.open('rebuild', { ...options, damaged: 'rebuild' });
assert.equal(dm.rebuilt, null);
dm.close();

// A damaged document too: the rest come back, the damaged one is named.
loseLastIndexEntries();
const seas = (await Promise.resolve(docs.find((d) => d.title === 'seas'))).id;
fs.writeFileSync(path.join(storageDir, 'documents', `${seas}.json`), '{"title": "seas", "te');
dm = await DocMem.open('rebuild', { ...options, damaged: 'rebuild' });
assert.equal(dm.rebuilt.documents, 2);
assert.deepEqual(dm.rebuilt.unreadable.map(([key]) => key), [`documents/${seas}.json`]);
assert.deepEqual((await dm.documents()).map((d) => d.title), ['rivers', 'lakes']);
dm.close();

fs.rmSync(tmp, { recursive: true, force: true });
console.log(`rebuild: a damaged library refused untouched, then rebuilt from its documents with the damaged copy kept (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
