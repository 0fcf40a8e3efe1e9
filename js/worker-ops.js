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
// Backend: 'cpu' runs the models in wasm; 'webgpu' loads the reader and answerer onto the
// browser's WebGPU adapter (straight from the file, a block of tensors at a time; any
// adapter whose kernel checks pass, software ones included) or fails with
// WEBGPU_UNAVAILABLE; 'auto' takes WebGPU when the adapter is a hardware one and passes
// the checks, and otherwise runs on the CPU and says why (a software adapter such as
// SwiftShader is slower than wasm on the same cores).
//
// Threads: the wasm CPU kernels (the embedder unless it runs on WebGPU; the reader and
// answerer on the CPU backend) run on `threads` threads (default: the cores, at most 8) with the threads build
// of the wasm package, whose helper workers threads.js starts before any model loads;
// where shared memory is unavailable (a page that is not cross-origin isolated), on one
// with the plain build, and the backend report says why.
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

let platform;
let port;

/** A build of the wasm package at URLs the app gave (DocMem's `wasm` option). */
const importUrl = (url) => import(/* webpackIgnore: true */ /* @vite-ignore */ url);
const givenBuild = (name, b) => b && { name, url: b.js, glue: () => importUrl(b.js), wasm: b.wasm };

let w; // the wasm package's module
let wasmMemory; // its linear memory (WebAssembly.Memory; it only grows, so its size is the peak)
let embedder;
let reader;
let answerer;
let scorer = null; // a hosted reader's scorer (RemoteModel); null with a local reader
let hosted = {}; // role → true for the roles a hosted model plays
let transport = null; // to the hosted models' host (remote.js), when there are any
let onGpu = false; // the local reader and answerer are GpuLm objects (WebGPU), not Lm (wasm CPU)
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

/** Whether this engine has relaxed SIMD: a 60-byte module using its dot product validates
 * (so an engine without it never downloads or compiles the relaxed build). */
function hasRelaxedSimd() {
  const v128 = [0xfd, 0x0c, ...new Array(16).fill(0)]; // v128.const 0
  const body = [0x00, ...v128, ...v128, ...v128, 0xfd, 0x93, 0x02, 0x0b]; // i32x4.relaxed_dot_i8x16_i7x16_add_s
  const code = [0x01, body.length, ...body];
  const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03, 0x02, 0x01, 0x00];
  try {
    return WebAssembly.validate(new Uint8Array([...header, 0x0a, code.length, ...code]));
  } catch {
    return false;
  }
}

/**
 * Load the wasm package: the threads build on `threads` threads where that is asked for
 * (a number, or the platform's core count when not given) and possible, else the plain
 * build on one. Where the package has a relaxed-SIMD threads build and the engine compiles
 * it, that one is tried first and kept only if its kernels pass the check against the
 * portable ones (an engine may compute relaxed products its own way: V8 11.3 doubles them
 * on some x86 machines). Returns {count, note, kernels}: the threads started, why only one
 * when so, and 'simd128' or 'relaxed-simd'.
 */
