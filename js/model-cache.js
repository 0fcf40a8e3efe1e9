// Model files in a browser, fetched once by URL with download progress, checked against
// their pinned sha256, and kept in the Origin Private File System (a second visit loads
// them with no network). Node's model cache is a directory (node/fs-model-cache.js); the
// download itself (resuming, hashing on the way) is model-download.js, shared by both.
//
// A model is {name, files: [{path, url, size, sha256}]}; each file comes back as a
// ModelFile with `size`, `read(offset, length)` (synchronous: the wasm package's
// Device.loadLm and loadEmbedder read every file through it) and `bytes()` (the whole
// file, for checks).
//
// Downloads respect the device: a file streams into storage as it arrives and is hashed
// on the way (an incremental SHA-256 from `hasher`, the wasm package's Sha256 in the
// worker), so no more than one network chunk and one 4 MiB read
// buffer are ever held in memory, whatever the file's size. An interrupted download keeps
// what it stored; the next try hashes that prefix again (streaming, from storage) and asks
// the server for the rest with a Range request (`bytes=N-`); a server that answers 200
// instead of 206 is read from byte 0 again. A file whose hash is not the pinned one is
// deleted (partial or complete), so the next try starts clean. Before a download starts,
// `prepare(files)` refuses with QUOTA_EXCEEDED when the bytes still to fetch exceed the
// free storage (navigator.storage.estimate()).
//
// Browser storage (OPFS directory `docmem-models/`):
//   <sha256>      the file's bytes, appended through a sync access handle (a dedicated
//                 worker) as they arrive; a partial download is this file, shorter
//   <sha256>.ok   written once the whole file hashed to <sha256>: {sha256, size, url}.
//                 A file with its .ok is trusted without hashing it again (re-hashing 1 GB
//                 on every visit would take seconds); OPFS is private to the origin.
// The Cache API cannot append, so it cannot resume; entries that an older docmem stored
// there (`docmem-models` cache, x-docmem-sha256 header) are still read in place (no copy,
// no migration). Where OPFS is missing (a private window in some browsers) a file streams
// into the Cache API instead, hashed on the way, without resuming.
//
// Hasher: a function returning {update(Uint8Array), finish() → 64 hex digits, free?()},
// the shape of the wasm package's `Sha256` (so `() => new w.Sha256()` fits as is).

import { DocMemError, codes, storageError } from './errors.js';
import { CHUNK, checksumError, fetchError, finishHash, mb, pump, quotaError, request, throttled } from './model-download.js';

const HASH_HEADER = 'x-docmem-sha256';
const CACHE_NAME = 'docmem-models';
const DIR_NAME = 'docmem-models';
const PERSIST_ASKED = '.persist-asked';
const NO_STORE = { cache: 'no-store' }; // the HTTP cache would keep a second copy of the model
const FLUSH_EVERY = 16 << 20; // bytes between flushes of the sync access handle (what a crash can lose)

/** A stored file held as a Blob (an OPFS File: disk-backed), read in slices; also a File
 * the user chose, read where it lies. */
export class BlobFile {
  constructor(blob) {
    this.size = blob.size;
    this.blob = blob;
  }
  read(offset, length) {
    // Workers have FileReaderSync: a slice at a time, never the whole model in JS memory.
    const slice = this.blob.slice(offset, offset + length);
    return new Uint8Array(new FileReaderSync().readAsArrayBuffer(slice));
  }
  async bytes() {
    return new Uint8Array(await this.blob.arrayBuffer());
  }
}

async function opfsDir() {
  if (!globalThis.navigator?.storage?.getDirectory) return null;
  try {
    const root = await navigator.storage.getDirectory();
    return await root.getDirectoryHandle(DIR_NAME, { create: true });
  } catch {
    return null; // no OPFS here (some private windows)
  }
}

async function fileIn(dir, name, create = false) {
  try {
    return await dir.getFileHandle(name, { create });
  } catch (e) {
    if (e && (e.name === 'NotFoundError' || e.name === 'TypeMismatchError')) return null;
    throw e;
  }
}

