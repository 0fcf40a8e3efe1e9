// Hosted models through the npm package in Node (OpenOptions.remote), against the fake
// OpenAI-compatible host of tests/fake-host.mjs: options checked before anything is sent;
// a library whose reader, answerer and embedder are all hosted (no model manifest): MoM
// ingest sends the document to the reader with the bearer token, the library is made with
// the hosted embedder's width, a memory the reader writes is stored as written (its
// outline, cores and exact chunks: not a fallback), an answer streams token by token and cites, clues work with
// a hosted answerer; a cancel mid-stream, and one while the host is silent, close the
// connection the host sees; a wrong token is REMOTE_FAILED naming 401 unauthorized, for
// the embedder (connecting, and embedding later), the answerer and the reader; a local embedder with hosted models sends
// nothing while it indexes. The scorer is not exercised (samples: 0 needs none; the fake
// host has no `echo` log-probabilities).
//
//   node tests/wasm/remote.mjs MODELS_DIR   (after scripts/wasm-test.sh bound the web package)
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DocMem } from '../../js/node/docmem.js';
import { retries } from '../../js/remote.js';
import { ANSWER, MEMORY_CORES, MEMORY_DOC, MEMORY_OUTLINE, startFakeHost } from '../fake-host.mjs';

const [modelsDir] = process.argv.slice(2);
const t0 = performance.now();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-remote-'));
const TOKEN = 'test-token-7f3a';
const host = await startFakeHost({ token: TOKEN });
const hostName = new URL(host.url).host;

