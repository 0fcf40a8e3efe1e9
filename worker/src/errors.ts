/**
 * The worker's error responses: one JSON shape with a stable machine-readable code.
 *
 * Clients (the docmem library, the web app) branch on `error.code`, never on the message,
 * so codes are a closed set and each maps to one HTTP status. The message is plain words for
 * a person; it never carries request text or secrets. Failures deep in the request path are
 * thrown as `WorkerError` and turned into a response in one place (index.ts).
 */

export type ErrorCode =
  | "bad_request"
  | "max_tokens_too_large"
  | "too_many_choices"
  | "unauthorized"
  | "token_expired"
  | "origin_not_allowed"
  | "model_not_allowed"
  | "not_found"
  | "method_not_allowed"
  | "body_too_large"
  | "rate_limited"
  | "client_closed"
  | "misconfigured"
  | "internal"
  | "upstream_rejected"
  | "upstream_unavailable"
  | "upstream_error"
  | "upstream_timeout";

/** The status each code is answered with; `upstream_rejected` carries the upstream's 4xx. */
const STATUS: Record<ErrorCode, number> = {
  bad_request: 400,
  max_tokens_too_large: 400,
  too_many_choices: 400,
  unauthorized: 401,
  token_expired: 401,
  origin_not_allowed: 403,
  model_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  body_too_large: 413,
  rate_limited: 429,
  // nginx's "client closed request": only ever logged, as there is no one left to answer.
  client_closed: 499,
  misconfigured: 500,
  internal: 500,
  upstream_rejected: 400,
  upstream_unavailable: 502,
  upstream_error: 502,
  upstream_timeout: 504,
};

export class WorkerError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, options: { status?: number; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = "WorkerError";
    this.code = code;
    this.status = options.status ?? STATUS[code];
    this.headers = options.headers ?? {};
  }
}

/** The error as a JSON response, with its body's size in bytes (the log's bytes out). */
export function errorResponse(error: WorkerError): { response: Response; bytes: number } {
  const body = new TextEncoder().encode(errorBody(error.code, error.message));
  const headers = new Headers(error.headers);
  headers.set("Content-Type", "application/json");
  return { response: new Response(body, { status: error.status, headers }), bytes: body.byteLength };
}

/** The same JSON as text, for an error reported inside an SSE stream. */
export function errorBody(code: ErrorCode, message: string): string {
  return JSON.stringify({ error: { code, message, type: "docmem_worker" } });
}
