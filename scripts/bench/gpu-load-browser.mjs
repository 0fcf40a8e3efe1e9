// Issue #6's measurement: in headless Chromium (WebGPU on SwiftShader where there is no
// GPU), the time to load a GGUF model straight onto the WebGPU device from a local URL with
// docmem's `GpuLm.fromReader`, and the wasm heap (linear memory) with the model loaded;
// the target is under 300 MiB with Qwen2.5-Coder-1.5B Q4_K_M (about 1.07 GiB of file).
// A benchmark, not a test: it prints figures, it asserts nothing but that the load works.
//
//   node scripts/bench/gpu-load-browser.mjs [--models SUBSTR,...] [--case-timeout SECONDS]
//        [--prompt TEXT] [--tokens N (0: skip the first call)] [--trace FILE]
// (scripts/bench/gpu-load-browser.sh checks the packages first.)
// Environment: DOCMEM_CACHE (~/.cache/docmem), DOCMEM_MODELS ($DOCMEM_CACHE/models),
// CHROMIUM (/usr/bin/chromium).
//
// A small static server serves the page (scripts/bench/gpu-load-browser{.html,-page.js,
// -worker.js}) at /bench/, the web wasm package ($DOCMEM_CACHE/wasm-pkg-web) at /pkg/ and
// the model files at /models/, with HTTP Range support (206 answers), and counts the
// requests and bytes it serves per model as a cross-check of the worker's own count.
// Each model runs in a fresh browser (so one case's GPU buffers cannot inflate the next),
// launched with the WebGPU-on-SwiftShader flags of ../shared/docs/machine-facts.md.
// While a case runs, the RSS of Chromium's processes is sampled from /proc every second:
// the GPU process (where SwiftShader keeps the weights) and the renderer (where the worker
// and its wasm heap live), for context next to the wasm figures.
// What the worker measures and how is written in gpu-load-browser-worker.js.
//
// --trace FILE writes every read of every case (offset, length, the tensor it falls in,
// wasm memory when it began) as JSON: where the heap grows.
//
// Output (stdout): one JSON object per model, then a markdown table. Progress and errors
// go to stderr. A failed case is printed with its error, and the script exits 1 at the end.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cache = process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem');
const modelsDir = process.env.DOCMEM_MODELS || path.join(cache, 'models');
const pkgDir = path.join(cache, 'wasm-pkg-web');

const MODELS = ['SmolLM2-135M-Instruct.Q4_1.gguf', 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'];
const TARGET_MIB = 300; // issue #6: the wasm heap with the 1.5B model loaded
const MiB = 2 ** 20;

// ---- arguments
const args = process.argv.slice(2);
const opts = { models: null, caseTimeout: 900, prompt: 'The capital of France is', tokens: 1, trace: null };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const value = () => {
    if (i + 1 >= args.length) die(`${a} needs a value`);
    return args[++i];
  };
  const int = (v, min = 1) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) die(`${a}: not an integer >= ${min}: ${v}`);
    return n;
  };
  if (a === '--models') opts.models = value().split(',').filter(Boolean);
  else if (a === '--case-timeout') opts.caseTimeout = int(value());
  else if (a === '--prompt') opts.prompt = value();
  else if (a === '--tokens') opts.tokens = int(value(), 0);
  else if (a === '--trace') opts.trace = value();
  else if (a === '-h' || a === '--help') {
    console.log('usage: gpu-load-browser.mjs [--models SUBSTR,...] [--case-timeout SECONDS (900)] [--prompt TEXT] [--tokens N (1; 0 skips the call)] [--trace FILE]');
    process.exit(0);
  } else die(`unknown argument: ${a}`);
}

function die(message) {
  console.error(`gpu-load-browser: ${message}`);
  process.exit(2);
}
const log = (m) => console.error(`[gpu-load-browser] ${m}`);

// ---- what to run
if (!fs.existsSync(path.join(pkgDir, 'docmem_wasm_bg.wasm'))) die(`no web wasm package in ${pkgDir}`);
if (!fs.readFileSync(path.join(pkgDir, 'docmem_wasm.d.ts'), 'utf8').includes('class GpuLm')) {
  die(`the web wasm package in ${pkgDir} has no GpuLm (built without the gpu feature?)`);
}
const models = [];
for (const file of MODELS) {
  if (opts.models && !opts.models.some((s) => file.toLowerCase().includes(s.toLowerCase()))) continue;
  const full = path.join(modelsDir, file);
  if (!fs.existsSync(full)) {
    log(`skipping ${file}: not in ${modelsDir}`);
    continue;
  }
  models.push({ file, full, name: file.replace(/\.gguf$/, ''), size: fs.statSync(full).size });
}
if (models.length === 0) die(`none of the models is in ${modelsDir} (scripts/fetch-models.sh, docmem models fetch bench)`);

