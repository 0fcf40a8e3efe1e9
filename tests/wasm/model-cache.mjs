// Model downloads that respect the device (js/node/fs-model-cache.js's FsModelCache, and
// scripts/serve.mjs's Range answers), against a local HTTP server in this test that serves
// a 6 MB file with Range support and can cut the connection midway or ignore Range:
//   - an interrupted download keeps its bytes; the next try re-hashes them and asks for
//     the rest with `Range: bytes=N-` (only the remainder is sent), the hash is checked,
//     and the progress events report the resumed bytes;
//   - a file whose hash is not the pinned one is deleted (MODEL_CHECKSUM_MISMATCH), a
//     partial download as well as a stored file that was damaged on disk (found when the
//     cache hit is re-hashed, once per process);
//   - a server that ignores Range (200) is read again from byte 0, cleanly;
//   - too little free space is refused before any byte is fetched (QUOTA_EXCEEDED, with
//     the bytes needed and free);
//   - scripts/serve.mjs answers model Range requests with 206 + Content-Range, 416 past
//     the end, and a download resumes through it.
//   node tests/wasm/model-cache.mjs
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cacheModule = path.join(root, 'js/node/fs-model-cache.js');
let fresh = 0;
// A fresh instance of the module: a new process as far as its once-per-process hash goes.
const load = () => import(`${new URL(`file://${cacheModule}`).href}?process=${++fresh}`);
const { FsModelCache } = await load();
const t0 = performance.now();

const SIZE = 6 * 1024 * 1024 + 12345;
const data = randomBytes(SIZE);
const sha256 = createHash('sha256').update(data).digest('hex');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-model-cache-'));

// The server: `mode.cutAfter` bytes of body, then the socket is destroyed; `mode.ignoreRange`
// answers 200 with the whole file; every request is logged with its Range and bytes sent.
const mode = { cutAfter: Infinity, ignoreRange: false };
const log = [];
const server = http.createServer((req, res) => {
  const entry = { range: req.headers.range ?? null, status: 0, sent: 0 };
  log.push(entry);
  let start = 0;
  const m = /^bytes=(\d+)-$/.exec(req.headers.range || '');
  if (m && !mode.ignoreRange) {
    start = Number(m[1]);
    if (start >= SIZE) {
      entry.status = 416;
      res.writeHead(416, { 'content-range': `bytes */${SIZE}` }).end();
      return;
    }
    entry.status = 206;
    res.writeHead(206, { 'content-length': SIZE - start, 'content-range': `bytes ${start}-${SIZE - 1}/${SIZE}`, 'accept-ranges': 'bytes' });
  } else {
    entry.status = 200;
    res.writeHead(200, { 'content-length': SIZE });
  }
  const body = data.subarray(start);
  const cut = mode.cutAfter;
  let at = 0;
  const step = 64 * 1024;
  const next = () => {
    while (at < body.length) {
      if (entry.sent >= cut) {
        // Let what was written reach the client, then drop the connection.
        setTimeout(() => res.socket.destroy(), 50);
        return;
      }
      const n = Math.min(step, body.length - at, cut - entry.sent);
      const chunk = body.subarray(at, at + n);
      at += n;
      entry.sent += n;
      if (!res.write(chunk)) {
        res.once('drain', next);
        return;
      }
    }
    res.end();
  };
  next();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/model.bin`;
const file = { path: 'model.bin', url, size: SIZE, sha256 };

const rejects = async (promise, code) => {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.code, code, `${e.code}: ${e.message}`);
    return e;
  }
  assert.fail(`expected ${code}`);
};
const progressLog = () => {
  const events = [];
  return { events, on: (loaded, total, cached, info) => events.push({ loaded, total, cached, ...info }) };
};
const readAll = (f) => Buffer.from(f.read(0, f.size));

// ---- an interrupted download resumes with a Range request ----
{
  const dir = path.join(tmp, 'resume');
  let hashers = 0;
  const hasher = () => {
    hashers++;
    const h = createHash('sha256');
    return { update: (b) => h.update(b), finish: () => h.digest('hex') };
  };
  const cache = new FsModelCache(dir, { hasher });
  mode.cutAfter = 2_500_000;
  const e = await rejects(cache.file(file), 'MODEL_FETCH_FAILED');
  assert.match(e.message, /the next try resumes/);
  const part = path.join(dir, `${sha256}.part`);
  const kept = fs.statSync(part).size;
  assert.ok(kept > 0 && kept <= 2_500_000, `the interrupted download kept ${kept} bytes`);
  assert.ok(!fs.existsSync(path.join(dir, sha256)), 'nothing stored as complete');
  assert.ok(data.subarray(0, kept).equals(fs.readFileSync(part)), 'the kept bytes are the file’s first bytes');

  mode.cutAfter = Infinity;
  log.length = 0;
  const p = progressLog();
  const f = await cache.file(file, p.on);
  assert.equal(log.length, 1);
  assert.equal(log[0].range, `bytes=${kept}-`, 'a Range request from the stored bytes');
  assert.equal(log[0].status, 206);
  assert.equal(log[0].sent, SIZE - kept, 'only the remainder was transferred');
  assert.equal(f.size, SIZE);
  assert.ok(readAll(f).equals(data), 'the resumed file is the file');
  assert.deepEqual(Buffer.from(f.read(SIZE - 10, 10)), data.subarray(SIZE - 10));
  f.close();
  assert.ok(!fs.existsSync(part), 'the .part became the stored file');
  const downloadEvents = p.events.filter((x) => !x.cached);
  assert.ok(downloadEvents.length >= 2, 'progress during the download');
  assert.ok(downloadEvents.every((x) => x.resumed === kept && x.total === SIZE), 'the events say how many bytes were resumed');
  assert.equal(downloadEvents[0].loaded, kept);
  assert.equal(downloadEvents.at(-1).loaded, SIZE);
  assert.ok(downloadEvents.length < 40, `progress is throttled (${downloadEvents.length} events)`);

  // A cache hit in the same process: not hashed again, no request.
  const before = hashers;
  log.length = 0;
  (await cache.file(file)).close();
  assert.equal(hashers, before, 'a cache hit is hashed once per process');
  assert.equal(log.length, 0);
  // In a new process it is hashed once more.
  const { FsModelCache: Fresh } = await load();
  (await new Fresh(dir, { hasher }).file(file)).close();
  assert.equal(hashers, before + 1, 'a new process hashes the stored file again');
  console.log(`  resumed from ${kept} bytes with a Range request; ${SIZE - kept} bytes sent the second time`);
}

// ---- checksum mismatches delete what was stored ----
{
  const dir = path.join(tmp, 'mismatch');
  const cache = new FsModelCache(dir);
  const wrong = { ...file, sha256: 'f'.repeat(64) };
  const e = await rejects(cache.file(wrong), 'MODEL_CHECKSUM_MISMATCH');
  assert.match(e.message, /deleted/);
  assert.deepEqual(fs.readdirSync(dir), [], 'the mismatching download is gone');

  // A stored file damaged on disk: found when a new process hashes the hit, then deleted.
  (await cache.file(file)).close();
  const stored = path.join(dir, sha256);
  const fd = fs.openSync(stored, 'r+');
  fs.writeSync(fd, Buffer.from([data[1000] ^ 0xff]), 0, 1, 1000);
  fs.closeSync(fd);
  const { FsModelCache: Fresh } = await load();
  const again = new Fresh(dir);
  const e2 = await rejects(again.file(file), 'MODEL_CHECKSUM_MISMATCH');
  assert.match(e2.message, /stored copy was deleted/);
  assert.ok(!fs.existsSync(stored));
  log.length = 0;
  const f = await again.file(file);
  assert.equal(log.length, 1, 'the next try downloads it again');
  assert.equal(log[0].range, null, 'from the start');
  assert.ok(readAll(f).equals(data));
  f.close();

  // A partial download whose bytes were damaged: the full hash fails, the part is deleted.
  const dir2 = path.join(tmp, 'bad-part');
  fs.mkdirSync(dir2);
  const bad = Buffer.from(data.subarray(0, 1_000_000));
  bad[10] ^= 0xff;
  fs.writeFileSync(path.join(dir2, `${sha256}.part`), bad);
  await rejects(new FsModelCache(dir2).file(file), 'MODEL_CHECKSUM_MISMATCH');
  assert.deepEqual(fs.readdirSync(dir2), []);
  const f2 = await new FsModelCache(dir2).file(file);
  assert.ok(readAll(f2).equals(data), 'the try after a mismatch starts clean');
  f2.close();
}

// ---- a server that ignores Range: the whole file again from byte 0 ----
{
  const dir = path.join(tmp, 'no-range');
  const cache = new FsModelCache(dir);
  mode.cutAfter = 3_000_000;
  await rejects(cache.file(file), 'MODEL_FETCH_FAILED');
  const kept = fs.statSync(path.join(dir, `${sha256}.part`)).size;
  assert.ok(kept > 0);
  mode.cutAfter = Infinity;
  mode.ignoreRange = true;
  log.length = 0;
  const p = progressLog();
  const f = await cache.file(file, p.on);
  assert.equal(log[0].range, `bytes=${kept}-`);
  assert.equal(log[0].status, 200);
  assert.equal(log[0].sent, SIZE);
  assert.ok(readAll(f).equals(data), 'restarted cleanly: the file, not the kept bytes twice');
  assert.ok(p.events.filter((x) => !x.cached).every((x) => x.resumed === 0));
  f.close();
  mode.ignoreRange = false;
}

// ---- a complete .part (stopped before its rename): checked, no request ----
{
  const dir = path.join(tmp, 'complete-part');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, `${sha256}.part`), data);
  log.length = 0;
  const f = await new FsModelCache(dir).file(file);
  assert.equal(log.length, 0);
  assert.ok(readAll(f).equals(data));
  f.close();
  // A .part longer than the file: started again.
  const dir2 = path.join(tmp, 'long-part');
  fs.mkdirSync(dir2);
  fs.writeFileSync(path.join(dir2, `${sha256}.part`), Buffer.concat([data, Buffer.from('extra')]));
  const f2 = await new FsModelCache(dir2).file(file);
  assert.ok(readAll(f2).equals(data));
  f2.close();
}

// ---- free space: refused before anything is fetched ----
{
  const dir = path.join(tmp, 'full');
  const cache = new FsModelCache(dir, { freeBytes: async () => 1_000_000 });
  log.length = 0;
  const e = await rejects(cache.prepare([file]), 'QUOTA_EXCEEDED');
  assert.match(e.message, /need 6\.3 MB more of disk space .*only 1\.0 MB is free/);
  assert.equal(log.length, 0);
  // What is already stored is not needed again: a kept part counts.
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${sha256}.part`), data.subarray(0, SIZE - 500_000));
  const room = await cache.prepare([file]);
  assert.equal(room.needed, 500_000);
  // The real disk: room enough for 6 MB.
  assert.equal((await new FsModelCache(path.join(tmp, 'disk')).prepare([file])).needed, SIZE);
  console.log(`  refused: ${e.message}`);
}

