// Model files, fetched once by URL with download progress, checked against their pinned
// sha256, and kept: in the browser in the Cache API (a second visit loads them with no
// network), in Node in a directory (a `file:` URL is read in place, after the same check).
//
// A model is {name, files: [{path, url, size, sha256}]}; each file comes back as a
// ModelFile with `size`, `read(offset, length)` (synchronous, for Lm.fromReader) and
// `bytes()`.

import { DocMemError, codes, storageError } from './errors.js';

const HASH_HEADER = 'x-docmem-sha256';

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

async function sha256(bytes) {
  return hex(await crypto.subtle.digest('SHA-256', bytes));
}

function checksumError(file, got) {
  return new DocMemError(codes.MODEL_CHECKSUM_MISMATCH, `${file.path}: sha256 ${got}, expected ${file.sha256}`);
}

/** GET `url` into one buffer, calling onProgress(loaded, total) as bytes arrive. */
async function download(file, onProgress) {
  let response;
  try {
    response = await fetch(file.url);
  } catch (e) {
    throw new DocMemError(codes.MODEL_FETCH_FAILED, `${file.url}: ${e.message}`, { cause: e });
  }
  if (!response.ok) throw new DocMemError(codes.MODEL_FETCH_FAILED, `${file.url}: HTTP ${response.status}`);
  const total = file.size || Number(response.headers.get('content-length')) || 0;
  let out = new Uint8Array(total);
  let loaded = 0;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (loaded + value.length > out.length) {
        const grown = new Uint8Array(Math.max(out.length * 2, loaded + value.length));
        grown.set(out.subarray(0, loaded));
        out = grown;
      }
      out.set(value, loaded);
      loaded += value.length;
      onProgress(loaded, total);
    }
  } catch (e) {
    throw new DocMemError(codes.MODEL_FETCH_FAILED, `${file.url}: ${e.message}`, { cause: e });
  }
  return loaded === out.length ? out : out.slice(0, loaded);
}

/** A cached file held as a Blob (disk-backed in browsers), read in slices. */
class BlobFile {
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

/** Browser: the Cache API. */
export class WebModelCache {
  constructor(cacheName = 'docmem-models') {
    this.cacheName = cacheName;
  }

  async file(file, onProgress = () => {}) {
    const cache = await caches.open(this.cacheName);
    const hit = await cache.match(file.url);
    if (hit && hit.headers.get(HASH_HEADER) === file.sha256) {
      const blob = await hit.blob();
      if (!file.size || blob.size === file.size) {
        onProgress(blob.size, blob.size, true);
        return new BlobFile(blob);
      }
    }
    const bytes = await download(file, onProgress);
    const got = await sha256(bytes);
    if (got !== file.sha256) throw checksumError(file, got);
    const headers = { 'content-type': 'application/octet-stream', [HASH_HEADER]: got };
    try {
      await cache.put(file.url, new Response(bytes, { headers }));
    } catch (e) {
      throw storageError(e, `storing ${file.path}`);
    }
    // Hand back the stored copy, so the downloaded buffer can be freed.
    const stored = await cache.match(file.url);
    return stored ? new BlobFile(await stored.blob()) : new BlobFile(new Blob([bytes]));
  }

  /** Whether every file of `model` is cached (a second visit needs no network). */
  async has(model) {
    const cache = await caches.open(this.cacheName);
    for (const f of model.files) {
      const hit = await cache.match(f.url);
      if (!hit || hit.headers.get(HASH_HEADER) !== f.sha256) return false;
    }
    return true;
  }
}

/** Node: a directory of files named by their sha256; `file:` URLs are read in place. */
export class FsModelCache {
  constructor(dir) {
    this.dir = dir;
  }

  async file(file, onProgress = () => {}) {
    const fs = await import('node:fs');
    const path = await import('node:path');
    const { fileURLToPath } = await import('node:url');
    const { createHash } = await import('node:crypto');
    const hashFile = async (p) => {
      const h = createHash('sha256');
      for await (const chunk of fs.createReadStream(p, { highWaterMark: 1 << 20 })) h.update(chunk);
      return h.digest('hex');
    };
    let where;
    if (file.url.startsWith('file:') || path.isAbsolute(file.url)) {
      where = file.url.startsWith('file:') ? fileURLToPath(file.url) : file.url;
      if (!fs.existsSync(where)) throw new DocMemError(codes.MODEL_FETCH_FAILED, `${where}: no such file`);
      if (file.sha256) {
        const got = await hashFile(where);
        if (got !== file.sha256) throw checksumError(file, got);
      }
    } else {
      where = path.join(this.dir, file.sha256);
      if (!fs.existsSync(where)) {
        const bytes = await download(file, onProgress);
        const got = await sha256(bytes);
        if (got !== file.sha256) throw checksumError(file, got);
        try {
          fs.mkdirSync(this.dir, { recursive: true });
          fs.writeFileSync(`${where}.part`, bytes);
          fs.renameSync(`${where}.part`, where);
        } catch (e) {
          throw storageError(e, `storing ${file.path}`);
        }
      }
    }
    const size = fs.statSync(where).size;
    onProgress(size, size, true);
    const fd = fs.openSync(where, 'r');
    return {
      size,
      read(offset, length) {
        const buf = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          const n = fs.readSync(fd, buf, done, length - done, offset + done);
          if (n === 0) break;
          done += n;
        }
        return buf;
      },
      async bytes() {
        return new Uint8Array(fs.readFileSync(where));
      },
      close() {
        fs.closeSync(fd);
      },
    };
  }
}
