// Harness for the tests, the load run and the local dev server: the compiled worker
// (worker/dist) in Miniflare (real workerd), and fake OpenAI-compatible upstreams as Node
// http servers on 127.0.0.1.
//
// One Miniflare (one workerd process) serves several copies of the worker, each with its own
// bindings, on its own direct socket, so a test file pays for one runtime start. workerd's
// stdout and stderr are captured for the logging assertions.
import { readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const here = path.dirname(fileURLToPath(import.meta.url));
export const DIST = path.resolve(here, "../dist");
const WRANGLER_TOML = readFileSync(path.resolve(here, "../wrangler.toml"), "utf8");
/** wrangler.toml's compatibility date and flags, so local runs match the deployed worker. */
export const COMPATIBILITY_DATE = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(WRANGLER_TOML)[1];
export const COMPATIBILITY_FLAGS = [
  ...(/^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(WRANGLER_TOML)?.[1] ?? "").matchAll(/"([^"]+)"/g),
].map((match) => match[1]);

/** Miniflare options for one copy of the compiled worker with these bindings. */
export function workerOptions(bindings) {
  return {
    modules: true,
    scriptPath: path.join(DIST, "index.js"),
    modulesRoot: DIST,
    // tsc emits ES modules with a .js extension; Miniflare's default rules read .js as CommonJS.
    modulesRules: [{ type: "ESModule", include: ["**/*.js"] }],
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: COMPATIBILITY_FLAGS,
    bindings,
  };
}

/**
 * Starts one workerd with a worker per entry of `configs` ({ name: bindings }).
 * Returns { urls: { name: URL }, output(): string, dispose() }.
 */
export async function startWorkers(configs, extra = {}) {
  const stdio = [];
  const stdoutChunks = [];
  const names = Object.keys(configs);
  const mf = new Miniflare({
    workers: names.map((name) => ({
      name,
      ...workerOptions(configs[name]),
      unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      ...(extra[name] ?? {}),
    })),
    handleRuntimeStdio(stdout, stderr) {
      stdout.on("data", (chunk) => {
        stdio.push(chunk.toString());
        stdoutChunks.push(chunk.toString());
      });
      stderr.on("data", (chunk) => stdio.push(chunk.toString()));
    },
  });
  await mf.ready;
  const urls = {};
  for (const name of names) urls[name] = await mf.unsafeGetDirectURL(name);
  return {
    urls,
    /** Everything workerd wrote, stdout and stderr. */
    output: () => stdio.join(""),
    /** workerd's stdout as lines (the worker's console.log), without empty ones. */
    stdoutLines: () =>
      stdoutChunks
        .join("")
        .split("\n")
        .filter((line) => line !== ""),
    /** The worker's JSON log lines so far. */
    logLines: () =>
      stdio
        .join("")
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line)),
    dispose: () => mf.dispose(),
  };
}

/**
 * A fake upstream: `handler(req, res, body)` answers each request; every request is recorded
 * as { method, url, headers, body, json }.
 */