async function loadWasm(given, wanted) {
  // The package's own builds, or the ones the app named by URL.
  const pkg = given ? { plain: givenBuild('plain', given), threads: givenBuild('threads', given.threads), relaxed: givenBuild('relaxed', given.relaxed) } : platform.builds;
  let count = wanted === undefined || wanted === null ? await platform.defaultThreadCount() : Math.max(1, Math.floor(Number(wanted)) || 1);
  let note = count === 1 ? (wanted !== undefined && wanted !== null ? 'one thread was asked for' : 'this device reports one core') : '';
  let kernelsNote = '';
  const support = platform.threadSupport();
  if (count > 1 && !pkg.threads) [count, note] = [1, 'the wasm package has no threads build'];
  if (count > 1 && !support.ok) [count, note] = [1, support.reason];
  const message = (e) => (e && e.message ? e.message : String(e));
  // One threads build: compiled, instantiated on shared memory and (relaxed) checked, as
  // {glue, module, memory}; its helpers are started by `start`.
  const prepare = async (build, check) => {
    const glue = await build.glue();
    const module = await platform.compileWasm(build.wasm);
    // Shared memory (up to 4 GiB reserved) can fail to be made.
    const exports = await glue.default({ module_or_path: module });
    if (check) glue.cpuKernelCheck();
    return { glue, module, memory: exports.memory };
  };
  const start = async (build, b, kernels) => {
    const started = await platform.startThreads(b.glue, { build: build.name, glueUrl: build.url, module: b.module, memory: b.memory, count });
    [w, wasmMemory] = [b.glue, b.memory];
    return { count: started, note, kernels, kernelsNote };
  };
  if (count > 1) {
    // The relaxed build where the engine has relaxed SIMD and its kernels pass the check,
    // else the simd128 threads build. (A build that compiled but failed its check stays in
    // memory, unused: only an engine that computes relaxed products wrongly gets there.)
    let chosen = null;
    if (pkg.relaxed && hasRelaxedSimd()) {
      try {
        chosen = { build: pkg.relaxed, b: await prepare(pkg.relaxed, true), kernels: 'relaxed-simd' };
      } catch (e) {
        kernelsNote = `relaxed SIMD not used: ${message(e)}`;
      }
    } else if (pkg.relaxed) {
      kernelsNote = 'relaxed SIMD not used: this engine does not have it';
    }
    try {
      chosen = chosen ?? { build: pkg.threads, b: await prepare(pkg.threads, false), kernels: 'simd128' };
      // startThreads stops its helpers when they fail; the plain build then runs on one
      // thread (helpers that failed once would fail again with the other build).
      return await start(chosen.build, chosen.b, chosen.kernels);
    } catch (e) {
      w = undefined;
      [count, note] = [1, `the threads build could not start (${message(e)})`];
    }
  }
  w = await pkg.plain.glue();
  wasmMemory = (await w.default({ module_or_path: await platform.wasmSource(pkg.plain.wasm) })).memory;
  return { count, note, kernels: 'simd128', kernelsNote };
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
 * Fetch every file of the local models (progress over all bytes), then load them onto
 * `device` (the wasm package's Device: the CPU, or WebGPU, straight from the files one
 * block of tensors at a time). The roles in `hosted` are skipped.
 */
async function loadModels(models, cacheDir, emit, device, keep = null) {
  // Downloads are hashed as they stream into storage, with the wasm package's incremental
  // Sha256 where the platform has no hasher of its own (WebCrypto would need the whole
  // file in memory).
  const cache = await platform.modelCache(cacheDir, () => new w.Sha256());
  // A browser's model store is shared by every tab of the origin: files are read under a
  // shared lock, and pruned (with `keepModels`) only when no other tab holds it.
  let pruned = null;
  if (keep && cache.prune) {
    const named = Object.values(models).flatMap((m) => m?.files ?? []).map((f) => f.sha256).filter(Boolean);
    pruned = await platform.withModelStore('prune', () => cache.prune([...keep, ...named]));
  }
  const loaded = await platform.withModelStore('shared', () => loadModelsHeld(cache, models, emit, device));
  return { ...loaded, pruned };
}

async function loadModelsHeld(cache, models, emit, device) {
  const local = (role) => !hosted[role] && (models[role] || (role === 'answerer' && models.reader));
  const unique = new Map();
  for (const role of ['embedder', 'reader', 'answerer']) {
    const m = local(role);
    if (m && !unique.has(m.name)) unique.set(m.name, m);
  }
  const all = [...unique.values()].flatMap((m) => m.files.map((f) => ({ model: m.name, file: f })));
  const total = all.reduce((s, x) => s + (x.file.size || 0), 0);
  const loaded = new Map();
  const resumed = new Map(); // bytes an interrupted download had stored, not fetched again
  let fromCache = true;
  const got = new Map();
  // Refuses (QUOTA_EXCEEDED) before any download when the storage cannot take the files.
  const room = await cache.prepare(all.map((x) => (x.file.blob ? { path: x.file.path, size: x.file.blob.size } : x.file)));
  const sumOf = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  const adoptions = []; // model files the user chose, kept in storage once they load
  for (const { model, file } of all) {
    const report = (n) => {
      loaded.set(file.url ?? file.path, n);
      const sum = sumOf(loaded);
      emit({ stage: 'download', model, file: file.path, loaded: sum, total, fraction: total ? sum / total : 1, resumed: sumOf(resumed), persisted: room.persisted });
    };
    if (file.blob) {
      // A model file the user chose: read where it lies, a slice at a time.
      got.set(file.path, await platform.userFile(file.blob, model));
      adoptions.push({ model, file });
      fromCache = false;
      report(file.blob.size);
      continue;
    }
    if (!file.url) {
      // A model the user chose before, kept by its sha256; nowhere to fetch it from.
      const kept = file.sha256 && cache.stored ? await cache.stored(file) : null;
      if (!kept) throw new DocMemError(codes.MODEL_FETCH_FAILED, `${model} is no longer kept in this browser's storage (it was cleared); choose its file again`);
      got.set(file.path, kept);
      report(kept.size);
      continue;
    }
    const f = await cache.file(file, (n, _t, cached, info = {}) => {
      if (info.resumed) resumed.set(file.url, info.resumed);
      if (!cached) fromCache = false;
      report(n);
    });
    got.set(file.url, f);
  }
  emit({ stage: 'loading', fraction: 0 });
  // What each model is (a GGUF file or a checkpoint) and where it runs is the wasm
  // package's to decide (Device.loadLm, loadEmbedder): here are its files.
  const filesOf = (spec) =>
    spec.files.map((f) => {
      const file = got.get(f.url ?? f.path);
      return { path: f.path, size: file.size, read: (offset, length) => file.read(offset, length) };
    });
  const lms = new Map();
  const lm = (spec) => {
    if (!lms.has(spec.name)) {
      // A file the user chose is said what it is, from its header, and refused here when
      // it cannot run, before its weights are read.
      const describe = spec.files[0].blob ? ({ line, facts }) => emit({ stage: 'model', model: spec.name, line, facts, fraction: 0 }) : undefined;
      lms.set(spec.name, device.loadLm(spec.name, filesOf(spec), { describe }));
    }
    return lms.get(spec.name);
  };
  if (local('reader')) reader = lm(models.reader);
  if (local('answerer')) answerer = lm(local('answerer'));
  onGpu = device.kind === 'webgpu' && lms.size > 0;
  // On WebGPU the embedder shares the local models' device, unless a hosted answerer's
  // guided asks (which embed synchronously) need it in wasm.
  if (local('embedder')) embedder = device.loadEmbedder(models.embedder.name, filesOf(models.embedder), { onCpu: Boolean(hosted.answerer) });
  for (const f of got.values()) f.close?.();
  // The chosen files loaded (a supported architecture): keep them for the next visit.
  const adopted = [];
  for (const { model, file } of adoptions) {
    const kept = await cache.adopt(file.blob, file.path, (n, t) => emit({ stage: 'keeping', model, loaded: n, total: t, fraction: t ? n / t : 1 }));
    adopted.push({ name: model, path: file.path, ...kept });
  }
  emit({ stage: 'loading', fraction: 1 });
  return { fromCache, adopted };
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
  mergeDue = true;
  return opened;
}

async function persist() {
  mergeDue = true;
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
    const threading = await loadWasm(a.wasm, a.threads);
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
      loadedModels = await loadModels(a.models, a.modelCacheDir, emit, device, a.keepModels);
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
      loadedModels = await loadModels(a.models, a.modelCacheDir, emit, device, a.keepModels);
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
    // Clues and routing with an embedder on WebGPU are refused by the runtime, by name.
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

// ---- background memories ----------------------------------------------------------
// A document added with sentence chunks is searchable at once; `memorize` then has the
// local reader write its MoM memory in the background, one window per turn of the request
// queue (a MemoryDraft step), and swap it in for the chunks in one commit when the last
// window is read. A request that arrives meanwhile is served before the next window; with
// shared memory the window being read stops within one prompt piece or decoding step (the
// client raises flag [1]), and the reader keeps what it read and wrote of it, so the next
// step goes on where it stopped: questions delay a memory but never undo it. Without
// shared memory a request waits for the window to end. Jobs are served in the
// order they came; `pauseMemories` holds them (a window being read stops at once).

const memoryJobs = []; // {id, docId, samples, maxNewTokens, emit, draft, aborted, seconds, fraction, gaveWay}
let memoriesPaused = false;
let pendingRequests = 0; // requests received and not yet answered
let stepQueued = false;

const memoryStopped = (job) => job.aborted || flag(SIGNAL.STOP_MEMORY) === job.id;
const requestsWait = () => pendingRequests > 0 || flag(SIGNAL.WAITING) > 0;
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
  port.post({ id: job.id, type: 'result', data });
}

/** Read ahead the latest question's answer prompt until done, a request, or a newer one. */
async function aheadStep() {
  const job = ahead;
  if (!job || requestsWait()) return;
  try {
    if (!answerer || hosted.answerer) return endAhead(job, { kept: 0 });
    let pieces = 0;
    let stopped = false;
    const interrupt = () => {
      // With shared memory: until a request or a newer read-ahead comes; without, one
      // piece per turn of the queue (a message can only arrive between turns).
      stopped = requestsWait() || ahead !== job || (cancelFlag !== null ? flag(SIGNAL.READ_AHEAD) !== job.seq : pieces++ > 0);
      return stopped;
    };
    // Awaited inside the try: a rejected read-ahead on WebGPU must not reject the queue
    // it runs in (every later request would be skipped).
    job.kept = await lib.readAhead(job.question, { embedder, answerer, k: job.k, interrupt });
    if (!stopped) endAhead(job, { kept: job.kept });
  } catch (e) {
    // Reading ahead only saves time: a failure (a library being replaced, say) ends it,
    // and the ask reports its own errors.
    endAhead(job, { kept: job.kept, error: classify(e).message });
  }
}

function endMemory(job, error, data) {
  memoryJobs.splice(memoryJobs.indexOf(job), 1);
  // Only the job being written has a draft (they are written in order).
  const wasWritten = job.draft !== null;
  job.draft?.free();
  if (error) port.post({ id: job.id, type: 'error', error: toWire(error) });
  else port.post({ id: job.id, type: 'result', data });
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
    const slice = Math.min(MERGE_SLICE_MS[1], Math.max(MERGE_SLICE_MS[0], pendingRequests > 0 ? MERGE_SLICE_MS[0] : lastRequestMs));
    lastRequestMs = MERGE_SLICE_MS[1]; // idle from here on, unless a request comes
    const r = lib.mergeStep(slice);
    if (r.applied) await persist();
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
  if (stepQueued || !lib) return;
  const aheadWaits = ahead !== null && !requestsWait();
  const mergeWaits = mergeDue && !requestsWait();
  if (!aheadWaits && !mergeWaits && (memoryJobs.length === 0 || memoryGivesWay())) return;
  stepQueued = true;
  queue = queue
    .then(() => (ahead !== null ? aheadStep() : mergeDue && !requestsWait() ? mergeStep() : memoryStep()))
    .finally(() => {
      stepQueued = false;
      setTimeout(scheduleMemory, 0);
    });
}

/** Read one window of the first job's memory; land it when it is the last. */
async function memoryStep() {
  const job = memoryJobs[0];
  if (!job || memoryGivesWay()) return;
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
      if (knownCode(e) === codes.ABORTED && !memoryStopped(job)) {
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
      await persist();
      report(job.draft.progress());
      return;
    }
    const r = await lib.replaceMemory(job.draft, embedder);
    await persist();
    endMemory(job, null, { ...r, id: job.docId, seconds: job.seconds, gaveWay: job.gaveWay });
  } catch (e) {
    endMemory(job, memoryStopped(job) ? new DocMemError(codes.ABORTED, 'the memory was cancelled; the document keeps its chunks') : classify(e));
  }
}

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
    lastRequestMs = performance.now() - started;
  }
}

