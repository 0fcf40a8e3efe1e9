// The docmem web app's server (Node, no dependencies): www/ (or --site DIR) at /, the npm
// package at /js/ with its wasm builds at /js/wasm/{plain,threads,relaxed}/ and PDF.js
// (npm's pdfjs-dist, from node_modules: the two modules of its build, its CMaps and
// standard fonts; js/pdf.js loads them in the worker) at /js/vendor/pdfjs/, where an
// installed package has them, and the models at /models/, with a generated
// /models/models.json (js/manifest.js: url, size, sha256 of each file; hashes computed
// once and cached). Every response is cross-origin isolated (COOP/COEP, so the worker can share a
// cancel flag and the wasm CPU kernels run on threads; `?isolated=0` on a page leaves the
// headers off, to see the one-thread fallback) and carries the Content-Security-Policy:
// no inline script, wasm allowed, and connections to the page's own origin and to the
// hosted models' host the user may choose in the app (any https: host; http only on this
// machine, for a development host). The worker makes those requests, and a dedicated
// worker follows its own script's policy, so the header (not only the page's meta tag)
// must allow them.
//
//   node scripts/serve.mjs [--port 8080] [--reader FILE.gguf] [--site DIR] [--no-csp]
// (--reader: the default model; --no-csp: no Content-Security-Policy, for a site whose own
// pages need more than it allows, such as Next.js's inline scripts)
// Environment: DOCMEM_CACHE (~/.cache/docmem), DOCMEM_MODELS ($DOCMEM_CACHE/models), PORT.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeManifest } from '../js/manifest.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cache = process.env.DOCMEM_CACHE || path.join(os.homedir(), '.cache', 'docmem');
const modelsDir = process.env.DOCMEM_MODELS || path.join(cache, 'models');
const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const port = Number(arg('--port', process.env.PORT ?? 8080));
// The site at /: the app (www/), or with --site another folder (an app built with the npm
// package, as the package's Vite test serves its dist/), with the same headers and models.
const site = path.resolve(arg('--site', path.join(root, 'www')));
// The language models the page offers (reader and answerer), those present in the models
// folder: the first present is the default unless --reader names another. `memories`: what
// held-out articles showed of each one's memories (docs/evaluation.md), which decides
// whether the page writes them in the background by default.
const LMS = [
  {
    file: 'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf',
    label: 'Qwen2.5-Coder 1.5B',
    note: 'answers well',
    memories: {
      pays: false,
      evidence: 'on held-out articles its memories answered no better than sentence chunks, and it mostly copies sentences as summaries',
    },
  },
  {
    file: 'SmolLM2-135M-Instruct.Q4_1.gguf',
    label: 'SmolLM2 135M',
    note: 'small and fast; weak answers',
  },
];
const readerArg = arg('--reader', null);
const csp = !args.includes('--no-csp');
const embedderDir = 'all-MiniLM-L6-v2';

export const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "worker-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self' https: http://127.0.0.1:* http://localhost:*",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.md': 'text/markdown; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.ts': 'text/plain; charset=utf-8',
};

// PDF.js under /vendor/pdfjs/ (the paths of node_modules/pdfjs-dist): only what js/pdf.js
// loads (the modern build's module and its worker's, minified, which it runs in docmem's
// worker) and fetches while reading text (CMaps, standard fonts), and the licence.
const pdfjsDir = path.join(root, 'node_modules', 'pdfjs-dist');
const PDFJS = /^\/(?:js\/)?vendor\/pdfjs\/(build\/pdf(\.worker)?\.min\.mjs|cmaps\/[\w.-]+\.bcmap|standard_fonts\/[\w.-]+\.(pfb|ttf)|LICENSE)$/;

// URL prefix → directory.
// The package's own wasm builds and PDF.js are where an installed package has them,
// beside js/docmem.js (js/wasm/, js/vendor/pdfjs/), served from the build cache.
const mounts = [
  ['/js/wasm/plain/', path.join(cache, 'wasm-pkg-web')],
  ['/js/wasm/threads/', path.join(cache, 'wasm-pkg-web-threads')],
  ['/js/wasm/relaxed/', path.join(cache, 'wasm-pkg-web-threads-relaxed')],
  ['/js/', path.join(root, 'js')],
  ['/examples/', path.join(root, 'examples')],
  ['/', site],
];

