// The transport to hosted models: how the wasm package's remote roles (RemoteModel,
// Embedder.remote; crates/wasm/src/remote.rs) reach an OpenAI-compatible host, the docmem
// edge worker or any other. The protocol (request bodies, streamed events, the host's
// errors) is the Rust side's; this file only moves bytes, with the bearer token, and is
// used inside the package's worker (worker.js), where the models run.
//
// Three ways to POST, because the wasm side needs three:
// - post(path, body): the whole reply ({status, body}, any status). The reader's memory,
//   the scorer's log-probabilities and the clues are whole replies.
// - postStream(path, body): the answer, streamed. Pulled, not pushed: once the headers are
//   in it gives {status, body, next, cancel}; Rust calls next() for each piece (a
//   Uint8Array, null at the end), so no Rust closure has to stay alive inside JavaScript
//   between calls. cancel() aborts the fetch, so the host sees the connection close and
//   stops generating. A failing status comes with the whole body instead.
// - postSync(path, body): the same reply, synchronously. The embedder needs it: the
//   library embeds inside its synchronous calls (ingest, search). The package runs in a
//   worker, where blocking is allowed: a synchronous XMLHttpRequest in a browser's Web
//   Worker; in Node, which has no synchronous HTTP, the one node/worker.js gives
//   (node/sync-post.js: a helper thread fetches while this one waits).
//
// Every way sends a request again by the runtime's rules (crates/runtime/src/remote/
// retry.rs, mirrored in `retries`): a rate limit (429) is waited out for its Retry-After, a
// few times; a 502, a 503 or no reply at all is tried twice more after half a second, then
// a second. postSync sleeps between tries with Atomics.wait, which a browser allows only
// where SharedArrayBuffer exists (a cross-origin-isolated page); elsewhere it tries a
// dropped connection, a 502 or a 503 again at once and cannot wait out a rate limit (the
// 429 is returned, and the call fails with REMOTE_FAILED).
//
// abort() fails every request in flight at once (not postSync's, which nothing can
// interrupt): the worker calls it when its request is cancelled, so a cancel never waits
// for a slow host.

import { DocMemError, codes } from './errors.js';

/** How long one request may take before it fails (a reader's memory of a long window can take minutes). */
export const TIMEOUT_MS = 10 * 60_000;
/** How often a rate-limited (429) request is sent again, each after its Retry-After (1–30 s). */
export const RATE_LIMIT_RETRIES = 4;
/** How often a request that got no reply, a 502 or a 503 is sent again. */
export const UNAVAILABLE_RETRIES = 2;

/**
 * A request's failures so far, counted by kind (each kind has its own budget). `next(status,
 * retryAfter)` counts one (status null: no reply) and gives the milliseconds to wait before
 * sending the request again, or null when it is final. The rules are
 * crates/runtime/src/remote/retry.rs's (`Retries`); tests/wasm/remote.mjs checks the same
 * table of cases.
 */
export function retries() {
  let rateLimited = 0;
  let unavailable = 0;
  return {
    next(status, retryAfter) {
      // Whole seconds in ASCII digits, at most 30 (however many digits); anything else is ignored.
      const text = (retryAfter ?? '').trim();
      const asked = /^[0-9]+$/.test(text) ? Math.min(30, Number(text)) * 1000 : null;
      if (status === 429) {
        rateLimited += 1;
        return rateLimited <= RATE_LIMIT_RETRIES ? Math.max(1000, asked ?? 1000) : null;
      }
      if (status === 502 || status === 503 || status === null) {
        unavailable += 1;
        const backoff = 500 * 2 ** (Math.min(unavailable, 8) - 1);
        return unavailable <= UNAVAILABLE_RETRIES ? ((status === null ? null : asked) ?? backoff) : null;
      }
      return null;
    },
  };
}

/** Wait `ms` milliseconds, unless `signal` aborts first (or has already). */
function wait(ms, signal) {
  if (signal.aborted) return Promise.reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
      },
      { once: true },
    );
  });
}

/**
 * The API's base URL from what a user gives: https, or http to this machine unless
 * `allowHttp` (the token and the text would otherwise cross the network unencrypted),
 * without a trailing `/` or `/v1` (the API's paths carry it), as the CLI reads --remote.
 * Throws BAD_ARGUMENT naming `option`.
 */
