// The docmem worker's work, the same in browsers and in Node: everything that takes time
// runs here, off the page's main thread. The entries (worker.js, a module Web Worker;
// node/worker.js, a worker thread) call serveRequests with their platform (below). It
// loads the wasm package, fetches and checks the models, opens the library from storage,
// and answers one request at a time from the main-thread client (client.js):
//   main → worker  {id, op, args}
//   worker → main  {id, type: 'event', data} (progress, tokens), then
//                  {id, type: 'result', data} or {id, type: 'error', error: {code, message}}
// Requests are served one at a time, in the order they arrive (a queue: with the models
// on WebGPU an ingest or an answer is a Promise that spans many turns of the event loop).
// A request is cancelled through a shared flag that the progress and token callbacks read
// (or, without SharedArrayBuffer, by the client terminating this worker). Storage sees a
// change only after the call has succeeded: the library's journal is applied in one
// transaction.
//
// This file translates: the wasm package does the work (its Library answers in the
// package's own shapes; its Device, chosen by the runtime's one rule, loads the models),
// and the worker keeps storage and the message loop. Beside it: wasm-build.js (which build
// of the package, on how many threads), model-files.js (the models' files in the model
// store), background.js (read-ahead, merges and background memories between requests).
//
// Backend: 'cpu' runs the models in wasm; 'webgpu' loads them onto the browser's WebGPU
// adapter (any whose kernel checks pass, software ones included) or fails with
// WEBGPU_UNAVAILABLE; 'auto' takes WebGPU when the adapter is a hardware one and passes
// the checks, and otherwise runs on the CPU and says why (a software adapter such as
// SwiftShader is slower than wasm on the same cores), as it does when WebGPU cannot take
// the models.
//
// Hosted models (init's `remote`): each role given a model name is a RemoteModel (reader,
// scorer, answerer) or Embedder.remote (embedder) over one transport (remote.js), and its
// requests go through the wasm package's two Promise entry points (addDocument, ask; the
// same for every backend), during which this worker's event loop stays free: a
// {op: 'cancel', id} message is served at once, aborting the request's fetches, besides
// the shared flag.
//
// A platform is {
//   port: {post(m), on(f)}, the channel to the client;
//   builds: {plain, threads, relaxed}, the package's wasm builds, each {name, glue() → its
//     glue module, wasm: the .wasm's URL};
//   compileWasm(url) → WebAssembly.Module; wasmSource(url) → what the plain build's glue
//     takes to instantiate (the URL, or the file's bytes);
//   threadSupport(), defaultThreadCount(), startThreads(w, options) (threads.js);
//   modelCache(dir, hasher) → (a Promise of) the model cache (model-cache.js's
//     interface); withModelStore(mode, fn), which runs fn while holding the model store
//     as `mode` ('shared' or 'prune') says, or resolves null where another holder
//     forbids pruning;
//   userFile(blob, model) → (a Promise of) a model file the user chose (a File), read
//     where it lies;
//   openStore(args, suffix) → the library's store (idb-store.js's interface), and
//     setAsideBase(args): what a damaged library's set-aside copy is named after;
//   pdfToText(bytes, options) (pdf-text.js);
//   syncPost(headers): remote.js's postSync }.

import { DocMemError, codes, toWire } from './errors.js';
import { isPdf } from './pdf-text.js';
import { SIGNAL } from './signals.js';
import { makeTransport } from './remote.js';
import { loadWasm } from './wasm-build.js';
import { withModelFiles } from './model-files.js';
import { cancelMemory, libraryChanged, memorize, pauseMemories, readAhead, requestArrived, requestTook, schedule, startBackground } from './background.js';

let platform;
let port;

let w; // the wasm package's module
let wasmMemory; // its linear memory (WebAssembly.Memory; it only grows, so its size is the peak)
let embedder;
let reader;
let answerer;
let scorer = null; // a hosted reader's scorer (RemoteModel); null with a local reader
let hosted = {}; // role → true for the roles a hosted model plays
let transport = null; // to the hosted models' host (remote.js), when there are any
let onGpu = false; // the local reader and answerer run on WebGPU, not in wasm on the CPU
let serving = null; // the request being served: {id, aborted}
let lib;
let store;
// Int32Array over the client's SharedArrayBuffer: the signals of signals.js.
let cancelFlag = null;

/** Signal `i` (0 where there is no shared memory). */
const flag = (i) => (cancelFlag !== null && cancelFlag.length > i ? Atomics.load(cancelFlag, i) : 0);
const cancelled = () => (serving !== null && serving.aborted) || flag(SIGNAL.CANCEL) === 1;

