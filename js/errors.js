// Errors of the docmem client: plain JS Errors with a stable `code`, so callers branch on
// the code and show the message. Errors cross the worker boundary as {code, message}.

export const codes = Object.freeze({
  WEBGPU_UNAVAILABLE: 'WEBGPU_UNAVAILABLE', // backend 'webgpu' was required and there is none
  MODEL_FETCH_FAILED: 'MODEL_FETCH_FAILED', // a model file could not be downloaded
  MODEL_CHECKSUM_MISMATCH: 'MODEL_CHECKSUM_MISMATCH', // a downloaded file's sha256 is not the pinned one
  MODEL_LOAD_FAILED: 'MODEL_LOAD_FAILED', // the files arrived but the runtime refused them
  MODEL_FAILED: 'MODEL_FAILED', // a loaded model failed while running (its context is full, …)
  QUOTA_EXCEEDED: 'QUOTA_EXCEEDED', // the browser's storage quota is full
  STORAGE_FAILED: 'STORAGE_FAILED', // IndexedDB / the library directory failed otherwise
  BAD_DOCUMENT: 'BAD_DOCUMENT', // empty, unreadable or unsupported document
  BAD_QUESTION: 'BAD_QUESTION', // empty question
  BAD_LIBRARY: 'BAD_LIBRARY', // an import that is not a docmem library, or a damaged one
  BAD_ARGUMENT: 'BAD_ARGUMENT', // an option that is not valid (an unknown chunker, …)
  NOT_FOUND: 'NOT_FOUND', // no such document
  ABORTED: 'ABORTED', // the AbortSignal fired
  CLOSED: 'CLOSED', // the DocMem was closed
  REMOTE_FAILED: 'REMOTE_FAILED', // a hosted model (OpenOptions.remote) failed or could not be reached; the message carries the host's code and words
  BUSY: 'BUSY', // the library is open in another DocMem (another tab, process or DocMem of this one), or the wasm object is in use by a call still running
  INTERNAL: 'INTERNAL', // anything else (the message says what)
});

export class DocMemError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'DocMemError';
    this.code = code;
  }
}

export function abortError() {
  return new DocMemError(codes.ABORTED, 'the operation was aborted');
}

/** An error as it crosses postMessage. */
export function toWire(e) {
  if (e instanceof DocMemError) return { code: e.code, message: e.message };
  return { code: codes.INTERNAL, message: String(e && e.message ? e.message : e) };
}

export function fromWire(w) {
  return new DocMemError(Object.hasOwn(codes, w.code) ? w.code : codes.INTERNAL, w.message);
}

/** A storage failure: the quota, or anything else. */
export function storageError(e, what) {
  const quota = e && (e.name === 'QuotaExceededError' || e.code === 'ENOSPC' || e.code === 22);
  return quota
    ? new DocMemError(codes.QUOTA_EXCEEDED, `storage quota exceeded while ${what}: remove documents or free space in this browser's storage`, { cause: e })
    : new DocMemError(codes.STORAGE_FAILED, `${what} failed: ${e && e.message ? e.message : e}`, { cause: e });
}
