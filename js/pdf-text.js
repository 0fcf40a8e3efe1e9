// A PDF's text for docmem, through PDF.js (npm's pdfjs-dist, the library browsers use),
// run in docmem's own worker: the worker reads a dropped .pdf's bytes with pdfToText
// (pdf.js in a browser, node/pdf.js in Node, each binding this file to its PDF.js).
//
//   const { text, pageStarts } = await pdfToText(bytes);
//   // text: every page's text, in order, joined by a blank line ("\n\n", or the option
//   // `separator`); pageStarts[i]: where page i + 1 begins in text, in code points (as
//   // the engine counts a Source's chars), so pageStarts[0] = 0
//
// Where PDF.js comes from is the platform's (`loader`): in a browser, its modern build
// that the package carries (pdf.js); in Node, npm's pdfjs-dist (node/pdf.js). The option
// `pdfjs` (the module, e.g. an app's own import of 'pdfjs-dist') replaces it, and `assets`
// (the folder URL holding cmaps/ and standard_fonts/) names where its CMaps and fonts are.
//
// PDF.js's own worker is not started (this code already runs in a worker): the module of
// that worker is imported here, and PDF.js then runs it in this thread (its "fake worker",
// which pdfjs-dist uses whenever globalThis.pdfjsWorker is set).
//
// Refused, each with a DocMemError BAD_DOCUMENT: a file over MAX_PDF_BYTES (checked on
// the byte length before PDF.js sees it), a password-protected PDF, bytes PDF.js cannot
// read, and a PDF with no text layer (scanned pages are images; docmem does no OCR).
//
// Text from PDF.js's items (getTextContent): an item's text is appended to the current
// line; a line ends where PDF.js marks an end of line (hasEOL) or the next item's baseline
// is elsewhere (more than half the font size across the writing direction); items on one
// line separated by a gap get a space unless one side has whitespace. Lines are joined by
// "\n", and by "\n\n" (a new paragraph) where the font size changes, the text jumps back up
// the page (a new column), or the gap between baselines is over 1.4 times the page's
// usual line spacing (the lower quartile of the gaps between lines of one size).

import { DocMemError, abortError, codes } from './errors.js';

/**
 * The largest PDF read, in bytes: 64 MiB. PDF.js holds the whole file in memory in this
 * worker beside the models (the wasm memory), and a copy is made for it, so a larger file
 * costs hundreds of MB at its peak; a text PDF of that size holds far more than the
 * engine's 16 MiB text limit for one document (a 1,000-page book is a few MB of PDF), so
 * what is over 64 MiB is mostly images, i.e. scans docmem cannot read anyway.
 */
export const MAX_PDF_BYTES = 64 * 1024 * 1024;

export const NO_TEXT_LAYER = 'this PDF has no text layer (scanned pages are images); docmem does no OCR';

/** `load` run once, its promise kept for every later call (a failed one is run again). */
export function loadOnce(load) {
  let loading = null;
  return () => {
    if (!loading) {
      loading = load();
      loading.catch(() => {
        loading = null;
      });
    }
    return loading;
  };
}

/** Whether these bytes start like a PDF file ('%PDF-'). */
export function isPdf(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  return b.length >= 5 && b[0] === 0x25 && b[1] === 0x50 && b[2] === 0x44 && b[3] === 0x46 && b[4] === 0x2d;
}

const bad = (message, cause) => new DocMemError(codes.BAD_DOCUMENT, message, cause ? { cause } : undefined);

// MiB with one decimal, rounded up (a file 1 byte over a 64 MB limit reads 64.1 MB).
const mb = (n) => `${(Math.ceil((n / (1024 * 1024)) * 10) / 10).toFixed(1).replace(/\.0$/, '')} MB`;

/** Code points in a string (a surrogate pair is one). */
export function codePoints(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n -= 1;
        i += 1;
      }
    }
  }
  return n;
}

/**
 * The text of a PDF and where each page begins: {text, pageStarts, pages}. `bytes` is a
 * Uint8Array or ArrayBuffer (not modified: PDF.js gets a copy). Options: `maxBytes`
 * (default MAX_PDF_BYTES), `name` (the file's name, put before each error message),
 * `isCancelled` (read between pages: true ends the call with ABORTED), `separator`
 * (between pages, default "\n\n"), `pdfjs` and `assets` (see the header). Throws
 * DocMemError BAD_DOCUMENT when the PDF is refused. An empty page is an empty string
 * between two separators, so page starts always increase.
 *
 * `loader`: {load() → {pdfjs, options} (the module, and what getDocument needs besides
 * the bytes to find its CMaps and fonts), where (what a failed load names), inWorker
 * (PDF.js runs in a Web Worker, where only its worker side can fetch)}.
 */
