// The web app in headless Chromium (playwright-core driving /usr/bin/chromium): models
// downloaded and checked, examples/printing-press.md added, a streamed answer to "Who
// brought printing to England?" whose citation link highlights a span of the document,
// the library still there after a reload, the app and models loading with the server
// gone (offline), and a run without WebGPU that also fills the storage quota (the add is
// refused with QUOTA_EXCEEDED, nothing half-written). The app's backend: CPU (wasm simd128
// + relaxed SIMD: the relaxed-SIMD threads build passed its kernel check) in both runs
// (SwiftShader is a software adapter), on as many threads as the browser reports cores
// (the page is cross-origin isolated), and on one, saying why, when served without
// COOP/COEP (the plain simd128 build); the package is also opened with backend 'webgpu', which loads its
// models onto SwiftShader, and on the CPU, where helper threads are seen to work. Hosted
// models are applied in the settings panel (a fake OpenAI-compatible host,
// tests/fake-host.mjs): the notice says what leaves the device, and an answer streams
// from the host. Screenshots (desktop and 375 px) go to tests/browser/out/.
//
// The page as a user meets it: an answer says what it is doing before its first word
// (searching, reading N passages, writing) and links each [n] as it streams; a file is
// titled without its extension and listed, with its own time, as soon as it is stored,
// while the rest of its batch is still being added, and Cancel stops the rest (nothing of
// them stored, also after a reload); removing a document and importing over the library
// ask first in the page's own dialog (dismissed: nothing changes; accepted: it happens);
// the storage line names the models' and the library's bytes; a document whose sentence
// chunks overlap is drawn once (its text equals the file's), and a cited passage that
// shares a sentence with its neighbour shows it once. A PDF: a scan is refused (no text
// layer) and adds nothing; a two-page PDF is added, a question answered from its page 2
// lists that passage as "two-pages, p. 2", and the document view draws its page boundary
// as a separator. The storage line says whether the browser keeps the storage.
//
//   node tests/browser/app.test.mjs      (scripts/browser-test.sh runs it)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { ANSWER, startFakeHost } from '../fake-host.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const out = path.join(root, 'tests/browser/out');
fs.mkdirSync(out, { recursive: true });
const example = path.join(root, 'examples/printing-press.md');
const exampleText = fs.readFileSync(example, 'utf8');
const QUESTION = 'Who brought printing to England?';
const MINUTES = 60_000;

const COMMON = ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const WEBGPU = ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-vulkan=swiftshader', '--use-webgpu-adapter=swiftshader'];
const NO_WEBGPU = ['--disable-features=WebGPU,Vulkan'];

const times = {};
const timed = async (name, f) => {
  const t = performance.now();
  const r = await f();
  times[name] = ((performance.now() - t) / 1000).toFixed(1);
  console.log(`  ${name}: ${times[name]} s`);
  return r;
};

const servers = new Set();
process.on('exit', () => servers.forEach((c) => c.kill()));

function serve() {
  const child = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0', '--reader', 'SmolLM2-135M-Instruct.Q4_1.gguf'], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.add(child);
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(String(d));
      if (m) resolve({ url: m[1], stop: () => child.kill() });
    });
    child.on('exit', (code) => reject(new Error(`the server exited (${code})`)));
  });
}

async function launch(profile, flags) {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [...COMMON, ...flags],
    viewport: { width: 1280, height: 900 },
  });
  const page = context.pages()[0] || (await context.newPage());
  // Background memories off: SmolLM2 reading the example would take minutes of these two
  // cores; tests/browser/memories.test.mjs checks them on short documents.
  await context.addInitScript(() => {
    if (!localStorage.getItem('docmem-memories')) localStorage.setItem('docmem-memories', 'off');
  });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  return { context, page, problems };
}

async function ready(page, url) {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"], #error:not([hidden])', { timeout: 10 * MINUTES });
  const error = await page.locator('#error').evaluate((e) => (e.hidden ? '' : e.textContent));
  assert.equal(error, '', `the app failed to start: ${error}`);
}

/**
 * WebGPU in the page (SwiftShader): every kernel check of docmem_runtime::gpu::checks on
 * the browser's adapter, then SmolLM2 on the CPU and on WebGPU from the same file: the
 * logits of a prompt within the tolerance the native parity test states (1.0 absolute,
 * same top token on every row), and the greedy continuation, whose agreement is printed
 * (both of its two tokens must agree; `tests/gpu_parity.rs` runs 32 natively).
 */
