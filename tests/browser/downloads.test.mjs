// Model downloads in headless Chromium, through the real docmem worker (DocMem.open on a
// blank page of the app's origin): the models (SmolLM2 Q4_1, 98 MB; all-MiniLM-L6-v2's
// files) come from a server in this test that answers Range requests and can pause or cut
// a file midway; everything else is scripts/serve.mjs, behind it (same origin).
//   1. A quota too small for the models (Storage.overrideQuotaForOrigin, as app.test.mjs
//      fills it): refused before any byte is fetched, QUOTA_EXCEEDED naming the bytes
//      needed and free. persist() is asked once, by DocMem.open in the background
//      (requestPersistence), and the answer is remembered.
//   2. SmolLM2 paused at 40 MB: what arrived is already in OPFS (streamed, not buffered),
//      and the worker never allocated a buffer near the file's size (its Uint8Array /
//      ArrayBuffer constructors and Response body readers are watched from the start of
//      model-cache.js); then the connection is cut: MODEL_FETCH_FAILED, the bytes kept.
//   3. Reload: the worker hashes the stored prefix again, asks for the rest with
//      `Range: bytes=N-` (only the remainder is sent; the embedder's files are not asked
//      for again), the progress events report the resumed bytes and whether storage is
//      persistent, the models load, and the stored file's .ok names the pinned sha256.
//   4. Reload: no request at all (an older docmem's Cache API entry is read in place too).
//   4b. keepModels: stored files that neither keepModels nor the models name are
//      deleted (an old model, a partial download, an interrupted adoption), but not while
//      another tab holds the model store's lock.
//   5. A pinned hash that does not match: MODEL_CHECKSUM_MISMATCH, the entry deleted.
//   6. The page-side paths of js/model-cache.js: a writable stream into OPFS where sync
//      access handles are missing (a page), and the Cache API where OPFS is (hashed as it
//      streams; a mismatch deleted).
//   node tests/browser/downloads.test.mjs      (scripts/browser-test.sh runs it)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const modelsDir = process.env.DOCMEM_MODELS || path.join(process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem'), 'models');
const t0 = performance.now();
const MB = 1 << 20;
const times = {};
const timed = async (name, f) => {
  const t = performance.now();
  const r = await f();
  times[name] = ((performance.now() - t) / 1000).toFixed(1);
  console.log(`  ${name}: ${times[name]} s`);
  return r;
};

// ---- the models, pinned ----
const sha = (file) => {
  const h = createHash('sha256');
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.alloc(4 * MB);
  let n;
  while ((n = fs.readSync(fd, buf, 0, buf.length, null)) > 0) h.update(buf.subarray(0, n));
  fs.closeSync(fd);
  return h.digest('hex');
};
const entry = (rel) => {
  const file = path.join(modelsDir, rel);
  return { path: rel.split('/').slice(1).join('/') || rel, url: `/models/${rel}`, size: fs.statSync(file).size, sha256: sha(file) };
};
const READER = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const embedderFiles = ['config.json', 'modules.json', 'tokenizer.json', 'model.safetensors', '1_Pooling/config.json'].map((f) => entry(`all-MiniLM-L6-v2/${f}`));
const reader = entry(READER);
const manifest = { embedder: { name: 'all-MiniLM-L6-v2', files: embedderFiles }, reader: { name: READER, files: [reader] } };

// ---- serve.mjs, behind this test's server ----
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-downloads-'));
const app = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf'], { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => app.kill());
const appUrl = new URL(
  await new Promise((resolve, reject) => {
    app.stdout.on('data', (d) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(String(d));
      if (m) resolve(m[1]);
    });
    app.on('exit', (code) => reject(new Error(`serve.mjs exited (${code})`)));
  }),
);

// Model requests: logged ({file, range, status, sent}); `control.pauseAt` (bytes of a
// response's body) holds a response until `control.release()`; `control.cut` then drops it.
const log = [];
const control = { file: null, pauseAt: Infinity, cut: false, paused: null, release: null };
let pausedAt = null; // resolves when a response reaches its pause
const pauseReached = () => new Promise((r) => (pausedAt = r));
// The worker's module model-cache.js is held until the allocation watch is installed.
let gate = Promise.resolve();

