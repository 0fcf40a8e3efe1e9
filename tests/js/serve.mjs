// scripts/serve.mjs against what any web page (or a file in the served folders) can throw
// at it: a NUL in the path, another site's name in Host (DNS rebinding), a symlink out of
// the site, a file gone between stat and open, a models folder with nothing in it; and
// the Range answers a resumed download needs, on any file.
//
//   node tests/js/serve.mjs
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-serve-'));
const site = path.join(tmp, 'site');
fs.mkdirSync(site);
fs.writeFileSync(path.join(site, 'index.html'), '<!doctype html><p>hello</p>');
fs.writeFileSync(path.join(site, 'data.txt'), '0123456789');
fs.writeFileSync(path.join(tmp, 'secret.txt'), 'not for the page');
fs.symlinkSync(path.join(tmp, 'secret.txt'), path.join(site, 'leak.txt'));
const noModels = path.join(tmp, 'no-models');
fs.mkdirSync(noModels);

const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--site', site], {
  stdio: ['ignore', 'pipe', 'pipe'],
  env: { ...process.env, DOCMEM_MODELS: noModels },
});
let log = '';
server.stderr.on('data', (d) => (log += d));
const base = await new Promise((resolve, reject) => {
  server.on('exit', (code) => reject(new Error(`serve.mjs exited (${code}): ${log}`)));
  server.stdout.on('data', (d) => {
    const m = /serving on (http:\S+)/.exec(String(d));
    if (m) resolve(new URL(m[1]));
  });
});
const get = (pathAndQuery, headers = {}) =>
  new Promise((resolve, reject) => {
    const req = http.request({ host: base.hostname, port: base.port, path: pathAndQuery, headers: { host: base.host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });

try {
  assert.equal((await get('/%00')).status, 400, 'a NUL is a bad path');
  assert.equal((await get('/js/%00/x')).status, 400);
  assert.equal((await get('/')).status, 200, 'and the server is still up');
  assert.equal((await get('/', { host: 'evil.example:80' })).status, 421, 'another name in Host is refused');
  assert.equal((await get('/', { host: `localhost:${base.port}` })).status, 200);
  const leak = await get('/leak.txt');
  assert.equal(leak.status, 404, 'a symlink out of the site is not followed');
  assert.ok(!leak.body.includes('not for the page'));
  const part = await get('/data.txt', { range: 'bytes=3-5' });
  assert.equal(part.status, 206);
  assert.equal(part.body, '345');
  assert.equal(part.headers['content-range'], 'bytes 3-5/10');
  assert.equal((await get('/data.txt', { range: 'bytes=20-' })).status, 416);
  const models = await get('/models/models.json');
  assert.equal(models.status, 500);
  assert.ok(!models.body.includes(noModels) && !models.body.includes(os.homedir()), `no local path in the answer: ${models.body}`);
  // Files removed while being served: many requests racing a delete; the server lives on.
  await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      const f = path.join(site, `gone${i}.txt`);
      fs.writeFileSync(f, 'x'.repeat(1 << 16));
      const r = get(`/gone${i}.txt`).catch(() => ({ status: 0 }));
      fs.rmSync(f, { force: true });
      return r;
    }),
  );
  assert.equal((await get('/')).status, 200, 'still serving after files vanished mid-request');
  console.error('tests/js/serve.mjs: NUL, Host, symlink, Range, no-models and vanishing-file checks passed');
} finally {
  server.kill();
  fs.rmSync(tmp, { recursive: true, force: true });
}
