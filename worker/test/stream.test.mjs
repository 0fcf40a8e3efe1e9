// Streaming: SSE arrives chunk by chunk, a client that leaves cancels the upstream request
// (while it streams, and before the upstream has even answered), a stream that goes quiet ends
// with an SSE error event, no response body outlives MAX_STREAM_SECONDS, the client only ever
// receives whole SSE events (a half-received one is dropped before the error event), and each
// client's concurrent generations are capped (MAX_CONCURRENT_PER_CLIENT), their slots freed
// however a request ends.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { post, rawPost, readSse, sleep, startOpenAiUpstream, startWorkers, waitFor } from "../testing/harness.mjs";

const TOKEN = "stream-test-token-0123456789abcdef";
const OTHER_TOKEN = "stream-test-token-other-0123456789";
const PARTIAL_MODELS = ["partial-break", "partial-crlf", "partial-stall", "unended-tail", "huge-event"];
let upstream;
/** A slow upstream: 50 chunks 200 ms apart, and response headers after 3 s for "slow-headers". */
let long;
let workers;

before(async () => {
  upstream = await startOpenAiUpstream({ chunks: 6, gapMs: 200 });
  long = await startOpenAiUpstream({ chunks: 50, gapMs: 200, slowMs: 3000 });
  const auth = { CLIENT_TOKENS: `streamer=${TOKEN}` };
  workers = await startWorkers({
    main: {
      ...auth,
      UPSTREAM_URL: upstream.url,
      ALLOWED_MODELS: ["test-model", "stall-stream", "break-stream", "bulk-stream", ...PARTIAL_MODELS].join(","),
      UPSTREAM_TIMEOUT_MS: "1000",
    },
    patient: { ...auth, UPSTREAM_URL: long.url, ALLOWED_MODELS: "slow-headers", UPSTREAM_TIMEOUT_MS: "10000" },
    capped: {
      ...auth,
      UPSTREAM_URL: long.url,
      ALLOWED_MODELS: "test-model,bulk-stream",
      MAX_STREAM_SECONDS: "1",
      UPSTREAM_TIMEOUT_MS: "1000",
    },
    // 50 chunks 200 ms apart (10 s) per stream; a cap of 8 slots; n up to 16 passes MAX_CHOICES.
    slots: {
      CLIENT_TOKENS: `streamer=${TOKEN},other=${OTHER_TOKEN}`,
      UPSTREAM_URL: long.url,
      ALLOWED_MODELS: "test-model,slow-headers,fail-500,reject-400,stall-stream,break-stream,partial-break",
      MAX_CONCURRENT_PER_CLIENT: "8",
      MAX_CHOICES: "16",
      UPSTREAM_TIMEOUT_MS: "1000",
    },
  });
});

after(async () => {
  await workers?.dispose();
  await upstream?.close();
  await long?.close();
});

function streamChat(model, signal, worker = "main", { token = TOKEN, ...extra } = {}) {
  return fetch(new URL("/v1/chat/completions", workers.urls[worker]), {
    method: "POST",
    signal,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "count" }], ...extra }),
  });
}

test("SSE chunks arrive as the upstream sends them, all of them, in order", async () => {
  upstream.sent.length = 0;
  const response = await streamChat("test-model");
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type"), /^text\/event-stream/);
  const events = await readSse(response);

  assert.deepEqual(
    events.map((e) => e.data),
    [...upstream.sent.map(({ i }) => JSON.stringify(chatChunkFor(i))), "[DONE]"],
  );
  // Six chunks 200 ms apart: the last is sent 1 s after the first. A relay that buffered the
  // body would deliver the first only after that; one that passes chunks on has it in hand
  // about a second early. 500 ms leaves half a second for a loaded machine's scheduling
  // without letting a buffering relay pass. (Per-chunk latency is not asserted: under load
  // a single chunk can be late without anything being wrong.)
  assert.equal(upstream.sent.length, 6);
  const lastSent = upstream.sent.at(-1).at;
  const firstReceived = events[0].at;
  assert.ok(
    firstReceived <= lastSent - 500,
    `first chunk received ${lastSent - firstReceived} ms before the last was sent; expected ≥ 500`,
  );
});

