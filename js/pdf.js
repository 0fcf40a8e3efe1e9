// A PDF's text in a browser (pdf-text.js), through the modern build of PDF.js that the
// package carries in vendor/pdfjs/. Both of its modules are imported by literal paths, so
// a bundler builds them into the docmem worker as chunks of their own, loaded only when a
// PDF is added; unbundled (a copy of the package served as it is), the browser loads the
// files beside this one. Its CMaps and standard fonts come by name from a table of files
// (pdf-assets.js, pdf-asset-factories.js), each of which a bundler copies; folder URLs,
// which no bundler copies, would lose the text of CJK fonts in a bundled app.

import { tableAssetOptions } from './pdf-asset-factories.js';
import { loadOnce, readPdfText } from './pdf-text.js';

export { MAX_PDF_BYTES, NO_TEXT_LAYER, codePoints, isPdf, pageText } from './pdf-text.js';

const load = loadOnce(async () => {
  // Imported in a dedicated worker, PDF.js's worker module may take that worker's own
  // message port for its channel to PDF.js (it would post 'ready' to our page and listen
  // there); without a postMessage to find, it only sets globalThis.pdfjsWorker, the
  // "fake worker" PDF.js then runs in this thread. (A worker's postMessage is the global
  // object's own property: put back, not deleted.) The global is set here too, from the
  // module's export: a bundler may drop a module's side effects when its exports go
  // unused (Vite does, for a package's files not listed in its sideEffects).
  const post = typeof window === 'undefined' && typeof self !== 'undefined' ? self.postMessage : undefined;
  if (post) self.postMessage = undefined;
  try {
    const { WorkerMessageHandler } = await import('./vendor/pdfjs/build/pdf.worker.min.mjs');
    globalThis.pdfjsWorker ??= { WorkerMessageHandler };
  } finally {
    if (post) self.postMessage = post;
  }
  const pdfjs = await import('./vendor/pdfjs/build/pdf.min.mjs');
  return { pdfjs, options: tableAssetOptions() };
});

const loader = { load, where: 'the package\u2019s vendor/pdfjs/', inWorker: true };

/** pdf-text.js's readPdfText with the package's PDF.js. */
export const pdfToText = (bytes, options) => readPdfText(bytes, options, loader);
