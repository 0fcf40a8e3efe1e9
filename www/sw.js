// The app's service worker: keeps the app's own files (page, scripts, the wasm engine)
// so the app opens offline after the first visit. Network first, so a new version is
// picked up when online; models are not handled here (the DocMem model cache keeps them),
// nor are requests to a hosted model's host (POSTs to another origin).
const CACHE = 'docmem-app-v7';
const SHELL = ['/', '/index.html', '/app.js', '/style.css', '/js/docmem.js', '/js/worker.js', '/js/errors.js', '/js/remote.js', '/js/spans.js',
  '/js/model-cache.js', '/js/idb-store.js', '/js/threads.js', '/js/thread-worker.js', '/pkg/docmem_wasm.js', '/pkg/docmem_wasm_bg.wasm',
  '/pkg-threads/docmem_wasm.js', '/pkg-threads/docmem_wasm_bg.wasm', '/pkg-threads-relaxed/docmem_wasm.js', '/pkg-threads-relaxed/docmem_wasm_bg.wasm',
  // PDFs offline: js/pdf.js and PDF.js (a CMap or standard font it fetches is kept on first use, as any other file).
  '/js/pdf.js', '/vendor/pdfjs/build/pdf.min.mjs', '/vendor/pdfjs/build/pdf.worker.min.mjs'];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== location.origin || url.pathname.startsWith('/models/')) return;
  event.respondWith(
    fetch(event.request)
      .then((response) => {
        if (response.ok) {
          const copy = response.clone();
          caches.open(CACHE).then((c) => c.put(event.request, copy));
        }
        return response;
      })
      .catch(() => caches.match(event.request, { ignoreSearch: true }).then((hit) => hit || Response.error())),
  );
});
