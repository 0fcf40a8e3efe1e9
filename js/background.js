// Work the worker does between requests, in this order: reading ahead the question being
// typed, a slice of a merge of the index's parts, a window of a background memory. Each
// step is queued behind the requests (worker-ops.js's queue) and gives way to any that
// arrives.
//
// Background memories: a document added with sentence chunks is searchable at once; `memorize` then has the
// local reader write its MoM memory in the background, one window per turn of the request
// queue (a MemoryDraft step), and swap it in for the chunks in one commit when the last
// window is read. A request that arrives meanwhile is served before the next window; with
// shared memory the window being read stops within one prompt piece or decoding step (the
// client raises flag [1]), and the reader keeps what it read and wrote of it, so the next
// step goes on where it stopped: questions delay a memory but never undo it. Without
// shared memory a request waits for the window to end. Jobs are served in the
// order they came; `pauseMemories` holds them (a window being read stops at once).
//
// `worker` (startBackground) is what this needs of worker-ops.js: post(message) to the
// client, flag(i) and sharedFlags() (signals.js over the client's SharedArrayBuffer),
// pending() requests received and not yet answered, enqueue(step, after) behind them,
// state() → {lib, reader, answerer, embedder, hosted, onGpu}, persist() the library's
// changes, classify(e) and knownCode(e) for errors.

import { DocMemError, codes, toWire } from './errors.js';
import { SIGNAL } from './signals.js';

let worker;
const flag = (i) => worker.flag(i);

/** Start serving background work for `given` (the worker: see the header). */
export function startBackground(given) {
  worker = given;
}

const memoryJobs = []; // {id, docId, samples, maxNewTokens, emit, draft, aborted, seconds, fraction, gaveWay}
let memoriesPaused = false;
let stepQueued = false;

const memoryStopped = (job) => job.aborted || flag(SIGNAL.STOP_MEMORY) === job.id;
const requestsWait = () => worker.pending() > 0 || flag(SIGNAL.WAITING) > 0;
// A read-ahead goes first too: a question is being typed, and its ask would stop the
// window anyway.
const memoryGivesWay = () => memoriesPaused || flag(SIGNAL.PAUSE_MEMORIES) === 1 || requestsWait() || ahead !== null;

// Reading ahead: while a question is being typed, the client sends what there is so far
// (`readAhead`) and the local answerer reads the answer prompt it would get, up to the
// question (the instructions and the passages that question finds now), so that the ask
// runs only what differs: on two CPU cores the 1.5B reads about 30 prompt tokens a second,
// and typing a question takes about as long as reading its passages. Only the latest
// read-ahead is kept; it goes before background memories and gives way to any request
// (within 16 prompt tokens with shared memory; without it, it reads one piece per turn of
// the queue). A request that comes ends it: the ask it prepared reuses what was read.
let ahead = null; // {id, question, k, kept}: the latest read-ahead asked for

function endAhead(job, data) {
  if (ahead === job) ahead = null;
  worker.post({ id: job.id, type: 'result', data });
}

/** Read ahead the latest question's answer prompt until done, a request, or a newer one. */
async function aheadStep() {
  const job = ahead;
  if (!job || requestsWait()) return;
  const { lib, answerer, embedder, hosted } = worker.state();
  try {
    if (!answerer || hosted.answerer) return endAhead(job, { kept: 0 });
    let pieces = 0;
    let stopped = false;
    const interrupt = () => {
      // With shared memory: until a request or a newer read-ahead comes; without, one
      // piece per turn of the queue (a message can only arrive between turns).
      stopped = requestsWait() || ahead !== job || (worker.sharedFlags() ? flag(SIGNAL.READ_AHEAD) !== job.seq : pieces++ > 0);
      return stopped;
    };
    // Awaited inside the try: a rejected read-ahead on WebGPU must not reject the queue
    // it runs in (every later request would be skipped).
    job.kept = await lib.readAhead(job.question, { embedder, answerer, k: job.k, interrupt });
    if (!stopped) endAhead(job, { kept: job.kept });
  } catch (e) {
    // Reading ahead only saves time: a failure (a library being replaced, say) ends it,
    // and the ask reports its own errors.
    endAhead(job, { kept: job.kept, error: worker.classify(e).message });
  }
}