test("a client that disconnects cancels the upstream request", async () => {
  const slow = await startOpenAiUpstream({ chunks: 50, gapMs: 200 });
  const local = await startWorkers({
    main: { UPSTREAM_URL: slow.url, CLIENT_TOKENS: `streamer=${TOKEN}`, ALLOWED_MODELS: "test-model" },
  });
  try {
    const controller = new AbortController();
    const response = await fetch(new URL("/v1/chat/completions", local.urls.main), {
      method: "POST",
      signal: controller.signal,
      headers: { Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ model: "test-model", stream: true, messages: [] }),
    });
    assert.equal(response.status, 200);
    const reader = response.body.getReader();
    const first = await reader.read();
    assert.match(new TextDecoder().decode(first.value), /tok0/);
    const abortedAt = Date.now();
    controller.abort();

    const closed = await waitFor(() => slow.events.some((e) => e.kind === "closed"), 4000);
    assert.ok(closed, "the upstream request was still open 4 s after the client left");
    const closedAt = slow.events.find((e) => e.kind === "closed").at;
    assert.ok(closedAt - abortedAt < 3000, `upstream closed ${closedAt - abortedAt} ms after the abort`);
    assert.ok(slow.sent.length < 50, "the upstream sent its whole answer to nobody");

    // The request's one log line is still written, and says how it ended.
    assert.ok(await waitFor(() => local.logLines().length === 1, 3000), local.output());
    const [line] = local.logLines();
    assert.equal(line.end, "client_closed");
    assert.equal(line.stream, true);
    assert.equal(line.status, 200);
  } finally {
    await local.dispose();
    await slow.close();
  }
});

test("a client that leaves before the upstream's response headers cancels the upstream request", async () => {
  long.events.length = 0;
  long.requests.length = 0;
  const before = workers.logLines().length;
  // The upstream answers after 3 s; the worker would wait 10 s. The client leaves at 300 ms.
  const socket = await rawPost(
    workers.urls.patient,
    "/v1/chat/completions",
    { model: "slow-headers", messages: [{ role: "user", content: "think long" }] },
    { Authorization: `Bearer ${TOKEN}` },
  );
  assert.ok(await waitFor(() => long.requests.length === 1, 2000), "the request never reached the upstream");
  await sleep(300);
  const leftAt = Date.now();
  socket.resetAndDestroy();

  const closed = await waitFor(() => long.events.some((e) => e.kind === "closed"), 2500);
  assert.ok(closed, "the upstream request was still open 2.5 s after the client left");
  const closedAt = long.events.find((e) => e.kind === "closed").at;
  assert.ok(closedAt - leftAt < 1500, `the upstream request closed ${closedAt - leftAt} ms after the client left`);

  // Its one log line says the client left (499), not that the upstream failed.
  assert.ok(await waitFor(() => workers.logLines().length > before, 3000), workers.output());
  const line = workers.logLines().at(-1);
  assert.equal(line.status, 499, JSON.stringify(line));
  assert.equal(line.code, "client_closed");
});

test("a response longer than MAX_STREAM_SECONDS ends with an SSE error event and the upstream is closed", async () => {
  long.events.length = 0;
  long.sent.length = 0;
  const started = Date.now();
  const response = await streamChat("test-model", undefined, "capped");
  assert.equal(response.status, 200);
  const events = await readSse(response);
  const elapsed = Date.now() - started;

  const error = events.at(-1);
  assert.equal(error.event, "error", JSON.stringify(events));
  assert.equal(JSON.parse(error.data).error.code, "upstream_timeout");
  assert.match(JSON.parse(error.data).error.message, /limit of 1 s/);
  assert.ok(events.length >= 2 && events.length < 20, `${events.length} events before the cap`);
  assert.ok(elapsed >= 900 && elapsed < 3000, `the stream ended after ${elapsed} ms; the cap is 1 s`);
  assert.ok(await waitFor(() => long.events.some((e) => e.kind === "closed"), 2000), "upstream left open");
  assert.ok(long.sent.length < 20, `the upstream sent ${long.sent.length} of 50 chunks`);
  assert.ok(await waitFor(() => workers.logLines().some((l) => l.end === "max_duration"), 2000), workers.output());
  assert.equal(workers.logLines().find((l) => l.end === "max_duration").code, "upstream_timeout");
});

