/**
 * Per-client request rate limit.
 *
 * When a Workers Rate Limiting binding is configured (RATE_LIMITER), it is the limiter: it is
 * shared by every isolate in a Cloudflare location, its limit and period are set on the binding
 * in wrangler.toml, and RATE_LIMIT_PER_MINUTE is not used. Without the binding, a fixed
 * one-minute window per client is kept in this isolate's memory. That is best effort only:
 * Cloudflare runs many isolates and recycles them, each with its own counts, so a client can
 * exceed the limit across isolates. Production deployments should bind RATE_LIMITER.
 * A binding call that throws falls back to the in-isolate window rather than refusing traffic.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

const WINDOW_MS = 60_000;
/** Bound on remembered clients; expired windows are swept when it is reached. */
const MAX_TRACKED_CLIENTS = 10_000;

interface Window {
  start: number;
  count: number;
}

const windows = new Map<string, Window>();

/** Counts one request for `client`; throws 429 with Retry-After when over the limit. */
export async function enforceRateLimit(client: string, config: Config, now: number = Date.now()): Promise<void> {
  if (config.rateLimiter !== null) {
    let outcome: RateLimitOutcome | null = null;
    try {
      outcome = await config.rateLimiter.limit({ key: client });
    } catch {
      outcome = null;
    }
    if (outcome !== null) {
      // The binding does not say when its window ends; its longest period is a minute.
      if (!outcome.success) throw limited(60);
      return;
    }
  }
  const retryAfter = countInIsolate(client, config.rateLimitPerMinute, now);
  if (retryAfter !== null) throw limited(retryAfter);
}

/** Returns null when the request is within the limit, else seconds until the window resets. */
function countInIsolate(client: string, limit: number, now: number): number | null {
  let window = windows.get(client);
  if (window === undefined || now - window.start >= WINDOW_MS) {
    if (window === undefined && windows.size >= MAX_TRACKED_CLIENTS) sweep(now);
    window = { start: now, count: 0 };
    windows.set(client, window);
  }
  if (window.count >= limit) return Math.max(1, Math.ceil((window.start + WINDOW_MS - now) / 1000));
  window.count += 1;
  return null;
}

function sweep(now: number): void {
  for (const [client, window] of windows) {
    if (now - window.start >= WINDOW_MS) windows.delete(client);
  }
  // Still full of live windows: forget the oldest rather than grow without bound.
  if (windows.size >= MAX_TRACKED_CLIENTS) {
    const oldest = windows.keys().next();
    if (!oldest.done) windows.delete(oldest.value);
  }
}

function limited(retryAfterSeconds: number): WorkerError {
  return new WorkerError("rate_limited", "too many requests from this client; retry later", {
    headers: { "Retry-After": String(retryAfterSeconds) },
  });
}
