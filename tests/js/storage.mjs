// The package's library storage in Node, without models: one DocMem per library (the lock
// file, across processes and within one), and the directory store's crash order (new
// files, then the manifest, then removals; an interrupted change leaves the old manifest
// naming files that are all there).
//
//   node tests/js/storage.mjs
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DocMem } from '../../js/node/docmem.js';
import { DirStore } from '../../js/node/dir-store.js';
import { lockDir } from '../../js/node/dir-lock.js';

const js = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-storage-'));
const bytes = (s) => new TextEncoder().encode(s);
const text = (dir, key) => fs.readFileSync(path.join(dir, key), 'utf8');
let checks = 0;
const check = async (name, f) => {
  await f();
  checks += 1;
  console.error(`ok ${name}`);
};

await check('a second DocMem on a library is refused while the first holds it, then allowed', async () => {
  const dir = path.join(tmp, 'lib-a');
  const release = await lockDir(dir);
  await assert.rejects(lockDir(dir), (e) => e.code === 'BUSY' && /another DocMem of this process/.test(e.message));
  // Another process is refused too, and told which process holds it.
  const other = spawnSync(process.execPath, ['--input-type=module', '-e', `import { lockDir } from '${path.join(js, 'node', 'dir-lock.js')}'; lockDir(${JSON.stringify(dir)}).then(() => console.log('locked'), (e) => console.log(e.code, e.message));`], { encoding: 'utf8' });
  assert.match(other.stdout, new RegExp(`^BUSY .*another process \\(pid ${process.pid}\\)`), other.stdout + other.stderr);
  release();
  assert.ok(!fs.existsSync(path.join(dir, '.lock')), 'released: the lock file is gone');
  (await lockDir(dir))();
});

await check('a process that exits without closing its DocMems leaves no lock behind', async () => {
  const dirs = [path.join(tmp, 'exit-a'), path.join(tmp, 'exit-b')];
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', `import { lockDir } from '${path.join(js, 'node', 'dir-lock.js')}'; for (const d of ${JSON.stringify(dirs)}) await lockDir(d); console.log('locked');`], { encoding: 'utf8' });
  assert.equal(child.stdout.trim(), 'locked', child.stderr);
  for (const d of dirs) assert.ok(!fs.existsSync(path.join(d, '.lock')), `${d}/.lock released at exit`);
});

await check("a lock left by a process that is gone is taken over", async () => {
  const dir = path.join(tmp, 'lib-stale');
  fs.mkdirSync(dir, { recursive: true });
  const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' }).stdout.trim();
  fs.writeFileSync(path.join(dir, '.lock'), dead);
  const release = await lockDir(dir);
  assert.equal(text(dir, '.lock'), String(process.pid));
  release();
});

await check("'.' and '..' name no library folder", async () => {
  for (const name of ['.', '..']) {
    const spec = (n) => ({ name: n, files: [{ path: n, url: `http://127.0.0.1:9/${n}`, sha256: 'ab'.repeat(32) }] });
    await assert.rejects(DocMem.open(name, { models: { embedder: spec('e'), reader: spec('r') } }), (e) => e.code === 'BAD_ARGUMENT' && e.message.includes('storageDir'));
  }
});

await check('a change writes new files, then the manifest, then removes; an interrupted one leaves the old library whole', async () => {
  const dir = path.join(tmp, 'store');
  let store = await DirStore.open(dir);
  await store.apply([['manifest.json', bytes('v1')], ['documents/a.json', bytes('a')], ['memories/a.json', bytes('ma')]]);
  assert.equal(text(dir, 'manifest.json'), 'v1');
  // The journal names the manifest first; a later file cannot be written (a file stands
  // where its folder must go): the change fails and the old manifest still names a.json.
  fs.writeFileSync(path.join(dir, 'index'), 'in the way');
  await assert.rejects(store.apply([['manifest.json', bytes('v2')], ['documents/a.json', null], ['index/1.bin', bytes('i')]]), (e) => e.code === 'STORAGE_FAILED');
  assert.equal(text(dir, 'manifest.json'), 'v1', 'the manifest was not replaced');
  assert.equal(text(dir, 'documents/a.json'), 'a', 'nor was anything it names removed');
  fs.rmSync(path.join(dir, 'index'));
  // A key written then removed in one journal is removed.
  await store.apply([['documents/b.json', bytes('b')], ['documents/b.json', null], ['manifest.json', bytes('v3')]]);
  assert.ok(!fs.existsSync(path.join(dir, 'documents/b.json')));
  // Leftover temporary files go at the next open; the lock file is never an entry.
  fs.writeFileSync(path.join(dir, 'documents', '.tmp-123-x-a.json'), 'partial');
  fs.writeFileSync(path.join(dir, '.lock'), '1');
  store = await DirStore.open(dir);
  assert.ok(!fs.existsSync(path.join(dir, 'documents', '.tmp-123-x-a.json')));
  assert.deepEqual(Object.keys(await store.entries()).sort(), ['documents/a.json', 'manifest.json', 'memories/a.json']);
  // An import replaces everything, old keys removed only after the new manifest is in.
  await store.apply([['manifest.json', bytes('imported')], ['documents/z.json', bytes('z')]], { replace: true });
  assert.deepEqual(Object.keys(await store.entries()).sort(), ['documents/z.json', 'manifest.json']);
  assert.equal(text(dir, 'manifest.json'), 'imported');
  assert.ok(fs.existsSync(path.join(dir, '.lock')), 'an import leaves the lock alone');
});

fs.rmSync(tmp, { recursive: true, force: true });
console.error(`tests/js/storage.mjs: ${checks} checks passed`);