// ---- the GGUF's tokenizer.ggml.tokens (the first token's text) and tensor ranges (for
// --trace), read here, not in the page, so the wasm figures are the loader's alone
function ggufIndex(file) {
  const fd = fs.openSync(file, 'r');
  let buf = Buffer.alloc(0);
  let at = 0; // file offset of buf[0]
  let pos = 0; // file offset of the cursor
  const need = (n) => {
    if (pos + n <= at + buf.length) return;
    const size = Math.max(n, 4 * MiB);
    const fresh = Buffer.alloc(size);
    const got = fs.readSync(fd, fresh, 0, size, pos);
    if (got < n) throw new Error('the GGUF header ends early');
    buf = fresh.subarray(0, got);
    at = pos;
  };
  const u32 = () => (need(4), (pos += 4), buf.readUInt32LE(pos - 4 - at));
  const u64 = () => (need(8), (pos += 8), Number(buf.readBigUInt64LE(pos - 8 - at)));
  const str = () => {
    const n = u64();
    need(n);
    pos += n;
    return buf.toString('utf8', pos - n - at, pos - at);
  };
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skip = (type) => {
    if (type === 8) return void str();
    if (type === 9) {
      const elem = u32();
      const n = u64();
      for (let i = 0; i < n; i++) skip(elem);
      return;
    }
    const s = SIZES[type];
    if (!s) throw new Error(`GGUF value type ${type}`);
    need(s);
    pos += s;
  };
  try {
    need(24);
    if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file');
    pos = 8;
    const nTensors = u64();
    const kvs = u64();
    let tokens = null;
    let alignment = 32;
    for (let k = 0; k < kvs; k++) {
      const key = str();
      const type = u32();
      if (key === 'tokenizer.ggml.tokens' && type === 9) {
        const elem = u32();
        const n = u64();
        if (elem !== 8) throw new Error('tokenizer.ggml.tokens is not an array of strings');
        tokens = new Array(n);
        for (let i = 0; i < n; i++) tokens[i] = str();
      } else if (key === 'general.alignment' && type === 4) alignment = u32();
      else skip(type);
    }
    const infos = [];
    for (let t = 0; t < nTensors; t++) {
      const name = str();
      const dims = u32();
      for (let d = 0; d < dims; d++) u64();
      u32(); // type
      infos.push({ name, offset: u64() });
    }
    const dataStart = Math.ceil(pos / alignment) * alignment;
    const size = fs.fstatSync(fd).size;
    const starts = infos.map((x) => dataStart + x.offset).sort((a, b) => a - b);
    const tensors = infos.map((x) => {
      const start = dataStart + x.offset;
      const next = starts.find((s) => s > start);
      return { name: x.name, start, end: next ?? size };
    });
    return { tokens, tensors, dataStart };
  } finally {
    fs.closeSync(fd);
  }
}

// ---- the server (with Range support: the worker's reader asks for byte ranges)
const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.gguf': 'application/octet-stream',
};
const PAGE_FILES = ['gpu-load-browser.html', 'gpu-load-browser-page.js', 'gpu-load-browser-worker.js'];
const HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
  'accept-ranges': 'bytes',
};
const served = new Map(); // model file -> {requests, bytes}

function resolveFile(pathname) {
  if (pathname === '/' || pathname === '/bench/') return path.join(root, 'scripts', 'bench', 'gpu-load-browser.html');
  if (pathname.startsWith('/bench/')) {
    const name = pathname.slice('/bench/'.length);
    return PAGE_FILES.includes(name) ? path.join(root, 'scripts', 'bench', name) : null;
  }
  if (pathname.startsWith('/models/')) {
    const m = models.find((x) => x.file === pathname.slice('/models/'.length));
    return m ? m.full : null;
  }
  if (pathname.startsWith('/pkg/')) {
    const full = path.resolve(pkgDir, '.' + pathname.slice('/pkg'.length));
    return full.startsWith(pkgDir + path.sep) ? full : null;
  }
  return null;
}

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
const origin = `http://127.0.0.1:${server.address().port}`;