// sha256 of a model file, cached by path, size and mtime (a 98 MB hash takes a while).
const hashCacheFile = path.join(cache, 'serve-sha256.json');
let hashCache = {};
try {
  hashCache = JSON.parse(fs.readFileSync(hashCacheFile, 'utf8'));
} catch {
  hashCache = {};
}
function sha256(file) {
  const st = fs.statSync(file);
  const key = `${file}:${st.size}:${st.mtimeMs}`;
  if (!hashCache[key]) {
    const h = createHash('sha256');
    const fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(1 << 22);
    let n;
    while ((n = fs.readSync(fd, buf, 0, buf.length, null)) > 0) h.update(buf.subarray(0, n));
    fs.closeSync(fd);
    hashCache[key] = h.digest('hex');
    fs.writeFileSync(hashCacheFile, JSON.stringify(hashCache, null, 1));
  }
  return hashCache[key];
}

// The manifest the app loads (js/manifest.js, the package's own): urls relative to
// /models/models.json; the default reader is --reader, else the first of LMS present.
function manifest() {
  const present = LMS.filter((m) => fs.existsSync(path.join(modelsDir, m.file)));
  const labels = Object.fromEntries(LMS.map((m) => [m.file, { label: m.label, note: m.note, memories: m.memories }]));
  if (readerArg && !present.some((m) => m.file === readerArg)) labels[readerArg] = { label: readerArg.replace(/\.gguf$/i, ''), note: 'given with --reader' };
  return makeManifest(modelsDir, { reader: readerArg ?? present[0]?.file ?? null, hash: sha256, labels });
}

let manifestJson = null;
const served = new Set(); // model files the manifest lists: nothing else under /models/

