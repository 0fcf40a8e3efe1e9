// The app's service worker: keeps the app's own files (page, scripts, the wasm engine)
// so the app opens offline after the first visit. Network first, so a new version is
// picked up when online; models are not handled here (the DocMem model cache keeps them),
// nor are requests to a hosted model's host (POSTs to another origin).
//
// One cache per version of the app: a new version's worker deletes the older caches when
// it takes over, and offline answers come from its own cache only (never an old app.js
// beside a new wasm). Files are kept under their path without the query string, so
// `?isolated=0` and the like make no second copy; partial answers (206) are not kept.
const CACHE = 'docmem-app-v12';
const PREFIX = 'docmem-app-';
// What the app needs to open at all: the install fails without any of it.
const SHELL = ['/', '/index.html', '/app.js', '/style.css', '/js/docmem.js', '/js/client.js', '/js/worker.js', '/js/worker-ops.js', '/js/signals.js', '/js/background.js', '/js/errors.js',
  '/js/remote.js', '/js/model-cache.js', '/js/model-download.js', '/js/model-files.js', '/js/idb-store.js', '/js/library-lock.js', '/js/threads.js', '/js/wasm-build.js',
  '/js/thread-worker.js', '/js/thread-serve.js', '/js/pdf.js', '/js/pdf-text.js', '/js/pdf-asset-factories.js', '/js/pdf-assets.js',
  '/js/wasm/plain/docmem_wasm.js', '/js/wasm/plain/docmem_wasm_bg.wasm'];
// Kept when the server has them: the threads builds (a server may ship only the plain
// one) and PDF.js (a CMap or standard font it fetches is kept on first use, as any file).
const OPTIONAL = ['/js/wasm/threads/docmem_wasm.js', '/js/wasm/threads/docmem_wasm_bg.wasm', '/js/wasm/relaxed/docmem_wasm.js', '/js/wasm/relaxed/docmem_wasm_bg.wasm',
  '/js/vendor/pdfjs/build/pdf.min.mjs', '/js/vendor/pdfjs/build/pdf.worker.min.mjs'];

self.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((c) => c.addAll(SHELL).then(() => Promise.all(OPTIONAL.map((path) => c.add(path).catch(() => {})))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith(PREFIX) && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== location.origin || url.pathname.startsWith('/models/')) return;
  const key = url.origin + url.pathname;
  event.respondWith(
    fetch(event.request)
      .then((response) => {
        if (response.status === 200) {
          const copy = response.clone();
          caches.open(CACHE).then((c) => c.put(key, copy)).catch(() => {});
        }
        return response;
      })
      .catch(() => caches.open(CACHE).then((c) => c.match(key)).then((hit) => hit || Response.error())),
  );
});
