/**
 * The served endpoints: what each does between an authenticated request and the upstream.
 *
 * The JSON endpoints (chat completions, completions, embeddings) read and check the body
 * (limits.ts), forward it (upstream.ts) and relay the upstream's body back unchanged
 * (relay.ts): SSE when the client asked for `stream: true`, JSON otherwise, with fields such
 * as `logprobs` arriving exactly as the upstream wrote them. Only the upstream's status and
 * content type are copied; its other headers (cookies, server banners) are not. Between the
 * checks and the upstream call a request takes its client's concurrency slots
 * (concurrency.ts), released when its response has ended whichever way it ends.
 * `GET /v1/models` answers the upstream's list filtered by ALLOWED_MODELS; when the upstream
 * has no /v1/models (404), the list is made from ALLOWED_MODELS itself (empty for `*`).
 */

import { claimSlots } from "./concurrency.js";
import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";
import { checkRequest, readBody, type BodyKind } from "./limits.js";
import { loggedModel, type RequestLog } from "./log.js";
import { relay, type RelayOutcome } from "./relay.js";
import { callUpstream, withTimeout } from "./upstream.js";

export interface Proxied {
  readonly response: Response;
  /** Set when the body is relayed from the upstream: settles when it has ended. */
  readonly done: Promise<RelayOutcome> | null;
}

export async function proxyJson(
  kind: BodyKind,
  path: string,
  request: Request,
  client: string,
  base: string,
  config: Config,
  log: RequestLog,
): Promise<Proxied> {
  // The declared size stands in the log if the body is refused before it is read.
  const declared = request.headers.get("Content-Length");
  if (declared !== null && /^\d{1,15}$/.test(declared)) log.line.bytes_in = Number(declared);
  const raw = await readBody(request, config.maxBodyBytes);
  log.line.bytes_in = raw.byteLength;
  const checked = checkRequest(kind, raw, config);
  log.line.model = loggedModel(checked.model, config.allowedModels);
  log.line.stream = checked.stream;

  const release = claimSlots(client, checked.choices, config);
  try {
    const call = await callUpstream(
      base,
      { method: "POST", path, body: JSON.stringify(checked.body), clientSignal: request.signal },
      config,
      (ms) => {
        log.line.upstream_ms = ms;
      },
    );
    const contentType = call.response.headers.get("Content-Type") ?? "application/json";
    const headers = new Headers({ "Content-Type": contentType });
    if (call.response.body === null) {
      release();
      return { response: new Response(null, { status: call.response.status, headers }), done: null };
    }

    const relayed = relay(call.response.body, {
      idleTimeoutMs: config.upstreamTimeoutMs,
      maxDurationMs: config.maxStreamSeconds * 1000,
      clientSignal: request.signal,
      sse: contentType.toLowerCase().startsWith("text/event-stream"),
      abortUpstream: call.abort,
    });
    // `done` never rejects and settles however the body ends: the slots go back then.
    const done = relayed.done.finally(release);
    return { response: new Response(relayed.stream, { status: call.response.status, headers }), done };
  } catch (error) {
    release();
    throw error;
  }
}

export async function listModels(base: string, config: Config, log: RequestLog): Promise<Response> {
  const allowed = (id: string): boolean => config.allowedModels === "any" || config.allowedModels.has(id);
  let models: ModelEntry[];
  try {
    models = (await upstreamModels(base, config, log)).filter((model) => allowed(model.id));
  } catch (error) {
    if (!(error instanceof WorkerError && error.code === "upstream_rejected" && error.status === 404)) throw error;
    const ids = config.allowedModels === "any" ? [] : [...config.allowedModels];
    models = ids.map((id) => ({ id, object: "model", created: 0, owned_by: "docmem" }));
  }
  return new Response(JSON.stringify({ object: "list", data: models }), {
    headers: { "Content-Type": "application/json" },
  });
}

/** A model list entry: an `id` plus whatever else the upstream says (e.g. vLLM's max_model_len). */
type ModelEntry = { readonly id: string } & Record<string, unknown>;

async function upstreamModels(base: string, config: Config, log: RequestLog): Promise<ModelEntry[]> {
  const call = await callUpstream(base, { method: "GET", path: "/v1/models" }, config, (ms) => {
    log.line.upstream_ms = ms;
  });
  const text = await withTimeout(call.response.text(), config.upstreamTimeoutMs);
  if (text === null) {
    call.abort();
    throw new WorkerError(
      "upstream_timeout",
      `the upstream did not send its model list within ${config.upstreamTimeoutMs} ms`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new WorkerError("upstream_error", "the upstream's model list is not JSON");
  }
  const data = typeof parsed === "object" && parsed !== null ? (parsed as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) throw new WorkerError("upstream_error", "the upstream's model list has no `data` array");
  return data.filter(
    (entry: unknown): entry is ModelEntry =>
      typeof entry === "object" && entry !== null && typeof (entry as { id?: unknown }).id === "string",
  );
}
