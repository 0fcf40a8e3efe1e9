// One writer per library. A library's state lives in the worker's memory, and every change
// is computed from it and written over what is stored: two DocMems on one library (two
// tabs, two Node processes) would each write their own view, and the later one would drop
// the other's documents. So a DocMem holds its library's lock from open to close, and a
// second one is refused with BUSY, saying where the library is open:
// - in a browser, a Web Lock named after the library (navigator.locks: per origin, across
//   tabs and workers, released by the browser when the tab goes away);
// - in Node, a `.lock` file in the library's directory (node/dir-lock.js).

import { DocMemError, codes } from './errors.js';

const releasing = new Map(); // lock name → the promise that settles once it is released

/** Take the lock of library `name`; resolves with a release function. */
export async function lockLibrary(name) {
  const locks = globalThis.navigator?.locks;
  if (!locks) return () => {}; // a browser without Web Locks: nothing to coordinate with
  const lockName = `docmem-library:${name}`;
  // A DocMem of this page closed just now (a model switch reopens at once): its lock is
  // released a moment after close(); wait for that, then briefly for another page going
  // away (a reload), before saying the library is busy.
  await releasing.get(lockName);
  for (let attempt = 0; ; attempt++) {
    let release;
    const holding = new Promise((resolve) => {
      release = resolve;
    });
    let settled;
    const granted = await new Promise((resolve, reject) => {
      settled = locks
        .request(lockName, { ifAvailable: true }, (lock) => {
          resolve(lock !== null);
          return lock === null ? undefined : holding;
        })
        .catch(reject);
    });
    if (granted) {
      return () => {
        releasing.set(lockName, settled);
        release();
      };
    }
    if (attempt >= 10) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new DocMemError(codes.BUSY, `the library '${name}' is open in another tab or window of this site; close it there (or use another library name)`);
}
