// The library's storage in Node: a directory, one file per key. The journal is applied in
// order (the library writes its manifest last), each file written under a temporary name
// and renamed, so an interrupted write leaves the previous manifest in charge.

import fs from 'node:fs';
import path from 'node:path';
import { storageError } from './errors.js';

export class DirStore {
  constructor(dir) {
    this.dir = dir;
  }

  static async open(dir) {
    fs.mkdirSync(dir, { recursive: true });
    return new DirStore(dir);
  }

  async entries() {
    const out = {};
    const walk = (sub) => {
      for (const e of fs.readdirSync(path.join(this.dir, sub), { withFileTypes: true })) {
        const key = sub ? `${sub}/${e.name}` : e.name;
        if (e.isDirectory()) walk(key);
        else if (!e.name.endsWith('.tmp')) out[key] = new Uint8Array(fs.readFileSync(path.join(this.dir, key)));
      }
    };
    walk('');
    return out;
  }

  async apply(writes, { replace = false } = {}) {
    try {
      if (replace) {
        // An import: everything old goes except the manifest, which the new one replaces last.
        for (const key of Object.keys(await this.entries())) {
          if (key !== 'manifest.json') fs.rmSync(path.join(this.dir, key), { force: true });
        }
      }
      for (const [key, bytes] of writes) {
        const file = path.join(this.dir, key);
        if (bytes === null) {
          fs.rmSync(file, { force: true });
        } else {
          fs.mkdirSync(path.dirname(file), { recursive: true });
          fs.writeFileSync(`${file}.tmp`, bytes);
          fs.renameSync(`${file}.tmp`, file);
        }
      }
    } catch (e) {
      throw storageError(e, 'saving the library');
    }
  }

  close() {}
}
