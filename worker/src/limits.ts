/**
 * What a request may ask of the upstream: body size, model, tokens and choices.
 *
 * The upstream's GPU time is the scarce thing the worker guards, so a request is read and
 * checked before anything is forwarded. The body is read with a byte budget: a declared
 * Content-Length over MAX_BODY_BYTES is refused at once, and a chunked body is counted as it
 * arrives and refused the moment it passes the budget, never buffered past it. The JSON is
 * then checked for the fields that decide cost: the model (allowlist), max_tokens (capped,
 * and set to the cap when absent, so no request runs unbounded), and n / best_of (capped at
 * MAX_CHOICES). Everything else passes through untouched for the upstream to judge, e.g.
 * `logprobs` and `echo`, which the docmem scorer needs. Messages never quote the body.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

export type JsonObject = Record<string, unknown>;

/** The endpoints that take a JSON body; each has its own cost fields. */
export type BodyKind = "chat" | "completions" | "embeddings";

export interface CheckedRequest {
  readonly body: JsonObject;
  readonly model: string;
  readonly stream: boolean;
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

/** Parses and checks a body; sets max_tokens to the cap when the request leaves it out. */
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
  if (kind === "embeddings") return { body, model, stream: false };

  const tokenFields = kind === "chat" ? ["max_tokens", "max_completion_tokens"] : ["max_tokens"];
  let tokensGiven = false;
  for (const field of tokenFields) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    // 0 is allowed: a completion with `echo` and max_tokens 0 scores a prompt without generating.
    if (!isWholeNumber(value, 0)) throw badRequest(`\`${field}\` must be a whole number ≥ 0`);
    if (value > config.maxTokensCap) {
      throw new WorkerError("max_tokens_too_large", `\`${field}\` is over this worker's cap of ${config.maxTokensCap}`);
    }
    tokensGiven = true;
  }
  if (!tokensGiven) body["max_tokens"] = config.maxTokensCap;

  for (const field of ["n", "best_of"]) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (!isWholeNumber(value, 1)) throw badRequest(`\`${field}\` must be a whole number ≥ 1`);
    if (value > config.maxChoices) {
      throw new WorkerError("too_many_choices", `\`${field}\` is over this worker's cap of ${config.maxChoices}`);
    }
  }
  return { body, model, stream };
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
