// End to end through the edge worker to a real upstream: llama.cpp's llama-server (built
// from the PyPI sdist by scripts/llamacpp/build.sh --server) serving SmolLM2-135M, the
// worker (worker/dist) in Miniflare in front of it, and docmem using the worker as its
// reader and answerer: the CLI (`remote:NAME` with --remote) and the npm package
// (`DocMem.open(..., { remote })`). A short document is ingested by the hosted reader and a
// question answered by the hosted answerer; the worker's logs show the requests and hold
// none of the document's text.
//
//   node tests/worker/e2e.mjs LLAMA_SERVER DOCMEM_BIN MODELS_DIR   (scripts/worker-test.sh runs it)
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startWorkers } from '../../worker/testing/harness.mjs';
import { DocMem } from '../../js/node/docmem.js';

const [llamaServer, docmemBin, modelsDir] = process.argv.slice(2);
const t0 = performance.now();
const seconds = () => ((performance.now() - t0) / 1000).toFixed(1);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-e2e-'));
const gguf = path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf');
const MODEL = 'smollm2';
// A marker no log line may hold: it is in the document and in the question.
const MARKER = 'Quillfeather';
const document = `# The ${MARKER} press

The ${MARKER} press was a printing press built in Mainz in 1452. It printed indulgences and
a calendar before it printed books.

William Caxton brought printing to England in 1476, when he set up a press at Westminster.
His first dated book printed in England was The Dictes or Sayings of the Philosophers.
`;
const docPath = path.join(tmp, 'quillfeather.md');
fs.writeFileSync(docPath, document);

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

// llama-server, as a deployment would run it (the API only; one slot).
const port = await freePort();
const upstream = `http://127.0.0.1:${port}`;
const server = spawn(llamaServer, ['-m', gguf, '--alias', MODEL, '--host', '127.0.0.1', '--port', String(port), '-c', '4096', '-np', '1', '-t', '2'], {
  stdio: ['ignore', 'ignore', 'pipe'],
});
let serverLog = '';
server.stderr.on('data', (d) => (serverLog += d));
const stopServer = () => server.exitCode === null && server.kill('SIGTERM');
process.on('exit', stopServer);
for (let i = 0; ; i++) {
  const ok = await fetch(`${upstream}/health`).then((r) => r.ok, () => false);
  if (ok) break;
  if (i > 600 || server.exitCode !== null) throw new Error(`llama-server did not start:\n${serverLog.slice(-2000)}`);
  await new Promise((r) => setTimeout(r, 100));
}
console.log(`llama-server ready (${seconds()} s)`);

