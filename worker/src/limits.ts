/**
 * What a request may ask of the upstream: body size, model, tokens and choices.
 *
 * The upstream's GPU time is the scarce thing the worker guards, so a request is read and
 * checked before anything is forwarded. The body is read with a byte budget: a declared
 * Content-Length over MAX_BODY_BYTES is refused at once, and a chunked body is counted as it
 * arrives and refused the moment it passes the budget, never buffered past it. The JSON is
 * then checked for the fields that decide cost: the model (allowlist), the output length,
 * n / best_of (capped at MAX_CHOICES) and the number of log-probability alternatives. The
 * number of generations a request asks for (`choices`: `n`, or `best_of` when larger, 1 when
 * absent) is returned for the per-client concurrency cap (concurrency.ts).
 *
 * The output length has several spellings, and the cap must hold whichever one the upstream
 * reads. `max_tokens` and OpenAI's newer `max_completion_tokens` are both capped; when
 * `max_tokens` is absent it is set (to `max_completion_tokens` if given, else to the cap), so
 * an upstream that knows only `max_tokens` is bounded too and no request runs unbounded.
 * llama.cpp's own `n_predict` is read before `max_tokens` and would override it, and its
 * `n_probs` (alternatives per token) has no bound, so a body with either is refused: the
 * OpenAI fields say the same thing and are checked. `logprobs` (a count in completions),
 * `top_logprobs` (chat) and vLLM's `prompt_logprobs` are capped at MAX_LOGPROBS, the most
 * vLLM serves by default and what docmem's scorer asks for; vLLM reads -1 as "the whole
 * vocabulary", so they must be whole numbers. Everything else passes through untouched for
 * the upstream to judge, e.g. `echo`. Messages never quote the body.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

export type JsonObject = Record<string, unknown>;

/** The most log-probability alternatives per token a request may ask for. */
export const MAX_LOGPROBS = 20;

/** Upstream-specific fields that would slip past the checked OpenAI ones, and what to use instead. */
const REFUSED_FIELDS: ReadonlyMap<string, string> = new Map([
  ["n_predict", "use `max_tokens`"],
  ["n_probs", "use `logprobs` (chat: `top_logprobs`)"],
]);

/** Fields counting log-probability alternatives; `logprobs` is a boolean in chat, a count in completions. */
const LOGPROB_COUNT_FIELDS = ["logprobs", "top_logprobs", "prompt_logprobs"] as const;

/** The endpoints that take a JSON body; each has its own cost fields. */
export type BodyKind = "chat" | "completions" | "embeddings";

export interface CheckedRequest {
  readonly body: JsonObject;
  readonly model: string;
  readonly stream: boolean;
  /** Generations the upstream runs for it at once: `n`, or `best_of` when larger; 1 when absent. */
  readonly choices: number;
}

/** Reads the whole body, refusing (413) past `maxBytes`. */
export async function readBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get("Content-Length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared.trim()) > maxBytes) {
    throw tooLarge(maxBytes);
  }
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/** Parses and checks a body; sets max_tokens when the request leaves it out (see above). */
export function checkRequest(kind: BodyKind, raw: Uint8Array, config: Config): CheckedRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(raw));
  } catch {
    throw badRequest("the body is not valid UTF-8 JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw badRequest("the body must be a JSON object");
  }
  const body = parsed as JsonObject;

  const model = body["model"];
  if (typeof model !== "string" || model.length === 0) throw badRequest("`model` must be a non-empty string");
  if (config.allowedModels !== "any" && !config.allowedModels.has(model)) {
    throw new WorkerError("model_not_allowed", "this model is not offered by the worker");
  }

  const stream = body["stream"] ?? false;
  if (typeof stream !== "boolean") throw badRequest("`stream` must be true or false");
  if (kind === "embeddings") return { body, model, stream: false, choices: 1 };

  for (const [field, instead] of REFUSED_FIELDS) {
    if (Object.hasOwn(body, field)) throw badRequest(`\`${field}\` is not accepted by this worker; ${instead}`);
  }
  const maxTokens = tokenLimit(body, "max_tokens", config);
  const maxCompletionTokens = tokenLimit(body, "max_completion_tokens", config);
  if (maxTokens === null) body["max_tokens"] = maxCompletionTokens ?? config.maxTokensCap;

  for (const field of LOGPROB_COUNT_FIELDS) {
    const value = body[field];
    // A boolean `logprobs` (chat) only switches them on; the count is `top_logprobs`.
    if (value === undefined || value === null || (field === "logprobs" && typeof value === "boolean")) continue;
    if (!isWholeNumber(value, 0) || value > MAX_LOGPROBS) {
      throw badRequest(`\`${field}\` must be a whole number from 0 to ${MAX_LOGPROBS}`);
    }
  }

  let choices = 1;
  for (const field of ["n", "best_of"]) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (!isWholeNumber(value, 1)) throw badRequest(`\`${field}\` must be a whole number ≥ 1`);
    if (value > config.maxChoices) {
      throw new WorkerError("too_many_choices", `\`${field}\` is over this worker's cap of ${config.maxChoices}`);
    }
    choices = Math.max(choices, value);
  }
  return { body, model, stream, choices };
}

/**
 * A length field's value, checked against the cap, or null when the request leaves it out.
 * 0 is allowed: a completion with `echo` and max_tokens 0 scores a prompt without generating.
 */
function tokenLimit(body: JsonObject, field: "max_tokens" | "max_completion_tokens", config: Config): number | null {
  const value = body[field];
  if (value === undefined || value === null) return null;
  if (!isWholeNumber(value, 0)) throw badRequest(`\`${field}\` must be a whole number ≥ 0`);
  if (value > config.maxTokensCap) {
    throw new WorkerError("max_tokens_too_large", `\`${field}\` is over this worker's cap of ${config.maxTokensCap}`);
  }
  return value;
}

function isWholeNumber(value: unknown, min: number): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= min;
}

function badRequest(message: string): WorkerError {
  return new WorkerError("bad_request", message);
}

function tooLarge(maxBytes: number): WorkerError {
  return new WorkerError("body_too_large", `the body is over this worker's limit of ${maxBytes} bytes`);
}