async function webgpuInPage(page) {
  const r = await page.evaluate(async () => {
    const w = await import('/js/wasm/plain/docmem_wasm.js');
    await w.default();
    const seconds = {};
    const clock = async (name, f) => {
      const t = performance.now();
      const r = await f();
      seconds[name] = ((performance.now() - t) / 1000).toFixed(1);
      return r;
    };
    // The runtime's device rule, required to take the adapter (SwiftShader here): every
    // kernel check runs on it, and the models below load onto that same device.
    const device = await clock('checks', () => w.Device.choose('webgpu'));
    const check = { checks: device.checks, adapter: device.adapter, kind: device.kind };
    const manifest = await (await fetch('/models/models.json')).json();
    const bytes = new Uint8Array(await (await fetch(new URL(manifest.reader.files[0].url, new URL('/models/', location.href)))).arrayBuffer());
    const cpu = new w.Lm(bytes);
    // Short, as SwiftShader takes 10-20 s per token of SmolLM2 on two cores.
    const prompt = 'Gutenberg printed the';
    const tokens = Array.from(cpu.tokenize(prompt));
    const want = await cpu.logits(Uint32Array.from(tokens));
    // Two tokens (about 13 s each on SwiftShader): the native test runs 32.
    const steps = 2;
    const cpuGreedy = JSON.parse(await cpu.generate(prompt, JSON.stringify({ temperature: 0, max_tokens: steps }))).tokens;
    // Files as the worker hands them over: {path, size, read}.
    const file = (path, b) => ({ path, size: b.length, read: (offset, length) => b.subarray(offset, offset + length) });
    const gpu = await clock('upload', () => device.loadLm('smollm2', [file('smollm2.gguf', bytes)]));
    const got = await clock('prompt', () => gpu.logits(Uint32Array.from(tokens)));
    const vocab = want.length / tokens.length;
    let maxDiff = 0;
    let sameTop = 0;
    const top = (a, row) => {
      let best = row * vocab;
      for (let i = row * vocab; i < (row + 1) * vocab; i++) if (a[i] > a[best]) best = i;
      return best - row * vocab;
    };
    for (let i = 0; i < want.length; i++) maxDiff = Math.max(maxDiff, Math.abs(want[i] - got[i]));
    for (let row = 0; row < tokens.length; row++) sameTop += top(want, row) === top(got, row);
    const gpuGreedy = Array.from(await clock('greedy', () => gpu.greedy(Uint32Array.from(tokens), cpuGreedy.length)));
    let agree = 0;
    while (agree < cpuGreedy.length && cpuGreedy[agree] === gpuGreedy[agree]) agree++;

    // The library's entry points with a model on WebGPU settle with the same typed
    // errors as with one on the CPU (no GPU work here: a cancel at the first progress report, an
    // empty question), and a cancelled ingest leaves the library as it was.
    const base = new URL('/models/', location.href);
    const files = {};
    for (const f of manifest.embedder.files) files[f.path] = new Uint8Array(await (await fetch(new URL(f.url, base))).arrayBuffer());
    const embedder = new w.Embedder(files, manifest.embedder.name, '');
    const lib = w.Library.open({}, embedder);
    await lib.addDocument({ title: 'bells.txt', text: 'The bell rang at noon. It rang again at dusk.' }, { embedder, chunker: 'sentence' });
    const code = async (p) => {
      try {
        await p;
        return 'resolved';
      } catch (e) {
        return e.code;
      }
    };
    const glue = {
      cancelledIngest: await code(lib.addDocument({ title: 'press.txt', text: 'Gutenberg printed the Bible.' }, { embedder, reader: gpu, progress: () => false })),
      emptyQuestion: await code(lib.ask('  ', { embedder, answerer: gpu, k: 1, maxTokens: 1 })),
      documents: lib.documents().length,
    };

    // The embedder on WebGPU, sharing the decoder's device: its vectors (awaited) against
    // the wasm CPU encoder's, and a library built with it (sentence chunks, embedded ahead
    // of indexing) and searched with it (the question's vector awaited too).
    const onGpu = device.loadEmbedder(manifest.embedder.name, Object.entries(files).map(([path, b]) => file(path, b)));
    const texts = ['William Caxton printed in England.', 'The bell rang at noon.', ''];
    const cpuVectors = (await embedder.embed(texts, false)).vectors;
    const gpuVectors = (await clock('embed', () => onGpu.embed(texts, false))).vectors;
    const dim = embedder.dim();
    let minCosine = 1;
    for (let t = 0; t < texts.length; t++) {
      let dot = 0;
      for (let i = t * dim; i < (t + 1) * dim; i++) dot += cpuVectors[i] * gpuVectors[i];
      minCosine = Math.min(minCosine, dot);
    }
    const gpuLib = w.Library.open({}, onGpu);
    const added = await clock('add', () => gpuLib.addDocument({ title: 'bells.txt', text: 'The bell rang at noon. It rang again at dusk.' }, { embedder: onGpu, chunker: 'sentence' }));
    const embedding = { onWebGpu: onGpu.onWebGpu(), cpuOnWebGpu: embedder.onWebGpu(), minCosine, chunks: added.chunks, found: await gpuLib.search('When did the bell ring?', { embedder: onGpu, k: 1 }) };
    return { seconds, check, adapter: gpu.adapter(), rows: tokens.length, length: want.length === got.length, maxDiff, sameTop, agree, steps: cpuGreedy.length, glue, embedding };
  });
  console.log(`  WebGPU in the page: ${r.check.checks} kernel checks pass on ${r.check.adapter}; SmolLM2 logits of ${r.rows} tokens within ${r.maxDiff.toFixed(3)} of the CPU's, top token the same on ${r.sameTop}/${r.rows} rows; greedy agrees for ${r.agree}/${r.steps} tokens (seconds: ${JSON.stringify(r.seconds)})`);
  assert.equal(r.check.checks, 12);
  assert.equal(r.check.kind, 'webgpu');
  assert.ok(r.length, 'as many logits on WebGPU as on the CPU');
  assert.ok(r.maxDiff <= 1.0, `logits within 1.0 of the CPU's (${r.maxDiff})`);
  assert.equal(r.sameTop, r.rows, 'the same top token on every row');
  assert.ok(r.agree >= 2, `greedy continuations agree for at least 2 tokens (${r.agree})`);
  console.log(`  WebGPU library calls: a cancelled ingest rejects ${r.glue.cancelledIngest}, an empty question ${r.glue.emptyQuestion}; documents after: ${r.glue.documents}`);
  assert.deepEqual(r.glue, { cancelledIngest: 'ABORTED', emptyQuestion: 'BAD_QUESTION', documents: 1 }, 'the WebGPU library calls settle with typed errors');
  const e = r.embedding;
  console.log(`  WebGPU embedder: cosine with the wasm encoder ≥ ${e.minCosine.toFixed(7)}; a library built with it holds ${e.chunks} chunks and finds ${JSON.stringify(e.found.map((h) => h.text))}`);
  assert.deepEqual([e.onWebGpu, e.cpuOnWebGpu], [true, false]);
  assert.ok(e.minCosine >= 0.99999, `the WebGPU embedder's vectors match the wasm encoder's (cosine ${e.minCosine})`);
  assert.ok(e.chunks > 0);
  assert.equal(e.found.length, 1, 'a search with the embedder on WebGPU finds a passage');
}

