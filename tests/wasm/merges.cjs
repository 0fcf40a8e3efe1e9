// Merges of a library's index parts made a slice at a time, as the npm package's worker
// makes them when its queue is idle: the wasm Library opened with small parts (16 vectors)
// and background merges, the hashing embedder (no model), documents added until a merge is
// due, then `mergeStep` in slices of one step each (a budget of 0 ms) until the merge is
// stored; a document removed midway stays removed; searches answer the same before, during
// and after, and after a reopen from the stored entries. As in the worker, the library
// leaves its index's bytes to the storage (`releaseIndex`): it exports through
// `Library.archive` of the stored entries.
//
//   node tests/wasm/merges.cjs PKG_DIR
// (scripts/wasm-test.sh builds PKG_DIR with wasm-bindgen --target nodejs.)
'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');

const [pkgDir] = process.argv.slice(2);
const { Embedder, Library } = require(path.resolve(pkgDir, 'docmem_wasm.js'));

async function main() {
  const t0 = performance.now();
  assert.throws(() => Embedder.hashing(0), /dim: 0 is not between 1 and 4096/);
  const embedder = Embedder.hashing(64);
  assert.equal(embedder.dim(), 64);
  assert.equal(embedder.precision(), 'none');
  assert.throws(() => Library.open({}, embedder, { partSize: 4 }), /options\.partSize is not an option here/);

  // The storage: a map of entries, the journal applied in order.
  const stored = {};
  const persist = (writes) => {
    for (const [key, bytes] of writes) {
      if (bytes === null) delete stored[key];
      else stored[key] = bytes;
    }
  };
  let lib = Library.open({}, embedder, { partVectors: 16 });
  lib.releaseIndex();
  lib.setBackgroundMerges(true);
  assert.deepEqual(lib.mergeStep(0), { merging: false, applied: false, left: 0 }, 'nothing is due in an empty library');
  const title = (i) => `tower-${i}.txt`;
  const text = (i) => `Tower ${i} has a clock. Its bell w${i}z rings at noon. The keeper is k${i}q and sweeps the stair.`;
  const top = async (l, i) => (await l.search(`Its bell w${i}z rings at noon.`, { embedder, k: 1 }))[0].document.title;
  const parts = () => (stored['manifest.json'] ? JSON.parse(new TextDecoder().decode(stored['manifest.json'])).parts : []);
  let added = 0;
  while (parts().length < 8) {
    await lib.addDocument({ title: title(added), text: text(added) }, { embedder, chunker: 'sentence' });
    persist(lib.takeWrites());
    added += 1;
    assert.ok(added < 400, 'eight parts were made');
  }
  assert.ok(parts().every((p) => p.tier === 0), 'a change makes no merge with background merges on');
  const before = await Promise.all([0, 7, added - 1].map((i) => top(lib, i)));
  assert.deepEqual(before, [title(0), title(7), title(added - 1)]);

  // One step per call: the merge takes several calls, and searches answer meanwhile.
  let r = lib.mergeStep(0);
  assert.equal(r.merging, true);
  assert.ok(r.left > 0, JSON.stringify(r));
  assert.equal(lib.takeWrites().length, 0, 'nothing is stored until the merge is done');
  assert.equal(await top(lib, 7), title(7));
  // Removed while merging: document 3, in a part being merged.
  const doc3 = lib.documents().find((d) => d.title === title(3));
  assert.equal(lib.removeDocument(String(doc3.id)), true);
  persist(lib.takeWrites());
  let slices = 1;
  for (;;) {
    const left = r.left;
    r = lib.mergeStep(0);
    slices += 1;
    if (!r.merging) break;
    assert.ok(r.left < left, 'each slice links vectors');
  }
  assert.equal(r.applied, true);
  assert.ok(slices > 3, `${slices} slices`);
  persist(lib.takeWrites());
  assert.ok(parts().some((p) => p.tier === 1), JSON.stringify(parts()));
  const check = async (l) => {
    assert.deepEqual(await Promise.all([0, 7, added - 1].map((i) => top(l, i))), before);
    assert.notEqual(await top(l, 3), title(3), 'removed while merging, and still removed');
    assert.equal(l.documents().length, added - 1);
  };
  await check(lib);
  assert.throws(() => lib.exportLibrary(), (e) => e.code === 'BAD_ARGUMENT' && /Library\.archive/.test(e.message));
  lib.free();
  lib = Library.open(stored, embedder, { partVectors: 16, releaseIndex: true });
  await check(lib);
  assert.throws(() => lib.exportLibrary(), /Library\.archive/, 'opened releasing its index: no whole copy to export');
  assert.throws(() => Library.open(stored, embedder, { releaseIndex: 'yes' }), /options\.releaseIndex must be true or false, not a value of type string/);
  // Still a working library: an add after the release, stored and found after a reopen.
  await lib.addDocument({ title: title(added), text: text(added) }, { embedder, chunker: 'sentence' });
  persist(lib.takeWrites());
  added += 1;
  lib.free();
  const imported = Library.importLibrary(Library.archive(stored), embedder);
  assert.equal(await top(imported, added - 1), title(added - 1));
  assert.equal(await top(imported, 7), title(7));
  assert.equal(imported.documents().length, added - 1);
  imported.free();
  console.log(`wasm merges: ${added} documents, ${slices} slices, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
