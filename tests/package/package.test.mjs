// The npm package as another project gets it: packed into a tarball (scripts/pack.sh),
// its file list checked, then installed into two fresh projects in temporary folders:
// - a minimal Vite app (tests/package/vite-app: Vite pinned by its lockfile), built with
//   `vite build`, its dist/ served by scripts/serve.mjs --site with the models, and loaded
//   in headless Chromium twice: cross-origin isolated (the cited answer appears, the CPU
//   kernels ran on two threads, the console has no error) and without the headers (it
//   still answers, on one thread, and says why);
// - a Node project (tests/package/node-app) whose script opens a library in a temporary
//   folder, adds a document, asks, and prints the cited answer.
// Besides: the API reference is what TypeDoc makes of the types (scripts/api-docs.sh
// --check), the types compile against the README's examples (tsc --noEmit), and the
// manifest writers of the package and of the CLI agree.
//
//   node tests/package/package.test.mjs MODELS_DIR [DOCMEM_BINARY]
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [modelsDir, docmemBin] = process.argv.slice(2);
const here = path.join(root, 'tests/package');
const t0 = performance.now();
const say = (m) => console.error(`package: ${m} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...opts });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-package-'));

// 1. The tarball and what it holds.
const tarball = run('bash', [path.join(root, 'scripts/pack.sh'), path.join(tmp, 'npm')]).trim().split('\n').pop();
const report = JSON.parse(fs.readFileSync(path.join(tmp, 'npm/pack.json'), 'utf8'))[0];
say(`packed ${path.basename(tarball)}: ${report.entryCount} files, ${(report.size / 1048576).toFixed(1)} MB packed, ${(report.unpackedSize / 1048576).toFixed(1)} MB unpacked`);
const files = report.files.map((f) => f.path).sort();
// Each line of files.txt is a file, or a pattern with one `*` (a name within its folder).
const expected = fs.readFileSync(path.join(here, 'files.txt'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
const matcher = (p) => new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace('*', '[^/]+')}$`);
const unexpected = files.filter((f) => !expected.some((p) => matcher(p).test(f)));
const missing = expected.filter((p) => !files.some((f) => matcher(p).test(f)));
assert.deepEqual(unexpected, [], `the tarball holds files its list does not name: ${unexpected.join(', ')}`);
assert.deepEqual(missing, [], `the tarball lacks: ${missing.join(', ')}`);
// No shipped script of ours names a path outside the package (a parent folder, a build
// cache, a developer's home): what it loads, it loads from beside itself.
const unpacked = path.join(tmp, 'unpacked');
fs.mkdirSync(unpacked);
run('tar', ['-xzf', tarball, '-C', unpacked]);
const pkgRoot = path.join(unpacked, 'package');
const outside = [/\.cache\/docmem/, /wasm-pkg-/, /\/(root|home|work|tmp)\//];
for (const f of files.filter((f) => /\.(m?js|d\.ts)$/.test(f) && !f.startsWith('vendor/'))) {
  const text = fs.readFileSync(path.join(pkgRoot, f), 'utf8');
  for (const re of outside) assert.ok(!re.test(text), `${f} names a path outside the package: ${re} (${text.match(re)?.[0]})`);
  // Every relative path it names ('./…', '../…') stays inside the package.
  for (const [, rel] of text.matchAll(/['"`](\.\.?\/[^'"`]*)['"`]/g)) {
    const to = path.resolve(path.dirname(path.join(pkgRoot, f)), rel);
    assert.ok(to === pkgRoot || to.startsWith(pkgRoot + path.sep), `${f} names ${rel}, outside the package`);
  }
}
say('file list and paths checked');

// 2. The API reference and the types.
run('bash', [path.join(root, 'scripts/api-docs.sh'), '--check']);
run(path.join(root, 'node_modules/.bin/tsc'), ['--noEmit', '-p', path.join(here, 'examples/tsconfig.json')]);
say('API reference current; the types compile against the examples');

// 3. The manifest writers agree (a folder of small stand-in files: hashing the real models twice is slow).
const fake = path.join(tmp, 'models-fake');
fs.mkdirSync(path.join(fake, 'mini lm', '1_Pooling'), { recursive: true });
for (const f of ['config.json', 'tokenizer.json', 'model.safetensors', '1_Pooling/config.json']) fs.writeFileSync(path.join(fake, 'mini lm', f), f);
fs.writeFileSync(path.join(fake, 'b.gguf'), 'GGUF b');
fs.writeFileSync(path.join(fake, 'a.gguf'), 'GGUF a');
const viaNode = JSON.parse(run(process.execPath, [path.join(unpacked, 'package/bin/docmem-manifest.js'), fake, '--base-url', 'https://cdn.example/m/', '--reader', 'b.gguf']));
if (docmemBin) {
  const viaCli = JSON.parse(run(docmemBin, ['models', 'manifest', fake, '--base-url', 'https://cdn.example/m/', '--reader', 'b.gguf']));
  assert.deepEqual(viaCli, viaNode, 'docmem models manifest and docmem-manifest write the same manifest');
}
assert.equal(viaNode.reader.files[0].url, 'https://cdn.example/m/b.gguf');
say('manifest writers agree');

// The real manifest, for both projects: SmolLM2 reads and answers (small, so the test is quick).
const manifest = JSON.parse(run(process.execPath, [path.join(unpacked, 'package/bin/docmem-manifest.js'), modelsDir, '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf']));
const npmInstall = (dir) => run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir });

// 4. Node: a fresh project installs the tarball and answers.
const nodeApp = path.join(tmp, 'node-app');
fs.cpSync(path.join(here, 'node-app'), nodeApp, { recursive: true });
fs.copyFileSync(tarball, path.join(nodeApp, 'docmem.tgz'));
npmInstall(nodeApp);
// File URLs of the models on disk, so the Node project needs no server.
const local = structuredClone(manifest);
for (const spec of [local.embedder, local.reader, local.answerer]) for (const f of spec.files) f.url = new URL(f.url, `file://${modelsDir}/`).href;
fs.writeFileSync(path.join(nodeApp, 'models.json'), JSON.stringify(local));
const nodeOut = JSON.parse(run(process.execPath, ['main.js', 'models.json'], { cwd: nodeApp }).trim().split('\n').pop());
say(`Node: ${JSON.stringify(nodeOut)}`);
assert.ok(nodeOut.answer.trim().length > 0, 'the Node project got an answer');
assert.ok(nodeOut.citations.length > 0 && nodeOut.citations[0].title === 'Printing in England', 'and a citation of the document');

// 5. Vite: a fresh app installs the tarball, builds, and answers in Chromium.
const viteApp = path.join(tmp, 'vite-app');
fs.cpSync(path.join(here, 'vite-app'), viteApp, { recursive: true });
fs.copyFileSync(tarball, path.join(viteApp, 'docmem.tgz'));
npmInstall(viteApp);
run(path.join(viteApp, 'node_modules/.bin/vite'), ['build', '--logLevel', 'error'], { cwd: viteApp });
const built = fs.readdirSync(path.join(viteApp, 'dist/assets'));
for (const want of [/^worker-.*\.js$/, /^thread-worker-.*\.js$/, /^docmem_wasm_bg-.*\.wasm$/, /^pdf\.worker\.min-.*\.mjs$/]) {
  assert.ok(built.some((f) => want.test(f)), `vite build emitted ${want}: ${built.join(', ')}`);
}
assert.equal(built.filter((f) => f.endsWith('.wasm')).length, 3, 'the three wasm builds');
say(`vite build: ${built.length} assets`);

const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--site', path.join(viteApp, 'dist'), '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf'], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, DOCMEM_MODELS: modelsDir },
});
const url = await new Promise((resolve, reject) => {
  server.on('exit', (code) => reject(new Error(`the server exited (${code})`)));
  server.stdout.on('data', (d) => {
    const m = /serving on (http:\S+)/.exec(String(d));
    if (m) resolve(m[1]);
  });
});
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--disable-features=WebGPU,Vulkan'] });
try {
  for (const isolated of [true, false]) {
    const page = await browser.newPage();
    const errors = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(new URL(isolated ? '/' : '/?isolated=0', url).href);
    await page.waitForSelector('body[data-done]', { timeout: 10 * 60_000 });
    const got = await page.evaluate(() => ({
      done: document.body.dataset.done,
      backend: document.getElementById('backend').textContent,
      answer: document.getElementById('answer').textContent,
      citation: document.getElementById('citation').textContent,
      isolated: globalThis.crossOriginIsolated,
    }));
    say(`Chromium, ${isolated ? 'isolated' : 'no headers'}: ${JSON.stringify(got)}`);
    assert.equal(got.done, 'true', got.answer);
    assert.equal(got.isolated, isolated);
    assert.ok(got.answer.trim().length > 0, 'an answer');
    assert.match(got.citation, /^Printing in England: .*Caxton/, 'cited from the document');
    if (isolated) assert.match(got.backend, /threads ([2-9]|\d\d)\b/, 'several threads where the page is cross-origin isolated');
    else assert.match(got.backend, /threads 1: .*cross-origin isolated/, 'one thread, saying why, without the headers');
    assert.deepEqual(errors, [], 'no error in the browser console');
    await page.close();
  }
} finally {
  await browser.close();
  server.kill();
}
fs.rmSync(tmp, { recursive: true, force: true });
say('passed');