async function removeIn(dir, name) {
  try {
    await dir.removeEntry(name);
  } catch (e) {
    if (!e || e.name !== 'NotFoundError') throw e;
  }
}

async function readText(dir, name) {
  const h = await fileIn(dir, name);
  return h ? (await h.getFile()).text() : null;
}

async function writeText(dir, name, text) {
  const h = await fileIn(dir, name, true);
  const w = await h.createWritable();
  await w.write(text);
  await w.close();
}

/**
 * Ask the browser once to keep this origin's storage under pressure (persist() exists on
 * pages only, not in workers: the page calls this before the worker starts). The answer
 * is remembered beside the models, so the question is never asked twice. Returns
 * {asked, granted}.
 */
export async function requestPersistence() {
  const storage = globalThis.navigator?.storage;
  if (!storage?.persisted) return { asked: false, granted: false };
  if (await storage.persisted()) return { asked: true, granted: true };
  const dir = await opfsDir();
  if (!storage.persist || !dir) return { asked: dir ? (await readText(dir, PERSIST_ASKED)) !== null : false, granted: false };
  if ((await readText(dir, PERSIST_ASKED)) !== null) return { asked: true, granted: false };
  const granted = await storage.persist();
  await writeText(dir, PERSIST_ASKED, JSON.stringify({ granted, at: new Date().toISOString() }));
  return { asked: true, granted };
}

/** Bytes of model files this origin keeps in OPFS (the storage line of the app adds them). */
export async function storedModelBytes() {
  const dir = await opfsDir();
  let bytes = 0;
  if (dir) for await (const [, h] of dir.entries()) if (h.kind === 'file') bytes += (await h.getFile()).size;
  return bytes;
}

/**
 * Run `fn` holding the origin's model-store lock (a Web Lock, across tabs and workers):
 * 'shared' while model files are read or written (a load), 'prune' to remove files, only
 * when no other context holds the store (`fn` is skipped otherwise and the result is
 * null: the next visit prunes). Without Web Locks, 'shared' runs `fn` and 'prune' skips.
 */
export async function withModelStore(mode, fn) {
  const locks = globalThis.navigator?.locks;
  if (!locks) return mode === 'shared' ? fn() : null;
  if (mode === 'shared') return locks.request(DIR_NAME, { mode: 'shared' }, fn);
  return locks.request(DIR_NAME, { mode: 'exclusive', ifAvailable: true }, (lock) => (lock ? fn() : null));
}

/** Browser: the Origin Private File System (see the top of this file). */
export class WebModelCache {
  /** options: {hasher} (required to download: () => {update, finish}). */
  constructor(options = {}) {
    if (typeof options === 'string') options = {}; // the old (cacheName) signature
    this.hasher = options.hasher;
    this.dirPromise = null;
  }

  dir() {
    this.dirPromise ??= opfsDir();
    return this.dirPromise;
  }

  /** A verified stored copy of `file`: a BlobFile, or null. */
  async stored(file) {
    const dir = await this.dir();
    if (dir) {
      const text = await readText(dir, `${file.sha256}.ok`);
      const data = text !== null ? await fileIn(dir, file.sha256) : null;
      if (data) {
        let ok = null;
        try {
          ok = JSON.parse(text);
        } catch {
          ok = null;
        }
        const blob = await data.getFile();
        if (ok && ok.sha256 === file.sha256 && blob.size === ok.size && (!file.size || blob.size === file.size)) return new BlobFile(blob);
      }
    }
    // An older docmem's Cache API entry: trusted as it was (its header is the hash it checked).
    if (globalThis.caches) {
      const hit = await (await caches.open(CACHE_NAME)).match(file.url);
      if (hit && hit.headers.get(HASH_HEADER) === file.sha256) {
        const blob = await hit.blob();
        if (!file.size || blob.size === file.size) return new BlobFile(blob);
      }
    }
    return null;
  }

