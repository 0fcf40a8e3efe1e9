// The library's storage in the browser: one IndexedDB database per library, one object
// store of entries (key → Uint8Array). Library.open gets every entry; the journal that
// takeWrites() gives after each change is applied in ONE readwrite transaction, so a tab
// closed midway leaves the stored library as it was.

import { storageError } from './errors.js';

const STORE = 'entries';

function request(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error('transaction aborted'));
  });
}

export class IdbStore {
  constructor(db) {
    this.db = db;
  }

  static async open(libraryName) {
    const r = indexedDB.open(`docmem-library:${libraryName}`, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    try {
      return new IdbStore(await request(r));
    } catch (e) {
      throw storageError(e, 'opening the library database');
    }
  }

  /** Every entry, as {key: Uint8Array}. */
  async entries() {
    const tx = this.db.transaction(STORE, 'readonly');
    const store = tx.objectStore(STORE);
    const [keys, values] = await Promise.all([request(store.getAllKeys()), request(store.getAll())]);
    const out = {};
    keys.forEach((k, i) => {
      out[k] = values[i];
    });
    return out;
  }

  /** Apply a journal ([key, Uint8Array | null], in order) in one transaction; with
   * `replace`, everything stored before goes in the same transaction (an import). */
  async apply(writes, { replace = false } = {}) {
    if (writes.length === 0 && !replace) return;
    try {
      const tx = this.db.transaction(STORE, 'readwrite', { durability: 'strict' });
      const store = tx.objectStore(STORE);
      if (replace) store.clear();
      for (const [key, bytes] of writes) {
        if (bytes === null) store.delete(key);
        else store.put(bytes, key);
      }
      await done(tx);
    } catch (e) {
      throw storageError(e, 'saving the library');
    }
  }

  close() {
    this.db.close();
  }
}
