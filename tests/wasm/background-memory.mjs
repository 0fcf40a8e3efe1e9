// Background memories through the npm package in Node (worker thread, CPU backend, SmolLM2
// as the reader): a document added with sentence chunks is searchable at once; writeMemory
// has the reader write its MoM memory window by window and swap it in; a question asked
// meanwhile is answered first (the window being read gives way, and goes on afterwards); a
// cancelled memory leaves the chunks; a paused one waits; a memory stopped by a close goes
// on from its next window after a reopen; the swapped memory persists; an answer read
// ahead while its question is typed runs only the question.
//
//   node tests/wasm/background-memory.mjs MODELS_DIR EXAMPLE.md
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DocMem } from '../../js/node/docmem.js';

const [modelsDir, examplePath] = process.argv.slice(2);
const t0 = performance.now();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-background-'));
const fileSpec = (file, name = path.basename(file)) => ({
  path: name,
  url: pathToFileURL(file).href,
  size: fs.statSync(file).size,
  sha256: createHash('sha256').update(fs.readFileSync(file)).digest('hex'),
});
const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
const embedderFiles = ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']
  .filter((f) => fs.existsSync(path.join(minilm, f)))
  .map((f) => fileSpec(path.join(minilm, f), f));
const reader = { name: 'SmolLM2-135M-Instruct.Q4_1.gguf', files: [fileSpec(path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf'), 'model.gguf')] };
const options = { models: { embedder: { name: 'all-MiniLM-L6-v2', files: embedderFiles }, reader }, storageDir: path.join(tmp, 'library'), modelCacheDir: path.join(tmp, 'models'), threads: 2 };
let dm = await DocMem.open('background', options);

// Searchable at once, with sentence chunks. (A short text: SmolLM2 prefills about 20
// tokens a second in wasm on two cores, and the memory's window is read twice here.)
const example = fs.readFileSync(examplePath, 'utf8');
const caxton = example.split(/\n\s*\n/).find((p) => p.includes('Caxton'));
assert.ok(caxton && caxton.length < 1500, 'the example has a paragraph about Caxton');
const added = await dm.addDocument(`# Printing in England\n\n${caxton}\n`, { title: 'printing-press', method: 'sentence' });
let [doc] = await dm.documents();
assert.deepEqual([doc.reader, doc.memoryVersion], ['sentence', 0]);

// The memory in the background; a question asked after its first window started.
const events = [];
let answeredAt = null;
let asked = null;
// SmolLM2 reads a long window slowly in wasm (about 3 tokens/s past 1,000 tokens of
// context): each window's reply is capped here, which the product does not do.
const cap = 40;
const memory = dm.writeMemory(added.id, {
  maxNewTokens: cap,
  onProgress: (p) => {
    events.push(p);
    if (!asked) {
      asked = dm.ask('Who brought printing to England?', { k: 2, maxTokens: 12 }).then((a) => {
        answeredAt = performance.now();
        return a;
      });
    }
  },
});
const written = await memory;
const writtenAt = performance.now();
const answer = await asked;
assert.ok(answer.sources.some((s) => s.text.includes('Caxton')), 'the question was answered from the chunks');
assert.ok(answeredAt < writtenAt, 'the question did not wait for the whole memory');
assert.ok(written.gaveWay >= 1, `the window being read gave way to the question: ${JSON.stringify(written)}`);
assert.ok(events.length > 0 && events.every((p) => p.stage === 'memory' && p.windows >= 1 && p.tokensTotal > 0), JSON.stringify(events.slice(0, 3)));
assert.ok(events.some((p) => p.seconds > 0));
// Within a window: its prompt read piece by piece, then the tokens written.
const within = events.filter((p) => p.windowPrompt > 0);
assert.ok(within.some((p) => p.windowRead < p.windowPrompt && p.windowWritten === 0), 'the prompt being read is reported');
assert.ok(within.some((p) => p.windowRead === p.windowPrompt && p.windowWritten > 0), 'the tokens being written are reported');
// The window being read is numbered from 1, and the share done moves within it (before,
// it stood still until a window ended) and never goes back.
assert.ok(within.every((p) => p.window >= 1 && p.window <= p.windows), `windows numbered from 1: ${JSON.stringify(within[0])}`);
assert.ok(within.some((p) => p.candidatesDone === 0 && p.fraction > 0), 'the first window moves the share done');
assert.ok(events.every((p, i) => i === 0 || p.fraction >= events[i - 1].fraction), 'the share done never goes back');
assert.equal(written.replaced, true, JSON.stringify(written));
assert.equal(written.id, added.id);
assert.match(written.reader, /SmolLM2/);
[doc] = await dm.documents();
assert.equal(doc.memoryVersion, 1, 'the reader memory replaced the chunks');
assert.match(doc.reader, /SmolLM2/);
assert.equal(doc.chunks, written.chunks);
// SmolLM2 may not write a usable memory: then the memory says it fell back, per window.
if (written.fallback) console.log(`SmolLM2's memory fell back: ${written.fallback.slice(0, 160)}`);
const m = await dm.memory(added.id);
assert.equal(m.scenarios.length, written.chunks);
assert.equal(m.text, (await dm.memory(added.id)).text);

// A cancelled memory leaves the chunks; a paused one waits until it goes on.
const second = await dm.addDocument('The bell of Saint Paul rang at noon and again at dusk. In 1666 the great fire melted it. A new bell was cast in 1716.', { title: 'bells', method: 'sentence' });
const controller = new AbortController();
const cancelled = dm.writeMemory(second.id, { maxNewTokens: cap, signal: controller.signal, onProgress: () => controller.abort() });
await assert.rejects(cancelled, { code: 'ABORTED' });
let bells = (await dm.documents()).find((d) => d.id === second.id);
assert.deepEqual([bells.reader, bells.memoryVersion], ['sentence', 0], 'a cancelled memory changes nothing');
dm.pauseMemories(true);
let progressed = 0;
const held = dm.writeMemory(second.id, { maxNewTokens: cap, onProgress: () => (progressed += 1) });
await new Promise((r) => setTimeout(r, 1500));
assert.equal(progressed, 0, 'no window is read while paused');
assert.equal((await dm.documents()).length, 2, 'requests are served while paused');
dm.pauseMemories(false);
const bellsWritten = await held;
assert.equal(bellsWritten.replaced, true);
assert.ok(progressed > 0);

// A removed document's memory is not brought back.
const third = await dm.addDocument('Clocks strike the hours. A clock of 1386 still runs in Salisbury.', { title: 'clocks', method: 'sentence' });
const gone = dm.writeMemory(third.id, { maxNewTokens: cap, onProgress: () => {} });
await dm.removeDocument(third.id);
const goneResult = await gone.catch((e) => e);
assert.ok(goneResult.code === 'NOT_FOUND' || goneResult.replaced === false, JSON.stringify(goneResult));

// A memory stopped after its first window (the DocMem closed, as a tab is) goes on from
// its second after a reopen: each window read is stored with the library. Windows of at
// most 40 document tokens make three of this text.
const tower = await dm.addDocument(
  'The tower of the town hall was built in 1310 of grey stone. It stood for four centuries above the market square. ' +
    'A storm in 1703 threw down its spire, and the bell fell into the square. The town rebuilt the spire in brick in 1712. ' +
    'Its new clock was the first in the county to strike the quarter hours.',
  { title: 'tower', method: 'sentence' },
);
const windowed = { maxNewTokens: cap, maxWindowTokens: 40 };
// The second window being read: the first is stored (the worker stores a window's draft
// before it goes on).
let secondWindowStarted = null;
const stopped = dm.writeMemory(tower.id, { ...windowed, onProgress: (p) => p.window >= 2 && p.windowPrompt > 0 && secondWindowStarted?.(p) });
const afterFirst = await new Promise((resolve) => (secondWindowStarted = resolve));
assert.ok(afterFirst.windows >= 3, `windows: ${JSON.stringify(afterFirst)}`);
dm.close();
await assert.rejects(stopped, { code: 'CLOSED' });

// Stored: reopened, the reader memories are there.
dm = await DocMem.open('background', options);
const reopened = await dm.documents();
assert.deepEqual(reopened.map((d) => [d.title, d.memoryVersion]), [['printing-press', 1], ['bells', 1], ['tower', 0]]);
const resumedEvents = [];
const resumed = await dm.writeMemory(tower.id, { ...windowed, onProgress: (p) => resumedEvents.push(p) });
assert.equal(resumed.replaced, true, JSON.stringify(resumed));
const windowsRead = new Set(resumedEvents.filter((p) => p.windowPrompt > 0).map((p) => p.window));
assert.ok(!windowsRead.has(1) && windowsRead.has(2), `the first window is not read again: read ${[...windowsRead]}`);
assert.ok(resumedEvents[0].fraction > 0, `the share done starts where it stopped: ${JSON.stringify(resumedEvents[0])}`);
assert.equal((await dm.documents()).find((d) => d.id === tower.id).memoryVersion, 1);
console.log(`  a memory stopped after window 1 of ${afterFirst.windows} went on from window ${Math.min(...windowsRead)} after a reopen`);

// Reading ahead while a question is typed: the latest read-ahead replaces the one before,
// and the ask then runs only its question, reusing every token that was read ahead.
const question = 'Who brought printing to England?';
const partial = dm.readAhead('Who brought', { k: 2 });
const ahead = await dm.readAhead(question, { k: 2 });
assert.equal((await partial).superseded, true, 'the newer read-ahead replaced the older');
assert.ok(ahead.kept > 50 && !ahead.superseded, JSON.stringify(ahead));
const answered = await dm.ask(question, { k: 2, maxTokens: 12 });
assert.equal(answered.reusedTokens, ahead.kept, 'the ask reused what was read ahead');
assert.ok(answered.promptTokens > answered.reusedTokens, `${answered.promptTokens} prompt tokens, ${answered.reusedTokens} reused`);
dm.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`background memories: ok (${events.length} progress reports, memory ${written.seconds.toFixed(1)} s, ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
