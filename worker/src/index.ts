/**
 * The docmem edge worker: an authenticated, rate-limited OpenAI-compatible proxy in front of
 * one configured upstream. This module routes a request through the checks in a fixed order
 * and turns any failure into the worker's JSON error; it holds no logic of its own.
 *
 * Order: browser origin (403) → configuration (500: no usable upstream, a secret too short)
 * → path (404) → CORS preflight, which is answered without authentication → method (405) →
 * the caller address's failed-authentication throttle (429, before the token is compared) →
 * token (401) → per-client rate limit (429) → the endpoint: body limits, the per-client cap
 * on concurrent generations (429), the upstream. No exception reaches the runtime: anything
 * unexpected is answered 500 `internal`. Every response carries the CORS headers of an
 * allowed origin, and every request writes exactly one log line (log.ts).
 */

import { authenticate } from "./auth.js";
import { callerAddress, guardAuthentication } from "./auththrottle.js";
import { readConfig, type Config, type Env } from "./config.js";
import { applyCors, checkOrigin, preflightResponse } from "./cors.js";
import { errorResponse, WorkerError } from "./errors.js";
import type { BodyKind } from "./limits.js";
import { RequestLog } from "./log.js";
import { listModels, proxyJson, type Proxied } from "./proxy.js";
import { enforceRateLimit } from "./ratelimit.js";

type Route = { readonly method: "POST"; readonly kind: BodyKind } | { readonly method: "GET"; readonly kind: "models" };

const ROUTES: ReadonlyMap<string, Route> = new Map<string, Route>([
  ["/v1/chat/completions", { method: "POST", kind: "chat" }],
  ["/v1/completions", { method: "POST", kind: "completions" }],
  ["/v1/embeddings", { method: "POST", kind: "embeddings" }],
  ["/v1/models", { method: "GET", kind: "models" }],
]);
const SERVED_PATHS: ReadonlySet<string> = new Set(ROUTES.keys());

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const log = new RequestLog(request, SERVED_PATHS);
    ctx.waitUntil(log.written);
    let origin: string | null = null;
    let result: Proxied;
    try {
      const config = readConfig(env);
      origin = checkOrigin(request, config);
      result = await handle(request, config, log);
    } catch (error) {
      const known =
        error instanceof WorkerError ? error : new WorkerError("internal", "the worker failed unexpectedly");
      const { response, bytes } = errorResponse(known);
      log.line.code = known.code;
      log.line.bytes_out = bytes;
      result = { response, done: null };
    }
    const { response, done } = result;
    applyCors(response.headers, origin);
    response.headers.set("Cache-Control", "no-store");
    response.headers.set("X-Content-Type-Options", "nosniff");
    log.line.status = response.status;

    if (done === null) {
      log.write();
    } else {
      ctx.waitUntil(
        done.then((outcome) => {
          log.line.bytes_out = outcome.bytes;
          log.line.end = outcome.end;
          if (outcome.end === "upstream_timeout" || outcome.end === "max_duration") {
            log.line.code = "upstream_timeout";
          } else if (outcome.end === "upstream_failed") {
            log.line.code = "upstream_error";
          }
          log.write();
        }),
      );
    }
    return response;
  },
} satisfies ExportedHandler<Env>;

async function handle(request: Request, config: Config, log: RequestLog): Promise<Proxied> {
  const base = config.upstreamUrl;
  if (base === null) throw new WorkerError("misconfigured", "the worker has no valid UPSTREAM_URL");
  if (config.misconfigured !== null) throw new WorkerError("misconfigured", config.misconfigured);

  const path = new URL(request.url).pathname;
  const route = ROUTES.get(path);
  if (route === undefined) throw new WorkerError("not_found", "no such endpoint");
  if (request.method === "OPTIONS") return { response: preflightResponse([route.method]), done: null };
  if (request.method !== route.method) {
    throw new WorkerError("method_not_allowed", `use ${route.method} for this endpoint`, {
      headers: { Allow: `${route.method}, OPTIONS` },
    });
  }

  const client = await guardAuthentication(callerAddress(request), config, () =>
    authenticate(request.headers.get("Authorization"), config),
  );
  log.line.client = client;
  await enforceRateLimit(client, config);

  if (route.kind === "models") return { response: await listModels(base, config, log), done: null };
  return proxyJson(route.kind, path, request, client, base, config, log);
}