export async function startUpstream(handler) {
  const requests = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let json = null;
      try {
        json = body ? JSON.parse(body) : null;
      } catch {
        json = null;
      }
      const record = { method: req.method, url: req.url, headers: req.headers, body, json };
      requests.push(record);
      Promise.resolve(handler(req, res, record)).catch((error) => {
        res.destroy(error);
      });
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(resolve);
      }),
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** POSTs JSON (or a raw string) with the given token; returns { status, headers, text, json }. */
export async function post(url, route, body, { token, headers = {} } = {}) {
  const response = await fetch(new URL(route, url), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return read(response);
}

export async function get(url, route, { token, headers = {} } = {}) {
  const response = await fetch(new URL(route, url), {
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
  });
  return read(response);
}

async function read(response) {
  const text = await response.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/**
 * Sends a POST over a raw TCP connection and returns the socket, so a test can make the client
 * leave the way it needs to: `socket.resetAndDestroy()` (RST). Locally workerd aborts
 * `request.signal` on a reset connection only; a normal close (FIN) leaves the request
 * running, as HTTP allows a client that half-closes and still awaits its answer.
 */
export async function rawPost(url, route, body, headers = {}) {
  const target = new URL(route, url);
  const payload = Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  const socket = net.connect(Number(target.port), target.hostname);
  socket.on("error", () => undefined);
  await new Promise((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const lines = [
    `POST ${target.pathname} HTTP/1.1`,
    `Host: ${target.host}`,
    "Content-Type: application/json",
    `Content-Length: ${payload.byteLength}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.write(`${lines.join("\r\n")}\r\n\r\n`);
  socket.write(payload);
  return socket;
}

/** Writes an SSE event. */
export function sse(res, data) {
  res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
}

export function chatChunk(i, content) {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, delta: { content }, finish_reason: null, i }],
  };
}

/** The logprobs object the fake upstream returns for /v1/completions (vLLM's shape). */
export const LOGPROBS = {
  tokens: ["The", " cat", " sat"],
  token_logprobs: [null, -2.125, -0.5078125],
  top_logprobs: [null, { " cat": -2.125, " dog": -2.75 }, { " sat": -0.5078125, " ran": -1.25 }],
  text_offset: [0, 3, 7],
};

export const UPSTREAM_MODELS = [
  { id: "test-model", object: "model", owned_by: "vllm", max_model_len: 2048 },
  { id: "other-model", object: "model", owned_by: "vllm", max_model_len: 4096 },
  { id: "hidden-model", object: "model", owned_by: "vllm", max_model_len: 8192 },
];

/**
 * A fake OpenAI-compatible upstream. What it does depends on the request's model:
 *  - "slow-headers": answers after `slowMs` (set longer or shorter than the worker's timeout);
 *  - "fail-500": 500 with a JSON error quoting the request body;
 *  - "reject-400": 400 with a JSON error quoting the body and the Authorization header;
 *  - "reject-400-long": 400 whose message is 988 characters, then the worker's UPSTREAM_KEY
 *    (the worker cuts messages at 1,000 characters: the key straddles the cut);
 *  - "reject-401": 401 quoting the Authorization header (a wrong UPSTREAM_KEY);
 *  - "stall-stream": one SSE chunk, then silence;
 *  - "break-stream": one SSE chunk, then the connection is cut;
 *  - "bulk-stream": 16 MiB of SSE as fast as the worker takes it (records `bulkDone`);
 *  - "partial-break": `data: {"a":1}` as a whole event, then the start of another
 *    (`data: {"b`), then the connection is cut;
 *  - "partial-crlf": the same with CRLF line endings;
 *  - "partial-stall": the same, with the first event's blank line in a second chunk, then silence;
 *  - "unended-tail": `data: {"a":1}`, then `data: [DONE]` without its blank line, then a clean end;
 *  - "huge-event": `data: {"a":1}`, then one event 64 MiB long, as fast as the worker takes it;
 *  - anything else: a normal answer; chat with `stream: true` sends `chunks` SSE chunks
 *    `gapMs` apart (each send time is recorded in `sent`).
 * Per-request state: `events` gets { kind: "closed", at } when a request's socket closes
 * before its response has finished.
 */
export async function startOpenAiUpstream({ chunks = 6, gapMs = 200, slowMs = 2000, hasModels = true } = {}) {
  const sent = [];
  const events = [];
  const upstream = await startUpstream(async (req, res, record) => {
    const started = Date.now();
    const onClose = () => events.push({ kind: "closed", at: Date.now(), url: req.url, started });
    req.socket.once("close", onClose);
    // A kept-alive socket serves many requests: a finished one stops listening for its close.
    res.once("finish", () => req.socket.off("close", onClose));
    const body = record.json ?? {};
    const json = (status, value) => {
      res.writeHead(status, { "Content-Type": "application/json", "Set-Cookie": "upstream=1", Server: "fake-vllm" });
      res.end(JSON.stringify(value));
    };
    if (req.method === "GET" && req.url === "/v1/models") {
      if (!hasModels) return json(404, { error: { message: "Not Found" } });
      return json(200, { object: "list", data: UPSTREAM_MODELS });
    }
    switch (body.model) {
      case "slow-headers":
        await sleep(slowMs);
        if (res.destroyed) return;
        return json(200, { ok: true });
      case "fail-500":
        return json(500, { error: { message: `internal failure on ${record.body}` } });
      case "reject-400":
        return json(400, {
          error: {
            message: `bad request: ${record.body} (auth ${req.headers.authorization})`,
            type: "BadRequestError",
          },
        });
      case "reject-400-long": {
        const key = (req.headers.authorization ?? "").replace(/^Bearer /, "");
        return json(400, { error: { message: `${"y".repeat(988)}${key} was used`, type: "BadRequestError" } });
      }
      case "reject-401":
        return json(401, { error: { message: `Incorrect API key provided: ${req.headers.authorization}` } });
      case "stall-stream":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        sse(res, chatChunk(0, "first"));
        return; // never ends; the worker's idle timeout must
      case "break-stream":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        sse(res, chatChunk(0, "first"));
        await sleep(50);
        res.destroy();
        return;
      case "bulk-stream": {
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        const pad = "x".repeat(16 * 1024 - 16);
        for (let i = 0; i < 1024 && !res.destroyed; i++) {
          if (!res.write(`data: ${pad}\n\n`)) await new Promise((resolve) => res.once("drain", resolve));
        }
        events.push({ kind: "bulkDone", at: Date.now() });
        res.end("data: [DONE]\n\n");
        return;
      }
      case "partial-break":
      case "partial-crlf": {
        const end = body.model === "partial-crlf" ? "\r\n" : "\n";
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write(`data: {"a":1}${end}${end}data: {"b`);
        await sleep(50);
        res.destroy();
        return;
      }
      case "partial-stall":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write('data: {"a":1}\n');
        await sleep(30);
        res.write('\ndata: {"b');
        return; // never ends; the worker's idle timeout must
      case "unended-tail":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write('data: {"a":1}\n\n');
        await sleep(30);
        res.end("data: [DONE]");
        return;
      case "huge-event": {
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write('data: {"a":1}\n\ndata: ');
        const pad = "x".repeat(64 * 1024);
        // 64 MiB: far more than socket buffers hold, so only the worker's abort ends it.
        for (let i = 0; i < 1024 && !res.destroyed; i++) {
          if (!res.write(pad)) {
            await new Promise((resolve) => {
              const go = () => {
                res.off("drain", go);
                res.off("close", go);
                resolve();
              };
              res.once("drain", go);
              res.once("close", go);
            });
          }
        }
        if (!res.destroyed) res.end("\n\n");
        return;
      }
      default:
        break;
    }
    if (req.url === "/v1/chat/completions" && body.stream === true) {
      res.writeHead(200, { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache" });
      for (let i = 0; i < chunks; i++) {
        if (res.destroyed) return;
        sse(res, chatChunk(i, `tok${i} `));
        sent.push({ i, at: Date.now() });
        if (i < chunks - 1) await sleep(gapMs);
      }
      res.end("data: [DONE]\n\n");
      return;
    }
    if (req.url === "/v1/chat/completions") {
      return json(200, {
        id: "chatcmpl-1",
        object: "chat.completion",
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: "an answer" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
      });
    }
    if (req.url === "/v1/completions") {
      return json(200, {
        id: "cmpl-1",
        object: "text_completion",
        model: body.model,
        choices: [{ index: 0, text: "The cat sat", logprobs: LOGPROBS, finish_reason: "length" }],
      });
    }
    if (req.url === "/v1/embeddings") {
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      return json(200, {
        object: "list",
        model: body.model,
        data: inputs.map((_, index) => ({ object: "embedding", index, embedding: [0.25, -0.5, 0.125] })),
      });
    }
    return json(404, { error: { message: "no such route" } });
  });
  return { ...upstream, sent, events };
}

/** Reads an SSE response body, recording each `data:` payload with its arrival time. */
export async function readSse(response, { onEvent } = {}) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const events = [];
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let boundary;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, boundary);
      buffer = buffer.slice(boundary + 2);
      const event = { at: Date.now(), event: null, data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event.event = line.slice(6).trim();
        if (line.startsWith("data:")) event.data += line.slice(5).trim();
      }
      if (event.data === "" && event.event === null) continue;
      events.push(event);
      if (onEvent && onEvent(event, reader) === "stop") return events;
    }
  }
  return events;
}

/** Polls `predicate` until it holds or `ms` pass; returns whether it held. */
export async function waitFor(predicate, ms = 5000, step = 25) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (predicate()) return true;
    await sleep(step);
  }
  return predicate();
}