// ---- scripts/serve.mjs: Range answers for model files, and a resume through it ----
{
  const models = path.join(tmp, 'serve-models');
  fs.mkdirSync(path.join(models, 'all-MiniLM-L6-v2'), { recursive: true });
  fs.writeFileSync(path.join(models, 'SmolLM2-135M-Instruct.Q4_1.gguf'), data);
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) fs.writeFileSync(path.join(models, 'all-MiniLM-L6-v2', f), '{}');
  const child = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, DOCMEM_MODELS: models, DOCMEM_CACHE: path.join(tmp, 'serve-cache') },
  });
  try {
    const base = await new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => {
        const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(String(d));
        if (m) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`serve.mjs exited (${code})`)));
    });
    fs.mkdirSync(path.join(tmp, 'serve-cache'), { recursive: true });
    const manifest = await (await fetch(new URL('/models/models.json', base))).json();
    const entry = manifest.reader.files[0];
    assert.equal(entry.sha256, sha256);
    const modelUrl = new URL(entry.url, new URL('/models/', base)).href;
    const whole = await fetch(modelUrl);
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get('accept-ranges'), 'bytes');
    assert.ok(Buffer.from(await whole.arrayBuffer()).equals(data));
    const range = async (r) => fetch(modelUrl, { headers: { range: r } });
    let r = await range('bytes=100-199');
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes 100-199/${SIZE}`);
    assert.equal(r.headers.get('content-length'), '100');
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data.subarray(100, 200)));
    r = await range(`bytes=${SIZE - 1000}-`);
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes ${SIZE - 1000}-${SIZE - 1}/${SIZE}`);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data.subarray(SIZE - 1000)));
    r = await range('bytes=-10');
    assert.equal(r.status, 206);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data.subarray(SIZE - 10)));
    r = await range(`bytes=${SIZE}-`);
    assert.equal(r.status, 416);
    assert.equal(r.headers.get('content-range'), `bytes */${SIZE}`);
    await r.arrayBuffer();
    // Every other file answers Range too (a resumed fetch of the wasm, say).
    r = await fetch(new URL('/js/errors.js', base), { headers: { range: 'bytes=0-9' } });
    assert.equal(r.status, 206);
    assert.equal((await r.arrayBuffer()).byteLength, 10);
    // A download that resumes through serve.mjs.
    const dir = path.join(tmp, 'via-serve');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, `${sha256}.part`), data.subarray(0, 4_000_000));
    const p = progressLog();
    const f = await new FsModelCache(dir).file({ path: entry.path, url: modelUrl, size: entry.size, sha256: entry.sha256 }, p.on);
    assert.ok(readAll(f).equals(data));
    assert.ok(p.events.some((x) => x.resumed === 4_000_000));
    f.close();
  } finally {
    child.kill();
  }
}

server.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`model cache: ok (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
