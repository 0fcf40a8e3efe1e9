// The npm package as another project gets it: packed into a tarball (scripts/pack.sh),
// its file list checked, the files its browser entry reaches checked for Node code
// (browser-graph.mjs), then installed into fresh projects in temporary folders:
// - apps built by webpack 5 (its default configuration), esbuild and Rollup (the
//   configuration js/README.md gives), Vite and Next.js (app router, a client component,
//   static export), each pinned by its lockfile (tests/package/apps/), built in production
//   mode, served by scripts/serve.mjs --site with the models, and loaded in headless
//   Chromium twice: cross-origin isolated (the cited answer appears, the CPU kernels ran
//   on two threads, the console has no error) and without the headers (it still answers,
//   on one thread, and says why). DOCMEM_APPS=webpack,next runs only those;
// - a Node project (tests/package/node-app) whose script opens a library in a temporary
//   folder, adds a document, asks, and prints the cited answer.
// Besides: the API reference is what TypeDoc makes of the types (scripts/api-docs.sh
// --check), the types compile against the README's examples (tsc --noEmit), and the
// manifest writers of the package and of the CLI agree.
//
//   node tests/package/package.test.mjs MODELS_DIR [DOCMEM_BINARY]
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { browserGraph } from './browser-graph.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [modelsDir, docmemBin] = process.argv.slice(2);
const here = path.join(root, 'tests/package');
const t0 = performance.now();
const say = (m) => console.error(`package: ${m} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...opts });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-package-'));
// Run from `npm publish --dry-run` (the package's prepublishOnly), npm hands its flags to
// every npm this runs: the scratch projects' installs and packs must really happen.
delete process.env.npm_config_dry_run;

// 1. The tarball and what it holds: packed from the working tree, or (DOCMEM_PACKAGE_DIR,
// as the package's prepublishOnly sets it) from the staged folder about to be published.
const staged = process.env.DOCMEM_PACKAGE_DIR;
if (staged) {
  fs.mkdirSync(path.join(tmp, 'npm'));
  fs.writeFileSync(path.join(tmp, 'npm/pack.json'), run('npm', ['pack', staged, '--pack-destination', path.join(tmp, 'npm'), '--json', '--ignore-scripts', '--loglevel=error']));
}
const tarball = staged
  ? path.join(tmp, 'npm', JSON.parse(fs.readFileSync(path.join(tmp, 'npm/pack.json'), 'utf8'))[0].filename)
  : run('bash', [path.join(root, 'scripts/pack.sh'), path.join(tmp, 'npm')]).trim().split('\n').pop();
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
// The browser entry and everything it reaches (worker, thread helper, wasm glue, PDF.js)
// name no Node builtin (browser-graph.mjs).
const reached = browserGraph(pkgRoot);
assert.ok(reached.includes('worker.js') && reached.includes('thread-worker.js') && reached.includes('wasm/relaxed/docmem_wasm.js'), `the walk reaches the worker, its thread helper and the glue: ${reached.join(', ')}`);
say(`file list and paths checked; ${reached.length} files reachable from the browser entry, none names a Node builtin`);

// 2. The API reference and the types.
run('bash', [path.join(root, 'scripts/api-docs.sh'), '--check']);
run(path.join(root, 'node_modules/.bin/tsc'), ['--noEmit', '-p', path.join(here, 'examples/tsconfig.json')]);
// The table of PDF.js's CMaps and fonts names every file of the pdfjs-dist version pinned.
run(process.execPath, [path.join(root, 'scripts/pdf-assets.mjs'), '--check']);
say('API reference current; the types compile against the examples; the PDF.js asset table is current');

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

// 5. Apps built by the bundlers people use, each from the tarball in a fresh folder with
// its bundler pinned by a lockfile, in production mode (tests/package/apps/: one folder
// per bundler, with the configuration js/README.md gives for it, and nothing more). All
// run the same page (apps/page.js: the quick start, showing what it did). Installs run
// side by side (the network's time), builds as many at once as there are cores.
const APPS = [
  // name, the folder served, the files the build must have made (a bundler that builds
  // the package's worker, thread helper, wasm and PDF.js emits them as files of its own)
  { name: 'webpack', out: 'dist', page: 'src/page.js', html: true, emits: [/\.wasm$/, /^[^/]*\.js$/] },
  { name: 'esbuild', out: 'dist', page: 'src/page.js', html: true, emits: [/^docmem\/worker\.js$/, /^docmem\/wasm\/threads\/docmem_wasm_bg\.wasm$/] },
  { name: 'rollup', out: 'dist', page: 'src/page.js', html: true, emits: [/^docmem\/worker\.js$/, /^docmem\/wasm\/threads\/docmem_wasm_bg\.wasm$/] },
  { name: 'vite', out: 'dist', page: 'src/page.js', html: false, emits: [/^assets\/worker-.*\.js$/, /^assets\/thread-worker-.*\.js$/, /\.wasm$/] },
  // Next.js's pages carry inline scripts of its own, which the dev server's policy (no
  // inline script) refuses: served without one. Nothing of docmem's needs it.
  { name: 'next', out: 'out', page: 'app/page-script.js', html: false, emits: [/\.wasm$/], noCsp: true },
];
const only = process.env.DOCMEM_APPS ? process.env.DOCMEM_APPS.split(',') : null;
const apps = APPS.filter((a) => !only || only.includes(a.name));
const execAsync = (cmd, args, opts) =>
  new Promise((resolve, reject) => {
    const started = performance.now();
    execFile(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} in ${opts.cwd} failed:\n${stdout}\n${stderr}`));
      else resolve((performance.now() - started) / 1000);
    });
  });
