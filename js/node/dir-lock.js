// One writer per library, in Node: a `.lock` file in the library's directory holding the
// owner's process id, created exclusively. A lock whose process is gone (a crash) is taken
// over, and within one process a registry tells a live DocMem from one that was closed.
// (Why a library has one writer: library-lock.js, the browser's Web Lock.)

import fs from 'node:fs';
import path from 'node:path';
import { DocMemError, codes } from '../errors.js';

const held = new Map(); // this process's locked directories → their release
let releaseAtExit = false; // one 'exit' listener releases them all

/** Take the lock of the library in directory `dir`; resolves with a release function. */
export async function lockDir(dir) {
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