/** Wait until `f()` is true (the host sees a close a moment after the client aborts). */
async function eventually(f, what) {
  for (let i = 0; i < 100 && !f(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(f(), what);
}

/** A host's refusal of the token, as the package reports it. */
const refused = (e) => e.code === 'REMOTE_FAILED' && /401/.test(e.message) && /unauthorized/.test(e.message);
const options = { storageDir: path.join(tmp, 'hosted'), modelCacheDir: path.join(tmp, 'models') };
const remote = { url: `${host.url}/v1/`, token: TOKEN, reader: 'memreader-7b', answerer: 'qwen2.5-7b-instruct', embedder: 'hash-16' };

// ---- options are checked before anything starts or is sent ----
for (const [bad, message] of [
  [{ ...remote, url: 'ftp://example.com' }, /^remote\.url: .*not an http/],
  [{ ...remote, url: undefined }, /^remote\.url: /],
  [{ ...remote, url: 'https://user:pw@example.com' }, /^remote\.url: put the token in remote\.token/],
  [{ ...remote, reader: ' ' }, /^remote\.reader: /],
  [{ ...remote, answerer: 7 }, /^remote\.answerer: /],
  [{ ...remote, token: 5 }, /^remote\.token: /],
  [{ ...remote, context: 1.5 }, /^remote\.context: /],
  [{ url: host.url, token: TOKEN, scorer: 'judge' }, /^remote\.scorer: .*name remote\.reader too/],
  [{ ...remote, answer: 'x' }, /^remote\.answer is not an option/],
  [{ url: host.url, token: TOKEN }, /^remote: names no hosted model/],
  ['https://example.com', /^remote: an object/],
]) {
  await assert.rejects(DocMem.open('bad', { ...options, remote: bad }), { code: 'BAD_ARGUMENT', message });
}
// A local role still needs its model.
await assert.rejects(DocMem.open('bad', { ...options, remote: { url: host.url, answerer: 'a' } }), { code: 'MODEL_FETCH_FAILED', message: /no models given/ });
await assert.rejects(DocMem.open('bad', { ...options, models: {}, remote: { url: host.url, answerer: 'a' } }), { code: 'MODEL_FETCH_FAILED', message: /no embedder/ });
assert.equal(host.requests.length, 0, 'nothing was sent');

// ---- every model role hosted: no manifest, nothing downloaded ----
let dm = await DocMem.open('hosted', { ...options, remote });
assert.deepEqual(dm.remote, { host: hostName, roles: { reader: 'remote:memreader-7b', answerer: 'remote:qwen2.5-7b-instruct', embedder: 'remote:hash-16' } });
assert.equal(dm.backend.embedder, 'hosted');
assert.deepEqual([dm.models.reader, dm.models.answerer, dm.models.embedder], ['remote:memreader-7b', 'remote:qwen2.5-7b-instruct', 'remote:hash-16']);
assert.equal(host.to('/v1/embeddings').length, 1, 'the embedder asked for one vector, to learn the width');
assert.equal(dm.backend.threadsNote, 'every model is hosted, none runs here');

// MoM ingest: the document goes to the hosted reader (a whole reply), its chunks to the
// hosted embedder; every request carries the bearer token.
const BELLS = 'The bell of Saint Paul rang at noon and again at dusk. In 1666 the great fire melted it. William Caxton brought printing to England in 1476, and printed Chaucer.';
const stages = new Set();
const added = await dm.addDocument(BELLS, { title: 'bells.txt', method: 'mom', samples: 0, onProgress: (p) => stages.add(p.stage) });
assert.equal(added.added, true);
assert.ok(added.chunks > 0, JSON.stringify(added));
assert.ok(added.fallback, `the fake reply is no memory, so sentence chunks: ${JSON.stringify(added)}`);
assert.ok(stages.has('reading') && stages.has('indexing'), [...stages].join());
const reads = host.to('/v1/chat/completions').filter((r) => r.body.model === 'memreader-7b');
assert.ok(reads.length >= 1 && reads.every((r) => r.body.stream === true), 'the reader streams too (no proxy cuts a long reply)');
assert.ok(reads.some((r) => r.body.messages.some((m) => m.content.includes('the great fire melted it'))), 'the reader was sent the document');
assert.ok(host.to('/v1/embeddings').some((r) => r.body.input.some((t) => t.includes('great fire'))), 'the embedder was sent its chunks');
assert.ok(host.requests.every((r) => r.auth === `Bearer ${TOKEN}`), 'every request carries the bearer token');
// A hosted reader that writes a real memory: it is stored as written, not as a fallback.
const written = await dm.addDocument(MEMORY_DOC, { title: 'westminster.txt', method: 'mom', samples: 0 });
assert.equal(written.fallback, null, `the reader's memory is kept: ${JSON.stringify(written)}`);
const memory = await dm.memory(written.id);
assert.deepEqual(memory.outline, MEMORY_OUTLINE);
assert.deepEqual(memory.scenarios.map((s) => s.core), MEMORY_CORES);
assert.deepEqual(
  memory.scenarios.map((s) => memory.text.slice(s.span.start, s.span.end).trim()),
  [MEMORY_DOC.slice(0, MEMORY_DOC.indexOf(' Wynkyn')), MEMORY_DOC.slice(MEMORY_DOC.indexOf('Wynkyn'))],
  'each chunk is the exact span the reader named',
);
assert.deepEqual(memory.scenarios.map((s) => s.outlineItem), [0, 1]);
await dm.removeDocument(written.id);
const [doc] = await dm.documents();
assert.equal(doc.title, 'bells.txt');
// The library is made with the hosted embedder: its name and the width it reported.
const manifest = JSON.parse(fs.readFileSync(path.join(options.storageDir, 'manifest.json'), 'utf8'));
assert.deepEqual([manifest.embedder, manifest.dim], ['remote:hash-16', 16]);

// A streamed answer: the tokens handed to onToken are the answer, which cites.
let streamed = '';
let pieces = 0;
const answer = await dm.ask('Who brought printing to England?', {
  k: 2,
  maxTokens: 64,
  onToken: (t) => {
    streamed += t;
    pieces += 1;
  },
});
assert.ok(pieces > 3, `streamed in pieces (${pieces})`);
assert.equal(streamed, answer.answer);
assert.equal(answer.answer.trim(), ANSWER);
assert.ok(answer.citations.length > 0 && answer.citations.every((c) => c.document.title === 'bells.txt'), JSON.stringify(answer.citations));
assert.ok(answer.citations.some((c) => c.text.includes('Caxton')));
const asked = host.to('/v1/chat/completions').at(-1);
assert.equal(asked.body.model, 'qwen2.5-7b-instruct');
assert.equal(asked.body.stream, true);
const prompt = asked.body.messages.map((m) => m.content).join('\n');
assert.ok(prompt.includes('Who brought printing to England?') && prompt.includes('Caxton'), 'the answerer was sent the question and the passages');

// Clues with the hosted answerer: it writes the library's overview and the clues.
const before = host.requests.length;
const clued = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 32, clues: 'on' });
assert.deepEqual(clued.clues.queries[0], { kind: 'question', text: 'Who brought printing to England?' });
assert.ok(host.requests.slice(before).filter((r) => r.path === '/v1/chat/completions').length >= 2, 'clues were written by the hosted answerer');

