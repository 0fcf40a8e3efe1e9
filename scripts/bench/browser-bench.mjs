// What the headless-Chromium benchmark drivers share: scripts/bench/gpu-load-browser.mjs
// (issue #6: GGUF load onto WebGPU) and scripts/bench/wasm-lm-browser.mjs (the wasm CPU
// backend against wllama). Both serve a page of three files from scripts/bench/ and the
// model files to a Chromium they launch with playwright-core, run one case per fresh
// browser or page through the page's `window.bench`, and print JSON lines and a table;
// this module holds the parts that are the same in both, so a fix to one (the server's
// Range handling, Chromium's flags, the case's time limit) reaches the other.
//
// - Paths: the repo root, DOCMEM_CACHE (~/.cache/docmem), DOCMEM_MODELS
//   ($DOCMEM_CACHE/models), and the benchmark's two models (MODELS).
// - reporter(name): die(message) (exit 2) and log(message) for stderr, named per driver.
// - parseArgs: the command-line loop (a flag's value, integers, --help, unknown flags).
// - findModels: the MODELS whose names contain one of --models' substrings and are present.
// - startServer: the static server. At /bench/ the driver's page (NAME.html, NAME-page.js,
//   NAME-worker.js), at /models/ the chosen model files, and directories at the driver's
//   own mount points (/pkg/, ...). Every response is cross-origin isolated (COOP, COEP,
//   CORP; the threads build needs SharedArrayBuffer) and no-store, and byte ranges are
//   answered (206 for `Range: bytes=A-B`, `A-` or `-N`, 416 for an unsatisfiable one: the
//   GPU loader reads the model in ranges). It counts the requests and bytes served per
//   model file (`served`, keyed by URL path).
// - launchOptions: playwright's options for Chromium (CHROMIUM, /usr/bin/chromium) with
//   the quiet-start flags and, for WebGPU, the WebGPU-on-SwiftShader flags of
//   ../shared/docs/machine-facts.md.
// - runBenchPage: one case on an open page: load the driver's page, wait for it to be
//   ready, read `bench.info()`, then `bench.run(case)` under a time limit; keeps the last
//   40 console lines for a failure's report.
// - round, errorText, browserLabel: formatting shared by the two reports.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const cache = process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem');
export const modelsDir = process.env.DOCMEM_MODELS || path.join(cache, 'models');

export const MODELS = ['SmolLM2-135M-Instruct.Q4_1.gguf', 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'];

// ---- messages
export function reporter(name) {
  return {
    die(message) {
      console.error(`${name}: ${message}`);
      process.exit(2);
    },
    log: (m) => console.error(`[${name}] ${m}`),
  };
}

// ---- arguments
// handle(a, value, int) sets what flag `a` asks for and returns false for a flag it does
// not know; value() takes the flag's value, int(v, min = 1, what) checks an integer.
export function parseArgs(argv, { die, usage, handle }) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(`${a} needs a value`);
      return argv[++i];
    };
    const int = (v, min = 1, what = `an integer >= ${min}`) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) die(`${a}: not ${what}: ${v}`);
      return n;
    };
    if (a === '-h' || a === '--help') {
      console.log(usage);
      process.exit(0);
    }
    if (handle(a, value, int) === false) die(`unknown argument: ${a}`);
  }
}

// ---- what to run: {file, full (its path), name, size} of each model present
export function findModels(filters, { log, die }) {
  const models = [];
  for (const file of MODELS) {
    if (filters && !filters.some((s) => file.toLowerCase().includes(s.toLowerCase()))) continue;
    const full = path.join(modelsDir, file);
    if (!fs.existsSync(full)) {
      log(`skipping ${file}: not in ${modelsDir}`);
      continue;
    }
    models.push({ file, full, name: file.replace(/\.gguf$/, ''), size: fs.statSync(full).size });
  }
  if (models.length === 0) die(`none of the models is in ${modelsDir} (scripts/fetch-models.sh, docmem models fetch bench)`);
  return models;
}

// ---- the server
const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.gguf': 'application/octet-stream',
};
const HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
  'accept-ranges': 'bytes',
};