// ---- Chromium's processes and their memory (Linux /proc; null elsewhere)
function procTable() {
  const out = new Map(); // pid -> {ppid, cmd}
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      // (Chromium rewrites its children's titles: their arguments may be space-separated)
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split(/[\0 ]+/);
      out.set(Number(name), { ppid, cmd });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

// Peak RSS of the GPU process, the largest renderer and all of the browser's processes
// (the sum counts shared pages more than once: an upper bound), sampled every second.
function rssSampler(profile) {
  const peak = { gpu_process: 0, renderer: 0, total: 0 };
  let ok = true;
  const sample = () => {
    try {
      const table = procTable();
      const mainPid = [...table].find(([, p]) => p.cmd.some((a) => a === `--user-data-dir=${profile}`) && !p.cmd.some((a) => a.startsWith('--type=')))?.[0];
      if (!mainPid) return;
      const family = new Set([mainPid]);
      let grew = true;
      while (grew) {
        grew = false;
        for (const [pid, p] of table) {
          if (!family.has(pid) && family.has(p.ppid)) {
            family.add(pid);
            grew = true;
          }
        }
      }
      let total = 0;
      for (const pid of family) {
        const r = rssMiB(pid);
        total += r;
        const type = table.get(pid).cmd.find((a) => a.startsWith('--type='));
        if (type === '--type=gpu-process') peak.gpu_process = Math.max(peak.gpu_process, r);
        if (type === '--type=renderer') peak.renderer = Math.max(peak.renderer, r);
      }
      peak.total = Math.max(peak.total, total);
    } catch {
      ok = false;
    }
  };
  const timer = setInterval(sample, 1000);
  sample();
  return () => {
    clearInterval(timer);
    sample();
    return ok ? Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, Math.round(v)])) : null;
  };
}

// ---- one case in a fresh browser
const WEBGPU = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader', '--use-webgpu-adapter=swiftshader'];
const COMMON = ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

async function runCase(model) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-gpu-load-'));
  let context = null;
  let stopRss = null;
  let timer;
  let info = null;
  const consoleLines = [];
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: [...COMMON, ...WEBGPU],
    });
    stopRss = rssSampler(profile);
    const page = context.pages()[0] || (await context.newPage());
    page.on('console', (m) => {
      const text = m.text();
      if (text.startsWith('[gpu-load] ')) log(text.slice('[gpu-load] '.length));
      else {
        consoleLines.push(`console.${m.type()}: ${text}`);
        if (consoleLines.length > 40) consoleLines.shift();
      }
    });
    page.on('pageerror', (e) => consoleLines.push(`page error: ${e.message}`));
    await page.goto(`${origin}/bench/gpu-load-browser.html`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
    info = await page.evaluate(() => window.bench.info());
    const c = { model: `/models/${model.file}`, name: model.name, size: model.size, prompt: opts.prompt, tokens: opts.tokens };
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${opts.caseTimeout} s`)), opts.caseTimeout * 1000);
    });
    const result = await Promise.race([page.evaluate((x) => window.bench.run(x), c), timeout]);
    return { ok: true, result, info, rss: stopRss(), console: consoleLines };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e), info, rss: stopRss ? stopRss() : null, console: consoleLines };
  } finally {
    clearTimeout(timer);
    if (context) await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

const round = (x, d = 2) => (x == null || !Number.isFinite(x) ? x : Math.round(x * 10 ** d) / 10 ** d);
const results = [];
const traces = [];
let failed = 0;
let browserInfo = null;

for (const model of models) {
  log(`${model.name}: ${(model.size / MiB).toFixed(1)} MiB, in a fresh browser (time limit ${opts.caseTimeout} s)`);
  served.delete(`/models/${model.file}`);
  const t0 = Date.now();
  const out = await runCase(model);
  browserInfo = browserInfo || out.info;
  const row = { model: model.name, file_mib: round(model.size / MiB, 1), ok: out.ok };
  if (out.ok) {
    const r = out.result;
    let index = null;
    try {
      index = ggufIndex(model.full);
    } catch (e) {
      log(`${model.name}: could not read the GGUF's header (${e.message}); token ids only`);
    }
    const vocab = index && index.tokens;
    if (opts.trace) {
      const where = (offset) => {
        if (!index) return null;
        if (offset < index.dataStart) return '(header)';
        const t = index.tensors.find((x) => offset >= x.start && offset < x.end);
        return t ? t.name : null;
      };
      traces.push({ model: model.name, reads: r.trace.map(([offset, length, mem]) => ({ offset, mib: round(length / MiB, 3), tensor: where(offset), wasm_mib: mem })) });
    }
    const srv = served.get(`/models/${model.file}`) || { requests: 0, bytes: 0 };
    Object.assign(row, {
      adapter: r.adapter,
      load_s: round(r.load_s, 2),
      read_s: round(r.read_s, 2),
      wasm_before_mib: r.wasm_before_mib,
      wasm_peak_load_mib: r.wasm_peak_load_mib,
      wasm_after_load_mib: r.wasm_after_load_mib,
      wasm_after_first_mib: r.wasm_after_first_mib,
      reads: r.reads,
      read_mib: round(r.bytes_read / MiB, 1),
      largest_read_mib: round(r.largest_read / MiB, 2),
      served_requests: srv.requests,
      served_mib: round(srv.bytes / MiB, 1),
      prompt: opts.prompt,
      prompt_tokens: r.prompt_tokens.length,
      first_s: r.first_s == null ? null : round(r.first_s, 2),
      first_ids: r.first_ids,
      first_text: vocab ? r.first_ids.map((id) => vocab[id] ?? `<${id}>`) : null,
      gpu_limits: r.gpu ? { maxBufferSize: r.gpu.maxBufferSize, maxStorageBufferBindingSize: r.gpu.maxStorageBufferBindingSize } : null,
      chromium_rss_peak_mib: out.rss,
    });
    if (model.file.includes('1.5b')) row.meets_300_mib = r.wasm_after_first_mib < TARGET_MIB;
  } else {
    failed++;
    row.error = out.error;
    row.chromium_rss_peak_mib = out.rss;
    log(`FAILED ${model.name}: ${out.error}`);
    if (out.console.length) console.error(`  last console lines:\n  ${out.console.join('\n  ')}`);
  }
  row.case_s = round((Date.now() - t0) / 1000, 1);
  results.push(row);
  console.log(JSON.stringify(row));
}
server.close();
if (opts.trace) {
  fs.writeFileSync(opts.trace, JSON.stringify(traces, null, 1));
  log(`wrote the reads of ${traces.length} case(s) to ${opts.trace}`);
}