// Any error thrown while serving a request → a DocMemError with a stable code.
function classify(e) {
  if (e instanceof DocMemError) return e;
  // A trap is a Rust panic: the module kept its message and location (and refuses every
  // later call with an INTERNAL error naming it).
  const panic = e instanceof WebAssembly.RuntimeError && w && typeof w.lastPanic === 'function' ? w.lastPanic() : null;
  // Errors from the wasm module carry the Rust error's stable code (core's ErrorCode).
  const message = panic || String(e && e.message ? e.message : e);
  return new DocMemError(knownCode(e) || codes.INTERNAL, message);
}

/** The error's `code` when it is one of ours, else null. */
function knownCode(e) {
  return e && typeof e.code === 'string' && Object.hasOwn(codes, e.code) ? e.code : null;
}

/** The hosted models of init's `remote` ({url, token, context, roles}): role → object. */
function connectHosted(remote) {
  transport = makeTransport({ url: remote.url, token: remote.token, allowHttp: remote.allowHttp, syncPost: platform.syncPost });
  const out = {};
  const models = new Map(); // a model name in several roles is one object
  const model = (name) => {
    if (!models.has(name)) models.set(name, new w.RemoteModel(transport, name, remote.context));
    return models.get(name);
  };
  for (const role of ['reader', 'scorer', 'answerer']) if (remote.roles[role]) out[role] = model(remote.roles[role]);
  // Asks the host for one vector at once, to learn the width the library is made with.
  if (remote.roles.embedder) out.embedder = w.Embedder.remote(transport, remote.roles.embedder);
  return out;
}

/**
 * Load the local models onto `device` (the wasm package's Device: the CPU, or WebGPU,
 * straight from the files one block of tensors at a time), their files fetched first
 * (model-files.js). The roles in `hosted` are skipped.
 */
async function loadModels(models, a, emit, device) {
  const local = (role) => !hosted[role] && (models[role] || (role === 'answerer' && models.reader));
  const specs = new Map(); // a model in several roles is loaded once
  for (const role of ['embedder', 'reader', 'answerer']) if (local(role)) specs.set(local(role).name, local(role));
  // Kept when pruning (`keepModels`): those named, and every file a given model names.
  const keep = a.keepModels && [...a.keepModels, ...Object.values(models).flatMap((m) => m?.files ?? []).map((f) => f.sha256).filter(Boolean)];
  const store = { cacheDir: a.modelCacheDir, hasher: () => new w.Sha256(), keep, emit };
  return withModelFiles(platform, [...specs.values()], store, (filesOf) => {
    // What each model is (a GGUF file or a checkpoint) and where it runs is the wasm
    // package's to decide. A file the user chose is said what it is, from its header, and
    // refused when it cannot run, before its weights are read.
    const loaded = new Map();
    const lm = (spec) => {
      const describe = spec.files[0].blob ? ({ line, facts }) => emit({ stage: 'model', model: spec.name, line, facts, fraction: 0 }) : undefined;
      if (!loaded.has(spec.name)) loaded.set(spec.name, device.loadLm(spec.name, filesOf(spec), { describe }));
      return loaded.get(spec.name);
    };
    if (local('reader')) reader = lm(models.reader);
    if (local('answerer')) answerer = lm(local('answerer'));
    onGpu = device.kind === 'webgpu' && loaded.size > 0;
    // On WebGPU the embedder shares the local language models' device; with none there
    // (all hosted), it stays in wasm.
    if (local('embedder')) embedder = device.loadEmbedder(models.embedder.name, filesOf(models.embedder), { onCpu: !onGpu });
  });
}

/**
 * The way out of a library that no longer opens (`damaged: 'rebuild'`): its entries are
 * copied, untouched, to a library beside it (`<name>~damaged-<time>`, so nothing stored is
 * lost and it can be exported or inspected), the documents that still read back are added
 * to a new, empty library with sentence chunks (searchable at once; the app writes their
 * memories again in the background), and the original is replaced by it. Returns
 * {reason, documents, unreadable: [[key, why]], setAside}: setAside names the copy (a library
 * name in a browser, a directory in Node).
 */