function serveModel(req, res, rel) {
  const file = path.join(modelsDir, rel);
  const size = fs.statSync(file).size;
  const e = { file: rel, range: req.headers.range ?? null, status: 200, sent: 0 };
  log.push(e);
  let start = 0;
  const m = /^bytes=(\d+)-$/.exec(req.headers.range || '');
  const base = { 'content-type': 'application/octet-stream', 'cross-origin-resource-policy': 'same-origin', 'accept-ranges': 'bytes' };
  if (m) {
    start = Number(m[1]);
    if (start >= size) {
      e.status = 416;
      res.writeHead(416, { ...base, 'content-range': `bytes */${size}` }).end();
      return;
    }
    e.status = 206;
    res.writeHead(206, { ...base, 'content-length': size - start, 'content-range': `bytes ${start}-${size - 1}/${size}` });
  } else res.writeHead(200, { ...base, 'content-length': size });
  const pause = control.file === rel ? control.pauseAt : Infinity;
  const stream = fs.createReadStream(file, { start, highWaterMark: 256 * 1024 });
  stream.on('data', (chunk) => {
    if (e.sent + chunk.length > pause && e.sent <= pause) {
      const head = chunk.subarray(0, pause - e.sent);
      res.write(head);
      e.sent += head.length;
      stream.pause();
      control.release = () => {
        if (control.cut) {
          e.cut = true;
          stream.destroy();
          setTimeout(() => res.socket.destroy(), 100);
          return;
        }
        const rest = chunk.subarray(head.length);
        e.sent += rest.length;
        res.write(rest);
        stream.resume();
      };
      setTimeout(() => pausedAt?.(e), 200); // what was written has reached the worker
      return;
    }
    e.sent += chunk.length;
    if (!res.write(chunk)) {
      stream.pause();
      res.once('drain', () => stream.resume());
    }
  });
  stream.on('end', () => res.end());
}