function headers(type, extra = {}, isolated = true) {
  return {
    'content-type': type,
    ...(isolated ? { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp' } : {}),
    'cross-origin-resource-policy': 'same-origin',
    ...(csp ? { 'content-security-policy': CSP } : {}),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    ...extra,
  };
}

// `ranges`: answer a Range request (`bytes=a-b`, `bytes=a-`, `bytes=-n`; one range) with
// 206 and Content-Range, or 416 when it starts past the end: an interrupted model
// download resumes from the bytes it stored (js/model-cache.js). `within`: the real
// folder the file must lie in once symlinks are resolved (else 404).
function sendFile(req, res, file, cacheControl, isolated = true, ranges = true, within = null) {
  const notFound = () => res.writeHead(404, headers('text/plain; charset=utf-8', {}, isolated)).end('not found\n');
  fs.stat(file, (err, st) => {
    if (err || !st.isFile()) {
      notFound();
      return;
    }
    // A link out of the folder being served (a symlink in www/, say) is not followed there.
    if (within !== null) {
      let real;
      try {
        real = fs.realpathSync(file);
      } catch {
        notFound();
        return;
      }
      if (!real.startsWith(within + path.sep)) {
        notFound();
        return;
      }
    }
    const type = MIME[path.extname(file).toLowerCase()] || 'application/octet-stream';
    const extra = { 'cache-control': cacheControl, ...(ranges ? { 'accept-ranges': 'bytes' } : {}) };
    // The file may go between stat and open, or fail while read: end the response, keep serving.
    const stream = (opts) => fs.createReadStream(file, opts).on('error', () => res.destroy()).pipe(res);
    const m = ranges ? /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '') : null;
    if (m && (m[1] !== '' || m[2] !== '')) {
      let start = m[1] === '' ? Math.max(0, st.size - Number(m[2])) : Number(m[1]);
      const end = m[1] === '' || m[2] === '' ? st.size - 1 : Math.min(Number(m[2]), st.size - 1);
      if (m[1] === '' && Number(m[2]) === 0) start = st.size;
      if (start >= st.size || start > end) {
        res.writeHead(416, headers('text/plain; charset=utf-8', { ...extra, 'content-range': `bytes */${st.size}` }, isolated)).end();
        return;
      }
      res.writeHead(206, headers(type, { ...extra, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${st.size}` }, isolated));
      if (req.method === 'HEAD') res.end();
      else stream({ start, end });
      return;
    }
    res.writeHead(200, headers(type, { ...extra, 'content-length': st.size }, isolated));
    if (req.method === 'HEAD') res.end();
    else stream({});
  });
}

// The real folders behind the mounts (symlinks resolved once), for sendFile's `within`.
const realMounts = new Map(
  mounts.map(([prefix, dir]) => {
    try {
      return [prefix, fs.realpathSync(dir)];
    } catch {
      return [prefix, dir];
    }
  }),
);

// The names this server answers to: a page of another site whose name resolves here (DNS
// rebinding) sends its own name in Host and is refused.
const LOCAL_HOSTS = /^(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/i;

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    // The details stay in this terminal; the page gets no local path.
    console.error(`docmem: ${req.method} ${req.url}: ${e && e.stack ? e.stack : e}`);
    if (!res.headersSent) res.writeHead(500, headers('text/plain; charset=utf-8')).end('internal error (see the server\'s terminal)\n');
    else res.destroy();
  });
});

async function handle(req, res) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, headers('text/plain; charset=utf-8')).end();
    return;
  }
  if (!LOCAL_HOSTS.test(req.headers.host || '')) {
    res.writeHead(421, headers('text/plain; charset=utf-8')).end('this server answers to 127.0.0.1 and localhost only\n');
    return;
  }
  let pathname;
  let isolated = true;
  try {
    const url = new URL(req.url, 'http://localhost');
    pathname = decodeURIComponent(url.pathname);
    // `?isolated=0` serves a page without COOP/COEP, as a host that sets neither would:
    // no shared memory there, so the app runs its CPU kernels on one thread and says why.
    isolated = url.searchParams.get('isolated') !== '0';
  } catch {
    res.writeHead(400, headers('text/plain; charset=utf-8')).end();
    return;
  }
  // A NUL or a backslash names no file of ours (and a NUL throws in fs calls).
  if (/[\0\\]/.test(pathname)) {
    res.writeHead(400, headers('text/plain; charset=utf-8')).end('bad path\n');
    return;
  }
  if (pathname === '/models/models.json') {
    try {
      if (!manifestJson) {
        const m = await manifest();
        for (const spec of [m.embedder, ...m.choices]) for (const f of spec.files) served.add(decodeURIComponent(f.url));
        manifestJson = JSON.stringify(m, null, 1);
      }
    } catch (e) {
      console.error(`docmem: no models to serve in ${modelsDir}: ${e.message} (run bash scripts/fetch-models.sh)`);
      res.writeHead(500, headers('text/plain; charset=utf-8')).end('this server has no models to offer (its terminal says why)\n');
      return;
    }
    res.writeHead(200, headers(MIME['.json'], { 'cache-control': 'no-cache' })).end(manifestJson);
    return;
  }
  if (pathname.startsWith('/models/')) {
    const rel = pathname.slice('/models/'.length);
    if (!served.has(rel)) {
      res.writeHead(404, headers('text/plain; charset=utf-8')).end('not a served model file\n');
      return;
    }
    sendFile(req, res, path.join(modelsDir, rel), 'public, max-age=31536000, immutable', true);
    return;
  }
  const pdfjsAt = ['/js/vendor/pdfjs/', '/vendor/pdfjs/'].find((p) => pathname.startsWith(p));
  if (pdfjsAt) {
    if (!PDFJS.test(pathname)) res.writeHead(404, headers('text/plain; charset=utf-8')).end('not found\n');
    else sendFile(req, res, path.join(pdfjsDir, pathname.slice(pdfjsAt.length)), 'no-cache', isolated);
    return;
  }
  for (const [prefix, dir] of mounts) {
    if (!pathname.startsWith(prefix)) continue;
    let rel = pathname.slice(prefix.length);
    if (rel === '' || rel.endsWith('/')) rel += 'index.html';
    const file = path.resolve(dir, rel);
    if (!file.startsWith(dir + path.sep)) break;
    sendFile(req, res, file, 'no-cache', isolated, true, realMounts.get(prefix));
    return;
  }
  res.writeHead(404, headers('text/plain; charset=utf-8')).end('not found\n');
}

server.listen(port, '127.0.0.1', () => {
  console.log(`docmem: serving on http://127.0.0.1:${server.address().port}/`);
});