export function remoteBase(url, option = 'remote.url', allowHttp = false) {
  const bad = (why) => new DocMemError(codes.BAD_ARGUMENT, `${option}: ${why}`);
  if (typeof url !== 'string' && !(url instanceof URL)) throw bad('the host\u2019s URL is required (http:// or https://)');
  let parsed;
  try {
    parsed = new URL(String(url).trim());
  } catch {
    throw bad(`'${url}' is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw bad(`'${url}' is not an http:// or https:// URL`);
  if (parsed.username || parsed.password) throw bad('put the token in remote.token, not in the URL');
  const loopback = ['localhost', '[::1]'].includes(parsed.hostname) || /^127\.\d+\.\d+\.\d+$/.test(parsed.hostname);
  if (parsed.protocol === 'http:' && !loopback && !allowHttp) {
    throw bad(`'${url}' is plain http to another machine: the token and the documents would cross the network unencrypted (use https://, or remote.allowHttp: true for a network you trust)`);
  }
  const path = parsed.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${parsed.origin}${path}`;
}

/** The error for a request that got no reply: the URL and the client's reason (never the token). */
export function unreachable(url, e) {
  const cause = e && e.cause && e.cause.message ? e.cause.message : null;
  const reason = e && e.name === 'AbortError' ? 'cancelled' : cause || (e && e.message) || String(e);
  return new Error(`POST ${url}: ${reason}`);
}

/**
 * A transport to the host at `url` (see the header) sending `token` as a bearer token
 * (none when empty). `syncPost(headers)` makes postSync (default: a synchronous
 * XMLHttpRequest, a browser worker's way).
 */
export function makeTransport({ url, token, allowHttp = false, syncPost = xhrSyncPost }) {
  const base = remoteBase(url, 'remote.url', allowHttp);
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const inFlight = new Map(); // AbortController → its done(), for fetches not yet finished
  const postSync = syncPost(headers);

  async function start(path, body) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`no reply in ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
    const done = () => {
      clearTimeout(timer);
      inFlight.delete(controller);
    };
    inFlight.set(controller, done);
    try {
      // A rate limit (the worker's 429) is waited out, so a burst of scoring requests slows
      // down instead of failing a whole ingest; a dropped connection, a 502 or a 503 is
      // tried again (see retries).
      const failures = retries();
      for (;;) {
        let response;
        try {
          response = await fetch(base + path, { method: 'POST', headers, body, signal: controller.signal });
        } catch (e) {
          // No reply. A cancel or the timeout is final; anything else is tried again.
          const delay = controller.signal.aborted ? null : failures.next(null, null);
          if (delay === null) throw e;
          await wait(delay, controller.signal);
          continue;
        }
        const delay = failures.next(response.status, response.headers.get('retry-after'));
        if (delay === null) return { response, controller, done };
        await response.body?.cancel();
        await wait(delay, controller.signal);
      }
    } catch (e) {
      done();
      throw unreachable(base + path, e); // aborted with the timeout's reason, or AbortError for abort()
    }
  }

  /** The whole reply of a started request, any status. */
  async function whole(path, { response, done }) {
    try {
      return { status: response.status, body: await response.text() };
    } catch (e) {
      throw unreachable(base + path, e);
    } finally {
      done();
    }
  }

  return {
    async post(path, body) {
      return whole(path, await start(path, body));
    },
    async postStream(path, body) {
      const started = await start(path, body);
      const { response, controller, done } = started;
      if (!response.ok || !response.body) return whole(path, started);
      const reader = response.body.getReader();
      return {
        status: response.status,
        body: '',
        async next() {
          try {
            const { done: end, value } = await reader.read();
            if (end) done();
            return end ? null : value;
          } catch (e) {
            done();
            throw unreachable(base + path, e);
          }
        },
        cancel() {
          controller.abort();
          done();
        },
      };
    },
    postSync: (path, body) => postSync(base + path, body),
    abort() {
      for (const [controller, done] of inFlight) {
        controller.abort();
        done(); // its timer too
      }
    },
  };
}

/** Block this worker for `ms` milliseconds; false where it cannot (no SharedArrayBuffer). */
function sleepSync(ms) {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  return true;
}

/** postSync in a browser's Web Worker: a synchronous XMLHttpRequest, tried again as `retries` says. */
function xhrSyncPost(headers) {
  return (url, body) => {
    const failures = retries();
    for (;;) {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', url, false);
      xhr.timeout = TIMEOUT_MS; // allowed for synchronous requests in workers
      for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
      let failure = null;
      try {
        xhr.send(body);
      } catch (e) {
        failure = e;
      }
      // Status 0: no reply (refused, a CORS failure, the timeout).
      const status = failure || xhr.status === 0 ? null : xhr.status;
      const delay = failures.next(status, status === null ? null : xhr.getResponseHeader('retry-after'));
      const final = delay === null || (!sleepSync(delay) && status === 429);
      if (!final) continue;
      if (status === null) throw unreachable(url, failure ?? new Error('no reply (the host is unreachable, or refused the cross-origin request)'));
      return { status, body: xhr.responseText };
    }
  };
}
