/**
 * Per-client cap on generations running at once, the upstream's real cost.
 *
 * The rate limit counts requests, but a request's cost is what it holds open: a stream may
 * run for MAX_STREAM_SECONDS and ask for up to MAX_CHOICES choices, so 60 requests a minute
 * could keep hundreds of generations going for one client. So each proxied request holds
 * slots, one per generation it asks for (limits.ts: `n`, or `best_of` when larger; 1 when
 * absent, and for embeddings), from when it is admitted (its body checked) until its
 * response has ended: the relay's `done` settles (the body complete, the client gone, an
 * upstream failure or timeout, the duration cap), or at once for a response with no body to
 * relay or a request that fails. A request that would take its client past
 * MAX_CONCURRENT_PER_CLIENT slots is refused 429 `rate_limited` with `Retry-After: 1`; one
 * that asks for more generations than the cap allows at all is refused 400
 * `too_many_choices`, as waiting would never help it.
 *
 * Best effort, like the in-isolate rate limiter: the counts live in this isolate's memory,
 * and a client whose requests land in several isolates (Cloudflare runs many) is counted in
 * each alone. The memory needs no sweep: a client is remembered only while it holds slots,
 * so the map is never larger than the requests in flight.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";

/** Slots held per client; a client holding none is not in the map. */
const held = new Map<string, number>();

/**
 * Takes `slots` slots for `client`, or throws (429 over the cap, 400 past it alone). Returns
 * the release, which the caller must run once the request's response has ended, on every
 * path; running it again does nothing.
 */
export function claimSlots(client: string, slots: number, config: Config): () => void {
  const limit = config.maxConcurrentPerClient;
  if (slots > limit) {
    throw new WorkerError(
      "too_many_choices",
      `this request asks for ${slots} generations at once; this worker runs at most ${limit} per client`,
    );
  }
  const running = held.get(client) ?? 0;
  if (running + slots > limit) {
    throw new WorkerError(
      "rate_limited",
      `this client already has ${running} generations running; the limit is ${limit}`,
      { headers: { "Retry-After": "1" } },
    );
  }
  held.set(client, running + slots);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (held.get(client) ?? slots) - slots;
    if (left > 0) held.set(client, left);
    else held.delete(client);
  };
}
