#!/usr/bin/env node
// Load run for the edge worker: N concurrent streaming chat requests sent straight to an
// upstream and then through the worker (compiled worker/dist in Miniflare, i.e. workerd, on
// localhost), to measure what the worker adds. Prints a JSON record and a table: throughput
// (requests/s, SSE chunks/s), p50/p95 time to the first body byte and total latency for both
// paths, and the worker's overhead (through-worker minus direct, at p50 and p95).
//
//   npx tsc -p worker && node worker/bench/load.mjs [--concurrency 8] [--requests 200]
//       [--chunks 32] [--upstream URL --model NAME] [--max-seconds 60]
//
// Without --upstream, a built-in fake upstream (a child process, so it does not share the
// client's event loop) streams --chunks SSE chunks per request with no delay: the figures are
// then the proxy's own cost, not a model's. With --upstream, the same requests go to that
// OpenAI-compatible server (and UPSTREAM_KEY from the environment is given to the worker).
// Each path gets a warm-up, then --requests requests; a path stops early at --max-seconds.
import { fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    concurrency: { type: "string", default: "8" },
    requests: { type: "string", default: "200" },
    chunks: { type: "string", default: "32" },
    upstream: { type: "string" },
    model: { type: "string", default: "bench-model" },
    "max-seconds": { type: "string", default: "60" },
    "serve-upstream": { type: "boolean", default: false },
  },
});

if (args["serve-upstream"]) {
  serveFakeUpstream(Number(args.chunks));
} else {
  await main();
}

/** The built-in upstream: every chat completion streams `chunks` SSE chunks at once. */
function serveFakeUpstream(chunks) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
        res.writeHead(404, { "Content-Type": "application/json" }).end('{"error":{"message":"not found"}}');
        return;
      }
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      for (let i = 0; i < chunks; i++) {
        const chunk = {
          id: "bench",
          object: "chat.completion.chunk",
          model: "bench-model",
          choices: [{ index: 0, delta: { content: ` t${i}` } }],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      }
      res.end("data: [DONE]\n\n");
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => process.send?.({ port: server.address().port }));
  process.on("disconnect", () => process.exit(0));
}

async function main() {
  const concurrency = positive(args.concurrency, "concurrency");
  const requests = positive(args.requests, "requests");
  const maxMs = positive(args["max-seconds"], "max-seconds") * 1000;
  const dist = fileURLToPath(new URL("../dist/index.js", import.meta.url));
  if (!existsSync(dist)) {
    console.error("worker/dist is missing: compile the worker first (npx tsc -p worker)");
    process.exit(1);
  }
  const { startWorkers } = await import("../testing/harness.mjs");

  let child = null;
  let upstreamUrl = args.upstream;
  if (upstreamUrl === undefined) {
    child = fork(fileURLToPath(import.meta.url), ["--serve-upstream", "--chunks", args.chunks], { stdio: "inherit" });
    const { port } = await new Promise((resolve, reject) => {
      child.once("message", resolve);
      child.once("error", reject);
    });
    upstreamUrl = `http://127.0.0.1:${port}`;
  }
  upstreamUrl = upstreamUrl.replace(/\/+$/, "");

  const token = `bench-${randomUUID()}`;
  const workers = await startWorkers({
    bench: {
      UPSTREAM_URL: upstreamUrl,
      ...(process.env.UPSTREAM_KEY ? { UPSTREAM_KEY: process.env.UPSTREAM_KEY } : {}),
      CLIENT_TOKENS: `bench=${token}`,
      ALLOWED_MODELS: "*",
      RATE_LIMIT_PER_MINUTE: "100000000",
      // The run is one client at --concurrency: the per-client cap must not refuse it.
      MAX_CONCURRENT_PER_CLIENT: "100000000",
      MAX_TOKENS_CAP: "4096",
    },
  });
  const body = JSON.stringify({
    model: args.model,
    stream: true,
    max_tokens: 64,
    messages: [{ role: "user", content: "Count to ten." }],
  });
  const direct = { url: `${upstreamUrl}/v1/chat/completions`, headers: upstreamHeaders() };
  const worker = {
    url: new URL("/v1/chat/completions", workers.urls.bench).href,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
  };

  try {
    const warmup = Math.min(requests, Math.max(concurrency * 4, 20));
    await runPhase(direct, body, concurrency, warmup, maxMs);
    await runPhase(worker, body, concurrency, warmup, maxMs);
    const directRun = await runPhase(direct, body, concurrency, requests, maxMs);
    const workerRun = await runPhase(worker, body, concurrency, requests, maxMs);
    report(
      { concurrency, requests, upstream: args.upstream ?? `built-in (${args.chunks} chunks, no delay)` },
      directRun,
      workerRun,
    );
  } finally {
    await workers.dispose();
    child?.kill();
  }
}