const front = http.createServer(async (req, res) => {
  const { pathname } = new URL(req.url, 'http://x');
  if (pathname === '/__blank.html') {
    res.writeHead(200, { 'content-type': 'text/html', 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' });
    res.end('<!doctype html><title>downloads</title>');
    return;
  }
  if (pathname.startsWith('/models/')) {
    serveModel(req, res, decodeURIComponent(pathname.slice('/models/'.length)));
    return;
  }
  if (pathname === '/js/model-cache.js') await gate;
  const upstream = http.request({ host: appUrl.hostname, port: appUrl.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
    res.writeHead(up.statusCode, up.headers);
    up.pipe(res);
  });
  upstream.on('error', () => res.destroy());
  req.pipe(upstream);
});
await new Promise((r) => front.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${front.address().port}`;

// ---- Chromium ----
const context = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-features=WebGPU,Vulkan'],
});
const page = context.pages()[0] || (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));

// The allocation watch, installed in the docmem worker before it imports model-cache.js:
// every Uint8Array / ArrayBuffer / SharedArrayBuffer made with a length, and every
// Response body read whole.
let watched = null;
const WATCH = ({ quota }) => {
  if (quota) navigator.storage.estimate = async () => ({ quota, usage: 0 });
  const w = { max: 0, what: '', whole: [] };
  self.__watch = w;
  for (const name of ['Uint8Array', 'ArrayBuffer', 'SharedArrayBuffer']) {
    const C = self[name];
    self[name] = new Proxy(C, {
      construct(target, args) {
        if (typeof args[0] === 'number' && args[0] > w.max) [w.max, w.what] = [args[0], name];
        return Reflect.construct(target, args);
      },
    });
  }
  for (const m of ['arrayBuffer', 'blob', 'bytes']) {
    const f = Response.prototype[m];
    if (f)
      Response.prototype[m] = function (...a) {
        w.whole.push(`Response.${m}`);
        return f.apply(this, a);
      };
  }
};
function watchNextWorker(options = {}) {
  let open;
  gate = new Promise((r) => (open = r));
  watched = new Promise((resolve) => {
    const on = async (worker) => {
      if (!worker.url().endsWith('/js/worker.js')) return;
      page.off('worker', on);
      await worker.evaluate(WATCH, options);
      open();
      resolve(worker);
    };
    page.on('worker', on);
  });
}

const blank = `${origin}/__blank.html`;
/** DocMem.open in the page (started, not awaited): its result or {code, message}, and its events. */
const startOpen = (models, extra = {}) =>
  page.evaluate(async ([models, extra]) => {
    const { DocMem } = await import('/js/docmem.js');
    window.__events = [];
    window.__open = DocMem.open('downloads', { models, backend: 'cpu', threads: 1, onProgress: (p) => window.__events.push(p), ...extra }).then(
      async (dm) => {
        const r = { ok: true, models: dm.models };
        dm.close();
        return r;
      },
      (e) => ({ ok: false, code: e.code, message: e.message }),
    );
  }, [models, extra]);
const opened = () => page.evaluate(() => window.__open);
const events = () => page.evaluate(() => window.__events.filter((e) => e.stage === 'download'));
const opfs = () =>
  page.evaluate(async () => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('docmem-models', { create: true });
    const out = {};
    for await (const [name, h] of dir.entries()) out[name] = h.kind === 'file' ? (await h.getFile()).size : -1;
    return out;
  });
const text = (name) =>
  page.evaluate(async (name) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('docmem-models');
    return (await (await dir.getFileHandle(name)).getFile()).text();
  }, name);

try {
  await page.goto(blank);
  const total = reader.size + embedderFiles.reduce((s, f) => s + f.size, 0);

  // ---- 1. too little room: refused before any download; a real quota hit mid-file; persist() asked once ----
  await timed('quota refusals', async () => {
    // Chromium's estimate() does not report DevTools' quota override (it reports usage +
    // about 10 GiB to pages), so the worker's estimate() says 20 MB are free here.
    watchNextWorker({ quota: 20e6 });
    await startOpen(manifest);
    let r = await opened();
    assert.equal(r.code, 'QUOTA_EXCEEDED', JSON.stringify(r));
    assert.match(r.message, /^the models need 18\d\.\d MB more of this browser's storage for this site, and only 20\.\d MB is free/);
    assert.equal(log.length, 0, 'nothing fetched');
    console.log(`    ${r.message}`);

    // The real limit (DevTools' override): the download stops with QUOTA_EXCEEDED when a
    // write is refused, and says what is missing.
    const cdp = await context.newCDPSession(page);
    const { usage } = await cdp.send('Storage.getUsageAndQuota', { origin });
    await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: usage + 20e6 });
    watchNextWorker();
    await page.reload();
    await startOpen(manifest);
    r = await opened();
    assert.equal(r.code, 'QUOTA_EXCEEDED', JSON.stringify(r));
    assert.match(r.message, /^this browser's storage for this site filled up after \d+\.\d MB of model\.safetensors \(90\.9 MB\), which needs \d+\.\d MB more/);
    console.log(`    ${r.message}`);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin });

    const asked = await page.evaluate(async () => {
      let calls = 0;
      const persist = navigator.storage.persist.bind(navigator.storage);
      navigator.storage.persist = () => (calls++, persist());
      const { requestPersistence } = await import('/js/model-cache.js');
      const first = await requestPersistence();
      const second = await requestPersistence();
      return { first, second, calls };
    });
    // DocMem.open above already asked, in the background (opening never waits on the
    // browser's answer): it is remembered, and persist() is not asked again.
    assert.deepEqual(asked, { first: { asked: true, granted: false }, second: { asked: true, granted: false }, calls: 0 }, 'persist() asked once, by DocMem.open (headless Chromium does not grant it)');
  });

  // ---- 2. paused at 40 MB, then cut ----
  let kept;
  await timed('download interrupted at 40 MB', async () => {
    Object.assign(control, { file: READER, pauseAt: 40 * MB, cut: true });
    const paused = pauseReached();
    watchNextWorker();
    await startOpen(manifest);
    const worker = await watched;
    await paused;
    const stored = (await opfs())[reader.sha256];
    assert.ok(stored > 30 * MB && stored <= 40 * MB, `the first 40 MB are in OPFS while the download runs: ${stored}`);
    const w = await worker.evaluate(() => self.__watch);
    assert.ok(w.max <= 4 * MB, `the worker's largest buffer: ${w.max} bytes (${w.what}), the file is ${reader.size}`);
    assert.deepEqual(w.whole, [], 'no response body read whole');
    console.log(`    at the pause: ${(stored / MB).toFixed(1)} MB in OPFS; largest buffer the worker made: ${(w.max / MB).toFixed(1)} MB`);
    control.release();
    const r = await opened();
    assert.equal(r.code, 'MODEL_FETCH_FAILED', JSON.stringify(r));
    assert.match(r.message, /what arrived is kept and the next try resumes from there/);
    const files = await opfs();
    kept = files[reader.sha256];
    assert.ok(kept >= stored && kept <= 40 * MB, `kept ${kept}`);
    assert.equal(files[`${reader.sha256}.ok`], undefined, 'not marked verified');
    for (const f of embedderFiles) assert.equal(files[f.sha256], f.size, `${f.path} stored whole`);
    for (const f of embedderFiles) assert.ok(files[`${f.sha256}.ok`] > 0, `${f.path} verified`);
    assert.equal(log.filter((e) => e.file === READER).length, 1);
    // The embedder's weights, stopped by the full quota in 1, were resumed here.
    const resumedWeights = log.findLast((e) => e.file.endsWith('model.safetensors'));
    assert.match(resumedWeights.range ?? '', /^bytes=\d+-$/, 'the file the quota stopped resumes with a Range request');
    assert.equal(resumedWeights.status, 206);
  });

  // ---- 3. reload: resumed with a Range request ----
  await timed('reload: resumed, verified, models loaded', async () => {
    Object.assign(control, { file: READER, pauseAt: Math.floor((reader.size - kept) / 2), cut: false });
    log.length = 0;
    const paused = pauseReached();
    watchNextWorker();
    await page.reload();
    await startOpen(manifest);
    const worker = await watched;
    await paused;
    const w = await worker.evaluate(() => self.__watch);
    assert.ok(w.max <= 4 * MB, `while resuming, the worker's largest buffer: ${w.max} bytes (${w.what})`);
    assert.deepEqual(w.whole, []);
    control.release();
    const r = await opened();
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.models.fromCache, false);
    assert.deepEqual(
      log.map(({ file, range, status, sent }) => ({ file, range, status, sent })),
      [{ file: READER, range: `bytes=${kept}-`, status: 206, sent: reader.size - kept }],
      'one Range request for the rest of the reader; the embedder is not fetched again',
    );
    const ev = await events();
    const downloading = ev.filter((e) => e.file === READER && e.loaded < total);
    assert.ok(downloading.length > 2, 'download progress');
    assert.ok(downloading.every((e) => e.resumed === kept && e.persisted === false && e.total === total), JSON.stringify(downloading[0]));
    assert.equal(ev.at(-1).loaded, total);
    const ok = JSON.parse(await text(`${reader.sha256}.ok`));
    assert.deepEqual(ok, { sha256: reader.sha256, size: reader.size, url: reader.url }, 'verified: the pinned sha256');
    console.log(`    resumed from ${(kept / MB).toFixed(1)} MB: ${((reader.size - kept) / MB).toFixed(1)} MB fetched with Range, sha256 ${reader.sha256.slice(0, 12)}…`);
  });

  // ---- 4. reload: everything from storage; an old Cache API entry is read in place ----
  await timed('reload: no request', async () => {
    const old = embedderFiles[0];
    await page.reload();
    await page.evaluate(
      async ({ old, url }) => {
        const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('docmem-models');
        await dir.removeEntry(old.sha256);
        await dir.removeEntry(`${old.sha256}.ok`);
        const body = await (await fetch(url, { cache: 'no-store' })).blob();
        await (await caches.open('docmem-models')).put(url, new Response(body, { headers: { 'x-docmem-sha256': old.sha256 } }));
      },
      { old, url: `${origin}${old.url}` },
    );
    log.length = 0;
    await startOpen(manifest);
    const r = await opened();
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.models.fromCache, true);
    assert.deepEqual(log, [], 'no model request');
  });

  // ---- 4b. keepModels: files no manifest offers are pruned, never under another tab ----
  await timed('prune: stored files no model names', async () => {
    const [old, partial] = ['a'.repeat(64), 'b'.repeat(64)];
    await page.evaluate(
      async ([old, partial]) => {
        const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('docmem-models');
        const put = async (name, bytes) => {
          const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
          await w.write(new Uint8Array(bytes));
          await w.close();
        };
        await put(old, 1000);
        await put(`${old}.ok`, 10);
        await put(partial, 500);
        await put('adopting-interrupted', 10);
        // Another tab loading models holds the store.
        await new Promise((held) => navigator.locks.request('docmem-models', { mode: 'shared' }, () => new Promise((release) => ((window.__release = release), held()))));
      },
      [old, partial],
    );
    await startOpen(manifest, { keepModels: [partial] });
    let r = await opened();
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.models.pruned, null, 'nothing pruned while another tab holds the store');
    assert.ok(old in (await opfs()));
    await page.evaluate(() => window.__release());
    await startOpen(manifest, { keepModels: [partial] });
    r = await opened();
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.models.pruned, { files: 2, bytes: 1010 });
    const left = await opfs();
    assert.ok(!(old in left) && !(`${old}.ok` in left) && !('adopting-interrupted' in left), JSON.stringify(left));
    assert.equal(left[partial], 500, 'a file keepModels names stays');
    for (const f of [reader, ...embedderFiles.slice(1)]) assert.equal(left[f.sha256], f.size, `${f.path} stays: the models name it`);
    assert.ok(await page.evaluate((url) => caches.open('docmem-models').then((c) => c.match(url)).then(Boolean), `${origin}${embedderFiles[0].url}`), 'an older copy the models name stays');
    assert.deepEqual(log, [], 'no model request');
  });

  // ---- 5. a hash that does not match: the entry is deleted ----
  await timed('checksum mismatch', async () => {
    const bad = { ...embedderFiles[1], sha256: 'e'.repeat(64) };
    const models = { ...manifest, embedder: { ...manifest.embedder, files: [embedderFiles[0], bad, ...embedderFiles.slice(2)] } };
    await page.reload();
    await startOpen(models);
    const r = await opened();
    assert.equal(r.code, 'MODEL_CHECKSUM_MISMATCH', JSON.stringify(r));
    assert.match(r.message, /the downloaded copy was deleted/);
    const files = await opfs();
    assert.equal(files[bad.sha256], undefined, 'deleted');
    assert.equal(files[`${bad.sha256}.ok`], undefined);
  });
  // ---- 6. on a page (no sync access handles): a writable stream; without OPFS: the Cache API ----
  await timed('page-side paths: OPFS writable, Cache API fallback', async () => {
    const small = embedderFiles.find((f) => f.path === 'tokenizer.json');
    const r = await page.evaluate(async (file) => {
      const w = await import('/js/wasm/plain/docmem_wasm.js');
      await w.default();
      const { WebModelCache } = await import('/js/model-cache.js');
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('docmem-models');
      await dir.removeEntry(file.sha256).catch(() => {});
      await dir.removeEntry(`${file.sha256}.ok`).catch(() => {});
      const hasher = () => new w.Sha256();
      const sha = async (bytes) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
      const viaWritable = await new WebModelCache({ hasher }).file(file);
      const writable = { size: viaWritable.size, sha: await sha(await viaWritable.bytes()), ok: JSON.parse(await (await (await dir.getFileHandle(`${file.sha256}.ok`)).getFile()).text()).sha256 };
      class NoOpfs extends WebModelCache {
        dir() {
          return Promise.resolve(null);
        }
      }
      const cache = await caches.open('docmem-models');
      await cache.delete(file.url);
      const viaCache = await new NoOpfs({ hasher }).file(file);
      const cached = { size: viaCache.size, sha: await sha(await viaCache.bytes()), header: (await cache.match(file.url)).headers.get('x-docmem-sha256') };
      let mismatch;
      try {
        await new NoOpfs({ hasher }).file({ ...file, url: `${file.url}?bad`, sha256: 'd'.repeat(64) });
      } catch (e) {
        mismatch = { code: e.code, left: !!(await cache.match(`${file.url}?bad`)) };
      }
      return { writable, cached, mismatch };
    }, small);
    assert.deepEqual(r.writable, { size: small.size, sha: small.sha256, ok: small.sha256 });
    assert.deepEqual(r.cached, { size: small.size, sha: small.sha256, header: small.sha256 });
    assert.deepEqual(r.mismatch, { code: 'MODEL_CHECKSUM_MISMATCH', left: false });
  });
  assert.deepEqual(
    problems.filter((p) => !/Failed to load resource/.test(p)),
    [],
  );
} finally {
  await context.close();
  front.close();
  app.kill();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`downloads test: ok in ${((performance.now() - t0) / 1000).toFixed(1)} s (${Object.entries(times).map(([k, v]) => `${k} ${v} s`).join('; ')})`);
