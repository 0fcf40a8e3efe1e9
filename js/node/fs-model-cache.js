// Model files in Node: fetched once by URL (model-download.js: resumed with a Range
// request, hashed as they arrive), checked against their pinned sha256 and kept in a
// directory, or read in place from a `file:` URL after the same check.
//
// Directory `dir`: `<sha256>` complete and verified, `<sha256>.part` a partial download. A
// complete file is hashed again once per process (per worker thread) before it is used; a
// mismatch deletes it. The files a ModelFile gives are read a slice at a time
// (`read(offset, length)`), as the browser's are (model-cache.js).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DocMemError, codes, storageError } from '../errors.js';
import { CHUNK, checksumError, fetchError, finishHash, pump, quotaError, request, throttled } from '../model-download.js';

const verified = new Map(); // path → "size:mtimeMs" of files hashed in this process

/** node:crypto's SHA-256 in the shape of a hasher (model-cache.js's header). */
function nodeHasher() {
  const h = createHash('sha256');
  return { update: (b) => h.update(b), finish: () => h.digest('hex') };
}

/** Node: a directory of files named by their sha256; `file:` URLs are read in place. */
export class FsModelCache {
  /**
   * options: {hasher} (default: node:crypto's), {freeBytes: async () => number} (default: the
   * directory's disk, from statfs).
   */
  constructor(dir, options = {}) {
    this.dir = dir;
    this.options = options;
    this.hasher = options.hasher ?? nodeHasher;
  }

  async hashFile(p, onBytes = () => {}) {
    const h = this.hasher();
    let n = 0;
    for await (const chunk of fs.createReadStream(p, { highWaterMark: CHUNK })) {
      h.update(chunk);
      n += chunk.length;
      onBytes(n);
    }
    return finishHash(h);
  }

  /** Hash `p` unless this process already did (same size and mtime). */
  async check(file, p) {
    const st = fs.statSync(p);
    const key = `${st.size}:${st.mtimeMs}`;
    if (verified.get(p) === key) return null;
    const got = await this.hashFile(p);
    if (got === file.sha256) verified.set(p, key);
    return got === file.sha256 ? null : got;
  }

  local(file) {
    return file.url.startsWith('file:') || path.isAbsolute(file.url);
  }

  /** Refuse with QUOTA_EXCEEDED when the bytes to fetch exceed the disk's free space. */
  async prepare(files) {
    let needed = 0;
    for (const f of files) {
      if (this.local(f) || !/^[0-9a-f]{64}$/.test(f.sha256 ?? '') || fs.existsSync(path.join(this.dir, f.sha256))) continue;
      let part = 0;
      try {
        part = fs.statSync(path.join(this.dir, `${f.sha256}.part`)).size;
      } catch {
        part = 0;
      }
      needed += Math.max(0, (f.size || 0) - Math.min(part, f.size || 0));
    }
    let free = Infinity;
    if (this.options.freeBytes) free = await this.options.freeBytes();
    else if (needed > 0 && fs.statfsSync) {
      let at = this.dir;
      while (!fs.existsSync(at) && path.dirname(at) !== at) at = path.dirname(at);
      const s = fs.statfsSync(at);
      free = s.bavail * s.bsize;
    }
    if (needed > free) throw quotaError(needed, free, `disk space in ${this.dir}`, 'free some space there (or choose another modelCacheDir) and try again');
    return { needed, free, persisted: true, persistAsked: false };
  }

  async file(file, onProgress = () => {}) {
    let where;
    if (this.local(file)) {
      where = file.url.startsWith('file:') ? fileURLToPath(file.url) : file.url;
      if (!fs.existsSync(where)) throw new DocMemError(codes.MODEL_FETCH_FAILED, `${where}: no such file`);
      if (file.sha256) {
        const got = await this.check(file, where);
        if (got) throw new DocMemError(codes.MODEL_CHECKSUM_MISMATCH, `${file.path}: sha256 ${got}, expected ${file.sha256}`);
      }
    } else {
      // The sha256 names the stored file: only a well-formed one may (it comes from a manifest).
      if (!/^[0-9a-f]{64}$/.test(file.sha256 ?? '')) throw new DocMemError(codes.MODEL_FETCH_FAILED, `${file.path}: the manifest's sha256 is not 64 hex digits`);
      where = path.join(this.dir, file.sha256);
      if (fs.existsSync(where)) {
        const got = await this.check(file, where);
        if (got) {
          fs.rmSync(where, { force: true });
          verified.delete(where);
          throw checksumError(file, got);
        }
      } else {
        await this.download(file, where, onProgress);
        verified.set(where, `${fs.statSync(where).size}:${fs.statSync(where).mtimeMs}`);
      }
    }
    const size = fs.statSync(where).size;
    onProgress(size, size, true, { resumed: 0 });
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
      close() {
        fs.closeSync(fd);
      },
    };
  }

  /** Into `<where>.part` (resumed when it exists), verified, then renamed to `where`. */
  async download(file, where, onProgress) {
    const hasher = this.hasher;
    const part = `${where}.part`;
    let fh;
    try {
      fs.mkdirSync(this.dir, { recursive: true });
      fh = await fs.promises.open(part, fs.existsSync(part) ? 'r+' : 'w+');
    } catch (e) {
      throw storageError(e, `storing ${file.path}`);
    }
    let end;
    let got;
    try {
      let stored = (await fh.stat()).size;
      if (file.size && stored > file.size) {
        await fh.truncate(0);
        stored = 0;
      }
      let hash = hasher();
      if (stored > 0) {
        const buf = new Uint8Array(Math.min(CHUNK, stored));
        for (let at = 0; at < stored; ) {
          const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, stored - at), at);
          if (bytesRead <= 0) break;
          hash.update(buf.subarray(0, bytesRead));
          at += bytesRead;
        }
      }
      end = stored;
      if (!file.size || stored < file.size) {
        const { response, start } = await request(file, stored);
        if (start !== stored) {
          // The server ignored the Range: the whole file again, from byte 0.
          await fh.truncate(0);
          hash.free?.();
          hash = hasher();
        }
        const total = file.size || start + Number(response.headers.get('content-length') || 0);
        const progress = throttled(onProgress, total, start);
        progress(start, true);
        end = await pump(
          file,
          response,
          start,
          hash,
          async (chunk, at) => {
            try {
              let done = 0;
              while (done < chunk.length) done += (await fh.write(chunk, done, chunk.length - done, at + done)).bytesWritten;
            } catch (e) {
              throw storageError(e, `storing ${file.path}`);
            }
          },
          progress,
        );
        progress(end, true);
      } else {
        onProgress(stored, stored, false, { resumed: stored });
      }
      got = finishHash(hash);
      // On disk before it is renamed into place: a power cut must not leave a checked name
      // over bytes that never reached the disk.
      await fh.sync();
    } finally {
      await fh.close();
    }
    if (file.size && end !== file.size) throw fetchError(file, `the server sent ${end} of ${file.size} bytes; what arrived is kept and the next try resumes from there`);
    if (got !== file.sha256) {
      fs.rmSync(part, { force: true });
      throw checksumError(file, got, true);
    }
    try {
      fs.renameSync(part, where);
    } catch (e) {
      throw storageError(e, `storing ${file.path}`);
    }
  }
}