  /** Bytes of `file` already stored by an interrupted download. */
  async partial(file) {
    const dir = await this.dir();
    const h = dir ? await fileIn(dir, file.sha256) : null;
    return h ? (await h.getFile()).size : 0;
  }

  /**
   * Before any download: refuse with QUOTA_EXCEEDED when the bytes still to fetch exceed
   * what the origin may still store. Returns {needed, free, persisted, persistAsked}.
   */
  async prepare(files) {
    let needed = 0;
    for (const f of files) {
      if (await this.stored(f)) continue;
      needed += Math.max(0, (f.size || 0) - Math.min(await this.partial(f), f.size || 0));
    }
    const storage = globalThis.navigator?.storage;
    // Pages ask for persistence themselves (requestPersistence); in a worker only the answer is read.
    const persistence = storage?.persist ? await requestPersistence() : null;
    const persisted = persistence ? persistence.granted : storage?.persisted ? await storage.persisted() : false;
    const dir = await this.dir();
    const persistAsked = persistence ? persistence.asked : dir ? (await readText(dir, PERSIST_ASKED)) !== null : false;
    let free = Infinity;
    if (storage?.estimate) {
      const { quota, usage } = await storage.estimate();
      if (Number.isFinite(quota)) free = quota - usage;
    }
    if (needed > free) throw quotaError(needed, free, "this browser's storage for this site", "free space on the device or remove other sites' data, then try again");
    return { needed, free, persisted, persistAsked };
  }

  async file(file, onProgress = () => {}) {
    const hit = await this.stored(file);
    if (hit) {
      onProgress(hit.size, hit.size, true, { resumed: 0 });
      return hit;
    }
    if (!this.hasher) throw new DocMemError(codes.INTERNAL, 'WebModelCache needs a hasher to download');
    const dir = await this.dir();
    if (!dir) return this.intoCache(file, onProgress);
    let handle;
    try {
      handle = await fileIn(dir, file.sha256, true);
    } catch (e) {
      throw storageError(e, `storing ${file.path}`);
    }
    const sync = typeof handle.createSyncAccessHandle === 'function' && typeof DedicatedWorkerGlobalScope !== 'undefined';
    try {
      if (sync) await this.downloadSync(dir, handle, file, onProgress);
      else await this.downloadWritable(dir, handle, file, onProgress);
    } catch (e) {
      // The storage filled up mid-file (estimate() said there was room, or the browser
      // does not report the real limit): say how much is missing; what is stored is kept.
      if (e.code !== codes.QUOTA_EXCEEDED) throw e;
      const have = await this.partial(file).catch(() => 0);
      throw new DocMemError(
        codes.QUOTA_EXCEEDED,
        `this browser's storage for this site filled up after ${mb(have)} of ${file.path} (${mb(file.size || 0)}), which needs ${mb(Math.max(0, (file.size || 0) - have))} more; free space on the device or remove other sites' data, then try again (the download resumes from what is stored)`,
        { cause: e },
      );
    }
    const blob = await handle.getFile();
    await writeText(dir, `${file.sha256}.ok`, JSON.stringify({ sha256: file.sha256, size: blob.size, url: file.url }));
    return new BlobFile(blob);
  }

