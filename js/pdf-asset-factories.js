// PDF.js's CMaps and standard fonts by NAME, from the table of js/pdf-assets.js (each file
// its own `new URL('./vendor/pdfjs/…', import.meta.url)`, so an app's bundler copies it),
// instead of from folder URLs (cMapUrl, standardFontDataUrl), which a bundler never copies.
//
// How PDF.js 5.6.205 (pdfjs-dist) gets these files (read from build/pdf.mjs and
// build/pdf.worker.mjs; the same in legacy/ and the minified builds):
//
// - PDF.js 5.x has ONE factory option for them, `BinaryDataFactory` (CMaps, standard fonts
//   and wasm). The older `CMapReaderFactory` and `StandardFontDataFactory` options are
//   gone: getDocument ignores them.
// - The worker side (PartialEvaluator.fetchBuiltInCMap / fetchStandardFontData) asks for a
//   file whenever a font needs one; it does not look at whether a URL was given. With
//   `useWorkerFetch: true` it fetches `${cMapUrl}${name}.bcmap` /
//   `${standardFontDataUrl}${file}` itself and NEVER calls the factory (getDocument does
//   not even construct one), so a null URL there fetches 'null<name>.bcmap'. With
//   `useWorkerFetch: false` it sends 'FetchBinaryData' {kind, filename} to the main-thread
//   side, which calls `binaryDataFactory.fetch({ kind, filename })`: kind 'cMapUrl' with
//   filename `${name}.bcmap` (`${name}` alone if cMapPacked is false), kind
//   'standardFontDataUrl' with the file name of its table (e.g. 'LiberationSans-Regular.ttf'
//   for Helvetica, 'FoxitSerif.pfb' for Times-Roman), kind 'wasmUrl' for its image
//   decoders (only with useWasm). The answer is a Uint8Array of the file; for a CMap the
//   worker then sets isCompressed = cMapPacked (so cMapPacked must stay true, its default:
//   the table has only the packed .bcmap files).
// - getDocument builds the factory as `new BinaryDataFactory({ cMapUrl,
//   standardFontDataUrl, wasmUrl })`. Only PDF.js's own base class refuses a null URL
//   ("Ensure that the `cMapUrl` API parameter is provided."); a factory that does not
//   extend it needs no URL at all. The URLs still matter elsewhere only with
//   useSystemFonts (standardFontDataUrl names the fonts of its @font-face rules), which
//   docmem turns off.
// - The fake worker (globalThis.pdfjsWorker set, as js/pdf.js does) runs both sides in one
//   thread, so the factory's fetch() runs in docmem's worker, on the worker's own origin
//   and Content-Security-Policy (connect-src 'self' covers same-origin assets). The table's
//   URLs are absolute, so nothing reads document.baseURI (DOMBinaryDataFactory does).
// - A standard font is asked for only when useSystemFonts is false (as docmem sets it;
//   otherwise only Symbol and ZapfDingbats are), for a simple font naming one of the
//   base 14 (or an alias) without embedding it, even though only text is extracted (the
//   text of a WinAnsi Helvetica line comes out the same without it; the CMaps are what
//   CJK text needs).
// - Bundlers: webpack 5 emits every file of the table (hashed names); Vite inlines those
//   under its assetsInlineLimit (4 KiB; 134 of the 168 CMaps) as data: URLs in the
//   bundle, which this factory decodes itself, since a fetch() of a data: URL is refused
//   under a connect-src without data: (docmem's own CSP).
//
// So in a browser (pdf.js) getDocument takes tableAssetOptions(): the factory,
// useWorkerFetch false (true bypasses it), cMapPacked true (the table's files are .bcmap),
// useSystemFonts false (else standard fonts are not asked for), and no cMapUrl or
// standardFontDataUrl. Node (node/pdf.js) reads the folders of npm's pdfjs-dist with
// PDF.js's own factory instead: the table's URLs point into vendor/pdfjs/, which only the
// packed package holds, and Node's fetch() cannot read file: URLs.
//
// A name the table lacks (or a fetch that fails) rejects the fetch; PDF.js then loses that
// font's text (a warning at verbosity >= 1), as it does with a missing folder file.

import { cmaps as cmapTable, standardFonts as fontTable, pdfjsVersion } from './pdf-assets.js';

/** @typedef {Record<string, () => URL>} AssetTable name → a function making the file's URL */
/** @typedef {(url: URL | string) => Promise<{ ok: boolean, status: number, arrayBuffer(): Promise<ArrayBuffer> }>} AssetFetch */