// A rate limit is waited out after its Retry-After, not a failure.
host.rateLimited = 2;
let t = performance.now();
const limited = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 32 });
assert.equal(limited.answer.trim(), ANSWER);
assert.ok(performance.now() - t >= 1900, 'two 429s, each waited out for its Retry-After of 1 s');

// A dropped connection and a 502 (the worker could not reach its upstream) are tried again.
host.failing = ['drop', 502];
t = performance.now();
const retried = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 32 });
assert.equal(retried.answer.trim(), ANSWER);
assert.equal(host.failing.length, 0);
assert.ok(performance.now() - t >= 1400, 'half a second after the dropped connection, a second after the 502');
// Three in a row are reported.
host.failing = [502, 502, 502];
await assert.rejects(dm.ask('Who brought printing to England?', { k: 2, maxTokens: 32 }), (e) => e.code === 'REMOTE_FAILED' && /502/.test(e.message));
// The hosted embedder's synchronous requests (the package's worker thread waits on a helper
// thread) are tried again the same way.
host.failingEmbeddings = ['drop', 502];
t = performance.now();
const embeddedAgain = await dm.ask('Who brought printing to England?', { k: 2, maxTokens: 32 });
assert.equal(embeddedAgain.answer.trim(), ANSWER);
assert.equal(host.failingEmbeddings.length, 0, 'the embedding requests met both failures');
assert.ok(performance.now() - t >= 1400, 'half a second after the dropped connection, a second after the 502');
// The rules, case by case, as crates/runtime/src/remote/retry.rs's tests state them.
{
  const waits = (outcomes) => {
    const r = retries();
    return outcomes.map(([status, after]) => r.next(status, after ?? null));
  };
  assert.deepEqual(waits([[429, '3']]), [3000]);
  assert.deepEqual(waits([[429, '0']]), [1000]);
  assert.deepEqual(waits([[429, '3600']]), [30000]);
  assert.deepEqual(waits([[429, '99999999999999999999999']]), [30000]);
  for (const odd of ['Wed, 21 Oct 2026 07:28:00 GMT', '+5', '-1', '1.5', '']) assert.deepEqual(waits([[429, odd]]), [1000], odd);
  assert.deepEqual(waits(Array(5).fill([429])), [1000, 1000, 1000, 1000, null]);
  for (const s of [502, 503, null]) assert.deepEqual(waits(Array(3).fill([s])), [500, 1000, null], String(s));
  assert.deepEqual(waits([[503, '2']]), [2000]);
  assert.deepEqual(waits([[502, 'soon']]), [500]);
  assert.deepEqual(waits([[429], [429], [null], [502], [null]]), [1000, 1000, 500, 1000, null]);
  for (const s of [200, 400, 401, 403, 404, 408, 413, 500, 504]) assert.deepEqual(waits([[s, '1']]), [null], String(s));
}