  /** In a dedicated worker: appended through a sync access handle, flushed as it goes. */
  async downloadSync(dir, handle, file, onProgress) {
    let access;
    try {
      access = await handle.createSyncAccessHandle();
    } catch (e) {
      if (e && e.name === 'NoModificationAllowedError') {
        throw new DocMemError(codes.STORAGE_FAILED, `${file.path} is being downloaded by another tab or worker of this site; try again when it has finished`, { cause: e });
      }
      throw storageError(e, `storing ${file.path}`);
    }
    let end;
    let got;
    try {
      let stored = access.getSize();
      if (file.size && stored > file.size) {
        access.truncate(0);
        stored = 0;
      }
      let hash = this.hasher();
      // The stored prefix, hashed again from storage.
      if (stored > 0) {
        const buf = new Uint8Array(Math.min(CHUNK, stored));
        for (let at = 0; at < stored; ) {
          const n = access.read(buf.subarray(0, Math.min(buf.length, stored - at)), { at });
          if (n <= 0) break;
          hash.update(buf.subarray(0, n));
          at += n;
        }
      }
      end = stored;
      if (!file.size || stored < file.size) {
        const { response, start } = await request(file, stored, NO_STORE);
        if (start !== stored) {
          // The server ignored the Range: the whole file again, from byte 0.
          access.truncate(0);
          hash.free?.();
          hash = this.hasher();
        }
        end = await this.appendSync(access, file, response, start, hash, onProgress);
      } else {
        onProgress(stored, stored, false, { resumed: stored });
      }
      got = finishHash(hash);
      access.flush();
    } finally {
      access.close();
    }
    if (file.size && end !== file.size) throw fetchError(file, `the server sent ${end} of ${file.size} bytes; what arrived is kept and the next try resumes from there`);
    if (got !== file.sha256) {
      await removeIn(dir, file.sha256);
      throw checksumError(file, got, true);
    }
  }

  async appendSync(access, file, response, start, hash, onProgress) {
    const total = file.size || start + Number(response.headers.get('content-length') || 0);
    const progress = throttled(onProgress, total, start);
    progress(start, true);
    let unflushed = 0;
    const end = await pump(
      file,
      response,
      start,
      hash,
      (chunk, at) => {
        try {
          let done = 0;
          while (done < chunk.length) done += access.write(chunk.subarray(done), { at: at + done });
          unflushed += chunk.length;
          if (unflushed >= FLUSH_EVERY) {
            access.flush();
            unflushed = 0;
          }
        } catch (e) {
          throw storageError(e, `storing ${file.path}`);
        }
      },
      progress,
    );
    progress(end, true);
    return end;
  }