/**
 * The npm package with backend 'webgpu', which takes the software adapter: the worker loads
 * the reader, the answerer and the embedder onto WebGPU (one device) and a document goes in.
 * Answering is not run here: SwiftShader takes about 4 s per prompt token, so an answer
 * prompt of ~150 tokens would take ten minutes; `tests/gpu_parity.rs` answers on the GPU
 * natively.
 */
async function packageOnWebgpu(page) {
  const r = await page.evaluate(
    async ({ text }) => {
      const { DocMem } = await import('/js/docmem.js');
      const dm = await DocMem.open('package-webgpu', { backend: 'webgpu', method: 'sentence' });
      // A short document: SwiftShader embeds about a sentence a second on these two cores.
      const added = await dm.addDocument(text, { title: 'printing-press.md' });
      const documents = await dm.documents();
      const out = { backend: dm.backend, models: dm.models, added, documents: documents.map((d) => d.title) };
      dm.close();
      return out;
    },
    { text: 'William Caxton set up the first printing press in England in 1476. He printed Chaucer.' },
  );
  console.log(`  package with backend 'webgpu': ${r.backend.label} — ${r.backend.reason}; ${r.added.chunks} chunks added`);
  assert.equal(r.backend.name, 'webgpu');
  assert.equal(r.backend.embedder, 'webgpu', 'the embedder runs beside the models on WebGPU');
  assert.equal(r.backend.software, true, 'SwiftShader is a software adapter');
  assert.match(r.backend.reason, /12 kernel checks pass/);
  assert.deepEqual(r.documents, ['printing-press.md']);
  assert.ok(r.added.chunks > 0);
}

/**
 * Threads in the cross-origin isolated page: the package on the CPU backend (the threads
 * build, helper workers on shared memory) loads SmolLM2, generates an answer, and reports
 * that helper threads ran some of the kernels' tasks.
 */
async function threadsInPage(page) {
  const r = await page.evaluate(async () => {
    const { DocMem } = await import('/js/docmem.js');
    const dm = await DocMem.open('package-threads', { backend: 'cpu', method: 'sentence' });
    await dm.addDocument('William Caxton set up the first printing press in England in 1476.', { title: 'caxton.txt' });
    const answer = await dm.ask('Who set up the first printing press in England?', { k: 1, maxTokens: 4 });
    const out = { backend: dm.backend, stats: await dm.threadStats(), answer: answer.answer, cores: navigator.hardwareConcurrency };
    dm.close();
    return out;
  });
  console.log(`  threads: ${r.backend.label}; ${r.stats.helperTasks} kernel tasks ran on helpers; answer ${JSON.stringify(r.answer)}`);
  const expected = Math.min(8, r.cores);
  assert.ok(expected > 1, `this test needs more than one core (the browser reports ${r.cores})`);
  assert.equal(r.backend.threads, expected, `threads follow navigator.hardwareConcurrency (${r.cores})`);
  assert.equal(r.backend.label, `CPU (wasm simd128 + relaxed SIMD, ${expected} threads)`);
  assert.equal(r.backend.kernels, 'relaxed-simd', `the relaxed-SIMD build was not kept: ${r.backend.kernelsNote}`);
  assert.ok(r.stats.helperTasks > 0, 'helper threads ran some of the model\'s tasks');
  assert.ok(r.answer.length > 0, 'SmolLM2 generated an answer');
}

const docTitles = (page) => page.locator('#doc-list li[data-id] .doc-open').allTextContents();
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Record, while the next answer is written, each line the status above it shows and
 * whether a citation link was in the answer before the answer was done (data-seconds).
 */
async function watchAnswer(page) {
  await page.evaluate(() => {
    const box = document.querySelector('#answer-box');
    delete box.dataset.seconds;
    window.answerSeen = { status: [], liveLink: false };
    window.answerWatch?.disconnect();
    window.answerWatch = new MutationObserver((records) => {
      for (const r of records) {
        if (r.target.id !== 'answer-status') continue;
        for (const n of r.addedNodes) if (n.nodeType === Node.TEXT_NODE) window.answerSeen.status.push(n.data);
      }
      if (!box.dataset.seconds && box.querySelector('#answer a.cite')) window.answerSeen.liveLink = true;
    });
    window.answerWatch.observe(box, { childList: true, subtree: true, characterData: true });
  });
}
const answerSeen = (page) => page.evaluate(() => window.answerSeen);

/** The page's confirm dialog is open: its title, text and buttons. */
async function dialogShown(page) {
  await page.waitForSelector('#confirm[open]');
  const [title, text] = await Promise.all([page.locator('#confirm-h').textContent(), page.locator('#confirm-text').textContent()]);
  return { title, text, focus: await page.evaluate(() => document.activeElement.id) };
}
const dialogClosed = (page) => page.waitForSelector('#confirm:not([open])', { state: 'attached' });

/** Wait until the app has (re)opened its library, and fail on an error it shows. */
async function reopened(page) {
  await page.waitForSelector('body[data-ready="true"], #error:not([hidden])', { timeout: 10 * MINUTES });
  const error = await page.locator('#error').evaluate((e) => (e.hidden ? '' : e.textContent));
  assert.equal(error, '', `the app failed to reopen: ${error}`);
}

/**
 * Hosted models in the page: the settings panel applied with a hosted reader, answerer
 * and embedder (the fake host); the notice names what leaves and where; the example is
 * indexed by the hosted embedder (its own library) and a question is answered, streamed
 * and cited, by the hosted answerer. Turned off: the notice goes, the token is forgotten,
 * and this device's library is back.
 */
