// The model manifest as DocMem.open reads it, refused before anything is fetched or
// stored when it could do harm: a manifest from a server naming this machine's files
// (file: URLs, paths), a sha256 that is not one (it names the stored file in Node), a
// role without files. And the package's manifest writer on a folder of stand-in files.
//
//   node tests/js/manifest.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { DocMem } from '../../js/node/docmem.js';
import { makeManifest } from '../../js/manifest.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-manifest-'));
const sha = 'ab'.repeat(32);
const file = (url, extra = {}) => ({ path: 'model.gguf', url, size: 4, sha256: sha, ...extra });
let served = {};
const server = http.createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(served)));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/models.json`;
const opts = { storageDir: path.join(tmp, 'lib'), modelCacheDir: path.join(tmp, 'cache') };
const refused = async (manifest, pattern, viaServer = true) => {
  served = manifest;
  await assert.rejects(DocMem.open('m', { ...opts, models: viaServer ? url : manifest }), (e) => e.code === 'MODEL_FETCH_FAILED' && pattern.test(e.message), String(pattern));
};

try {
  const embedder = { name: 'e', files: [file('e.bin')] };
  await refused({ embedder, reader: { name: 'r', files: [file('file:///etc/passwd')] } }, /file:\/\/\/etc\/passwd is not an http\(s\) URL/);
  await refused({ embedder, reader: { name: 'r', files: [file('r.gguf', { sha256: '../../escape' })] } }, /sha256 must be 64/);
  await refused({ embedder, reader: { name: 'r', files: [] } }, /reader needs a name and files/);
  await refused({ embedder, reader: { name: 'r', files: [file('r.gguf', { sha256: sha.toUpperCase() })] } }, /sha256 must be 64/, false);
  assert.ok(!fs.existsSync(path.join(tmp, 'cache')), 'nothing was fetched or stored');

  const dir = path.join(tmp, 'models');
  fs.mkdirSync(path.join(dir, 'minilm'), { recursive: true });
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) fs.writeFileSync(path.join(dir, 'minilm', f), f);
  fs.writeFileSync(path.join(dir, 'small model.gguf'), 'GGUF');
  const m = await makeManifest(dir, { baseUrl: 'https://cdn.example/models' });
  assert.equal(m.reader.files[0].url, 'https://cdn.example/models/small%20model.gguf');
  assert.deepEqual(m.embedder.files.map((f) => f.path), ['config.json', 'model.safetensors', 'tokenizer.json']);
  assert.ok(m.embedder.files.every((f) => /^[0-9a-f]{64}$/.test(f.sha256)));
  await assert.rejects(makeManifest(path.join(tmp, 'nowhere')), /not a folder/);
  console.error('tests/js/manifest.mjs: manifest refusals and the manifest writer passed');
} finally {
  server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
