/**
 * The one place that talks to the upstream (vLLM, llama-server, any OpenAI-compatible host).
 *
 * A request is rebuilt rather than forwarded: only the validated JSON body, a JSON content
 * type and, when UPSTREAM_KEY is set, the worker's own `Authorization` go out; no client header
 * (the client's token above all) reaches the upstream. Redirects are not followed, so the
 * upstream key is never sent anywhere but UPSTREAM_URL. UPSTREAM_TIMEOUT_MS bounds the wait
 * for the response headers. Failures become the worker's own codes: unreachable → 502
 * upstream_unavailable, too slow → 504 upstream_timeout, 5xx or a redirect → 502
 * upstream_error, 4xx → the same status with `upstream_rejected` and the upstream's own
 * message (the client needs it to fix its request; it is never logged). A 401/403 from the
 * upstream is about the worker's key, not the client, and its text may quote the key, so it
 * becomes a 502 without the upstream's words.
 *
 * The client's own request signal is linked to the upstream request: a client that leaves,
 * even before the upstream's response headers (a model still reading a long prompt), aborts
 * the upstream fetch at once, so no GPU time is spent for no one. workerd aborts
 * `request.signal` on a disconnect only with the `enable_request_signal` compatibility flag
 * (wrangler.toml); without it the signal never fires and a departure is noticed by the relay
 * at its next write instead.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

/** The most of an upstream error body that is read to find its message. */
const MAX_ERROR_BODY_BYTES = 65_536;
const MAX_MESSAGE_CHARS = 1000;

export interface UpstreamCall {
  readonly response: Response;
  /** Cancels the upstream request (and its connection) if it is still running. */
  readonly abort: () => void;
}

export interface UpstreamRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly body?: string;
  /** The client's request signal: when it aborts (the client left), so does the upstream request. */
  readonly clientSignal?: AbortSignal;
}

/**
 * Sends the request and returns a 2xx response, or throws the mapped `WorkerError`.
 * `onUpstreamMs` gets the time to the response headers (or to the failure), for the log.
 */
export async function callUpstream(
  base: string,
  request: UpstreamRequest,
  config: Config,
  onUpstreamMs: (ms: number) => void,
): Promise<UpstreamCall> {
  const controller = new AbortController();
  const clientSignal = request.clientSignal;
  if (clientSignal !== undefined) {
    if (clientSignal.aborted) controller.abort();
    else clientSignal.addEventListener("abort", () => controller.abort(), { once: true });
  }
  const headers = new Headers({ Accept: "application/json, text/event-stream" });
  if (request.body !== undefined) headers.set("Content-Type", "application/json");
  if (config.upstreamKey !== null) headers.set("Authorization", `Bearer ${config.upstreamKey}`);

  const started = Date.now();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, config.upstreamTimeoutMs);

  let response: Response;
  try {
    response = await fetch(`${base}${request.path}`, {
      method: request.method,
      headers,
      body: request.body ?? null,
      redirect: "manual",
      signal: controller.signal,
    });
  } catch {
    if (clientSignal?.aborted === true) {
      throw new WorkerError("client_closed", "the client left before the upstream answered");
    }
    throw timedOut
      ? new WorkerError("upstream_timeout", `the upstream did not answer within ${config.upstreamTimeoutMs} ms`)
      : new WorkerError("upstream_unavailable", "the upstream could not be reached");
  } finally {
    clearTimeout(timer);
    onUpstreamMs(Date.now() - started);
  }
  const abort = (): void => controller.abort();

  if (response.status >= 200 && response.status < 300) {
    return { response, abort };
  }
  if (response.status === 401 || response.status === 403) {
    await discard(response);
    throw new WorkerError("upstream_error", "the upstream refused the worker's credentials");
  }
  if (response.status >= 400 && response.status < 500) {
    // An upstream's own 429 says when to come back; that header is passed on.
    const retryAfter = response.headers.get("Retry-After");
    const headers: Record<string, string> =
      retryAfter !== null && /^\d{1,6}$/.test(retryAfter) ? { "Retry-After": retryAfter } : {};
    const message = await upstreamMessage(response, config);
    throw new WorkerError("upstream_rejected", message, { status: response.status, headers });
  }
  await discard(response);
  throw new WorkerError("upstream_error", `the upstream failed (status ${response.status})`);
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

/**
 * The upstream's own error message: `error.message`, `message` or `detail` of a JSON body,
 * or its text. Read with a size bound and the same timeout; the upstream key is blanked out.
 */
async function upstreamMessage(response: Response, config: Config): Promise<string> {
  const fallback = `the upstream refused the request (status ${response.status})`;
  const text = await readBounded(response, config.upstreamTimeoutMs);
  if (text === null) return fallback;
  let message: unknown = text;
  try {
    const parsed: unknown = JSON.parse(text);
    message =
      pick(parsed, ["error", "message"]) ??
      pick(parsed, ["message"]) ??
      pick(parsed, ["detail"]) ??
      pick(parsed, ["error"]);
  } catch {
    // Not JSON: the text is the message.
  }
  if (typeof message !== "string" || message.trim().length === 0) return fallback;
  // Redact before cutting: a cut through the key would leave its first characters, which no
  // longer match the whole key.
  let clean = message.trim();
  if (config.upstreamKey !== null) clean = clean.split(config.upstreamKey).join("[redacted]");
  return clean.slice(0, MAX_MESSAGE_CHARS);
}

function pick(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return typeof current === "string" ? current : undefined;
}

async function readBounded(response: Response, timeoutMs: number): Promise<string | null> {
  if (response.body === null) return null;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let total = 0;
  const deadline = Date.now() + timeoutMs;
  try {
    while (total < MAX_ERROR_BODY_BYTES) {
      const result = await withTimeout(reader.read(), deadline - Date.now());
      if (result === null || result.done) break;
      total += result.value.byteLength;
      text += decoder.decode(result.value, { stream: true });
    }
  } catch {
    return null;
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return text + decoder.decode();
}

/** Resolves to the promise's value, or null once `ms` have passed. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), Math.max(0, ms));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