function endMemory(job, error, data) {
  memoryJobs.splice(memoryJobs.indexOf(job), 1);
  // Only the job being written has a draft (they are written in order).
  const wasWritten = job.draft !== null;
  const { reader, hosted } = worker.state();
  job.draft?.free();
  if (error) worker.post({ id: job.id, type: 'error', error: toWire(error) });
  else worker.post({ id: job.id, type: 'result', data });
  // The reader keeps a stopped window's work, and its last results, for the memory being
  // written: free them when that memory ends. (After a panic the module refuses every
  // call; that must not reject the queue this runs in.)
  if (wasWritten && reader && !hosted.reader) {
    try {
      reader.forgetSuspended();
    } catch {}
  }
}

// ---- merges of the index's parts ------------------------------------------------------
// The library seals its newest documents into a part every few thousand vectors and, eight
// parts on, merges them into one HNSW graph: seconds of work that an add must not wait for
// (the library is opened with background merges). The worker builds the merge a slice at a
// time when no request waits, before background memories (a merge keeps searches fast and
// takes seconds; a memory takes minutes), and stores it when the last slice is done; until
// then the parts are searched as they are. A slice lasts as long as the last request took,
// between 1 and 50 ms: while a folder is being added, merging takes at most half the
// worker's time (an add of a few milliseconds is not made ten times slower), and when the
// page is idle it runs in 50 ms slices, each leaving the queue free for what comes.
const MERGE_SLICE_MS = [1, 50];
let mergeDue = false; // a change was made since mergeStep last found nothing to do
let lastRequestMs = MERGE_SLICE_MS[1];

async function mergeStep() {
  try {
    const slice = Math.min(MERGE_SLICE_MS[1], Math.max(MERGE_SLICE_MS[0], worker.pending() > 0 ? MERGE_SLICE_MS[0] : lastRequestMs));
    lastRequestMs = MERGE_SLICE_MS[1]; // idle from here on, unless a request comes
    const r = worker.state().lib.mergeStep(slice);
    if (r.applied) await worker.persist();
    mergeDue = r.merging || r.applied;
  } catch {
    // A merge only saves search time: a failure (storage full, say) leaves the parts as
    // they are, searched as they are, until the next change tries again.
    mergeDue = false;
  }
}

/** Queue one background step behind the requests, when there is work and nothing waits:
 * the read-ahead first, then a slice of a merge, then memories. */
function scheduleMemory() {
  if (stepQueued || !worker.state().lib) return;
  const aheadWaits = ahead !== null && !requestsWait();
  const mergeWaits = mergeDue && !requestsWait();
  if (!aheadWaits && !mergeWaits && (memoryJobs.length === 0 || memoryGivesWay())) return;
  stepQueued = true;
  worker.enqueue(
    () => (ahead !== null ? aheadStep() : mergeDue && !requestsWait() ? mergeStep() : memoryStep()),
    () => {
      stepQueued = false;
      setTimeout(scheduleMemory, 0);
    },
  );
}

