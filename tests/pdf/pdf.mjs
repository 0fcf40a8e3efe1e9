// js/node/pdf.js (no wasm, no model): a PDF's text through pdfjs-dist, on the fixtures
// that scripts/fixtures/make-pdf-fixtures.mjs writes. Both pages' text in order, with its
// lines and paragraphs; page starts in code points (page 1 holds a character outside the
// BMP); the input left as it was; the same text in a worker thread (as docmem's worker
// runs it); refusals, each a DocMemError BAD_DOCUMENT: a scan (no text layer), a
// password-protected PDF, a file over the size limit (before PDF.js is called), garbage
// and truncated bytes; cancellation between pages; the line builder on made-up items.
//
//   node tests/pdf/pdf.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DocMemError, codes } from '../../js/errors.js';
import { MAX_PDF_BYTES, NO_TEXT_LAYER, codePoints, isPdf, pageText, pdfToText } from '../../js/node/pdf.js';

const t0 = performance.now();
const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = (name) => new Uint8Array(fs.readFileSync(path.join(here, '../fixtures/pdf', name)));
const refused = (pattern) => (e) => {
  assert.ok(e instanceof DocMemError, `a DocMemError, not ${e && e.stack}`);
  assert.equal(e.code, codes.BAD_DOCUMENT);
  assert.match(e.message, pattern);
  return true;
};
// A PDF.js stand-in that fails the test if anything reaches it.
const untouchable = {
  getDocument() {
    throw new Error('PDF.js was called');
  },
};
let checks = 0;
const check = async (name, f) => {
  const t = performance.now();
  await f();
  checks += 1;
  console.log(`ok ${name} (${Math.round(performance.now() - t)} ms)`);
};

const PAGE1 = [
  'The printing press',
  '',
  'William Caxton set up a press at Westminster',
  'in 1476, the first in England; his books \u{1F4D6}',
  'were sold near the caf\u00e9 of the abbey.',
  '',
  'Year: 1476',
  '',
  'A new paragraph begins after a wider gap.',
].join('\n');
const PAGE2 = 'The Gutenberg Bible was printed around 1455\nin Mainz, with movable metal type.';

await check('two pages: text in order, lines and paragraphs, page starts in code points', async () => {
  const bytes = fixture('two-pages.pdf');
  const before = bytes.slice();
  assert.ok(isPdf(bytes) && isPdf(bytes.buffer) && !isPdf(new Uint8Array([0x25, 0x50])));
  const { text, pageStarts, pages } = await pdfToText(bytes);
  assert.equal(text, `${PAGE1}\n\n${PAGE2}`);
  assert.equal(pages, 2);
  assert.deepEqual(pageStarts, [0, codePoints(PAGE1) + 2]);
  // Code points, not UTF-16 units: the book emoji on page 1 is two units, one code point.
  assert.equal(text.indexOf('The Gutenberg'), pageStarts[1] + 1);
  assert.ok([...text].slice(pageStarts[1]).join('').startsWith('The Gutenberg Bible was printed'));
  assert.deepEqual(bytes, before, 'the caller keeps its bytes (PDF.js detaches what it is given)');
  // An ArrayBuffer too, and another separator (the page starts follow it).
  const ff = await pdfToText(bytes.buffer, { separator: '\n\f\n' });
  assert.equal(ff.text, `${PAGE1}\n\f\n${PAGE2}`);
  assert.deepEqual(ff.pageStarts, [0, codePoints(PAGE1) + 3]);
});