test("a client that never reads does not hold the upstream open past MAX_STREAM_SECONDS", async () => {
  long.events.length = 0;
  const before = workers.logLines().filter((l) => l.end === "max_duration").length;
  const response = await streamChat("bulk-stream", undefined, "capped");
  assert.equal(response.status, 200);
  // 16 MiB wait upstream; the client reads nothing, so the relay's writes stall.
  const closed = await waitFor(() => long.events.some((e) => e.kind === "closed"), 4000);
  assert.ok(closed, "the upstream request was still open 4 s into a stream capped at 1 s");
  assert.ok(!long.events.some((e) => e.kind === "bulkDone"), "the upstream sent everything");
  const ended = () => workers.logLines().filter((l) => l.end === "max_duration").length > before;
  assert.ok(await waitFor(ended, 4000), workers.output());
  await response.body.cancel().catch(() => undefined);
});

test("a stream that goes quiet ends with an SSE error event and the upstream is closed", async () => {
  upstream.events.length = 0;
  const started = Date.now();
  const response = await streamChat("stall-stream");
  assert.equal(response.status, 200);
  const events = await readSse(response);
  const elapsed = Date.now() - started;
  assert.equal(events.length, 2, JSON.stringify(events));
  assert.match(events[0].data, /first/);
  assert.equal(events[1].event, "error");
  const error = JSON.parse(events[1].data).error;
  assert.equal(error.code, "upstream_timeout");
  assert.equal(error.type, "docmem_worker");
  assert.ok(elapsed >= 900 && elapsed < 3000, `the stream ended after ${elapsed} ms; the idle timeout is 1000`);
  assert.ok(await waitFor(() => upstream.events.some((e) => e.kind === "closed"), 2000), "upstream left open");
});

test("an upstream that breaks off mid-stream → an SSE error event upstream_error", async () => {
  const events = await readSse(await streamChat("break-stream"));
  assert.equal(events.length, 2, JSON.stringify(events));
  assert.equal(events[1].event, "error");
  assert.equal(JSON.parse(events[1].data).error.code, "upstream_error");
});

test("a client that reads slowly is backpressure, not an idle upstream", async () => {
  upstream.events.length = 0;
  const response = await streamChat("bulk-stream");
  assert.equal(response.status, 200);
  // Read nothing for longer than the idle timeout (1000 ms) while 16 MiB wait upstream.
  await sleep(1500);
  assert.ok(!upstream.events.some((e) => e.kind === "bulkDone"), "the worker buffered the whole stream");
  const events = await readSse(response);
  assert.equal(events.at(-1).data, "[DONE]");
  assert.ok(!events.some((e) => e.event === "error"), "the stream was ended as idle");
  assert.equal(events.length, 1025);
});

