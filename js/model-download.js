// Downloading a model file: a GET that resumes with a Range request, its body streamed
// through a sink and a hasher, progress at most every MiB, and the errors each failure is
// reported with. Shared by the browser's model cache (model-cache.js) and Node's
// (node/fs-model-cache.js), which differ only in where the bytes go.

import { DocMemError, codes } from './errors.js';

/** Bytes read back at a time when re-hashing a stored prefix. */
export const CHUNK = 4 << 20;
const PROGRESS_EVERY = 1 << 20; // bytes between progress callbacks

export const mb = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(1)} MB`);

export function checksumError(file, got, partial = false) {
  return new DocMemError(
    codes.MODEL_CHECKSUM_MISMATCH,
    `${file.path}: sha256 ${got}, expected ${file.sha256}; the ${partial ? 'downloaded' : 'stored'} copy was deleted, so the next try downloads it again`,
  );
}

export function fetchError(file, what, cause) {
  return new DocMemError(codes.MODEL_FETCH_FAILED, `${file.url}: ${what}`, cause ? { cause } : undefined);
}

export function quotaError(needed, free, where, advice) {
  return new DocMemError(codes.QUOTA_EXCEEDED, `the models need ${mb(needed)} more of ${where}, and only ${mb(Math.max(0, free))} is free: ${advice}`);
}

/**
 * GET `file.url`, from byte `from` when from > 0 (a Range request), with fetch's
 * `options` besides (a browser's `cache: 'no-store'`). Returns
 * {response, start}: start is where the body begins in the file (0 when the server
 * ignored the Range and sent the whole file, or answered 416).
 */
export async function request(file, from, options = {}) {
  const init = { ...options, ...(from > 0 ? { headers: { range: `bytes=${from}-` } } : {}) };
  let response;
  try {
    response = await fetch(file.url, init);
  } catch (e) {
    throw fetchError(file, e.message, e);
  }
  if (from > 0 && response.status === 416) {
    // What is stored is not a prefix of the file (longer than it): start again.
    await response.body?.cancel();
    return request(file, 0, options);
  }
  if (!response.ok) throw fetchError(file, `HTTP ${response.status}`);
  if (from > 0 && response.status === 206) {
    const m = /^bytes (\d+)-/.exec(response.headers.get('content-range') || '');
    if (m && Number(m[1]) === from) return { response, start: from };
    await response.body?.cancel(); // a range we did not ask for
    return request(file, 0, options);
  }
  return { response, start: 0 };
}

/**
 * Stream `response`'s body through `sink(chunk)` (which stores it) and the hasher,
 * counting from `start`. Returns the bytes of the file now stored. A lost connection is
 * MODEL_FETCH_FAILED that says how much is kept.
 */
export async function pump(file, response, start, hash, sink, progress) {
  let pos = start;
  const reader = response.body.getReader();
  try {
    for (;;) {
      let part;
      try {
        part = await reader.read();
      } catch (e) {
        throw fetchError(file, `the download stopped after ${pos} of ${file.size || '?'} bytes (${e.message}); what arrived is kept and the next try resumes from there`, e);
      }
      if (part.done) break;
      const chunk = part.value;
      try {
        await sink(chunk, pos);
      } catch (e) {
        await reader.cancel().catch(() => {});
        throw e;
      }
      hash.update(chunk);
      pos += chunk.length;
      progress(pos);
    }
  } finally {
    reader.releaseLock?.();
  }
  return pos;
}

/** Calls onProgress at most every PROGRESS_EVERY bytes (and always at the end). */
export function throttled(onProgress, total, resumed) {
  let last = -Infinity;
  return (loaded, force = false) => {
    if (force || loaded - last >= PROGRESS_EVERY || loaded === total) {
      last = loaded;
      onProgress(loaded, total, false, { resumed });
    }
  };
}

export function finishHash(hash) {
  const got = hash.finish();
  hash.free?.();
  return got;
}
