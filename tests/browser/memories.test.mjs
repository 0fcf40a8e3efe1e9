// The app's memories and models in headless Chromium (CPU backend, SmolLM2 configured as
// the server's default so CI stays inside its time): memories are off by default for it,
// with the reason shown, and turned on; a dropped document is searchable at
// once with sentence chunks; the reader writes its memory in the background while a
// question, typed (its answer read ahead as it is typed, so the ask reuses that), is
// answered; the memory replaces the chunks (SmolLM2 may fall back to sentence
// chunks: the row then says so); a memory pending at a reload resumes after it; a GGUF
// file chosen in the model picker (SmolLM2's, under another name) is read from the File,
// answers, is kept in the browser and chosen again after a reload; a file that is not a
// model, or a model of an architecture docmem does not run (Mamba), is refused with a
// message and the model in use stays; a synthetic Qwen3 is named by its header and answers; the same for a Hugging Face
// folder (SmolLM2 exported as a checkpoint by the runtime's `gguf_to_hf` example). A library whose index is
// lost offers a rebuild from its documents, which keeps the damaged copy.
//
//   node tests/browser/memories.test.mjs      (bash scripts/browser-test.sh runs it)
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const models = process.env.DOCMEM_MODELS || path.join(os.homedir(), '.cache', 'docmem', 'models');
const smollm = path.join(models, 'SmolLM2-135M-Instruct.Q4_1.gguf');
const MINUTES = 60_000;
const t0 = performance.now();
const at = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;

const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf'], { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => server.kill());
const url = await new Promise((resolve, reject) => {
  server.stdout.on('data', (d) => {
    const m = /serving on (http:\S+)/.exec(String(d));
    if (m) resolve(m[1]);
  });
  server.on('exit', (code) => reject(new Error(`the server exited (${code})`)));
});

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-memories-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-features=WebGPU,Vulkan'],
  viewport: { width: 1280, height: 1000 },
});
const page = context.pages()[0] || (await context.newPage());
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));

async function ready() {
  await page.waitForSelector('body[data-ready="true"], #error:not([hidden])', { timeout: 10 * MINUTES });
  const error = await page.locator('#error').evaluate((e) => (e.hidden ? '' : e.textContent));
  assert.equal(error, '', `the app failed to start: ${error}`);
}
const row = (title) => page.locator('#doc-list li[data-id]', { hasText: title });
const addText = (name, text) => page.setInputFiles('#files', { name, mimeType: 'text/plain', buffer: Buffer.from(text) });