const listFiles = (dir, base = dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? listFiles(path.join(dir, d.name), base) : [path.relative(base, path.join(dir, d.name))]));
const appEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
await Promise.all(
  apps.map(async (app) => {
    app.dir = path.join(tmp, `${app.name}-app`);
    fs.cpSync(path.join(here, 'apps', app.name), app.dir, { recursive: true });
    fs.copyFileSync(path.join(here, 'apps/page.js'), path.join(app.dir, app.page));
    fs.copyFileSync(tarball, path.join(app.dir, 'docmem.tgz'));
    app.install = await execAsync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app.dir, env: appEnv });
  }),
);
say(`installed: ${apps.map((a) => `${a.name} ${a.install.toFixed(0)} s`).join(', ')}`);
{
  const queue = [...apps];
  const builder = async () => {
    for (let app = queue.shift(); app; app = queue.shift()) {
      app.build = await execAsync('npm', ['run', 'build', '--silent'], { cwd: app.dir, env: appEnv });
      const out = path.join(app.dir, app.out);
      if (app.html) fs.copyFileSync(path.join(here, 'apps/index.html'), path.join(out, 'index.html'));
      fs.copyFileSync(path.join(root, 'tests/fixtures/pdf/cjk-cid.pdf'), path.join(out, 'cjk-cid.pdf'));
      const built = listFiles(out);
      for (const want of app.emits) assert.ok(built.some((f) => want.test(f)), `${app.name}: the build emitted ${want}: ${built.join(', ')}`);
      assert.ok(built.includes('index.html'), `${app.name}: index.html in ${app.out}/`);
      say(`${app.name}: built in ${app.build.toFixed(1)} s, ${built.length} files in ${app.out}/`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(os.cpus().length, 2) }, builder));
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--disable-features=WebGPU,Vulkan'] });
const timings = [];
try {
  for (const app of apps) {
    const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--site', path.join(app.dir, app.out), '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf', ...(app.noCsp ? ['--no-csp'] : [])], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, DOCMEM_MODELS: modelsDir },
    });
    try {
      const url = await new Promise((resolve, reject) => {
        server.on('exit', (code) => reject(new Error(`the server exited (${code})`)));
        server.stdout.on('data', (d) => {
          const m = /serving on (http:\S+)/.exec(String(d));
          if (m) resolve(m[1]);
        });
      });
      for (const isolated of [true, false]) {
        const page = await browser.newPage();
        const errors = [];
        page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
        page.on('pageerror', (e) => errors.push(String(e)));
        const started = performance.now();
        await page.goto(new URL(isolated ? '/' : '/?isolated=0', url).href);
        await page.waitForSelector('body[data-done]', { timeout: 10 * 60_000 });
        const seconds = (performance.now() - started) / 1000;
        const got = await page.evaluate(() => ({
          done: document.body.dataset.done,
          backend: document.getElementById('backend').textContent,
          answer: document.getElementById('answer').textContent,
          citation: document.getElementById('citation').textContent,
          pdf: document.getElementById('pdf').textContent,
          isolated: globalThis.crossOriginIsolated,
        }));
        say(`${app.name}, ${isolated ? 'isolated' : 'no headers'}, ${seconds.toFixed(1)} s: ${JSON.stringify(got)}`);
        assert.equal(got.done, 'true', `${app.name}: ${got.answer}`);
        assert.equal(got.isolated, isolated);
        assert.ok(got.answer.trim().length > 0, `${app.name}: an answer`);
        assert.match(got.citation, /^Printing in England: .*Caxton/, `${app.name}: cited from the document`);
        assert.match(got.pdf, /^吾輩は猫である。名前はまだ無い。\s+Natsume Soseki, 1905$/, `${app.name}: the PDF's text, its Japanese line through PDF.js's CMaps`);
        if (isolated) assert.match(got.backend, /threads ([2-9]|\d\d)\b/, `${app.name}: several threads where the page is cross-origin isolated`);
        else assert.match(got.backend, /threads 1: .*cross-origin isolated/, `${app.name}: one thread, saying why, without the headers`);
        assert.deepEqual(errors, [], `${app.name}: no error in the browser console`);
        timings.push({ app: app.name, isolated, seconds });
        await page.close();
      }
    } finally {
      server.kill();
    }
  }
} finally {
  await browser.close();
}
console.error('package: the apps, as a table (seconds):');
console.error('  bundler  install  build  answered (isolated / no headers)');
for (const app of apps) {
  const t = (iso) => timings.find((x) => x.app === app.name && x.isolated === iso)?.seconds.toFixed(1) ?? '-';
  console.error(`  ${app.name.padEnd(8)} ${app.install.toFixed(0).padStart(7)} ${app.build.toFixed(1).padStart(6)}  ${t(true)} / ${t(false)}`);
}
fs.rmSync(tmp, { recursive: true, force: true });
say('passed');