/** Cancel request `id` if it is the one being served (its hosted models' fetches end
 * now) or a background memory. */
function cancel(id) {
  const job = memoryJobs.find((j) => j.id === id);
  if (job) {
    job.aborted = true;
    // Ended behind the step being read, if any (which stops at its next decoding step:
    // the client raised flag [2], or, on WebGPU, `aborted` is seen between steps).
    queue = queue.then(() => memoryJobs.includes(job) && endMemory(job, new DocMemError(codes.ABORTED, 'the memory was cancelled; the document keeps its chunks')));
    return;
  }
  if (serving === null || serving.id !== id) return;
  serving.aborted = true;
  transport?.abort();
}

// One request at a time, in arrival order, with background memory steps between them; a
// cancel, a background memory and a pause are taken at once.
let queue = Promise.resolve();

/** Serve the client's requests on `given.port` with the platform `given` (the header). */
export function serveRequests(given) {
  platform = given;
  port = given.port;
  port.on((message) => {
    if (message.op === 'cancel') cancel(message.id);
    else if (message.op === 'memorize') {
      const { id: docId, samples, maxNewTokens, maxWindowTokens } = message.args || {};
      memoryJobs.push({ id: message.id, docId: String(docId), samples, maxNewTokens, maxWindowTokens, gaveWay: 0, emit: (data) => port.post({ id: message.id, type: 'event', data }), draft: null, aborted: false, seconds: 0, fraction: 0 });
      scheduleMemory();
    } else if (message.op === 'readAhead') {
      // The latest question typed replaces the one before (which resolves with what it read).
      if (ahead) endAhead(ahead, { kept: ahead.kept, superseded: true });
      ahead = { id: message.id, question: String(message.args?.question ?? ''), k: message.args?.k ?? 8, seq: message.args?.seq ?? 0, kept: 0 };
      scheduleMemory();
    } else if (message.op === 'pauseMemories') {
      memoriesPaused = Boolean(message.args?.paused);
      port.post({ id: message.id, type: 'result', data: { paused: memoriesPaused, pending: memoryJobs.length } });
      scheduleMemory();
    } else {
      pendingRequests += 1;
      // A request ends the read-ahead: an ask reuses what it read, and reading on after it
      // could only be for a question that was not asked.
      if (ahead && message.op !== 'init') endAhead(ahead, { kept: ahead.kept, superseded: true });
      queue = queue
        .then(() => serve(message))
        .finally(() => {
          pendingRequests -= 1;
          if (message.op !== 'init' && cancelFlag !== null && cancelFlag.length > SIGNAL.WAITING) Atomics.sub(cancelFlag, SIGNAL.WAITING, 1);
          scheduleMemory();
        });
    }
  });
  port.post({ type: 'ready' });
}