async function hostedInPage(page, host) {
  const hostName = new URL(host.url).host;
  assert.equal(await page.locator('#remote-notice').isVisible(), false, 'no notice while everything runs here');
  await page.click('#hosted summary');
  await page.fill('#hosted-url', host.url);
  await page.fill('#hosted-token', host.token);
  await page.fill('#hosted-reader', 'memreader-7b');
  await page.fill('#hosted-answerer', 'qwen2.5-7b-instruct');
  await page.fill('#hosted-embedder', 'hash-16');
  await page.click('#hosted-apply');
  await reopened(page);
  const notice = await page.locator('#remote-notice').textContent();
  assert.equal(notice, `Text leaves this device: your documents and questions go to ${hostName} (reader: memreader-7b, answerer: qwen2.5-7b-instruct, embedder: hash-16).`);
  assert.equal(await page.locator('#remote-notice').isVisible(), true);
  assert.equal(await page.locator('#tagline-local').isVisible(), false, '"Nothing is uploaded" is no longer said');
  assert.match(await page.locator('#models').textContent(), /remote:memreader-7b \(reader\), remote:qwen2\.5-7b-instruct \(answerer\), remote:hash-16 \(embedder\)/);
  assert.equal(await page.evaluate((t) => JSON.stringify({ ...localStorage }).includes(t), host.token), false, 'the token is not in localStorage');
  await page.screenshot({ path: path.join(out, 'desktop-remote-settings.png') });
  console.log(`  hosted models: ${notice}`);

  assert.deepEqual(await docTitles(page), [], 'a hosted embedder has its own library');
  await page.setInputFiles('#files', [example, shortFile]);
  await page.waitForFunction(() => document.querySelectorAll('#doc-list li[data-id]').length === 2, null, { timeout: 2 * MINUTES });
  await watchAnswer(page);
  await page.fill('#question', QUESTION);
  await page.click('#ask-button');
  await page.waitForSelector('#answer-box[data-seconds]', { timeout: 2 * MINUTES });
  const answer = await page.locator('#answer').textContent();
  assert.ok(answer.startsWith(ANSWER.replace(/ \[1\]\.$/, '')), answer);
  assert.ok((await page.locator('#answer a.cite').count()) > 0, 'the hosted answer links a citation');
  const seen = await answerSeen(page);
  assert.equal(seen.liveLink, true, 'the [1] of the streamed answer was a link before the answer was done');
  assert.equal(seen.status[0], 'Searching the documents…');
  assert.ok(seen.status.includes('Writing…'), JSON.stringify(seen.status));
  console.log(`  hosted answer's status lines: ${JSON.stringify(seen.status)}; [1] linked while streaming: ${seen.liveLink}`);
  const asked = host.to('/v1/chat/completions').at(-1);
  assert.ok(asked.body.stream && asked.body.messages[0].content.includes(QUESTION), 'the question went to the hosted answerer');
  assert.ok(host.requests.every((r) => r.auth === `Bearer ${host.token}`), 'with the bearer token');
  assert.ok(host.to('/v1/embeddings').some((r) => r.body.input.some((t) => t.includes('Caxton'))), 'the chunks went to the hosted embedder');
  await page.screenshot({ path: path.join(out, 'desktop-remote-answer.png') });
  console.log(`  hosted answer: ${JSON.stringify(answer)}`);

  // The hosted answerer cites a passage without the answer's words: the page drops that
  // [n] and links the passages that hold them, and says so.
  await watchAnswer(page);
  await page.fill('#question', 'Who brought printing to England, and what did the old bell do on day 13? MISCITE');
  await page.click('#ask-button');
  await page.waitForSelector('#answer-box[data-seconds]', { timeout: 2 * MINUTES });
  const moved = await page.locator('#answer').textContent();
  const askedAgain = host.to('/v1/chat/completions').at(-1).body.messages.map((m) => m.content).join('\n');
  assert.ok(moved.startsWith('William Caxton brought printing to England in 1476. ['), `the answer's own [n] is dropped: ${JSON.stringify(moved)}; asked: ${JSON.stringify(askedAgain.slice(0, 3000))}`);
  assert.ok(/the passages the answer cited do not hold its words; these do/.test(moved), `the moved citations are said: ${JSON.stringify(moved)}`);
  const linked = await page.locator('#answer a.cite').evaluateAll((as) => as.map((a) => a.title));
  assert.ok(linked.length > 0 && linked.every((t) => t.startsWith('printing-press')), `the links go to the passages that hold the words: ${JSON.stringify(linked)}`);
  assert.ok(askedAgain.includes('MISCITE'));
  // Under "Cited", the passage shows the piece that holds the answer's words, not its opening.
  const citedSnippet = await page.locator('#sources li p.snippet').first().textContent();
  assert.ok(/Caxton/.test(citedSnippet), `the cited passage's snippet is the piece with the answer's words: ${JSON.stringify(citedSnippet)}`);
  await page.locator('#answer-box').screenshot({ path: path.join(out, 'answer-citations-moved.png') });
  console.log(`  mis-cited answer, its citations moved: ${JSON.stringify(moved)}`);

  // A cited passage of the document whose chunks overlap: its neighbour's sentence is in
  // it, shown once (the mark's text is the file's text, not a sentence run in twice).
  await watchAnswer(page);
  await page.fill('#question', 'What did the old bell do on day 13?');
  await page.click('#ask-button');
  await page.waitForSelector('#answer-box[data-seconds]', { timeout: 2 * MINUTES });
  await page.locator('#others').evaluate((e) => (e.open = true));
  await page.locator('#answer-box li a.cite[title^="short-sentences"]').first().click();
  await page.waitForSelector('mark#cited');
  const marked = await page.locator('mark#cited').textContent();
  assert.ok((await page.locator('mark#cited .chunk.shared').count()) > 0, 'the cited passage shares text with a neighbouring chunk');
  assert.ok(shortText.includes(marked) && marked.length > 100, `the cited passage is the document's text, each sentence once: ${JSON.stringify(marked)}`);
  assert.equal(await page.locator('#doc-text').textContent(), shortText, 'the document view draws the text once');
  console.log(`  cited passage with shared text: ${JSON.stringify(marked.slice(0, 60))}…${JSON.stringify(marked.slice(-40))}`);

  await page.click('#hosted-off');
  await reopened(page);
  assert.equal(await page.locator('#remote-notice').isVisible(), false);
  assert.equal(await page.locator('#hosted-token').inputValue(), '');
  assert.equal(await page.evaluate((t) => JSON.stringify({ ...sessionStorage, ...localStorage }).includes(t), host.token), false, 'the token is forgotten');
  assert.deepEqual(await docTitles(page), ['printing-press'], "this device's library is back");
  await page.click('#hosted summary');
}