// ---- the table
const lines = [''];
lines.push(
  `GGUF load onto WebGPU with GpuLm.fromReader (synchronous Range reads over local HTTP) in headless ` +
    `${browserInfo ? browserInfo.userAgent.match(/(?:Headless)?Chrome\/[\d.]+/)?.[0] : 'Chromium'}` +
    ` (${browserInfo ? browserInfo.cores : '?'} cores reported); first call: ${opts.tokens ? `greedy(${JSON.stringify(opts.prompt)}, ${opts.tokens})` : 'skipped'}.`,
);
lines.push('');
lines.push('| model | file MiB | adapter | load s (in reads) | wasm MiB before → after load → after 1st call | reads, MiB read, largest read MiB | first token (s) | Chromium RSS peak MiB: GPU process / renderer |');
lines.push('|---|---|---|---|---|---|---|---|');
for (const r of results) {
  if (!r.ok) {
    lines.push(`| ${r.model} | ${r.file_mib} | – | failed: ${String(r.error).split('\n')[0].replaceAll('|', '\\|').slice(0, 160)} | | | | |`);
    continue;
  }
  const tok = !r.first_ids.length ? 'not run' : r.first_ids.map((id, i) => `${id}${r.first_text ? ` ${JSON.stringify(r.first_text[i])}` : ''}`).join(', ');
  const rss = r.chromium_rss_peak_mib ? `${r.chromium_rss_peak_mib.gpu_process} / ${r.chromium_rss_peak_mib.renderer}` : '–';
  lines.push(
    `| ${r.model} | ${r.file_mib} | ${r.adapter.replaceAll('|', '/')} | ${r.load_s} (${r.read_s}) | ${r.wasm_before_mib} → ${r.wasm_after_load_mib} → ${r.wasm_after_first_mib} | ` +
      `${r.reads}, ${r.read_mib}, ${r.largest_read_mib} | ${tok}${r.first_s == null ? '' : ` (${r.first_s})`} | ${rss} |`,
  );
}
lines.push('');
for (const r of results.filter((x) => x.ok && 'meets_300_mib' in x)) {
  lines.push(`${r.model}: wasm heap peak ${r.wasm_after_first_mib} MiB with the model loaded: ${r.meets_300_mib ? 'meets' : 'misses'} the target of < ${TARGET_MIB} MiB (issue #6).`);
}
if (failed) lines.push(`${failed} case(s) failed (see above).`);
console.log(lines.join('\n'));
process.exit(failed ? 1 : 0);