// page: the page's file name without extension; models: findModels' list; mounts:
// [[URL prefix ending in /, directory], ...]. Resolves with {server, origin, served}.
export async function startServer({ page, models, mounts = [] }) {
  const benchDir = path.join(root, 'scripts', 'bench');
  const pageFiles = [`${page}.html`, `${page}-page.js`, `${page}-worker.js`];
  const served = new Map(); // model URL path -> {requests, bytes}

  const resolveFile = (pathname) => {
    if (pathname === '/' || pathname === '/bench/') return path.join(benchDir, `${page}.html`);
    if (pathname.startsWith('/bench/')) {
      const name = pathname.slice('/bench/'.length);
      return pageFiles.includes(name) ? path.join(benchDir, name) : null;
    }
    if (pathname.startsWith('/models/')) {
      const m = models.find((x) => x.file === pathname.slice('/models/'.length));
      return m ? m.full : null;
    }
    for (const [prefix, dir] of mounts) {
      if (!pathname.startsWith(prefix)) continue;
      const full = path.resolve(dir, '.' + pathname.slice(prefix.length - 1));
      return full.startsWith(dir + path.sep) ? full : null;
    }
    return null;
  };

  const server = http.createServer((req, res) => {
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      pathname = '';
    }
    if (pathname === '/favicon.ico') {
      res.writeHead(204, HEADERS); // (not a 404 in a failed case's console lines)
      res.end();
      return;
    }
    const file = pathname && resolveFile(pathname);
    let stat = null;
    try {
      stat = file ? fs.statSync(file) : null;
    } catch {
      stat = null;
    }
    if (!stat || !stat.isFile()) {
      res.writeHead(404, { ...HEADERS, 'content-type': 'text/plain; charset=utf-8' });
      res.end(`not found: ${pathname}\n`);
      return;
    }
    const type = MIME[path.extname(file)] || 'application/octet-stream';
    let start = 0;
    let end = stat.size - 1;
    let status = 200;
    const range = req.headers.range;
    if (range) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
      if (m && (m[1] !== '' || m[2] !== '')) {
        if (m[1] === '') start = Math.max(0, stat.size - Number(m[2])); // the last N bytes
        else {
          start = Number(m[1]);
          if (m[2] !== '') end = Math.min(end, Number(m[2]));
        }
      }
      if (!m || start > end || start >= stat.size) {
        res.writeHead(416, { ...HEADERS, 'content-range': `bytes */${stat.size}` });
        res.end();
        return;
      }
      status = 206;
    }
    const length = end - start + 1;
    res.writeHead(status, {
      ...HEADERS,
      'content-type': type,
      'content-length': length,
      ...(status === 206 ? { 'content-range': `bytes ${start}-${end}/${stat.size}` } : {}),
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (pathname.startsWith('/models/')) {
      const s = served.get(pathname) || { requests: 0, bytes: 0 };
      s.requests++;
      s.bytes += length;
      served.set(pathname, s);
    }
    fs.createReadStream(file, { start, end }).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}`, served };
}

// ---- Chromium
export const CHROMIUM_ARGS = ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader', '--use-webgpu-adapter=swiftshader'];

export function launchOptions({ webgpu = false } = {}) {
  return {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [...CHROMIUM_ARGS, ...(webgpu ? WEBGPU_ARGS : [])],
  };
}

export const errorText = (e) => String(e && e.message ? e.message : e);

// One case on `page`: {url of the driver's page, c (the case), timeoutMs (bench.run's
// limit), readyTimeoutMs (the page's), progressPrefix and onProgress (console lines that
// start with the prefix go to onProgress, without it, instead of the kept lines)}.
// Resolves with {ok, result | error, info (bench.info(), or null), console}.
export async function runBenchPage(page, { url, c, timeoutMs, readyTimeoutMs, progressPrefix = null, onProgress = null }) {
  const consoleLines = [];
  page.on('console', (m) => {
    const text = m.text();
    if (progressPrefix && text.startsWith(progressPrefix)) onProgress(text.slice(progressPrefix.length));
    else {
      consoleLines.push(`console.${m.type()}: ${text}`);
      if (consoleLines.length > 40) consoleLines.shift();
    }
  });
  page.on('pageerror', (e) => consoleLines.push(`page error: ${e.message}`));
  let timer;
  let info = null;
  try {
    await page.goto(url);
    await page.waitForSelector('body[data-ready="true"]', { timeout: readyTimeoutMs });
    info = await page.evaluate(() => window.bench.info());
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
    });
    const result = await Promise.race([page.evaluate((x) => window.bench.run(x), c), timeout]);
    return { ok: true, result, info, console: consoleLines };
  } catch (e) {
    return { ok: false, error: errorText(e), info, console: consoleLines };
  } finally {
    clearTimeout(timer);
  }
}

// ---- the reports
export const round = (x, d = 2) => (x == null || !Number.isFinite(x) ? x : Math.round(x * 10 ** d) / 10 ** d);

// "HeadlessChrome/N (C cores reported)" from a page's bench.info() (null: none ran).
export const browserLabel = (info) =>
  `${info ? info.userAgent.match(/(?:Headless)?Chrome\/[\d.]+/)?.[0] : 'Chromium'} (${info ? info.cores : '?'} cores reported)`;