await page.goto(url);
await ready();
// Off by default here: nothing shows SmolLM2's memories answering better than its chunks,
// and the page says so with what a memory would cost; the user turns them on.
assert.equal(await page.locator('#memories').inputValue(), 'off', 'memories are off by default for a model whose memories are not shown to pay');
const why = await page.locator('#memories-why').textContent();
assert.match(why, /^Off by default: this model\u2019s memories have not been measured against sentence chunks; a memory would take a time not yet measured on this device/, why);
await page.selectOption('#memories', 'background');
assert.match(await page.locator('#memories-why').textContent(), /^Your choice \(off by default here: this model\u2019s memories/);

// ---- searchable at once; the memory in the background; a question meanwhile ----
let t = performance.now();
await addText('bells.txt', 'The bell of Saint Paul rang at noon and again at dusk. In 1666 the great fire melted it. A new bell was cast in 1716 by Richard Phelps.');
await row('bells').waitFor({ timeout: MINUTES });
const searchable = (performance.now() - t) / 1000;
assert.ok(searchable < 5, `searchable in ${searchable.toFixed(1)} s`);
assert.match(await row('bells').textContent(), /1 chunk · sentence/);
await page.waitForFunction(() => /Memory: /.test(document.querySelector('#doc-list').textContent), null, { timeout: MINUTES });
assert.match(await page.locator('#memory-status').textContent(), /1 memory to write in the background/);
// Typed: each word has the answerer read the passages it finds ahead (the memory being
// written gives way), and the ask then runs only what the read-ahead did not.
await page.type('#question', 'When was the new bell cast?', { delay: 40 });
await page.waitForFunction(() => /^\d+ When was the new bell cast\?$/.test(document.querySelector('#question').dataset.readAhead || ''), null, { timeout: 3 * MINUTES });
const readAhead = Number((await page.locator('#question').getAttribute('data-read-ahead')).split(' ')[0]);
await page.click('#ask-button');
await page.waitForFunction(() => /Answered in/.test(document.querySelector('#answer-status').textContent), null, { timeout: 5 * MINUTES });
const reused = Number(await page.locator('#answer-box').getAttribute('data-reused-tokens'));
assert.ok(readAhead > 50 && reused === readAhead, `read ahead ${readAhead} prompt tokens, the ask reused ${reused}`);
const answeredWhilePending = /Memory: /.test(await row('bells').textContent());
assert.match(await page.locator('#sources').textContent(), /1716/, 'the answer cites the chunk');
await page.waitForFunction(() => /memory written|memory not written/.test(document.querySelector('#doc-list').textContent), null, { timeout: 8 * MINUTES });
const written = await row('bells').textContent();
assert.match(written, /SmolLM2-135M-Instruct\.Q4_1\.gguf \(en-\w+ prompt\)/, `the reader's memory replaced the chunks: ${written}`);
assert.match(written, /memory written in \d+ (s|min)/, written);
assert.ok(!/fell back/.test(written) || /the reader fell back to sentence chunks/.test(written), 'a fallback is said');
assert.equal(await page.locator('#memory-controls').isHidden(), true);
console.log(`  bells: searchable in ${searchable.toFixed(1)} s; ${readAhead} prompt tokens read ahead as the question was typed; answered while its memory was ${answeredWhilePending ? 'still being written' : 'already written'}; memory ${written.replace(/\s+/g, ' ').slice(0, 160)} (${at()})`);

// ---- a memory pending at a reload resumes after it ----
await addText('clocks.txt', 'A clock of 1386 still runs in Salisbury Cathedral. It has no face and strikes the hours on a bell.');
await row('clocks').waitFor({ timeout: MINUTES });
await page.reload();
await ready();
await page.waitForFunction(() => /clocks[\s\S]*Memory: /.test(document.querySelector('#doc-list').textContent), null, { timeout: MINUTES });
await page.waitForFunction(() => /clocks[\s\S]*memory written/.test(document.querySelector('#doc-list').textContent), null, { timeout: 8 * MINUTES });
assert.match(await row('clocks').textContent(), /SmolLM2/);
console.log(`  clocks: the memory pending at the reload resumed and landed (${at()})`);

// ---- bring your own model ----
await page.locator('#model-picker summary').click();
await page.setInputFiles('#own-model', { name: 'bad.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from('this is not a model') });
await page.waitForFunction(() => /could not be used/.test(document.querySelector('#model-picker-status').textContent), null, { timeout: 5 * MINUTES });
await page.waitForSelector('body[data-ready="true"]', { timeout: 5 * MINUTES });
assert.match(await page.locator('#error').textContent(), /bad\.gguf/, 'the error names the file');
assert.match(await page.locator('#models').textContent(), /^SmolLM2-135M-Instruct\.Q4_1\.gguf \(reader and answerer\)/, 'the model in use stays');
await page.locator('#error').evaluate((e) => (e.hidden = true));
// A GGUF file of an architecture docmem does not run (a Mamba header, no weights) is
// refused from its header, naming the architecture, and the model in use stays.
const ggufString = (text) => {
  const bytes = Buffer.from(text);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(bytes.length));
  return Buffer.concat([length, bytes]);
};
const mambaHead = Buffer.alloc(24);
mambaHead.write('GGUF', 0);
mambaHead.writeUInt32LE(3, 4); // version
mambaHead.writeBigUInt64LE(0n, 8); // tensors
mambaHead.writeBigUInt64LE(1n, 16); // metadata entries
const stringType = Buffer.alloc(4);
stringType.writeUInt32LE(8);
const mamba = Buffer.concat([mambaHead, ggufString('general.architecture'), stringType, ggufString('mamba')]);
await page.setInputFiles('#own-model', { name: 'mamba.gguf', mimeType: 'application/octet-stream', buffer: mamba });
await page.waitForFunction(() => /mamba could not be used/.test(document.querySelector('#model-picker-status').textContent), null, { timeout: 5 * MINUTES });
await page.waitForSelector('body[data-ready="true"]', { timeout: 5 * MINUTES });
assert.match(await page.locator('#model-picker-status').textContent(), /mamba\.gguf: mamba: not supported \(architecture 'mamba' is not supported/);
assert.match(await page.locator('#models').textContent(), /^SmolLM2-135M-Instruct\.Q4_1\.gguf \(reader and answerer\)/, 'the model in use stays');
await page.locator('#error').evaluate((e) => (e.hidden = true));
// A Qwen3, a Gemma 3 and a Phi-3 file (synthetic ones: the real files' tensors, metadata,
// per-head norms, Gemma's post-norms, sliding-window layers and SentencePiece tokenizer,
// Phi's stacked projections and LongRoPE, drawn weights, so their answers are noise) are
// named by their headers, load and answer.
const ownSaid = [];
for (const arch of ['qwen3', 'gemma3', 'phi3']) {
  const file = path.join(profile, `my-${arch}.gguf`);
  const synthesized = spawnSync(process.env.DOCMEM_CLI || 'docmem', ['synth-gguf', `${arch}-tiny:q4_k_m`, file], { encoding: 'utf8' });
  assert.equal(synthesized.status, 0, `docmem synth-gguf: ${synthesized.stderr}`);
  await page.setInputFiles('#own-model', file);
  await page.waitForFunction((name) => document.querySelector('#model-picker-status').textContent.includes(`Now using ${name}`), `my-${arch}`, { timeout: 5 * MINUTES });
  await ready();
  const said = await page.locator('#model-picker-status').textContent();
  // (Gemma's formats lead with the Q5_0 that rows not whole K-quant blocks take.)
  assert.match(said, new RegExp(`${arch} · [\\d.]+M parameters · [^·]*Q4_K[^·]* · [\\d.]+ [KMG]B · about [\\d.]+ [KMG]B to run with 2048 tokens of context on the CPU`));
  assert.match(await page.locator('#models').textContent(), new RegExp(`^my-${arch}\\.gguf \\(reader and answerer\\)`));
  await page.fill('#question', 'Where does the clock of 1386 run?');
  // The last model's "Answered in" must not pass for this one's.
  await page.locator('#answer-status').evaluate((e) => (e.textContent = ''));
  await page.click('#ask-button');
  ownSaid.push(said);
  await page.waitForFunction(() => /Answered in/.test(document.querySelector('#answer-status').textContent), null, { timeout: 5 * MINUTES });
  if (arch === 'qwen3') await page.locator('#model-picker').screenshot({ path: path.join(root, 'tests/browser/out/own-model.png') });
}
console.log(`  own model: a Mamba file refused by its architecture; a synthetic Qwen3, Gemma 3 and Phi-3 named by their headers ("${ownSaid.join('", "')}"), loaded and answered (${at()})`);
// Renamed so the page cannot confuse it with the served file.
const mine = path.join(profile, 'my-smollm2.gguf');
fs.copyFileSync(smollm, mine);
await page.setInputFiles('#own-model', mine);
await page.waitForFunction(() => /Now using my-smollm2/.test(document.querySelector('#model-picker-status').textContent), null, { timeout: 5 * MINUTES });
await ready();
assert.match(await page.locator('#models').textContent(), /^my-smollm2\.gguf \(reader and answerer\)/);
await page.fill('#question', 'Where does the clock of 1386 run?');
await page.click('#ask-button');
await page.waitForFunction(() => /Answered in/.test(document.querySelector('#answer-status').textContent), null, { timeout: 5 * MINUTES });
assert.ok((await page.locator('#answer').textContent()).trim().length > 0);
// The list is drawn again once the speed is recorded (after a few storage lookups): wait for it.
const ownMeasured = /my-smollm2 — your file, kept in this browser98\.4 MB · kept in this browser · [\d.]+ tokens\/s/;
await page
  .waitForFunction((re) => new RegExp(re).test(document.querySelector('#model-list').textContent), ownMeasured.source, { timeout: MINUTES })
  .catch(() => {});
assert.match(await page.locator('#model-list').textContent(), ownMeasured);
await page.reload();
await ready();
assert.match(await page.locator('#models').textContent(), /^my-smollm2\.gguf \(reader and answerer\)/, 'the chosen file is chosen again, from storage');
console.log(`  own model: a bad file refused, my-smollm2.gguf read from the File, answered, kept and chosen again after a reload (${at()})`);

// A Hugging Face folder: SmolLM2 written out as a checkpoint (bf16 safetensors, as
// published checkpoints are) by the runtime's exporter. A folder without its tokenizer is
// refused, naming what is missing; the whole one loads from the Files, answers, and is
// chosen again after a reload, from storage.
const checkpoint = path.join(profile, 'SmolLM2-hf');
const exporter = process.env.DOCMEM_GGUF_TO_HF || path.join(process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache', 'docmem', 'target'), 'debug', 'examples', 'gguf_to_hf');
const exported = spawnSync(exporter, [smollm, checkpoint, 'bf16'], { stdio: 'inherit' });
assert.equal(exported.status, 0, `${exporter} wrote the checkpoint`);
const partial = path.join(profile, 'no-tokenizer');
fs.mkdirSync(partial);
fs.copyFileSync(path.join(checkpoint, 'config.json'), path.join(partial, 'config.json'));
await page.setInputFiles('#own-folder', partial);
await page.waitForFunction(() => /not a Hugging Face model folder/.test(document.querySelector('#model-picker-status').textContent), null, { timeout: MINUTES });
assert.match(await page.locator('#model-picker-status').textContent(), /no-tokenizer is not a Hugging Face model folder: it lacks tokenizer\.json and a \.safetensors file\./);
await page.setInputFiles('#own-folder', checkpoint);
await page.waitForFunction(() => /Now using SmolLM2-hf|could not be used/.test(document.querySelector('#model-picker-status').textContent), null, { timeout: 5 * MINUTES });
assert.match(await page.locator('#model-picker-status').textContent(), /Now using SmolLM2-hf/);
await ready();
assert.match(await page.locator('#models').textContent(), /^SmolLM2-hf \(reader and answerer\)/);
await page.fill('#question', 'Where does the clock of 1386 run?');
await page.click('#ask-button');
await page.waitForFunction(() => /Answered in/.test(document.querySelector('#answer-status').textContent), null, { timeout: 5 * MINUTES });
assert.ok((await page.locator('#answer').textContent()).trim().length > 0);
await page.reload();
await ready();
assert.match(await page.locator('#models').textContent(), /^SmolLM2-hf \(reader and answerer\)/, 'the chosen folder is chosen again, from storage');
console.log(`  own folder: one without its tokenizer refused, SmolLM2 as a Hugging Face checkpoint read from the Files, answered, kept and chosen again after a reload (${at()})`);

// ---- a library that no longer opens: the way out keeps what can be read ----
await page.evaluate(
  () =>
    new Promise((resolve, reject) => {
      const r = indexedDB.open('docmem-library:default');
      r.onerror = () => reject(r.error);
      r.onsuccess = () => {
        const tx = r.result.transaction('entries', 'readwrite');
        const entries = tx.objectStore('entries');
        const keys = entries.getAllKeys();
        keys.onsuccess = () => keys.result.filter((k) => k.startsWith('index/')).forEach((k) => entries.delete(k));
        tx.oncomplete = () => (r.result.close(), resolve());
      };
    }),
);
await page.reload();
await page.locator('#library-damaged').waitFor({ timeout: 10 * MINUTES });
assert.match(await page.locator('#library-damaged-text').textContent(), /^Your library could not be opened: .*index\/(fresh|parts)\/\d+\.bin/);
await page.click('#rebuild-library');
await ready();
const rebuilt = await page.locator('#library-rebuilt').textContent();
assert.match(rebuilt, /rebuilt from 2 documents it still held; .* kept in this browser as “default~damaged-/, rebuilt);
assert.ok((await row('bells').count()) === 1 && (await row('clocks').count()) === 1, 'both documents are back');
console.log(`  a damaged library: the way out offered, rebuilt from its documents, the damaged copy kept (${at()})`);

await page.screenshot({ path: path.join(root, 'tests/browser/out/memories.png'), fullPage: true });
assert.deepEqual(problems, []);
await context.close();
// The server's piped stdout keeps this process alive until the server is gone.
server.kill();
fs.rmSync(profile, { recursive: true, force: true });
console.log(`memories and models in the page: ok (${at()})`);
