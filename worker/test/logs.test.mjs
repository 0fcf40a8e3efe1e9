// Logging policy: one JSON line per request, and never the request's text, the upstream's
// error text, a client token, the signing key or the upstream key, whatever the outcome.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { after, before, test } from "node:test";
import { DIST, get, post, readSse, startOpenAiUpstream, startWorkers, waitFor } from "../testing/harness.mjs";

const { issueToken } = await import(path.join(DIST, "token.js"));

const MARKER = `MARKER-${randomUUID()}`;
const TOKEN = `client-token-${randomUUID()}`;
const UPSTREAM_KEY = `upstream-key-${randomUUID()}`;
const SIGNING_KEY = `signing-key-${randomUUID()}`;
const FIELDS = [
  "time",
  "client",
  "method",
  "path",
  "model",
  "status",
  "code",
  "duration_ms",
  "upstream_ms",
  "bytes_in",
  "bytes_out",
  "stream",
  "end",
];

let upstream;
let workers;

before(async () => {
  upstream = await startOpenAiUpstream({ chunks: 3, gapMs: 20 });
  workers = await startWorkers({
    main: {
      UPSTREAM_URL: upstream.url,
      UPSTREAM_KEY,
      CLIENT_TOKENS: `logger=${TOKEN}`,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      ALLOWED_MODELS: "test-model,fail-500,reject-400",
      ALLOWED_ORIGINS: "https://app.example",
      MAX_BODY_BYTES: "4096",
    },
    // Any model allowed: the model string is the client's own text, however it is sent.
    any: { UPSTREAM_URL: upstream.url, CLIENT_TOKENS: `logger=${TOKEN}`, ALLOWED_MODELS: "*" },
  });
});

after(async () => {
  await workers?.dispose();
  await upstream?.close();
});

