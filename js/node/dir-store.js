// The library's storage in Node: a directory, one file per key. A change's journal is
// applied new files first and the manifest last, so a crash, a full disk or a killed
// process midway leaves the previous manifest in charge, naming files that are all still
// there; what the new manifest no longer names (an import's old keys) is removed only
// after it is in place. Each file is written under a temporary name of its own, flushed
// to disk and renamed over the key (atomic on POSIX and Windows), and the directory is
// flushed after the renames. Temporary files a crash left behind are removed at open
// (the library lock, node/dir-lock.js, means no other writer is at work then).

import fs from 'node:fs';
import path from 'node:path';
import { storageError } from '../errors.js';

const MANIFEST = 'manifest.json';
const TMP = '.tmp-';

export class DirStore {
  constructor(dir) {
    this.dir = dir;
  }

  static async open(dir) {
    fs.mkdirSync(dir, { recursive: true });
    const store = new DirStore(dir);
    store.#removeLeftovers('');
    return store;
  }

  #removeLeftovers(sub) {
    for (const e of fs.readdirSync(path.join(this.dir, sub), { withFileTypes: true })) {
      const key = sub ? `${sub}/${e.name}` : e.name;
      if (e.isDirectory()) this.#removeLeftovers(key);
      else if (e.name.startsWith(TMP) || e.name.endsWith('.tmp')) fs.rmSync(path.join(this.dir, key), { force: true });
    }
  }

  /** Every key (dot files, the lock and temporary files, are not keys). */
  #keys() {
    const out = [];
    const walk = (sub) => {
      for (const e of fs.readdirSync(path.join(this.dir, sub), { withFileTypes: true })) {
        if (e.name.startsWith('.')) continue;
        const key = sub ? `${sub}/${e.name}` : e.name;
        if (e.isDirectory()) walk(key);
        else if (e.isFile() && !e.name.endsWith('.tmp')) out.push(key);
      }
    };
    walk('');
    return out;
  }

  async entries() {
    const out = {};
    for (const key of this.#keys()) out[key] = new Uint8Array(fs.readFileSync(path.join(this.dir, key)));
    return out;
  }

  /** Write `bytes` to `key`: a temporary file of its own, flushed, then renamed over it. */
  #write(key, bytes) {
    const file = path.join(this.dir, key);
    const dir = path.dirname(file);
    fs.mkdirSync(dir, { recursive: true });
    const tmp = path.join(dir, `${TMP}${process.pid}-${Math.random().toString(36).slice(2)}-${path.basename(file)}`);
    try {
      const fd = fs.openSync(tmp, 'w');
      try {
        fs.writeFileSync(fd, bytes);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(tmp, file);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
    return dir;
  }

  /** Flush a directory's entries (the renames); not every platform can. */
  static #syncDir(dir) {
    let fd;
    try {
      fd = fs.openSync(dir, 'r');
      fs.fsyncSync(fd);
    } catch {
      // Windows cannot open a directory; its renames are durable by themselves.
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  }

  /** Apply a journal ([key, Uint8Array | null]): new files, then the manifest, then what
   * goes (removals, and with `replace`, every key the journal does not write: an import). */
  async apply(writes, { replace = false } = {}) {
    try {
      // Each key's last entry is what the change leaves (a key written then removed in one
      // journal is removed).
      const last = new Map(writes);
      const dirs = new Set();
      for (const [key, bytes] of last) if (bytes !== null && key !== MANIFEST) dirs.add(this.#write(key, bytes));
      for (const dir of dirs) DirStore.#syncDir(dir);
      if (last.get(MANIFEST)) DirStore.#syncDir(this.#write(MANIFEST, last.get(MANIFEST)));
      const gone = [...last].filter(([, bytes]) => bytes === null).map(([key]) => key);
      if (replace) gone.push(...this.#keys().filter((key) => !last.has(key)));
      for (const key of gone) fs.rmSync(path.join(this.dir, key), { force: true });
    } catch (e) {
      throw storageError(e, 'saving the library');
    }
  }

  close() {}
}