/** Read one window of the first job's memory; land it when it is the last. */
async function memoryStep() {
  const job = memoryJobs[0];
  if (!job || memoryGivesWay()) return;
  const { lib, reader, embedder, hosted, onGpu } = worker.state();
  try {
    if (memoryStopped(job)) throw new DocMemError(codes.ABORTED, 'the memory was cancelled');
    if (!reader || hosted.reader) throw new DocMemError(codes.BAD_ARGUMENT, 'background memories need a reader on this device (the reader is hosted)');
    const samples = job.samples ?? (onGpu ? 3 : 0);
    job.draft ??= lib.draftMemory(job.docId, { reader, samples, maxNewTokens: job.maxNewTokens ?? 0, maxWindowTokens: job.maxWindowTokens ?? 0 });
    const t0 = performance.now();
    const report = (p) => {
      const seconds = job.seconds + (performance.now() - t0) / 1000;
      // Within a window the share is an estimate, and a window the reader falls back on
      // starts its generations over: the page's figure never goes back.
      const fraction = (job.fraction = Math.max(job.fraction, p.fraction));
      const left = fraction > 0.02 ? (seconds / fraction) * (1 - fraction) : null;
      job.emit({ ...p, fraction, stage: 'memory', detail: p.stage, seconds, secondsLeft: left });
    };
    const progress = (p) => {
      if (memoryStopped(job)) return false;
      report(p);
      return true;
    };
    const aheadSent = flag(SIGNAL.READ_AHEAD);
    const interrupt = () => memoryStopped(job) || memoryGivesWay() || flag(SIGNAL.READ_AHEAD) !== aheadSent;
    let complete;
    try {
      complete = await job.draft.step({ reader, progress, interrupt });
    } catch (e) {
      // Stopped to give way: the reader keeps the window's work for the next step.
      if (worker.knownCode(e) === codes.ABORTED && !memoryStopped(job)) {
        job.gaveWay += 1;
        return;
      }
      throw e;
    } finally {
      job.seconds += (performance.now() - t0) / 1000;
    }
    if (!complete) {
      // The window is kept with the library: after a reload or a crash the memory goes
      // on from the next one (draftMemory takes the stored draft up).
      lib.saveDraft(job.draft);
      await worker.persist();
      report(job.draft.progress());
      return;
    }
    const r = await lib.replaceMemory(job.draft, embedder);
    await worker.persist();
    endMemory(job, null, { ...r, id: job.docId, seconds: job.seconds, gaveWay: job.gaveWay });
  } catch (e) {
    endMemory(job, memoryStopped(job) ? new DocMemError(codes.ABORTED, 'the memory was cancelled; the document keeps its chunks') : worker.classify(e));
  }
}

/** `memorize` {id: docId, samples, maxNewTokens, maxWindowTokens}: write the document's
 * memory in the background; request `id` is answered when it lands. */
export function memorize(id, args = {}) {
  const { id: docId, samples, maxNewTokens, maxWindowTokens } = args;
  const emit = (data) => worker.post({ id, type: 'event', data });
  memoryJobs.push({ id, docId: String(docId), samples, maxNewTokens, maxWindowTokens, gaveWay: 0, emit, draft: null, aborted: false, seconds: 0, fraction: 0 });
  scheduleMemory();
}

/** `readAhead` {question, k, seq}: the latest question typed replaces the one before
 * (which resolves with what it read). */
export function readAhead(id, args = {}) {
  if (ahead) endAhead(ahead, { kept: ahead.kept, superseded: true });
  ahead = { id, question: String(args.question ?? ''), k: args.k ?? 8, seq: args.seq ?? 0, kept: 0 };
  scheduleMemory();
}

/** `pauseMemories` {paused}: hold the memories (a window being read stops at once) or let
 * them go on. */
export function pauseMemories(id, paused) {
  memoriesPaused = Boolean(paused);
  worker.post({ id, type: 'result', data: { paused: memoriesPaused, pending: memoryJobs.length } });
  scheduleMemory();
}

/** A request `op` arrived: it ends the read-ahead (an ask reuses what it read, and reading
 * on after it could only be for a question that was not asked). */
export function requestArrived(op) {
  if (ahead && op !== 'init') endAhead(ahead, { kept: ahead.kept, superseded: true });
}

/** A request took `ms`: the next merge slice lasts about as long. */
export function requestTook(ms) {
  lastRequestMs = ms;
}

/** The library changed: a merge may be due. */
export function libraryChanged() {
  mergeDue = true;
}

/** Cancel background memory `id`; false when it is not one. */
export function cancelMemory(id) {
  const job = memoryJobs.find((j) => j.id === id);
  if (!job) return false;
  job.aborted = true;
  // Ended behind the step being read, if any (which stops at its next decoding step:
  // the client raised flag [2], or, on WebGPU, `aborted` is seen between steps).
  worker.enqueue(() => memoryJobs.includes(job) && endMemory(job, new DocMemError(codes.ABORTED, 'the memory was cancelled; the document keeps its chunks')));
  return true;
}

export { scheduleMemory as schedule };