async function rebuildLibrary(damaged, openStore, reason, emit, where) {
  const entries = await damaged.entries();
  const found = w.Library.salvage(entries);
  const suffix = `~damaged-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  const aside = await openStore(suffix);
  await aside.apply(Object.entries(entries), { replace: true });
  aside.close?.();
  lib = openLibrary({});
  let added = 0;
  for (const d of found.documents) {
    emit({ stage: 'rebuilding', fraction: added / found.documents.length, document: d.title });
    await lib.addDocument({ title: d.title, text: d.text }, { embedder, chunker: 'sentence', collection: d.collection });
    added += 1;
  }
  // The set-aside copy is complete before the original is replaced, in one transaction.
  await damaged.apply(lib.takeWrites(), { replace: true });
  return { reason, documents: added, unreadable: found.unreadable, setAside: `${where}${suffix}` };
}

/** The library stored in `entries`, its merges left to the idle queue (`mergeStep`). Its
 * index's bytes are given up as they are read (`releaseIndex`): the store holds them, and
 * the library keeps no second copy in wasm memory. */
function openLibrary(entries) {
  const opened = w.Library.open(entries, embedder, { releaseIndex: true });
  opened.setBackgroundMerges(true);
  libraryChanged();
  return opened;
}

async function persist() {
  libraryChanged();
  const writes = lib.takeWrites();
  try {
    await store.apply(writes);
  } catch (e) {
    // The library in memory is ahead of storage: reopen it as stored.
    lib.free();
    lib = openLibrary(await store.entries());
    throw e;
  }
}

/**
 * An add request's text: {text}. A string (`text`; HTML when `html`) is the text as
 * given. A file's bytes (`bytes`, a Uint8Array, with its `name`) are a PDF when the name
 * ends in .pdf or they start with %PDF- (the platform's pdfToText: PDF.js in this worker; a scan, an
 * encrypted or unreadable file or one over its size limit is refused with BAD_DOCUMENT),
 * else UTF-8 text (HTML when named .htm or .html), read as File.text() reads it. A PDF's
 * pages are separated by a form feed on its own line ("\n\f\n"), the engine's page mark:
 * a citation's page is counted from them.
 */
async function documentText(a) {
  if (a.bytes === undefined || a.bytes === null) return { text: a.html ? w.htmlToText(a.text) : a.text };
  const bytes = a.bytes instanceof Uint8Array ? a.bytes : new Uint8Array(a.bytes);
  const name = String(a.name ?? a.title ?? '');
  if (/\.pdf$/i.test(name) || isPdf(bytes)) {
    const { text } = await platform.pdfToText(bytes, { name, isCancelled: cancelled, separator: '\n\f\n' });
    return { text };
  }
  const text = new TextDecoder().decode(bytes);
  return { text: a.html || /\.html?$/i.test(name) ? w.htmlToText(text) : text };
}

const ops = {
  async init(a, emit) {
    cancelFlag = a.cancel ? new Int32Array(a.cancel) : null;
    const threading = await loadWasm(platform, a.wasm, a.threads);
    [w, wasmMemory] = [threading.module, threading.memory];
    const objects = a.remote ? connectHosted(a.remote) : {};
    hosted = Object.fromEntries(Object.keys(objects).map((role) => [role, true]));
    ({ reader, answerer, embedder } = objects);
    scorer = objects.scorer ?? objects.reader ?? null;
    // Where the local models run, with the reason in words: the runtime's one rule
    // (`docmem_runtime::device`, through the wasm package's Device). On WebGPU, the
    // adapter the kernel checks ran on, which every model then loads onto.
    let device = await w.Device.choose(['webgpu', 'cpu'].includes(a.backend) ? a.backend : 'auto');
    let reason = device.reason;
    const webgpuAdapter = device.adapter !== undefined;
    let loadedModels;
    try {
      loadedModels = await loadModels(a.models, a, emit, device);
    } catch (e) {
      // 'auto' falls back to the CPU when WebGPU cannot take the models (out of memory, say).
      if (device.kind !== 'webgpu' || a.backend === 'webgpu') throw e;
      // Free what did load (the embedder, a model already on the GPU), then load for the CPU.
      const loaded = { embedder, reader, answerer };
      for (const m of new Set(Object.keys(loaded).filter((r) => !hosted[r]).map((r) => loaded[r]))) m?.free?.();
      if (!hosted.embedder) embedder = undefined;
      if (!hosted.reader) reader = undefined;
      if (!hosted.answerer) answerer = undefined;
      device.free();
      device = await w.Device.choose('cpu');
      reason = `WebGPU could not take the models (${e.message})`;
      loadedModels = await loadModels(a.models, a, emit, device);
    }
    const openStore = (suffix = '') => platform.openStore(a, suffix);
    store = await openStore();
    let rebuilt = null;
    try {
      lib = openLibrary(await store.entries());
    } catch (e) {
      if (knownCode(e) !== codes.BAD_LIBRARY) throw e;
      if (a.damaged !== 'rebuild') {
        throw new DocMemError(codes.BAD_LIBRARY, `the library '${a.libraryName}' cannot be opened: ${e.message}. Opening it with {damaged: 'rebuild'} sets it aside, untouched, and builds a new one from the documents it still holds`);
      }
      rebuilt = await rebuildLibrary(store, openStore, e.message, emit, platform.setAsideBase(a));
    }
    const name = (role) => (hosted[role] ? `remote:${a.remote.roles[role]}` : (a.models[role] || a.models.reader).name);
    const remote = a.remote
      ? { host: new URL(a.remote.url).host, roles: Object.fromEntries(Object.keys(hosted).map((role) => [role, `remote:${a.remote.roles[role]}`])) }
      : null;
    // The CPU kernels' threads (the embedder's unless on WebGPU; the reader's and
    // answerer's on the CPU backend), as the loaded models use them.
    const threads = JSON.parse(w.threadStats()).threads;
    const note = hosted.reader && hosted.answerer && hosted.embedder ? 'every model is hosted, none runs here' : threading.note;
    const embedderRuns = hosted.embedder ? 'hosted' : embedder.onWebGpu() ? 'webgpu' : 'cpu';
    const simd = threading.kernels === 'relaxed-simd' ? 'simd128 + relaxed SIMD' : 'simd128';
    const where =
      device.kind === 'webgpu'
        ? { name: 'webgpu', label: 'WebGPU', software: device.software }
        : { name: 'cpu-wasm-simd128', label: `CPU (wasm ${simd}, ${threads} thread${threads === 1 ? '' : 's'})` };
    const backend = { ...where, reason, webgpuAdapter, embedder: embedderRuns, threads, threadsNote: threads === 1 ? note : '', kernels: threading.kernels, kernelsNote: threading.kernelsNote ?? '' };
    // The models hold the device now: its JavaScript handle goes (it never leaves this worker).
    device.free();
    return {
      backend,
      // Linear memory with every model loaded (the weights are held there once, read in
      // from the model cache a block at a time; on WebGPU the reader's are on the GPU).
      models: {
        reader: name('reader'),
        answerer: name('answerer'),
        embedder: name('embedder'),
        fromCache: loadedModels.fromCache,
        // Model files the user chose, now kept by sha256 ({name, path, sha256, size}).
        adopted: loadedModels.adopted,
        // With keepModels: the stored model files removed ({files, bytes}), or null when
        // another tab held the store (or none was asked for).
        pruned: loadedModels.pruned ?? null,
        wasmMemoryBytes: wasmMemory.buffer.byteLength,
      },
      remote,
      rebuilt,
    };
  },

  async add(a, emit) {
    // An empty text is refused by ingest itself (Error::EmptyDocument → BAD_DOCUMENT).
    const { text } = await documentText(a);
    let added;
    if (a.method === 'mom') {
      const stages = { reading: 'reading', fallback: 'reading', scoring: 'candidates', done: 'indexing' };
      const progress = (p) => {
        if (cancelled()) return false;
        emit({ ...p, stage: stages[p.stage] || p.stage, detail: p.stage, fraction: p.stage === 'done' ? 0 : p.fraction });
        return true;
      };
      added = await lib.addDocument({ title: a.title, text }, { embedder, chunker: 'mom', reader, scorer, samples: a.samples, progress, collection: a.collection });
    } else {
      emit({ stage: 'indexing', fraction: 0 });
      added = await lib.addDocument({ title: a.title, text }, { embedder, chunker: a.method, collection: a.collection });
    }
    emit({ stage: 'indexing', fraction: 1 });
    await persist();
    // With the library's entry for it (`document`), so a page can list it now, before any
    // request queued behind this one.
    return added;
  },

  async ask(a, emit) {
    // Progress: {stage: 'search'}, then {stage: 'read', found, passages, sources} once the
    // passages the answerer reads are known, then {stage: 'write'} with the first token;
    // tokens as {token}.
    let stopped = false;
    let writing = false;
    const onToken = (piece) => {
      if (cancelled()) {
        stopped = true;
        return false;
      }
      if (!writing) {
        writing = true;
        emit({ stage: 'write' });
      }
      emit({ token: piece });
      return true;
    };
    const guided = (a.clues && a.clues !== 'off') || a.route;
    emit({ stage: 'search' });
    // The ask hands over the passages its answerer is about to read (windows of text
    // grown around the pieces found, neighbours merged; with clues or routing, the pieces
    // they found), with their text, before the answerer reads them: on a CPU that read
    // is the long wait, and the page shows them meanwhile.
    const onRead = (sources) => {
      // Stopped while it searched: the answerer does not start reading.
      if (cancelled()) {
        stopped = true;
        return false;
      }
      const found = sources.reduce((n, s) => n + Math.max(1, s.hits.length), 0);
      emit({ stage: 'read', found, passages: sources.length, sources });
      return true;
    };
    // The answer's parts as the engine reads them (text, and each citation as its bracket
    // closes): what a page draws.
    const onPart = (part) => emit({ part });
    // The package's Answer, spans in UTF-16 units (the wasm layer shapes it).
    const answer = await lib.ask(a.question, { embedder, answerer, k: a.k, maxTokens: a.maxTokens, clues: a.clues || 'off', route: a.route ?? undefined, onToken, onPart, onRead });
    if (stopped) throw new DocMemError(codes.ABORTED, 'the operation was aborted');
    // Routing saves what it learned, clues the global memory: persist like a change.
    if (guided) await persist();
    return answer;
  },

  async threadStats() {
    return JSON.parse(w.threadStats());
  },

  async documents() {
    return lib.documents();
  },

  async collections() {
    return lib.collections();
  },

  async memory({ id }) {
    return lib.memory(id);
  },

  async remove({ id }) {
    const removed = lib.removeDocument(id);
    await persist();
    return removed;
  },

  async exportLibrary() {
    // What the store holds is the library: every change is applied to it as it is made.
    return w.Library.archive(await store.entries());
  },

  async importLibrary({ bytes }) {
    const imported = w.Library.importLibrary(bytes, embedder);
    imported.setBackgroundMerges(true);
    await store.apply(imported.takeWrites(), { replace: true });
    imported.releaseIndex();
    lib.free();
    lib = imported;
    return true;
  },
};

async function serve({ id, op, args }) {
  const emit = (data) => port.post({ id, type: 'event', data });
  serving = { id, aborted: false };
  const started = performance.now();
  try {
    if (!ops[op]) throw new DocMemError(codes.INTERNAL, `unknown request '${op}'`);
    if (op !== 'init' && !lib) throw new DocMemError(codes.INTERNAL, 'the worker is not initialised');
    port.post({ id, type: 'result', data: await ops[op](args || {}, emit) });
  } catch (e) {
    // A cancelled request's hosted model fails as its fetch is aborted: that is the cancel.
    const error = op !== 'init' && cancelled() ? new DocMemError(codes.ABORTED, 'the operation was aborted') : classify(e);
    port.post({ id, type: 'error', error: toWire(error) });
  } finally {
    serving = null;
    requestTook(performance.now() - started);
  }
}

/** Cancel request `id` if it is the one being served (its hosted models' fetches end
 * now) or a background memory. */
function cancel(id) {
  if (cancelMemory(id)) return;
  if (serving === null || serving.id !== id) return;
  serving.aborted = true;
  transport?.abort();
}

// One request at a time, in arrival order, with background steps between them; a cancel,
// a background memory and a pause are taken at once.
let queue = Promise.resolve();
let pendingRequests = 0; // requests received and not yet answered

/** Serve the client's requests on `given.port` with the platform `given` (the header). */
export function serveRequests(given) {
  platform = given;
  port = given.port;
  const enqueue = (step, after = () => {}) => (queue = queue.then(step).finally(after));
  startBackground({
    post: (m) => port.post(m),
    flag,
    sharedFlags: () => cancelFlag !== null,
    pending: () => pendingRequests,
    enqueue,
    state: () => ({ lib, reader, answerer, embedder, hosted, onGpu }),
    persist,
    classify,
    knownCode,
  });
  port.on((message) => {
    if (message.op === 'cancel') cancel(message.id);
    else if (message.op === 'memorize') memorize(message.id, message.args);
    else if (message.op === 'readAhead') readAhead(message.id, message.args);
    else if (message.op === 'pauseMemories') pauseMemories(message.id, message.args?.paused);
    else {
      pendingRequests += 1;
      requestArrived(message.op);
      enqueue(
        () => serve(message),
        () => {
          pendingRequests -= 1;
          if (message.op !== 'init' && cancelFlag !== null && cancelFlag.length > SIGNAL.WAITING) Atomics.sub(cancelFlag, SIGNAL.WAITING, 1);
          schedule();
        },
      );
    }
  });
  port.post({ type: 'ready' });
}