await check('the same text in a worker thread (where docmem runs it)', async () => {
  const url = pathToFileURL(path.join(here, '../../js/node/pdf.js')).href;
  const code = `
    import { parentPort, workerData } from 'node:worker_threads';
    const { pdfToText } = await import(${JSON.stringify(url)});
    parentPort.postMessage(await pdfToText(workerData));`;
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`), { workerData: fixture('two-pages.pdf') });
  const got = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.equal(got.text, `${PAGE1}\n\n${PAGE2}`);
  assert.deepEqual(got.pageStarts, [0, codePoints(PAGE1) + 2]);
});

await check('a CJK font with a predefined CMap (not embedded): its text, through the CMaps', async () => {
  // scripts/fixtures/make-cjk-pdf.py: Japanese in HeiseiMin-W3 over UniJIS-UCS2-H, no
  // ToUnicode, no embedded font; without the CMaps PDF.js reads only the Latin line.
  const { text } = await pdfToText(fixture('cjk-cid.pdf'));
  assert.equal(text, '吾輩は猫である。名前はまだ無い。\n\nNatsume Soseki, 1905');
});

await check('a scan (pages that are images) is refused: no text layer', async () => {
  await assert.rejects(pdfToText(fixture('scan.pdf'), { name: 'scan.pdf' }), refused(new RegExp(`^'scan\\.pdf': ${NO_TEXT_LAYER.replace(/[()]/g, '\\$&')}$`)));
});

await check('a password-protected PDF is refused (the fixture opens with its password)', async () => {
  const bytes = fixture('encrypted.pdf');
  await assert.rejects(pdfToText(bytes), refused(/password-protected \(encrypted\); docmem does not open encrypted PDFs/));
  // The fixture is a real encrypted file: PDF.js reads page 1's text with the password.
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const doc = await pdfjs.getDocument({ data: bytes.slice(), password: 'secret', verbosity: 0 }).promise;
  const items = (await (await doc.getPage(1)).getTextContent()).items;
  assert.equal(pageText(items), PAGE1);
  await doc.destroy();
});

await check('over the size limit: refused on the byte length, before PDF.js is called', async () => {
  assert.equal(MAX_PDF_BYTES, 64 * 1024 * 1024);
  const big = new Uint8Array(MAX_PDF_BYTES + 1);
  big.set(fixture('two-pages.pdf'));
  await assert.rejects(pdfToText(big, { pdfjs: untouchable }), refused(/^this PDF is 64\.1 MB, over docmem's limit of 64 MB for a PDF/));
  // A valid PDF over a smaller limit: refused the same way, never parsed.
  await assert.rejects(pdfToText(fixture('two-pages.pdf'), { maxBytes: 1000, pdfjs: untouchable }), refused(/over docmem's limit/));
  // At the limit it is read.
  const exact = fixture('two-pages.pdf');
  assert.equal((await pdfToText(exact, { maxBytes: exact.length })).pages, 2);
});

await check('garbage, a bare header, truncated and empty bytes are refused', async () => {
  let seed = 7;
  const garbage = Uint8Array.from({ length: 4096 }, () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24);
  await assert.rejects(pdfToText(garbage, { name: 'noise.pdf' }), refused(/^'noise\.pdf': this file is not a readable PDF/));
  const header = new TextEncoder().encode('%PDF-1.7\n');
  await assert.rejects(pdfToText(Uint8Array.from([...header, ...garbage])), refused(/not a readable PDF|could not be read|no text layer/));
  await assert.rejects(pdfToText(header), refused(/not a readable PDF|could not be read/));
  // Cut short: PDF.js may rebuild what it can; whatever it does, no other error escapes.
  const whole = fixture('two-pages.pdf');
  for (const cut of [20, 300, 900, whole.length - 40]) {
    try {
      const r = await pdfToText(whole.subarray(0, cut));
      assert.equal(typeof r.text, 'string');
    } catch (e) {
      refused(/./)(e);
    }
  }
  await assert.rejects(pdfToText(new Uint8Array(0)), refused(/empty/));
  await assert.rejects(pdfToText('%PDF-1.4'), (e) => e.code === codes.BAD_ARGUMENT);
});

await check('cancelled between pages: ABORTED', async () => {
  await assert.rejects(pdfToText(fixture('two-pages.pdf'), { isCancelled: () => true }), (e) => e.code === codes.ABORTED);
});

await check('the line builder on made-up items', () => {
  const item = (str, x, y, { size = 10, width = str.length * size * 0.5, eol = false, rotate = false } = {}) => ({
    str,
    width,
    height: size,
    hasEOL: eol,
    transform: rotate ? [0, size, -size, 0, x, y] : [size, 0, 0, size, x, y],
  });
  // A superscript stays on its line; a gap between items is a space; a jump back up the
  // page (a second column) and a change of font size start paragraphs.
  const items = [
    item('E = mc', 72, 700),
    item('2', 102, 704, { size: 6, width: 3 }),
    item('holds.', 110, 700),
    item('Second line', 72, 688),
    item('third line', 72, 676),
    item('Column two', 320, 700),
    item('Heading', 72, 640, { size: 16 }),
    { type: 'beginMarkedContent', id: 'x' },
    item('', 72, 620, { eol: true }),
    item('  ', 72, 620),
    item('Body\u0000 text', 72, 620),
  ];
  assert.equal(pageText(items), 'E = mc2 holds.\nSecond line\nthird line\n\nColumn two\n\nHeading\n\nBody text');
  // Text turned a quarter (up the page): lines by x, not y.
  const turned = [item('Up the', 100, 100, { rotate: true }), item('side', 100, 140, { rotate: true }), item('Next line', 112, 100, { rotate: true })];
  assert.equal(pageText(turned), 'Up the side\nNext line');
  assert.equal(pageText([]), '');
  assert.equal(codePoints('a\u{1F4D6}b\ud800'), 4);
});

console.log(`tests/pdf/pdf.mjs: ${checks} checks passed in ${((performance.now() - t0) / 1000).toFixed(2)} s`);