function upstreamHeaders() {
  const headers = { "Content-Type": "application/json" };
  if (process.env.UPSTREAM_KEY) headers.Authorization = `Bearer ${process.env.UPSTREAM_KEY}`;
  return headers;
}

/** Sends `count` requests, `concurrency` at a time, until done or `maxMs` has passed. */
async function runPhase(target, body, concurrency, count, maxMs) {
  const started = performance.now();
  const samples = [];
  let failures = 0;
  let issued = 0;
  const loop = async () => {
    while (issued < count && performance.now() - started < maxMs) {
      issued += 1;
      try {
        samples.push(await one(target, body));
      } catch {
        failures += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const seconds = (performance.now() - started) / 1000;
  return { samples, failures, seconds };
}

/** One streaming request: time to the first body byte, total time, SSE chunks received. */
async function one(target, body) {
  const t0 = performance.now();
  const response = await fetch(target.url, { method: "POST", headers: target.headers, body });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`status ${response.status}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let ttfb = null;
  let pending = "";
  let chunks = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    ttfb ??= performance.now() - t0;
    pending += decoder.decode(value, { stream: true });
    const events = pending.split("\n\n");
    pending = events.pop();
    chunks += events.filter((event) => event.startsWith("data: ") && event !== "data: [DONE]").length;
  }
  return { ttfb: ttfb ?? performance.now() - t0, total: performance.now() - t0, chunks };
}

function summary({ samples, failures, seconds }) {
  const chunks = samples.reduce((sum, s) => sum + s.chunks, 0);
  return {
    requests: samples.length,
    failures,
    seconds: round(seconds),
    requests_per_s: round(samples.length / seconds),
    chunks_per_s: round(chunks / seconds),
    ttfb_ms: {
      p50: percentile(
        samples.map((s) => s.ttfb),
        50,
      ),
      p95: percentile(
        samples.map((s) => s.ttfb),
        95,
      ),
    },
    total_ms: {
      p50: percentile(
        samples.map((s) => s.total),
        50,
      ),
      p95: percentile(
        samples.map((s) => s.total),
        95,
      ),
    },
  };
}

function report(setup, directRun, workerRun) {
  const direct = summary(directRun);
  const worker = summary(workerRun);
  const overhead = {
    ttfb_ms: {
      p50: round(worker.ttfb_ms.p50 - direct.ttfb_ms.p50),
      p95: round(worker.ttfb_ms.p95 - direct.ttfb_ms.p95),
    },
    total_ms: {
      p50: round(worker.total_ms.p50 - direct.total_ms.p50),
      p95: round(worker.total_ms.p95 - direct.total_ms.p95),
    },
  };
  const target_p50_ms = 5;
  const record = {
    setup,
    direct,
    worker,
    overhead,
    target: { p50_overhead_ms_below: target_p50_ms, met: overhead.total_ms.p50 < target_p50_ms },
  };
  console.log(JSON.stringify(record, null, 2));
  const rows = [
    ["", "req/s", "chunks/s", "TTFB p50", "TTFB p95", "total p50", "total p95", "failures"],
    row("direct", direct),
    row("worker", worker),
    [
      "overhead",
      "",
      "",
      ms(overhead.ttfb_ms.p50),
      ms(overhead.ttfb_ms.p95),
      ms(overhead.total_ms.p50),
      ms(overhead.total_ms.p95),
      "",
    ],
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c]).length)));
  console.log("");
  for (const r of rows) console.log(r.map((cell, c) => String(cell).padStart(widths[c])).join("  "));
  console.log(
    `\np50 overhead ${ms(overhead.total_ms.p50)} (target < ${target_p50_ms} ms): ${record.target.met ? "met" : "NOT met"}`,
  );
}

function row(name, s) {
  return [
    name,
    s.requests_per_s,
    s.chunks_per_s,
    ms(s.ttfb_ms.p50),
    ms(s.ttfb_ms.p95),
    ms(s.total_ms.p50),
    ms(s.total_ms.p95),
    s.failures,
  ];
}

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]);
}

function round(x) {
  return Math.round(x * 100) / 100;
}

function ms(x) {
  return `${x} ms`;
}

function positive(text, name) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a whole number ≥ 1`);
    process.exit(2);
  }
  return n;
}
