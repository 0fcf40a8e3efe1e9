// A fake OpenAI-compatible host for the tests of hosted models (tests/wasm/remote.mjs in
// Node, tests/browser/app.test.mjs in a page): what the docmem edge worker or vLLM
// answers, small and deterministic, with every request recorded.
//
// - POST /v1/embeddings: a hashed bag of words per input, as wide as the model name's
//   last number says ('hash-16' → 16; default 16).
// - POST /v1/chat/completions: whole (stream false) → REPLY, which is no valid document
//   memory, so a hosted reader's memory falls back to sentence chunks; streamed → ANSWER
//   in word pieces as server-sent events, then a finish_reason chunk and `data: [DONE]`.
//   A user turn containing SLOWLY streams 200 pieces, 100 ms apart; one containing STALL
//   gets headers (streamed) or nothing (whole) until the client goes away; one containing
//   MISCITE gets ANSWER citing a passage of the prompt that does not hold its words (the
//   first "[n] …" block without "Caxton"), as a small model sometimes cites.
// - A bearer token other than `host.token` → 401 {"error": {"code": "unauthorized", …}}.
// - While `host.rateLimited` is above 0, each chat request is answered 429 (Retry-After: 1)
//   and counts it down, as a worker's rate limit would.
// - While `host.failing` holds entries, each chat request takes the first: 'drop' closes
//   the connection with no reply, 502 answers upstream_unavailable (as the worker does when
//   its upstream could not be reached); `host.failingEmbeddings` does the same to
//   embedding requests.
// - CORS on every reply (preflights answered) and Cross-Origin-Resource-Policy:
//   cross-origin, as a page that is cross-origin isolated needs.
// Each request is recorded as {path, auth, body, closedEarly}: closedEarly turns true when
// the client closed the connection before the reply ended (a cancel reached the host).
import http from 'node:http';

export const REPLY = 'This hosted reply is not a document memory.';
export const ANSWER = 'William Caxton brought printing to England in 1476 [1].';
// A document the host's reader writes a real MoM memory of (MemReader's tag format, chunks
// named by their first and last words around [MASK], cores in its own words): what a test
// of the reader's memory, not of a fallback, reads back.
export const MEMORY_DOC =
  'The printing press reached Westminster in 1476. William Caxton set it up near the abbey. His first dated book was printed there in 1477. Wynkyn de Worde took over the press after Caxton died.';
export const MEMORY_OUTLINE = ['The press reaches Westminster', 'After Caxton'];
export const MEMORY_CORES = ["Caxton set up England's first press at Westminster in 1476.", 'Wynkyn de Worde ran the press after Caxton.'];
const MEMORY =
  `<outline>\n${MEMORY_OUTLINE.join('\n')}\n</outline>\n` +
  `<scenario><chunk>The printing press reached[MASK]printed there in 1477.</chunk>${MEMORY_CORES[0]}</scenario>\n` +
  `<scenario><chunk>Wynkyn de Worde[MASK]after Caxton died.</chunk>${MEMORY_CORES[1]}</scenario>`;

function hashedBagOfWords(text, width) {
  const v = new Array(width).fill(0.001);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []) {
    let h = 2166136261;
    for (const c of word) h = Math.imul(h ^ c.codePointAt(0), 16777619) >>> 0;
    v[h % width] += 1;
  }
  return v;
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': 'authorization, content-type',
  'access-control-allow-methods': 'POST, OPTIONS',
  'cross-origin-resource-policy': 'cross-origin',
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** ANSWER, or for a MISCITE turn ANSWER citing the first passage without its words. */
function answerFor(turn) {
  if (!turn.includes('MISCITE')) return ANSWER;
  const blocks = [...turn.matchAll(/^\[(\d+)\] ([\s\S]*?)(?=^\[\d+\] |$(?![\s\S]))/gm)];
  const wrong = blocks.find((b) => !b[2].includes('Caxton'));
  return wrong ? ANSWER.replace('[1]', `[${wrong[1]}]`) : ANSWER;
}

/** Start the host on 127.0.0.1 (a free port); `token` is the bearer token it accepts. */
export async function startFakeHost({ token }) {
  const host = { token, requests: [], url: '', rateLimited: 0, failing: [], failingEmbeddings: [] };
  const json = (res, status, value) => res.writeHead(status, { ...CORS, 'content-type': 'application/json' }).end(JSON.stringify(value));

  async function chat(req, res, record) {
    const turn = record.body.messages.map((m) => m.content).join('\n');
    const until = () => new Promise((r) => res.on('close', r));
    if (!record.body.stream) {
      if (turn.includes('STALL')) return until();
      const choice = { index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' };
      return json(res, 200, { id: 'fake', object: 'chat.completion', model: record.body.model, choices: [choice], usage: { completion_tokens: 9 } });
    }
    res.writeHead(200, { ...CORS, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    if (turn.includes('STALL')) return until();
    const slow = turn.includes('SLOWLY');
    const reply = turn.includes('reached Westminster in 1476') ? MEMORY : answerFor(turn);
    const pieces = slow ? new Array(200).fill('word ') : reply.split(/(?<= )/);
    const event = (delta, finish) => `data: ${JSON.stringify({ id: 'fake', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    for (const piece of pieces) {
      if (res.destroyed) return;
      res.write(event({ content: piece }, null));
      await sleep(slow ? 100 : 5);
    }
    res.write(event({}, 'stop'));
    res.end('data: [DONE]\n\n');
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, CORS).end();
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const record = { path: req.url, auth: req.headers.authorization ?? null, body: null, closedEarly: false };
      host.requests.push(record);
      res.on('close', () => {
        record.closedEarly = !res.writableFinished;
      });
      try {
        record.body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return json(res, 400, { error: { code: 'bad_request', message: 'the body is not JSON' } });
      }
      if (record.auth !== `Bearer ${host.token}`) return json(res, 401, { error: { code: 'unauthorized', message: 'the bearer token is not valid' } });
      const failing = { '/v1/chat/completions': host.failing, '/v1/embeddings': host.failingEmbeddings }[req.url];
      const failure = failing?.shift();
      if (failure === 'drop') return req.socket.destroy();
      if (failure === 502) return json(res, 502, { error: { code: 'upstream_unavailable', message: 'the upstream could not be reached' } });
      if (host.rateLimited > 0 && req.url === '/v1/chat/completions') {
        host.rateLimited -= 1;
        res.setHeader('retry-after', '1');
        return json(res, 429, { error: { code: 'rate_limited', message: 'too many requests' } });
      }
      if (req.method !== 'POST') return json(res, 405, { error: { code: 'method_not_allowed', message: 'POST only' } });
      if (req.url === '/v1/embeddings') {
        const width = Number(/(\d+)$/.exec(record.body.model)?.[1] ?? 16);
        const data = record.body.input.map((text, index) => ({ object: 'embedding', index, embedding: hashedBagOfWords(text, width) }));
        return json(res, 200, { object: 'list', model: record.body.model, data });
      }
      if (req.url === '/v1/chat/completions') return chat(req, res, record);
      return json(res, 404, { error: { code: 'not_found', message: `no ${req.url} here` } });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  host.url = `http://127.0.0.1:${server.address().port}`;
  host.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    });
  /** The requests to `path` so far. */
  host.to = (path) => host.requests.filter((r) => r.path === path);
  return host;
}
