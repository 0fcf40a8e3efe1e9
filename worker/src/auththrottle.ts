/**
 * Throttles failed authentications per calling address, so a token cannot be guessed at speed.
 *
 * The rate limiter (ratelimit.ts) is keyed by the client's name, which is known only once a
 * token matched, so it cannot slow someone who has no token. This one is keyed by the
 * caller's address: `CF-Connecting-IP`, which Cloudflare's edge sets and a client cannot
 * forge there (a request without it, e.g. one made locally, shares one key, "unknown"). It is
 * consulted before the token is compared: once an address has had AUTH_FAILURES_PER_MINUTE
 * failed authentications (401 `unauthorized`) in a one-minute window, each of its requests is
 * answered 429 `rate_limited` with Retry-After until that window ends, even one with a correct
 * token, so the correct guess is not confirmed either. Successful authentications do not
 * count, and neither does an expired token (only a holder of the signing key can make one).
 *
 * Comparisons already under way count as possible failures: when the failures so far plus
 * the comparisons in progress reach the limit, a further request waits (microseconds: a
 * comparison is a few digests) for one of them to end before it is judged. So a burst of
 * concurrent guesses gets no more tries than a sequence of them, and concurrent requests
 * with good tokens are delayed, never refused, by each other.
 *
 * Like the in-isolate rate limiter, this is best effort: the counts live in this isolate's
 * memory, Cloudflare runs many isolates and recycles them, and each counts alone. The memory
 * is bounded: an address is remembered only while it has failures in its window or a
 * comparison under way, expired entries are swept when MAX_TRACKED_ADDRESSES is reached, and
 * past that the oldest is forgotten rather than memory growing.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

const WINDOW_MS = 60_000;
/** Bound on remembered addresses; expired windows are swept when it is reached. */
const MAX_TRACKED_ADDRESSES = 10_000;
/** The key of requests without CF-Connecting-IP. */
const UNKNOWN_ADDRESS = "unknown";
/** An IPv6 address is at most 45 characters; anything longer is cut (a local caller can send anything). */
const MAX_ADDRESS_CHARS = 64;

interface Entry {
  /** When the window of `failures` began (the first failure in it). */
  start: number;
  failures: number;
  /** Comparisons under way. */
  pending: number;
  /** Requests waiting for a comparison to end before they are judged. */
  waiters: (() => void)[];
}

const entries = new Map<string, Entry>();

/** The caller's address, the throttle's key. */
export function callerAddress(request: Request): string {
  const address = request.headers.get("CF-Connecting-IP")?.trim() ?? "";
  return address.length > 0 ? address.slice(0, MAX_ADDRESS_CHARS) : UNKNOWN_ADDRESS;
}

/**
 * Runs `authenticate` for a request from `address` unless the address is throttled (then it
 * throws 429 without calling it), and counts it when it fails with `unauthorized`.
 */
export async function guardAuthentication<T>(
  address: string,
  config: Config,
  authenticate: () => Promise<T>,
): Promise<T> {
  const entry = await admit(address, config.authFailuresPerMinute);
  let failed = false;
  try {
    return await authenticate();
  } catch (error) {
    failed = error instanceof WorkerError && error.code === "unauthorized";
    throw error;
  } finally {
    settle(address, entry, failed);
  }
}

/** Waits until the address may try (counting the try as under way), or throws 429. */
async function admit(address: string, limit: number): Promise<Entry> {
  for (;;) {
    const now = Date.now();
    const entry = current(address, now);
    if (entry.failures >= limit) throw throttled(Math.max(1, Math.ceil((entry.start + WINDOW_MS - now) / 1000)));
    if (entry.failures + entry.pending < limit) {
      entry.pending += 1;
      return entry;
    }
    // If every comparison under way failed, the limit would be reached: wait for one to end.
    await new Promise<void>((resolve) => entry.waiters.push(resolve));
  }
}

/** The address's entry, created if need be, with an ended window's failures forgotten. */
function current(address: string, now: number): Entry {
  let entry = entries.get(address);
  if (entry === undefined) {
    if (entries.size >= MAX_TRACKED_ADDRESSES) sweep(now);
    entry = { start: now, failures: 0, pending: 0, waiters: [] };
    entries.set(address, entry);
  } else if (entry.failures > 0 && now - entry.start >= WINDOW_MS) {
    entry.failures = 0;
  }
  return entry;
}

function settle(address: string, entry: Entry, failed: boolean): void {
  entry.pending -= 1;
  if (failed) {
    const now = Date.now();
    if (entry.failures === 0 || now - entry.start >= WINDOW_MS) {
      entry.start = now;
      entry.failures = 0;
    }
    entry.failures += 1;
  }
  const waiters = entry.waiters;
  entry.waiters = [];
  for (const wake of waiters) wake();
  // Nothing to remember: a successful caller leaves no entry behind.
  if (entry.failures === 0 && entry.pending === 0 && entries.get(address) === entry) entries.delete(address);
}

function sweep(now: number): void {
  for (const [address, entry] of entries) {
    const idle = entry.pending === 0 && entry.waiters.length === 0;
    if (idle && (entry.failures === 0 || now - entry.start >= WINDOW_MS)) entries.delete(address);
  }
  // Still full of live windows: forget the oldest rather than grow without bound.
  if (entries.size >= MAX_TRACKED_ADDRESSES) {
    const oldest = entries.keys().next();
    if (!oldest.done) entries.delete(oldest.value);
  }
}

function throttled(retryAfterSeconds: number): WorkerError {
  return new WorkerError("rate_limited", "too many failed authentications from this address; retry later", {
    headers: { "Retry-After": String(retryAfterSeconds) },
  });
}