/**
 * PDFs dropped on the page (tests/fixtures/pdf): a scan is refused with its reason and
 * adds nothing; the two-page fixture (page 2: the Gutenberg Bible) is added, and asked
 * about page 2, the passages listed under the answer name "two-pages, p. 2"; its link
 * opens the document with the passage marked and the page boundary drawn as a separator
 * (not the form feed: the view's text is the PDF's text without it).
 */
async function pdfInPage(page) {
  const pdfs = path.join(root, 'tests/fixtures/pdf');
  await page.setInputFiles('#files', path.join(pdfs, 'scan.pdf'));
  const scan = page.locator('#doc-list li.failed', { hasText: 'scan' });
  await scan.waitFor({ timeout: 2 * MINUTES });
  assert.equal(await scan.getAttribute('data-code'), 'BAD_DOCUMENT');
  assert.match(await scan.textContent(), /no text layer/);
  console.log(`  scan.pdf: ${await scan.locator('.muted').textContent()}`);
  assert.deepEqual(await docTitles(page), ['printing-press'], 'the scan added nothing');

  await page.setInputFiles('#files', path.join(pdfs, 'two-pages.pdf'));
  await page.locator('#doc-list li[data-id]', { hasText: 'two-pages' }).waitFor({ timeout: 5 * MINUTES });
  assert.deepEqual(await docTitles(page), ['printing-press', 'two-pages']);

  await watchAnswer(page);
  await page.fill('#question', 'When was the Gutenberg Bible printed?');
  await page.click('#ask-button');
  await page.waitForSelector('#answer-box[data-seconds]', { timeout: 10 * MINUTES });
  await page.locator('#others').evaluate((e) => (e.open = true));
  const cited = await page.locator('#sources li strong').allTextContents();
  const shown = await page.locator('#sources li strong, #other-sources li strong').allTextContents();
  console.log(`  PDF answer: ${JSON.stringify(await page.locator('#answer').textContent())}; cited ${JSON.stringify(cited)}; shown ${JSON.stringify(shown)}`);
  // The engine names a passage's page by its best piece, and no chunk spans a page break,
  // so the passage that holds the answer (page 2) says p. 2.
  const fromPdf = shown.filter((t) => t.startsWith('two-pages'));
  assert.ok(fromPdf.length > 0, `a passage of the PDF is listed: ${JSON.stringify(shown)}`);
  assert.ok(fromPdf.every((t) => /^two-pages, p\. [12]$/.test(t)), `every passage of the PDF names its page: ${JSON.stringify(fromPdf)}`);
  assert.ok(fromPdf.includes('two-pages, p. 2'), `the answer's page is named: ${JSON.stringify(fromPdf)}`);
  assert.ok(shown.filter((t) => t.startsWith('printing-press')).every((t) => t === 'printing-press'), 'an unpaged document names no page');
  const link = page.locator('#answer-box li a.cite[title^="two-pages, p. 2"]').first();
  assert.match(await link.getAttribute('title'), /^two-pages, p\. 2/);

  await link.click();
  await page.waitForSelector('mark#cited');
  const text = await page.locator('#doc-text').textContent();
  const marked = await page.locator('mark#cited').textContent();
  const separator = page.locator('#doc-text .page-break');
  assert.equal(await separator.count(), 1, 'one page boundary drawn');
  assert.equal(await separator.getAttribute('data-page'), '2');
  assert.equal(await separator.isVisible(), true);
  assert.equal(await separator.evaluate((e) => getComputedStyle(e, '::before').content), '"p. 2"');
  assert.ok(!text.includes('\f'), 'the form feed is not drawn');
  assert.ok(text.includes('The Gutenberg Bible was printed around 1455'), text);
  assert.ok(text.indexOf('Caxton') < text.indexOf('Gutenberg Bible'), 'page 1 comes first');
  assert.ok(marked.trim().length > 20 && text.includes(marked), `the cited passage is marked in the text: ${JSON.stringify(marked)}`);
  assert.ok(marked.includes('Gutenberg Bible'), `the marked passage holds page 2's text: ${JSON.stringify(marked)}`);
  assert.match(await page.locator('#view-meta').textContent(), /^2 pages, /);
  console.log(`  the PDF's cited passage marks: ${JSON.stringify(marked)}`);
  await page.locator('mark#cited').evaluate((e) => e.scrollIntoView({ block: 'center' }));
  await page.screenshot({ path: path.join(out, 'desktop-pdf-citation.png') });
  await page.locator('#answer-box').evaluate((e) => e.scrollIntoView());
  await page.screenshot({ path: path.join(out, 'desktop-pdf-answer.png') });
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-browser-'));
// A document of short sentences: sentence chunks (128 tokens, 16 of overlap) then share
// their last sentence with the next chunk.
const SUBJECTS = ['The miller', 'A sailor', 'The old bell', 'Our baker', 'The river', 'A lantern', 'The clockmaker', 'The ferry', 'A heron', 'The printer'];
const VERBS = ['woke at dawn', 'crossed the bridge', 'sang a short song', 'counted the coins', 'watched the tide', 'closed the shutters', 'lit the stove', 'mended a net', 'read a letter', 'fed the geese'];
const shortText = `${[0, 1, 2].map((p) => Array.from({ length: 12 }, (_, k) => p * 12 + k).map((i) => `${SUBJECTS[i % 10]} ${VERBS[(i * 3) % 10]} on day ${i + 1}.`).join(' ')).join('\n\n')}\n`;
const shortFile = path.join(tmp, 'short-sentences.txt');
fs.writeFileSync(shortFile, shortText);
// Long enough (about 500 chunks, seconds of embedding on a fast machine) to be cancelled
// while it is being added.
const longFile = path.join(tmp, 'long.md');
fs.writeFileSync(longFile, exampleText.repeat(48));
const profile = path.join(tmp, 'profile');
const host = await startFakeHost({ token: 'browser-test-token' });
let server = await serve();
console.log(`browser test against ${server.url}`);

// ---- run 1: WebGPU flags (SwiftShader): kernel checks and SmolLM2 parity in the page; the app's models on the CPU ----
let { context, page, problems } = await launch(profile, WEBGPU);
try {
  await timed('first visit: models downloaded, checked and loaded', () => ready(page, server.url));
  const backend = await page.locator('#backend').textContent();
  const adapter = await page.evaluate(async () => !!(navigator.gpu && (await navigator.gpu.requestAdapter())));
  assert.match(backend, /^CPU \(wasm simd128 \+ relaxed SIMD, [2-8] threads\) — /);
  // SwiftShader is the browser's fallback adapter: 'auto' keeps the models on the CPU.
  assert.match(backend, adapter ? /WebGPU on .* is a software adapter: the CPU runs the models faster$/ : /no WebGPU adapter \(the browser offers none\)$/);
  console.log(`  backend: ${backend} (WebGPU adapter in the page: ${adapter})`);
  assert.match(await page.locator('#models').textContent(), /SmolLM2-135M.*all-MiniLM-L6-v2/);
  assert.equal(await page.evaluate(() => crossOriginIsolated), true, 'COOP/COEP make the page cross-origin isolated');
  assert.ok(adapter, 'SwiftShader gives the page a WebGPU adapter under these flags');
  await timed('WebGPU: kernel checks and SmolLM2 parity in the page', () => webgpuInPage(page));
  await timed("WebGPU: the package with backend 'webgpu' loads its models there", () => packageOnWebgpu(page));
  await timed('threads: SmolLM2 generates with helper workers on shared memory', () => threadsInPage(page));

  // Add the example with the method the app offers by default (sentence chunks).
  const storedBefore = await (await page.waitForFunction(() => /^models /.test(document.querySelector('#storage').textContent) && document.querySelector('#storage').textContent)).jsonValue();
  await page.setInputFiles('#files', example);
  await timed('add printing-press.md (sentence chunks, embedded in wasm)', () =>
    page.waitForSelector('#doc-list li[data-id]', { timeout: 10 * MINUTES }),
  );
  assert.deepEqual(await docTitles(page), ['printing-press'], 'titled without the extension');
  assert.match(await page.locator('#doc-list li[data-id] .doc-meta').textContent(), /^10 chunks · sentence · added in \d+\.\d s$/);
  // Storage: the models (the model cache's files) and the library (IndexedDB), shown again after the add.
  const storage = await page.waitForFunction((before) => {
    const t = document.querySelector('#storage').textContent;
    const shape = /^models \d+\.\d MB · library \d+\.\d (kB|MB) · app \d+\.\d MB \(of \d+\.\d (GB|MB) this browser allows\) · (kept \(persistent\)|may be evicted)$/;
    return shape.test(t) && t !== before && t;
  }, storedBefore, { timeout: MINUTES });
  const models = Number(/models (\S+) MB/.exec(await storage.jsonValue())[1]);
  console.log(`  storage: ${storedBefore} → ${await storage.jsonValue()}`);
  assert.ok(models > 90 && models < 300, `the models' bytes (SmolLM2 Q4_1 and MiniLM): ${models} MB`);
  const libraryKb = (t) => Number(/library (\S+) kB/.exec(t)?.[1] ?? 1e6);
  assert.ok(libraryKb(await storage.jsonValue()) > libraryKb(storedBefore), 'the library grew with the document');

  await watchAnswer(page);
  await page.fill('#question', QUESTION);
  await timed('ask: answer streamed and cited', async () => {
    await page.click('#ask-button');
    // The long wait on a CPU (the prompt's prefill) says what it is.
    await page.locator('#answer-status', { hasText: /^Reading / }).waitFor({ timeout: MINUTES });
    // While the answerer reads, the passages it reads are listed, each with its sentence that shares most words with the question.
    assert.equal(await page.locator('#sources-h').textContent(), 'Reading these passages');
    const reading = await page.locator('#sources li .snippet').allTextContents();
    assert.ok(reading.length > 0 && reading.some((t) => t.includes('Caxton')), JSON.stringify(reading));
    await page.screenshot({ path: path.join(out, 'desktop-reading.png') });
    await page.waitForSelector('#answer-box[data-seconds]', { timeout: 10 * MINUTES });
  });
  assert.ok((await page.locator('#answer a.cite').count()) > 0, 'the answer links a citation');
  const answer = await page.locator('#answer').textContent();
  const box = page.locator('#answer-box');
  console.log(`  answer: ${JSON.stringify(answer)} (${await box.getAttribute('data-seconds')} s, first token ${await box.getAttribute('data-first-token')} s)`);
  // Before its first word the page said what it was doing, in order; the passages it said
  // it was reading are the ones listed under the answer.
  const seen = await answerSeen(page);
  const shownPassages = await page.locator('#sources li, #other-sources li').count();
  console.log(`  status lines: ${JSON.stringify(seen.status)}; a [n] linked while streaming: ${seen.liveLink}`);
  assert.deepEqual(seen.status.slice(0, 2), ['Searching the documents…', 'Searching the documents…']);
  assert.equal(seen.status[2], `Reading ${shownPassages} passage${shownPassages === 1 ? '' : 's'}…`, JSON.stringify(seen.status));
  assert.equal(seen.status[3], 'Writing…');
  // (The instructions are read ahead once the page is ready and when the question box takes
  // the focus: an ask reuses them.)
  assert.match(seen.status.at(-1), /^Answered in \d+\.\d s \(first words after \d+\.\d s(; \d+ prompt tokens were read already)?\)\.$/);
  await page.screenshot({ path: path.join(out, 'desktop-answer.png'), fullPage: true });

  // A citation link opens the document with the cited span marked.
  const link = page.locator('#answer a.cite').first();
  const cited = await link.textContent();
  await link.click();
  await page.waitForSelector('mark#cited');
  const marked = await page.locator('mark#cited').textContent();
  const shownText = await page.locator('#doc-text').textContent();
  assert.ok(marked.trim().length > 20, `marked: ${marked}`);
  assert.ok(shownText.includes(marked), 'the marked span is inside the document text');
  assert.ok(exampleText.includes(marked.trim()), 'and inside the file that was added');
  assert.equal(shownText, exampleText, 'the view draws the document text once');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'cited', 'focus moves to the cited span');
  console.log(`  ${cited} marks: ${JSON.stringify(marked.slice(0, 80))}…`);
  await page.screenshot({ path: path.join(out, 'desktop-citation.png'), fullPage: false });

  await page.setViewportSize({ width: 375, height: 812 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(out, 'phone-375-top.png') });
  await page.locator('#ask-h').evaluate((e) => e.scrollIntoView());
  await page.screenshot({ path: path.join(out, 'phone-375-answer.png') });
  await page.locator('mark#cited').evaluate((e) => e.scrollIntoView({ block: 'center' }));
  await page.screenshot({ path: path.join(out, 'phone-375-citation.png') });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no sideways scrolling at 375 px (${overflow} px too wide)`);
  await page.setViewportSize({ width: 1280, height: 900 });

  // Routing (#9): the search picker lists the collection; asked through the router, the
  // answer comes with its trace under it.
  assert.deepEqual(await page.locator('#route option').allTextContents(), ['every collection', 'auto: the router chooses', 'only default (1)']);
  await page.selectOption('#route', 'auto');
  await page.evaluate(() => delete document.querySelector('#answer-box').dataset.seconds);
  await timed('ask through the router: the trace under the answer', async () => {
    await page.click('#ask-button');
    await page.waitForSelector('#answer-box[data-seconds]', { timeout: 10 * MINUTES });
  });
  assert.equal(await page.locator('#trace').isVisible(), true);
  const trace = await page.locator('#trace-list li').allTextContents();
  assert.ok(trace.length >= 1 && trace[0].startsWith('default ('), JSON.stringify(trace));
  await page.locator('#trace').evaluate((e) => {
    e.open = true;
    e.scrollIntoView();
  });
  await page.screenshot({ path: path.join(out, 'desktop-route-trace.png'), fullPage: false });
  console.log(`  routing trace: ${JSON.stringify(trace)}`);
  await page.selectOption('#route', '');

  await timed('a batch of two: the first listed while the second is added; Cancel; reload', async () => {
    // What the list held the moment short-sentences was listed, seen by the page itself:
    // asked from here, the answer could come after long is done on a busy machine.
    await page.evaluate(() => {
      const list = document.querySelector('#doc-list');
      new MutationObserver((changes, observer) => {
        const listed = changes.some((c) => [...c.addedNodes].some((n) => n.dataset?.id && n.textContent.includes('short-sentences')));
        if (!listed) return;
        window.pendingWhenShortListed = list.querySelectorAll('li.pending').length;
        observer.disconnect();
      }).observe(list, { childList: true });
    });
    await page.setInputFiles('#files', [shortFile, longFile]);
    const short = page.locator('#doc-list li[data-id]', { hasText: 'short-sentences' });
    await short.waitFor({ timeout: 2 * MINUTES });
    assert.equal(await page.evaluate(() => window.pendingWhenShortListed), 1, 'short-sentences is listed while long is still being added');
    assert.match(await short.locator('.doc-meta').textContent(), /^3 chunks · sentence · added in \d+\.\d s$/);
    assert.deepEqual(await docTitles(page), ['printing-press', 'short-sentences']);
    // Cancel while the worker is adding long (its first progress report has come).
    await page.locator('#doc-list li.pending', { hasText: 'Indexing' }).waitFor({ timeout: MINUTES });
    await page.locator('#docs-h').evaluate((e) => e.scrollIntoView());
    await page.screenshot({ path: path.join(out, 'desktop-adding.png') });
    await page.click('#cancel-add');
    await page.waitForFunction(() => /^Cancelled/.test(document.querySelector('#add-status').textContent));
    assert.equal(await page.locator('#add-status').textContent(), 'Cancelled: long was not added; nothing of it is stored.');
    assert.equal(await page.locator('#doc-list li:not([data-id])').count(), 0, 'no row left for the cancelled file');
    assert.deepEqual(await docTitles(page), ['printing-press', 'short-sentences'], 'the cancelled file is not in the library');
    // The worker, ended by the cancel, starts again; the page says so, then that it is ready.
    await page.waitForFunction(() => document.querySelector('#model-label').textContent.startsWith('Models ready'), null, { timeout: 2 * MINUTES });
    assert.equal(await page.locator('#cancel-add').isVisible(), false);
    await page.screenshot({ path: path.join(out, 'desktop-cancelled.png') });
    await ready(page, server.url);
    assert.deepEqual(await docTitles(page), ['printing-press', 'short-sentences'], 'after a reload: the same library, nothing of long stored');
  });

  // The document view draws a text whose chunks overlap once.
  await page.locator('#doc-list .doc-open', { hasText: 'short-sentences' }).click();
  await page.waitForSelector('#doc-view:not([hidden])');
  const overlapping = await page.locator('#doc-text').textContent();
  assert.ok((await page.locator('#doc-text .chunk.shared').count()) >= 2, 'neighbouring chunks share sentences');
  assert.equal(overlapping, shortText, 'the view shows the document text, each sentence once');
  assert.equal(overlapping.split('The old bell lit the stove on day 13.').length, 2);
  await page.locator('#doc-text .chunk.shared').first().evaluate((e) => e.scrollIntoView({ block: 'center' }));
  await page.screenshot({ path: path.join(out, 'desktop-overlap.png') });

  await timed('remove and import ask first (dismissed: nothing changes; accepted: it happens)', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    const exported = path.join(tmp, 'library.docmem');
    await download.saveAs(exported);
    const removeShort = () => page.locator('#doc-list li[data-id]', { hasText: 'short-sentences' }).locator('button.icon').click();

    await removeShort();
    const asked = await dialogShown(page);
    assert.equal(asked.title, 'Remove short-sentences?');
    assert.match(asked.text, /^Its memory \(3 chunks\) is deleted from this library/);
    assert.equal(asked.focus, 'confirm-no', 'the safe choice has focus');
    await page.screenshot({ path: path.join(out, 'desktop-confirm.png') });
    await page.click('#confirm-no');
    await dialogClosed(page);
    await pause(500);
    assert.deepEqual(await docTitles(page), ['printing-press', 'short-sentences'], 'kept: nothing removed');
    await removeShort();
    await dialogShown(page);
    await page.click('#confirm-yes');
    await page.waitForFunction(() => document.querySelectorAll('#doc-list li[data-id]').length === 1);
    assert.deepEqual(await docTitles(page), ['printing-press'], 'removed');

    // Import the exported library (two documents) over this one (one).
    await page.setInputFiles('#import', exported);
    const replace = await dialogShown(page);
    assert.equal(replace.title, 'Replace this library?');
    assert.match(replace.text, /^Importing library\.docmem replaces this library: its document \(printing-press\) is removed/);
    await page.setViewportSize({ width: 375, height: 812 });
    await page.screenshot({ path: path.join(out, 'phone-375-confirm.png') });
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.keyboard.press('Escape');
    await dialogClosed(page);
    await pause(500);
    assert.deepEqual(await docTitles(page), ['printing-press'], 'dismissed with Escape: the library is as it was');
    await page.setInputFiles('#import', exported);
    await dialogShown(page);
    await page.click('#confirm-yes');
    await page.waitForFunction(() => document.querySelectorAll('#doc-list li[data-id]').length === 2);
    assert.deepEqual(await docTitles(page), ['printing-press', 'short-sentences'], 'replaced by the imported library');

    await removeShort();
    await dialogShown(page);
    await page.click('#confirm-yes');
    await page.waitForFunction(() => document.querySelectorAll('#doc-list li[data-id]').length === 1);
  });
  assert.deepEqual(await docTitles(page), ['printing-press']);

  await timed('hosted models: settings applied, a streamed answer from the fake host, turned off', () => hostedInPage(page, host));

  // Reload: the library is still there, the models come from the browser's cache.
  await timed('reload: models from the Cache API, library from IndexedDB', () => ready(page, server.url));
  assert.deepEqual(await docTitles(page), ['printing-press']);
  assert.match(await page.locator('#model-label').textContent(), /cache/);
  assert.deepEqual(problems, []);
} finally {
  await context.close();
}

// ---- offline: the server is gone; the app, engine, models and library are all local ----
server.stop();
({ context, page, problems } = await launch(profile, WEBGPU));
try {
  await timed('offline visit (server stopped)', () => ready(page, new URL('/', server.url).href));
  assert.deepEqual(await docTitles(page), ['printing-press']);
} finally {
  await context.close();
}

// ---- run 2: WebGPU off: the CPU fallback says why ----
server = await serve();
({ context, page, problems } = await launch(path.join(tmp, 'profile-cpu'), NO_WEBGPU));
try {
  await timed('visit without WebGPU (fresh profile: models downloaded again)', () => ready(page, server.url));
  const backend = await page.locator('#backend').textContent();
  assert.match(backend, /^CPU \(wasm simd128 \+ relaxed SIMD, [2-8] threads\) — no WebGPU adapter \(the browser offers none\)$/);
  console.log(`  backend: ${backend}`);
  assert.deepEqual(problems, []);

  // A full storage quota: Chromium is told (DevTools protocol) that the origin may hold
  // only what it holds now; adding a document must fail with QUOTA_EXCEEDED and leave the
  // library as it was (the worker reopens it from storage), and the same add must work,
  // without a reload, once the quota is back.
  const origin = new URL(server.url).origin;
  const cdp = await context.newCDPSession(page);
  const { usage } = await page.evaluate(() => navigator.storage.estimate());
  await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: usage });
  await page.setInputFiles('#files', example);
  const failed = page.locator('#doc-list li.failed');
  await failed.waitFor({ timeout: 10 * MINUTES });
  assert.equal(await failed.getAttribute('data-code'), 'QUOTA_EXCEEDED', await failed.textContent());
  console.log(`  full quota: ${await failed.locator('.muted').textContent()}`);
  await page.screenshot({ path: path.join(out, 'quota-exceeded.png') });
  assert.deepEqual(await docTitles(page), [], 'nothing half-written after the refused add');
  await cdp.send('Storage.overrideQuotaForOrigin', { origin });
  await page.setInputFiles('#files', example);
  await page.waitForSelector('#doc-list li[data-id]', { timeout: 10 * MINUTES });
  assert.deepEqual(await docTitles(page), ['printing-press']);
  const meta = await page.waitForFunction(() => {
    const t = document.querySelector('#doc-list li[data-id] .doc-meta')?.textContent || '';
    return /added in|already in the library/.test(t) && t;
  });
  assert.match(await meta.jsonValue(), /added in/, 'written now, not found in the library in memory');
  await ready(page, server.url);
  assert.deepEqual(await docTitles(page), ['printing-press']);

  await timed('a PDF: a scan refused; two pages added, a passage cited with its page', () => pdfInPage(page));

  // Served without COOP/COEP (as a host that sets neither would): no shared memory, so
  // one thread, and the page says why.
  await timed('visit without cross-origin isolation: one thread', () => ready(page, `${server.url}?isolated=0`));
  assert.equal(await page.evaluate(() => crossOriginIsolated), false);
  const single = await page.locator('#backend').textContent();
  assert.equal(
    single,
    'CPU (wasm simd128, 1 thread) — no WebGPU adapter (the browser offers none); one thread: the page is not cross-origin isolated (it needs the COOP and COEP headers), so wasm cannot share memory between threads',
  );
  console.log(`  backend: ${single}`);
  assert.deepEqual(await docTitles(page), ['printing-press', 'two-pages']);
} finally {
  await context.close();
  server.stop();
}

await host.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`browser test: ok (${Object.entries(times).map(([k, v]) => `${k} ${v} s`).join('; ')})`);
