// A PDF's text in Node (pdf-text.js), through pdfjs-dist's legacy build (the build
// pdfjs-dist supports in Node), resolved from node_modules: a dependency of the package.
// Its CMaps and standard fonts are read from the same folder.

import { createRequire } from 'node:module';
import path from 'node:path';
import { assetFolders, loadOnce, readPdfText } from '../pdf-text.js';

export { MAX_PDF_BYTES, NO_TEXT_LAYER, codePoints, isPdf, pageText } from '../pdf-text.js';

const load = loadOnce(async () => {
  const dir = path.dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
  await import('pdfjs-dist/legacy/build/pdf.worker.mjs'); // sets globalThis.pdfjsWorker: the fake worker
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  return { pdfjs, options: assetFolders(dir + path.sep, false) };
});

const loader = { load, where: "npm's pdfjs-dist (a dependency of docmem: npm install pdfjs-dist)", inWorker: false };

/** pdf-text.js's readPdfText with pdfjs-dist. */
export const pdfToText = (bytes, options) => readPdfText(bytes, options, loader);