test("one JSON log line per request, holding no request text, upstream error text, token or key", async () => {
  const url = workers.urls.main;
  const hmac = await issueToken(SIGNING_KEY, "web-user", 300);
  const ask = (model, extra = {}) => ({
    model,
    messages: [{ role: "user", content: `question about ${MARKER}` }],
    ...extra,
  });
  const sent = [];
  const send = async (label, promise, expectStatus) => {
    const response = await promise;
    assert.equal(response.status, expectStatus, `${label}: ${response.text}`);
    sent.push(label);
    return response;
  };

  await send("good chat", post(url, "/v1/chat/completions", ask("test-model"), { token: TOKEN }), 200);
  await send("good chat via HMAC", post(url, "/v1/chat/completions", ask("test-model"), { token: hmac }), 200);
  const stream = await fetch(new URL("/v1/chat/completions", url), {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(ask("test-model", { stream: true })),
  });
  assert.equal((await readSse(stream)).at(-1).data, "[DONE]");
  sent.push("stream");
  await send(
    "completion",
    post(url, "/v1/completions", { model: "test-model", prompt: MARKER, echo: true, logprobs: 1 }, { token: TOKEN }),
    200,
  );
  await send("embedding", post(url, "/v1/embeddings", { model: "test-model", input: MARKER }, { token: TOKEN }), 200);
  await send(
    "invalid JSON",
    post(url, "/v1/chat/completions", `{"model":"test-model","messages":"${MARKER}`, { token: TOKEN }),
    400,
  );
  await send("model refused", post(url, "/v1/chat/completions", ask(`model-${MARKER}`), { token: TOKEN }), 403);
  await send(
    "too large",
    post(url, "/v1/chat/completions", ask("test-model", { pad: `${MARKER}`.repeat(200) }), { token: TOKEN }),
    413,
  );
  await send(
    "upstream 400 quoting the prompt",
    post(url, "/v1/chat/completions", ask("reject-400"), { token: TOKEN }),
    400,
  );
  await send(
    "upstream 500 quoting the prompt",
    post(url, "/v1/chat/completions", ask("fail-500"), { token: TOKEN }),
    502,
  );
  await send("wrong token", post(url, "/v1/chat/completions", ask("test-model"), { token: `${TOKEN}x` }), 401);
  await send(
    "bad HMAC",
    post(url, "/v1/chat/completions", ask("test-model"), { token: `${hmac.slice(0, -2)}AA` }),
    401,
  );
  await send(
    "bad origin",
    post(url, "/v1/chat/completions", ask("test-model"), {
      token: TOKEN,
      headers: { Origin: `https://${MARKER}.test` },
    }),
    403,
  );
  await send("models", get(url, "/v1/models", { token: TOKEN }), 200);
  await send("unknown path", get(url, `/v1/${MARKER}`, { token: TOKEN }), 404);

  // The upstream did see the marker (so its absence from the logs means something).
  assert.ok(upstream.requests.some((r) => r.body.includes(MARKER)));

  assert.ok(await waitFor(() => workers.logLines().length >= sent.length, 3000), workers.output());
  await new Promise((resolve) => setTimeout(resolve, 200)); // any extra line would show now
  const output = workers.output();
  for (const [name, secret] of [
    ["marker", MARKER],
    ["client token", TOKEN],
    ["upstream key", UPSTREAM_KEY],
    ["signing key", SIGNING_KEY],
    ["HMAC token", hmac],
    ["HMAC signature", hmac.split(".")[4]],
  ]) {
    assert.ok(!output.includes(secret), `the ${name} appears in the worker's output`);
  }
  // The worker writes nothing but its log lines, one per request, each a JSON object.
  const lines = workers.stdoutLines().map((line) => JSON.parse(line));
  assert.equal(lines.length, sent.length, `${lines.length} log lines for ${sent.length} requests:\n${output}`);
  for (const line of lines) assert.deepEqual(Object.keys(line), FIELDS);

  const byStatus = (status) => lines.filter((line) => line.status === status);
  assert.equal(byStatus(200).length, 6);
  const streamed = lines.find((line) => line.stream);
  assert.equal(streamed.end, "complete");
  assert.ok(streamed.bytes_out > 0 && streamed.bytes_in > 0);
  assert.ok(streamed.upstream_ms !== null);
  assert.ok(lines.some((line) => line.client === "web-user"));
  assert.deepEqual(
    lines
      .filter((line) => line.status >= 400)
      .map((line) => line.code)
      .sort(),
    [
      "bad_request",
      "body_too_large",
      "model_not_allowed",
      "not_found",
      "origin_not_allowed",
      "unauthorized",
      "unauthorized",
      "upstream_error",
      "upstream_rejected",
    ].sort(),
  );
  assert.equal(lines.find((line) => line.code === "model_not_allowed").model, null);
});

test("with ALLOWED_MODELS `*` the model is logged as \"other\", never as the client wrote it", async () => {
  const url = workers.urls.any;
  const before = workers.stdoutLines().length;
  const model = `model-${MARKER}`;
  const chat = await post(url, "/v1/chat/completions", { model, messages: [] }, { token: TOKEN });
  assert.equal(chat.status, 200, chat.text);
  const completion = await post(url, "/v1/completions", { model, prompt: "p" }, { token: TOKEN });
  assert.equal(completion.status, 200, completion.text);
  const stream = await fetch(new URL("/v1/chat/completions", url), {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ model, stream: true, messages: [] }),
  });
  assert.equal((await readSse(stream)).at(-1).data, "[DONE]");
  assert.equal(upstream.requests.at(-1).json.model, model, "the upstream gets the model unchanged");

  assert.ok(await waitFor(() => workers.stdoutLines().length >= before + 3, 3000), workers.output());
  assert.ok(!workers.output().includes(MARKER), "the client's model string appears in the worker's output");
  const lines = workers
    .stdoutLines()
    .slice(before)
    .map((line) => JSON.parse(line));
  assert.deepEqual(
    lines.map((line) => line.model),
    ["other", "other", "other"],
  );
});