/**
 * A BinaryDataFactory class (getDocument's option) that answers PDF.js's requests for
 * CMaps and standard fonts from tables of name → () => URL (by default js/pdf-assets.js),
 * with `fetch` (default: the global fetch at the time of the call; any function taking a
 * URL and returning a Response-like object with `ok`, `status` and `arrayBuffer()`).
 * wasm files (asked for only with useWasm) come from the option wasmUrl, if given.
 *
 * @param {{ cmaps?: AssetTable, standardFonts?: AssetTable, fetch?: AssetFetch }} [options]
 */
export function makeTableBinaryDataFactory({ cmaps = cmapTable, standardFonts = fontTable, fetch: fetchFn } = {}) {
  /** @type {AssetFetch} */
  const get = (url) => (fetchFn ? fetchFn(url) : globalThis.fetch(url));
  /** @type {AssetTable} */
  const cmapsByName = cmaps;
  /** @type {AssetTable} */
  const fontsByName = standardFonts;
  return class TableBinaryDataFactory {
    /** @param {{ wasmUrl?: string | null }} [urls] what getDocument passes (cMapUrl and standardFontDataUrl are not used) */
    constructor({ wasmUrl = null } = {}) {
      /** @type {string | null} */
      this.wasmUrl = wasmUrl;
    }

    /**
     * PDF.js's request → the file's bytes.
     * @param {{ kind: string, filename: string }} request kind: 'cMapUrl' | 'standardFontDataUrl' | 'wasmUrl'
     * @returns {Promise<Uint8Array>}
     */
    async fetch({ kind, filename }) {
      let url;
      if (kind === 'cMapUrl') {
        if (!filename.endsWith('.bcmap')) {
          throw new Error(`PDF.js asked for the unpacked CMap '${filename}'; pass cMapPacked: true (the table holds .bcmap files)`);
        }
        const name = filename.slice(0, -'.bcmap'.length);
        if (!Object.hasOwn(cmapsByName, name)) throw new Error(`no CMap '${name}' in the table of pdfjs-dist ${pdfjsVersion}'s CMaps`);
        url = cmapsByName[name]();
      } else if (kind === 'standardFontDataUrl') {
        if (!Object.hasOwn(fontsByName, filename)) throw new Error(`no standard font '${filename}' in the table of pdfjs-dist ${pdfjsVersion}'s fonts`);
        url = fontsByName[filename]();
      } else if (kind === 'wasmUrl' && this.wasmUrl) {
        url = `${this.wasmUrl}${filename}`;
      } else {
        throw new Error(`PDF.js asked for ${kind} data '${filename}', which docmem does not provide`);
      }
      if (String(url).startsWith('data:')) return dataUrlBytes(String(url));
      const response = await get(url);
      if (!response.ok) throw new Error(`PDF.js data ${url}: HTTP ${response.status}`);
      return new Uint8Array(await response.arrayBuffer());
    }
  };
}

/**
 * The bytes of a data: URL, decoded here rather than fetched: Vite inlines assets under
 * its assetsInlineLimit (4 KiB by default; most CMaps are smaller) as data: URLs, and a
 * fetch() of one is refused under a Content-Security-Policy whose connect-src does not
 * list data: (docmem's does not).
 * @param {string} href
 * @returns {Uint8Array}
 */
function dataUrlBytes(href) {
  const comma = href.indexOf(',');
  if (comma < 0) throw new Error('a data: URL without a comma');
  const body = href.slice(comma + 1);
  if (/;base64$/i.test(href.slice(0, comma))) {
    const s = atob(decodeURIComponent(body));
    const bytes = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
    return bytes;
  }
  const out = [];
  for (let i = 0; i < body.length; i++) {
    const hex = body[i] === '%' ? body.slice(i + 1, i + 3) : '';
    if (/^[0-9a-fA-F]{2}$/.test(hex)) {
      out.push(parseInt(hex, 16));
      i += 2;
    } else {
      out.push(...new TextEncoder().encode(body[i]));
    }
  }
  return new Uint8Array(out);
}

/** The BinaryDataFactory of js/pdf-assets.js's table, with the global fetch. */
export const TableBinaryDataFactory = makeTableBinaryDataFactory();

/**
 * getDocument's options for the table (see above): spread them into its parameters.
 * @param {Function} [factory] a BinaryDataFactory class (default TableBinaryDataFactory)
 */
export function tableAssetOptions(factory = TableBinaryDataFactory) {
  return { BinaryDataFactory: factory, useWorkerFetch: false, cMapPacked: true, useSystemFonts: false };
}
