// One writer per library. A library's state lives in the worker's memory, and every change
// is computed from it and written over what is stored: two DocMems on one library (two
// tabs, two Node processes) would each write their own view, and the later one would drop
// the other's documents. So a DocMem holds its library's lock from open to close, and a
// second one is refused with BUSY, saying where the library is open:
// - in a browser, a Web Lock named after the library (navigator.locks: per origin, across
//   tabs and workers, released by the browser when the tab goes away);
// - in Node, a `.lock` file in the library's directory holding the owner's process id,
//   created exclusively; a lock whose process is gone (a crash) is taken over, and within
//   one process a registry tells a live DocMem from one that was closed.

import { DocMemError, codes } from './errors.js';

const isNode = typeof self === 'undefined' && typeof process !== 'undefined';
const held = new Map(); // Node: this process's locked directories → their release
let releaseAtExit = false; // one 'exit' listener releases them all

/** Take the lock of library `name` (browser) or of directory `dir` (Node); resolves with a release function. */
export async function lockLibrary(name, dir) {
  return isNode ? lockDir(dir) : lockWeb(name);
}

const releasing = new Map(); // browser: lock name → the promise that settles once it is released

async function lockWeb(name) {
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

async function lockDir(dir) {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const abs = path.resolve(dir);
  fs.mkdirSync(abs, { recursive: true });
  const file = path.join(abs, '.lock');
  const busy = (pid) => new DocMemError(codes.BUSY, `the library in ${abs} is open in ${pid === process.pid ? 'another DocMem of this process' : `another process (pid ${pid})`}; close it there first`);
  if (held.has(abs)) throw busy(process.pid);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      const release = () => {
        if (held.get(abs) !== release) return;
        held.delete(abs);
        try {
          if (fs.readFileSync(file, 'utf8') === String(process.pid)) fs.rmSync(file);
        } catch {
          // gone already
        }
      };
      held.set(abs, release);
      if (!releaseAtExit) {
        releaseAtExit = true;
        process.once('exit', () => {
          for (const r of [...held.values()]) r();
        });
      }
      return release;
    } catch (e) {
      if (e.code !== 'EEXIST') throw new DocMemError(codes.STORAGE_FAILED, `cannot lock the library in ${abs}: ${e.message}`, { cause: e });
    }
    const pid = Number(fs.readFileSync(file, 'utf8'));
    // The owner is alive when it is another process that answers signal 0 (this process's
    // own DocMems are in `held`, checked above: a lock of ours not there was left by one
    // that was closed without releasing it).
    if (pid !== process.pid && alive(pid)) throw busy(pid);
    fs.rmSync(file, { force: true });
  }
  throw new DocMemError(codes.BUSY, `the library in ${abs} was locked again while its stale lock was removed`);
}

function alive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM'; // it exists, owned by another user
  }
}