export async function readPdfText(bytes, { maxBytes = MAX_PDF_BYTES, name, isCancelled, separator = '\n\n', pdfjs: given, assets } = {}, loader) {
  const named = (message) => (name ? `'${name}': ${message}` : message);
  if (!(bytes instanceof Uint8Array || bytes instanceof ArrayBuffer)) {
    throw new DocMemError(codes.BAD_ARGUMENT, 'a PDF is a Uint8Array or an ArrayBuffer of its bytes');
  }
  // Before PDF.js reads a byte.
  if (bytes.byteLength > maxBytes) {
    throw bad(named(`this PDF is ${mb(bytes.byteLength)}, over docmem's limit of ${mb(maxBytes)} for a PDF (split it into smaller files)`));
  }
  if (bytes.byteLength === 0) throw bad(named('the file is empty'));
  let loaded;
  try {
    loaded = given ? { pdfjs: given, options: {} } : await loader.load();
  } catch (e) {
    throw new DocMemError(codes.INTERNAL, `PDF.js could not be loaded from ${loader.where}: ${e && e.message ? e.message : e}`, { cause: e });
  }
  const data = bytes instanceof Uint8Array ? new Uint8Array(bytes) : new Uint8Array(bytes.slice(0)); // PDF.js detaches what it gets
  const task = loaded.pdfjs.getDocument({
    data,
    verbosity: 0, // errors only: a damaged file's recoverable problems are not the user's to read
    isEvalSupported: false, // the app's Content-Security-Policy has no 'unsafe-eval'
    disableFontFace: true, // text only: nothing is drawn
    useSystemFonts: false,
    useWasm: false, // the image decoders' wasm: images are not decoded for text
    enableXfa: false,
    stopAtErrors: false, // a damaged page or object loses its text, not the file's
    ...loaded.options,
    ...(assets ? assetFolders(assets, loader.inWorker) : {}),
  });
  try {
    let doc;
    try {
      doc = await task.promise;
    } catch (e) {
      throw refusal(e, named);
    }
    const pages = [];
    for (let i = 1; i <= doc.numPages; i++) {
      if (isCancelled && isCancelled()) throw abortError();
      let content;
      try {
        const page = await doc.getPage(i);
        content = await page.getTextContent();
        page.cleanup();
      } catch (e) {
        throw bad(named(`page ${i} of this PDF could not be read: ${e && e.message ? e.message : e}`), e);
      }
      pages.push(pageText(content.items));
    }
    if (!pages.some((p) => p.trim() !== '')) throw bad(named(NO_TEXT_LAYER));
    const pageStarts = [];
    let at = 0;
    for (const p of pages) {
      pageStarts.push(at);
      at += codePoints(p) + codePoints(separator);
    }
    return { text: pages.join(separator), pageStarts, pages: pages.length };
  } finally {
    await task.destroy().catch(() => {});
  }
}

/**
 * getDocument's options for CMaps and standard fonts in the folder at URL (or path)
 * `assets`. In a Web Worker, PDF.js's main-thread side cannot fetch (it reads
 * document.baseURI): its worker side, in this same thread, fetches them.
 */
export function assetFolders(assets, inWorker) {
  return { cMapUrl: `${assets}cmaps/`, cMapPacked: true, standardFontDataUrl: `${assets}standard_fonts/`, ...(inWorker ? { useWorkerFetch: true } : {}) };
}

/** A PDF.js loading failure → the DocMemError shown to the user. */
function refusal(e, named) {
  const why = e && e.message ? e.message : String(e);
  if (e && e.name === 'PasswordException') {
    return bad(named('this PDF is password-protected (encrypted); docmem does not open encrypted PDFs (save a copy without the password and add that)'), e);
  }
  if (e && e.name === 'InvalidPDFException') return bad(named(`this file is not a readable PDF (${why})`), e);
  return bad(named(`this PDF could not be read: ${why}`), e);
}

const SPACE = /^\s*$/;

/** One page's text from PDF.js's text items (see the header). */
export function pageText(items) {
  const lines = [];
  let cur = null;
  const end = () => {
    if (cur) {
      cur.text = cur.text
        .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '') // NULs and controls (glyphs without Unicode)
        .replace(/\s+/g, ' ')
        .trim();
      if (cur.text) lines.push(cur);
    }
    cur = null;
  };
  for (const it of items) {
    if (typeof it.str !== 'string') continue; // marked content
    if (it.str !== '') {
      const [a, b, c, d, e, f] = it.transform;
      const scale = Math.hypot(a, b) || 1;
      const [ux, uy] = [a / scale, b / scale]; // the writing direction
      const size = Math.hypot(c, d) || it.height || scale;
      const u = e * ux + f * uy; // along the line
      const v = f * ux - e * uy; // across it (up the page for ordinary text)
      const space = SPACE.test(it.str);
      if (cur && !space) {
        const turned = Math.abs(ux - cur.ux) > 0.01 || Math.abs(uy - cur.uy) > 0.01;
        if (turned || Math.abs(v - cur.v) > 0.5 * Math.max(size, cur.size)) end();
        else if (u - cur.uEnd > 0.2 * size && !/\s$/.test(cur.text) && !/^\s/.test(it.str)) cur.text += ' ';
      }
      if (!cur) {
        if (space) continue; // whitespace does not start a line
        cur = { text: '', ux, uy, v, size, uStart: u, uEnd: u };
      }
      cur.text += it.str;
      cur.uEnd = Math.max(cur.uEnd, u + (it.width || 0));
    }
    if (it.hasEOL) end();
  }
  end();
  if (lines.length === 0) return '';
  // The page's usual line spacing: the lower quartile of the gaps between consecutive
  // lines of one size and direction (short paragraphs make wide gaps common).
  const sameRun = (p, q) => Math.abs(p.size - q.size) <= 0.15 * Math.max(p.size, q.size) && p.ux === q.ux && p.uy === q.uy;
  const gaps = [];
  for (let i = 1; i < lines.length; i++) {
    const [p, q] = [lines[i - 1], lines[i]];
    const gap = p.v - q.v;
    if (sameRun(p, q) && gap > 0.5 * q.size && gap < 3 * q.size) gaps.push(gap);
  }
  gaps.sort((x, y) => x - y);
  const leading = gaps.length ? gaps[Math.floor((gaps.length - 1) / 4)] : null;
  let out = lines[0].text;
  for (let i = 1; i < lines.length; i++) {
    const [p, q] = [lines[i - 1], lines[i]];
    const gap = p.v - q.v;
    const size = Math.max(p.size, q.size);
    const paragraph = !sameRun(p, q) || gap < -0.5 * size || gap > 1.4 * (leading ?? 1.2 * size);
    out += (paragraph ? '\n\n' : '\n') + q.text;
  }
  return out;
}