  /**
   * On a page (no sync access handles): a writable stream, committed when it closes, so
   * an interruption keeps only what an earlier, finished attempt stored.
   */
  async downloadWritable(dir, handle, file, onProgress) {
    const stored0 = (await handle.getFile()).size;
    let stored = file.size && stored0 > file.size ? 0 : stored0;
    let hash = this.hasher();
    if (stored > 0) {
      const reader = (await handle.getFile()).slice(0, stored).stream().getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        hash.update(value);
      }
    }
    const { response, start } = file.size && stored === file.size ? { response: null, start: stored } : await request(file, stored, NO_STORE);
    if (start !== stored) {
      hash.free?.();
      hash = this.hasher();
      stored = 0;
    }
    let writable;
    try {
      writable = await handle.createWritable({ keepExistingData: stored > 0 });
      await writable.truncate(stored);
      await writable.seek(stored);
    } catch (e) {
      throw storageError(e, `storing ${file.path}`);
    }
    let end = stored;
    try {
      if (response) {
        const progress = throttled(onProgress, file.size || 0, stored);
        end = await pump(file, response, stored, hash, (chunk) => writable.write(chunk), progress);
        progress(end, true);
      }
      await writable.close();
    } catch (e) {
      await writable.abort().catch(() => {});
      throw e instanceof DocMemError ? e : storageError(e, `storing ${file.path}`);
    }
    const got = finishHash(hash);
    if (file.size && end !== file.size) throw fetchError(file, `the server sent ${end} of ${file.size} bytes`);
    if (got !== file.sha256) {
      await removeIn(dir, file.sha256);
      throw checksumError(file, got, true);
    }
  }

  /** Without OPFS: streamed into the Cache API, hashed on the way (no resuming there). */
  async intoCache(file, onProgress) {
    const cache = await caches.open(CACHE_NAME);
    const { response } = await request(file, 0, NO_STORE);
    const hash = this.hasher();
    const total = file.size || Number(response.headers.get('content-length') || 0);
    const progress = throttled(onProgress, total, 0);
    let loaded = 0;
    const hashing = new TransformStream({
      transform(chunk, controller) {
        hash.update(chunk);
        loaded += chunk.length;
        progress(loaded);
        controller.enqueue(chunk);
      },
    });
    const headers = { 'content-type': 'application/octet-stream', [HASH_HEADER]: file.sha256 };
    try {
      await cache.put(file.url, new Response(response.body.pipeThrough(hashing), { headers }));
    } catch (e) {
      await cache.delete(file.url);
      if (e instanceof DocMemError) throw e;
      throw e && e.name === 'QuotaExceededError' ? storageError(e, `storing ${file.path}`) : fetchError(file, e.message, e);
    }
    progress(loaded, true);
    const got = finishHash(hash);
    if (got !== file.sha256 || (file.size && loaded !== file.size)) {
      await cache.delete(file.url);
      throw checksumError(file, got, true);
    }
    const stored = await cache.match(file.url);
    return new BlobFile(await stored.blob());
  }

  /**
   * Keep a model file the user chose (a File, read in slices, never whole in memory) in
   * OPFS beside the downloaded ones, hashed on the way: it is then a stored file like any
   * other, named by its sha256, and loads on the next visit with no file chooser. Returns
   * {sha256, size}. A file already kept costs one hash.
   */
  async adopt(blob, name, onProgress = () => {}) {
    const dir = await this.dir();
    if (!dir) throw new DocMemError(codes.STORAGE_FAILED, `${name} cannot be kept: this browser gives the site no private file system (a private window?)`);
    const temp = `adopting-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    const handle = await fileIn(dir, temp, true);
    const access = await handle.createSyncAccessHandle();
    const hash = this.hasher();
    let at = 0;
    try {
      const reader = blob.stream().getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        hash.update(value);
        let written = 0;
        while (written < value.length) written += access.write(value.subarray(written), { at: at + written });
        at += value.length;
        onProgress(at, blob.size);
      }
      access.flush();
    } catch (e) {
      access.close();
      await removeIn(dir, temp);
      throw storageError(e, `keeping ${name}`);
    }
    access.close();
    const sha256 = finishHash(hash);
    if (await this.stored({ sha256, size: at, url: '' })) await removeIn(dir, temp);
    else {
      await removeIn(dir, sha256);
      await handle.move(sha256);
      await writeText(dir, `${sha256}.ok`, JSON.stringify({ sha256, size: at, url: `file:${name}` }));
    }
    return { sha256, size: at };
  }

  /**
   * Remove every stored model file whose sha256 is not in `keep`: files of models no
   * manifest offers any more (a deploy that pinned new versions, a model the user's
   * own file replaced), their partial downloads, an interrupted adoption's temporary file,
   * and older docmem's Cache API copies. Call it inside withModelStore('prune'): another
   * tab loading a model could otherwise lose the file under it. Returns {files, bytes}
   * removed.
   */
  async prune(keep) {
    const wanted = new Set(keep);
    let files = 0;
    let bytes = 0;
    const dir = await this.dir();
    if (dir) {
      const doomed = [];
      for await (const [name, h] of dir.entries()) {
        if (h.kind !== 'file' || name === PERSIST_ASKED) continue;
        const sha = name.endsWith('.ok') ? name.slice(0, -3) : name;
        if (!wanted.has(sha)) doomed.push([name, h]);
      }
      for (const [name, h] of doomed) {
        const size = (await h.getFile()).size;
        try {
          await removeIn(dir, name);
        } catch {
          continue; // open elsewhere (a sync access handle): left for the next prune
        }
        if (!name.endsWith('.ok')) {
          files += 1;
          bytes += size;
        }
      }
    }
    if (globalThis.caches && (await caches.has(CACHE_NAME))) {
      const cache = await caches.open(CACHE_NAME);
      for (const request of await cache.keys()) {
        const response = await cache.match(request);
        if (wanted.has(response?.headers.get(HASH_HEADER))) continue;
        bytes += Number(response?.headers.get('content-length')) || 0;
        files += 1;
        await cache.delete(request);
      }
    }
    return { files, bytes };
  }

  /** Whether every file of `model` is stored and verified (a second visit needs no network). */
  async has(model) {
    for (const f of model.files) if (!(await this.stored(f))) return false;
    return true;
  }
}