// ---- cancels reach the host: its connection closes ----
let controller = new AbortController();
t = performance.now();
await assert.rejects(
  dm.ask('Tell me SLOWLY about the bells', { k: 1, signal: controller.signal, onToken: () => controller.abort() }),
  { code: 'ABORTED' },
);
const slow = host.to('/v1/chat/completions').at(-1);
assert.ok(JSON.stringify(slow.body).includes('SLOWLY'));
await eventually(() => slow.closedEarly, 'the host saw the streamed answer\u2019s connection close');
const cancelMs = performance.now() - t;
assert.ok(cancelMs < 5000, `cancelled within 5 s of the first token (${cancelMs.toFixed(0)} ms), not after the 20 s stream`);
// While the host is silent (no token yet, a whole reply pending): the cancel aborts the fetch.
for (const [what, run] of [
  ['an answer', (signal) => dm.ask('STALL: who rang the bell?', { k: 1, signal })],
  ['a MoM ingest', (signal) => dm.addDocument('STALL. The clock struck one.', { title: 'clock.txt', method: 'mom', samples: 0, signal })],
]) {
  controller = new AbortController();
  const n = host.requests.length;
  const pending = run(controller.signal);
  const stalled = () => host.requests.slice(n).find((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes('STALL'));
  await eventually(stalled, `${what} reached the host`);
  t = performance.now();
  controller.abort();
  await assert.rejects(pending, { code: 'ABORTED' });
  await eventually(() => stalled().closedEarly, `the host saw ${what}\u2019s connection close`);
  assert.ok(performance.now() - t < 5000, `${what} cancelled at once`);
}
assert.deepEqual((await dm.documents()).map((d) => d.title), ['bells.txt'], 'the cancelled ingest left the library as it was');
// A token revoked while the library is open: the hosted embedder is refused as it embeds the question.
host.token = 'revoked';
await assert.rejects(dm.ask('Who rang the bell?', { k: 1 }), refused, 'the embedder, embedding a question');
host.token = TOKEN;
dm.close();

// ---- the library keeps its embedder: another width does not open it; the same one does ----
await assert.rejects(DocMem.open('hosted', { ...options, remote: { ...remote, embedder: 'hash-8' } }), { code: 'BAD_LIBRARY', message: /16 dimensions/ });
dm = await DocMem.open('hosted', { ...options, remote });
assert.deepEqual((await dm.documents()).map((d) => d.title), ['bells.txt'], 'the library persisted');
dm.close();

// ---- a wrong token: REMOTE_FAILED with the host's status and code ----
await assert.rejects(DocMem.open('hosted', { ...options, remote: { ...remote, token: 'wrong' } }), refused, 'the embedder\u2019s probe');
// A local embedder (from file: URLs) with a hosted reader and answerer: indexing sends nothing.
const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
const sha256 = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const embedderFiles = ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']
  .filter((f) => fs.existsSync(path.join(minilm, f)))
  .map((f) => ({ path: f, url: pathToFileURL(path.join(minilm, f)).href, size: fs.statSync(path.join(minilm, f)).size, sha256: sha256(path.join(minilm, f)) }));
dm = await DocMem.open('local-embedder', {
  storageDir: path.join(tmp, 'local-embedder'),
  modelCacheDir: options.modelCacheDir,
  models: { embedder: { name: 'all-MiniLM-L6-v2', files: embedderFiles } },
  remote: { url: host.url, token: 'wrong', reader: 'memreader-7b', answerer: 'qwen2.5-7b-instruct' },
});
assert.equal(dm.models.embedder, 'all-MiniLM-L6-v2');
assert.deepEqual(Object.keys(dm.remote.roles), ['reader', 'answerer']);
const sent = host.requests.length;
await dm.addDocument(BELLS, { title: 'bells.txt', method: 'sentence' });
assert.equal(host.requests.length, sent, 'a chunker and a local embedder send nothing');
await assert.rejects(dm.ask('Who brought printing to England?', { k: 1 }), refused, 'the answerer');
await assert.rejects(dm.addDocument('The clock struck one.', { title: 'clock.txt', method: 'mom', samples: 0 }), refused, 'the reader');
dm.close();

await host.close();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(
  `npm package with hosted models: options checked, MoM ingest and a cited streamed answer with reader, answerer and embedder hosted, clues, ` +
    `cancel mid-stream (${cancelMs.toFixed(0)} ms) and while the host is silent, the library's embedder width, 401 → REMOTE_FAILED, two 429s waited out, a dropped connection and a 502 tried again: ok (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
);