test("a non-streaming chat completion is relayed as JSON", async () => {
  const response = await fetch(new URL("/v1/chat/completions", workers.urls.main), {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.equal(response.headers.get("set-cookie"), null, "upstream headers must not be copied");
  const body = await response.json();
  assert.equal(body.choices[0].message.content, "an answer");
});

describe("the client receives whole SSE events only", () => {
  /** The error event as the relay writes it. */
  const errorEvent = /^event: error\ndata: (\{[^\n]*\})\n\n$/;

  /** Streams `model` from the main worker; returns the body's text and the request's log line. */
  async function relayed(model) {
    const response = await streamChat(model);
    assert.equal(response.status, 200);
    const text = await response.text();
    const logged = () => workers.logLines().find((line) => line.model === model);
    assert.ok(await waitFor(() => logged() !== undefined, 3000), workers.output());
    return { text, line: logged() };
  }

  for (const [model, first, code, end] of [
    ["partial-break", 'data: {"a":1}\n\n', "upstream_error", "upstream_failed"],
    ["partial-crlf", 'data: {"a":1}\r\n\r\n', "upstream_error", "upstream_failed"],
    ["partial-stall", 'data: {"a":1}\n\n', "upstream_timeout", "upstream_timeout"],
  ]) {
    test(`${model}: the first event, then the error event; the half-sent \`data: {"b\` is dropped`, async () => {
      const { text, line } = await relayed(model);
      assert.ok(text.startsWith(first), JSON.stringify(text));
      const match = errorEvent.exec(text.slice(first.length));
      assert.ok(match, `not one whole event, then the error event: ${JSON.stringify(text)}`);
      assert.equal(JSON.parse(match[1]).error.code, code);
      assert.ok(!text.includes('{"b'), JSON.stringify(text));
      // The log counts what the client was sent, not what the upstream sent.
      assert.equal(line.bytes_out, Buffer.byteLength(text));
      assert.equal(line.end, end);
    });
  }

  test("an event longer than 1 MiB ends the stream with upstream_error after the whole events", async () => {
    upstream.events.length = 0;
    const { text, line } = await relayed("huge-event");
    const first = 'data: {"a":1}\n\n';
    assert.ok(text.startsWith(first), text.slice(0, 100));
    const match = errorEvent.exec(text.slice(first.length));
    assert.ok(match, `${text.length} characters: ${JSON.stringify(text.slice(0, 200))}`);
    const { error } = JSON.parse(match[1]);
    assert.equal(error.code, "upstream_error");
    assert.match(error.message, /an event from the upstream was longer than 1048576 bytes/);
    assert.equal(line.end, "upstream_failed");
    assert.equal(line.bytes_out, Buffer.byteLength(text));
    assert.ok(await waitFor(() => upstream.events.some((e) => e.kind === "closed"), 2000), "upstream left open");
  });

  test("an upstream that ends cleanly has its unfinished last event forwarded as it is", async () => {
    const { text, line } = await relayed("unended-tail");
    assert.equal(text, 'data: {"a":1}\n\ndata: [DONE]');
    assert.equal(line.end, "complete");
    assert.equal(line.bytes_out, Buffer.byteLength(text));
  });
});

describe("concurrent generations per client (MAX_CONCURRENT_PER_CLIENT = 8)", () => {
  const slots = () => workers.urls.slots;
  /** A quick, non-streamed request asking for `n` generations. */
  const probe = (n, token = TOKEN) =>
    post(slots(), "/v1/chat/completions", { model: "test-model", n, messages: [] }, { token });
  /** Probes until one is admitted (the slots were freed) or `ms` pass; returns whether one was. */
  async function admittedWithin(n, ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      const response = await probe(n);
      if (response.status === 200) return true;
      assert.equal(response.status, 429, response.text);
      if (Date.now() > deadline) return false;
      await sleep(50);
    }
  }

  test("two concurrent streams with n=5 each: the second is refused 429, naming the count and the limit", async () => {
    const controller = new AbortController();
    const first = await streamChat("test-model", controller.signal, "slots", { n: 5 });
    assert.equal(first.status, 200);
    const reader = first.body.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /tok0/);

    const second = await streamChat("test-model", undefined, "slots", { n: 5 });
    const text = await second.text();
    assert.equal(second.status, 429, text);
    const { error } = JSON.parse(text);
    assert.equal(error.code, "rate_limited");
    assert.equal(error.message, "this client already has 5 generations running; the limit is 8");
    assert.equal(second.headers.get("retry-after"), "1");

    // What fits is admitted (5 + 3 = 8), and another client has its own slots.
    assert.equal((await probe(3)).status, 200);
    assert.equal((await probe(8, OTHER_TOKEN)).status, 200);
    // More choices than the cap allows at all can never be admitted: 400, not 429.
    const tooMany = await probe(9);
    assert.equal(tooMany.status, 400, tooMany.text);
    assert.equal(tooMany.json.error.code, "too_many_choices");

    controller.abort();
    assert.ok(await admittedWithin(8, 5000), "the first stream's slots were not freed after it was cancelled");
  });

  test("a client that disconnects mid-stream frees its slots", async () => {
    const controller = new AbortController();
    const response = await streamChat("test-model", controller.signal, "slots", { n: 8 });
    assert.equal(response.status, 200);
    const reader = response.body.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /tok0/);
    assert.equal((await probe(1)).status, 429, "the stream did not hold its 8 slots");
    controller.abort();
    assert.ok(await admittedWithin(8, 5000), "the slots were still held 5 s after the client left");
  });

  test("slots are freed however a request ends: upstream errors, timeouts, broken and idle streams", async () => {
    const cases = [
      ["fail-500", false, 502],
      ["reject-400", false, 400],
      ["slow-headers", false, 504],
      ["test-model", false, 200],
      ["break-stream", true, 200],
      ["stall-stream", true, 200],
      ["partial-break", true, 200],
    ];
    for (const [model, stream, status] of cases) {
      const response = await post(
        slots(),
        "/v1/chat/completions",
        { model, n: 8, stream, messages: [] },
        { token: TOKEN },
      );
      assert.equal(response.status, status, `${model}: ${response.text}`);
      assert.ok(await admittedWithin(8, 2000), `${model}: its slots were not freed`);
    }
  });
});

function chatChunkFor(i) {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, delta: { content: `tok${i} ` }, finish_reason: null, i }],
  };
}
