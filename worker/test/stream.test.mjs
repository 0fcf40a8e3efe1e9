// Streaming: SSE arrives chunk by chunk, a client that leaves cancels the upstream request,
// and a stream that goes quiet ends with an SSE error event.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { readSse, sleep, startOpenAiUpstream, startWorkers, waitFor } from "../testing/harness.mjs";

const TOKEN = "stream-test-token";
let upstream;
let workers;

before(async () => {
  upstream = await startOpenAiUpstream({ chunks: 6, gapMs: 200 });
  workers = await startWorkers({
    main: {
      UPSTREAM_URL: upstream.url,
      CLIENT_TOKENS: `streamer=${TOKEN}`,
      ALLOWED_MODELS: "test-model,stall-stream,break-stream,bulk-stream",
      UPSTREAM_TIMEOUT_MS: "1000",
    },
  });
});

after(async () => {
  await workers?.dispose();
  await upstream?.close();
});

function streamChat(model, signal) {
  return fetch(new URL("/v1/chat/completions", workers.urls.main), {
    method: "POST",
    signal,
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "count" }] }),
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
  const lastSent = upstream.sent.at(-1).at;
  const firstReceived = events[0].at;
  // Six chunks 200 ms apart: the first must be in hand about a second before the last is sent.
  assert.ok(
    firstReceived < lastSent - 600,
    `first chunk received ${lastSent - firstReceived} ms before the last was sent; expected > 600`,
  );
  // And each chunk within a gap of its send time, not bunched at the end.
  for (const { i, at } of upstream.sent) {
    assert.ok(events[i].at - at < 150, `chunk ${i} arrived ${events[i].at - at} ms after it was sent`);
  }
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

function chatChunkFor(i) {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, delta: { content: `tok${i} ` }, finish_reason: null, i }],
  };
}
