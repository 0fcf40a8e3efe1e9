#!/usr/bin/env node
// Runs the compiled worker locally in Miniflare (workerd, the Workers runtime) without
// wrangler: `npx tsc -p worker && UPSTREAM_URL=http://127.0.0.1:8080
// CLIENT_TOKENS=me=$(openssl rand -hex 32) ALLOWED_MODELS='*' node worker/scripts/dev.mjs
// [--port 8787]` (a static token must have at least 32 characters).
// Every setting is read from the environment variable of the same name (worker/README.md
// lists them); unset ones are left out, so the worker's defaults apply. Ctrl-C stops it.
import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { Miniflare } from "miniflare";
import { DIST, workerOptions } from "../testing/harness.mjs";

const SETTINGS = [
  "UPSTREAM_URL",
  "UPSTREAM_KEY",
  "CLIENT_TOKENS",
  "TOKEN_SIGNING_KEY",
  "TOKEN_MAX_TTL_SECONDS",
  "ALLOWED_ORIGINS",
  "ALLOWED_MODELS",
  "MAX_BODY_BYTES",
  "MAX_TOKENS_CAP",
  "MAX_CHOICES",
  "RATE_LIMIT_PER_MINUTE",
  "UPSTREAM_TIMEOUT_MS",
  "MAX_STREAM_SECONDS",
  "AUTH_FAILURES_PER_MINUTE",
  "MAX_CONCURRENT_PER_CLIENT",
];

const { values } = parseArgs({
  options: { port: { type: "string", default: "8787" }, host: { type: "string", default: "127.0.0.1" } },
});
if (!existsSync(path.join(DIST, "index.js"))) {
  console.error("worker/dist is missing: compile the worker first (npx tsc -p worker)");
  process.exit(1);
}
const bindings = Object.fromEntries(
  SETTINGS.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]]),
);
const mf = new Miniflare({ ...workerOptions(bindings), host: values.host, port: Number(values.port) });
const url = await mf.ready;
console.error(`docmem worker on ${url} (settings from the environment: ${Object.keys(bindings).join(", ") || "none"})`);
const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