const token = randomBytes(16).toString('hex');
const workers = await startWorkers({
  e2e: { UPSTREAM_URL: upstream, CLIENT_TOKENS: `e2e=${token}`, ALLOWED_MODELS: MODEL, RATE_LIMIT_PER_MINUTE: '1000' },
});
const workerUrl = workers.urls.e2e.href.replace(/\/$/, '');
try {
  // The CLI: the hosted reader writes the memory, the hosted answerer answers.
  const lib = path.join(tmp, 'cli-library');
  const env = { ...process.env, DOCMEM_REMOTE_TOKEN: token };
  const cli = (args) => spawnSync(docmemBin, args, { env, encoding: 'utf8', timeout: 300_000 });
  // A failed command's message, with the ends of llama-server's log and workerd's output
  // (read a second later: workerd's pipes lag behind).
  const failure = async (what, r) => {
    if (r.status === 0) return '';
    await new Promise((resolve) => setTimeout(resolve, 1000));
    return `${what} failed: ${r.stderr}\nllama-server's log ends:\n${serverLog.slice(-3000)}\nworkerd's output ends:\n${workers.output().slice(-3000)}`;
  };
  let r = cli(['ingest', '--library', lib, '--reader', `remote:${MODEL}`, '--remote', workerUrl, '--samples', '0', '--max-new-tokens', '256', '--embedder', 'hashing', '--json', docPath]);
  assert.equal(r.status, 0, await failure('ingest', r));
  assert.match(r.stderr, /the reader is the hosted model 'smollm2' at .*leave this device/);
  const ingested = JSON.parse(r.stdout);
  assert.equal(ingested.added, true);
  assert.ok(ingested.scenarios > 0, 'the memory has chunks');
  console.log(`CLI ingest through the worker: ${ingested.scenarios} chunks${ingested.fallback ? ` (fallback: ${ingested.fallback})` : ''} (${seconds()} s)`);

  r = cli(['ask', 'Who brought printing to England?', '--library', lib, '--answerer', `remote:${MODEL}`, '--remote', workerUrl, '--embedder', 'hashing', '--max-tokens', '48', '--json']);
  assert.equal(r.status, 0, await failure('ask', r));
  const answer = JSON.parse(r.stdout);
  assert.ok(answer.answer.trim().length > 0, 'an answer came back');
  assert.ok(answer.sources.length > 0, 'it was given passages');
  assert.ok(['end_of_text', 'length'].includes(answer.finish), answer.finish);
  console.log(`CLI answer through the worker: ${JSON.stringify(answer.answer.slice(0, 80))} (${seconds()} s)`);

  // A wrong token is refused by the worker, and the CLI says so.
  r = spawnSync(docmemBin, ['ask', 'Who?', '--library', lib, '--answerer', `remote:${MODEL}`, '--remote', workerUrl, '--embedder', 'hashing'], {
    env: { ...process.env, DOCMEM_REMOTE_TOKEN: 'wrong' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /401 unauthorized/);

  // The npm package (wasm in a worker thread) with the same hosted models; the embedder
  // stays local (hashing is the CLI's; the package uses all-MiniLM-L6-v2 from a file).
  const minilm = path.join(modelsDir, 'all-MiniLM-L6-v2');
  const files = ['config.json', 'model.safetensors', 'tokenizer.json', 'modules.json', '1_Pooling/config.json']
    .filter((f) => fs.existsSync(path.join(minilm, f)))
    .map((f) => ({ path: f, url: pathToFileURL(path.join(minilm, f)).href, size: fs.statSync(path.join(minilm, f)).size }));
  const dm = await DocMem.open('e2e', {
    models: { embedder: { name: 'all-MiniLM-L6-v2', files } },
    storageDir: path.join(tmp, 'npm-library'),
    modelCacheDir: path.join(tmp, 'npm-models'),
    threads: 1,
    samples: 0,
    remote: { url: workerUrl, token, reader: MODEL, answerer: MODEL },
  });
  try {
    const added = await dm.addDocument(document, { title: 'quillfeather.md', method: 'mom', samples: 0 });
    assert.equal(added.added, true);
    let streamed = '';
    const a = await dm.ask('Who brought printing to England?', { maxTokens: 48, onToken: (t) => (streamed += t) });
    assert.ok(a.answer.length > 0 && streamed.trim() === a.answer.trim(), 'the streamed pieces make the answer');
    assert.ok(a.sources.length > 0);
    console.log(`npm package through the worker: ${added.chunks} chunks, answer ${JSON.stringify(a.answer.slice(0, 80))} (${seconds()} s)`);
  } finally {
    await dm.close();
  }

  // The worker logged every request, with none of the text.
  const logs = workers.logLines();
  const chat = logs.filter((l) => l.path === '/v1/chat/completions' && l.status === 200);
  assert.ok(chat.length >= 3, `chat requests logged: ${chat.length}`);
  assert.ok(chat.some((l) => l.stream === true), 'a streamed answer went through');
  const output = workers.output();
  assert.ok(!output.includes(MARKER), 'no document text in the worker logs');
  assert.ok(!output.includes(token), 'no token in the worker logs');
  // A 502 (the worker could not reach llama-server for a moment) is tried again by the
  // clients (crates/runtime/src/remote/retry.rs); say how often it happened.
  const unavailable = logs.filter((l) => l.status === 502).length;
  console.log(`worker logs: ${logs.length} requests, none holding document text${unavailable ? `; ${unavailable} answered 502 and tried again` : ''}`);
} finally {
  await workers.dispose();
  stopServer();
  fs.rmSync(tmp, { recursive: true, force: true });
}
console.log(`end to end through the worker: ok (${seconds()} s)`);
