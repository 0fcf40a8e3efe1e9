/**
 * Which web pages may call the worker from a browser.
 *
 * Browsers send `Origin` on cross-origin requests; a request whose origin is not in
 * ALLOWED_ORIGINS (exact match, scheme and port included) is refused with 403 before it is
 * authenticated or forwarded, preflight or not. Requests without an Origin header (the CLI,
 * a server) are not browser requests and pass. An allowed origin gets
 * `Access-Control-Allow-Origin` on every response, errors included, so the page can read
 * the error's code instead of seeing an opaque network failure. `Vary: Origin` is always set
 * because the answer depends on it, and `Cross-Origin-Resource-Policy: cross-origin` too, so
 * a cross-origin-isolated page (the docmem app, for wasm threads) may read the answers; it
 * grants nothing else, since access is by bearer token, never by cookie.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

/** How long a browser may cache a preflight answer (seconds). */
const PREFLIGHT_MAX_AGE = "86400";

/** Returns the request's allowed origin, null when it has none, or throws 403. */
export function checkOrigin(request: Request, config: Config): string | null {
  const origin = request.headers.get("Origin");
  if (origin === null) return null;
  if (!config.allowedOrigins.has(origin)) {
    throw new WorkerError("origin_not_allowed", "this origin may not call the worker");
  }
  return origin;
}

/** Adds the CORS response headers for `origin` (when there is one) to `headers`. */
export function applyCors(headers: Headers, origin: string | null): void {
  headers.append("Vary", "Origin");
  headers.set("Cross-Origin-Resource-Policy", "cross-origin");
  if (origin === null) return;
  headers.set("Access-Control-Allow-Origin", origin);
  headers.set("Access-Control-Expose-Headers", "Retry-After");
}

/** The answer to an OPTIONS preflight on a served path. */
export function preflightResponse(methods: readonly string[]): Response {
  const allowed = [...methods, "OPTIONS"].join(", ");
  return new Response(null, {
    status: 204,
    headers: {
      Allow: allowed,
      "Access-Control-Allow-Methods": allowed,
      "Access-Control-Allow-Headers": "Authorization, Content-Type",
      "Access-Control-Max-Age": PREFLIGHT_MAX_AGE,
    },
  });
}
