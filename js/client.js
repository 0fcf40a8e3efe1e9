// docmem's main-thread client, the same in browsers and in Node: every method is async and
// only sends a request to the package's worker, where the wasm package does the work;
// requests run one at a time, in order. What differs between the two (how the worker is
// started, where the library and the models are kept, how a library is locked) is the
// `platform` of the entry that binds this class: docmem.js for browsers and bundlers (a
// module Web Worker, models in the Origin Private File System, the library in IndexedDB),
// node/docmem.js for Node >= 20 (a worker thread, both in directories). So the browser
// entry never names a Node builtin, and the Node one carries no browser code.
//
//   const dm = await DocMem.open('notes', { models: '/models/models.json', onProgress });
//   await dm.addDocument(file, { onProgress, signal });
//   const { answer, citations } = await dm.ask('Who brought printing to England?', { onToken });
//
// Hosted models are opt-in, per role (options.remote): a role given a model name sends its
// text to that host (remote.js moves the bytes; the worker picks the wasm entry points);
// every other role stays on this device.
//
// A platform is {
//   defaultModels(): the manifest's URL when `models` is not given (undefined: none),
//   manifestUrl(models): the absolute URL of a manifest given as a URL or path,
//   readManifest(url): a manifest read without fetch (Node's file: URLs), or null,
//   storage(name, options): {storageDir, modelCacheDir} where they are directories, else {},
//   lockLibrary(name, storageDir): resolves with a release function (library-lock.js),
//   askPersistence(): null, or a Promise of {asked, granted} (navigator.storage.persist()),
//   sharedMemory(): whether a SharedArrayBuffer can reach the worker,
//   spawnWorker(workerUrl): {post(m, transfer), onMessage(f), onError(f), terminate()} }.

import { DocMemError, abortError, codes, fromWire } from './errors.js';
import { remoteBase } from './remote.js';
import { SIGNAL, SIGNAL_BYTES } from './signals.js';

const SUFFIXES = /\.(txt|md|markdown|html?|pdf)$/i;

const ROLES = ['reader', 'scorer', 'answerer', 'embedder'];

/**
 * `options.remote` checked: {url (the API's base), token, context, roles: {role: model
 * name}} with only the hosted roles named, or null when there is none. Each mistake is a
 * BAD_ARGUMENT naming its option.
 */
function hostedRoles(remote) {
  if (remote === undefined || remote === null) return null;
  const bad = (message) => new DocMemError(codes.BAD_ARGUMENT, message);
  if (typeof remote !== 'object' || Array.isArray(remote)) throw bad('remote: an object {url, token, reader?, scorer?, answerer?, embedder?, context?}');
  const known = new Set(['url', 'token', 'context', 'allowHttp', ...ROLES]);
  for (const key of Object.keys(remote)) {
    if (!known.has(key)) throw bad(`remote.${key} is not an option (${[...known].join(', ')})`);
  }
  if (remote.allowHttp !== undefined && typeof remote.allowHttp !== 'boolean') throw bad('remote.allowHttp: true or false');
  const url = remoteBase(remote.url, 'remote.url', remote.allowHttp === true);
  if (remote.token !== undefined && remote.token !== null && typeof remote.token !== 'string') throw bad('remote.token: a string (the bearer token)');
  const context = remote.context ?? 0;
  if (!Number.isInteger(context) || context < 0 || context > 1 << 22) throw bad(`remote.context: a whole number of tokens up to ${1 << 22} (0: the default, 8192)`);
  const roles = {};
  for (const role of ROLES) {
    const name = remote[role];
    if (name === undefined || name === null) continue;
    if (typeof name !== 'string' || name.trim() === '') throw bad(`remote.${role}: the hosted model's name, a non-empty string`);
    roles[role] = name.trim();
  }
  if (Object.keys(roles).length === 0) throw bad('remote: names no hosted model (give remote.reader, remote.scorer, remote.answerer or remote.embedder)');
  // The wasm package scores a hosted reader's candidates with a hosted model only, and a
  // local reader scores its own: a hosted scorer goes with a hosted reader.
  if (roles.scorer && !roles.reader) throw bad('remote.scorer: a hosted scorer scores a hosted reader\u2019s candidates; name remote.reader too (a local reader scores its own)');
  return { url, token: remote.token || '', context, roles, allowHttp: remote.allowHttp === true };
}

/**
 * A model manifest ({embedder, reader, answerer}, each {name, files: [{path, url, size,
 * sha256}]}) with every url made absolute against `base`. Roles in `hosted` need no
 * model; every other one does (a local answerer defaults to the reader's model).
 */
function resolveManifest(manifest, base, hosted = {}) {
  const out = {};
  const bad = (message) => new DocMemError(codes.MODEL_FETCH_FAILED, `the model manifest${base ? ` (${base})` : ''}: ${message}`);
  // A manifest fetched from a server names files on servers: never this machine's files.
  const remoteManifest = base !== null && !base.startsWith('file:');
  for (const role of ['embedder', 'reader', 'answerer']) {
    const m = manifest[role];
    if (!m) continue;
    if (typeof m.name !== 'string' || !Array.isArray(m.files) || m.files.length === 0) throw bad(`${role} needs a name and files`);
    const files = m.files.map((f) => {
      // (A file of the user's own, read from a File, has a blob and no url; one kept earlier, neither.)
      if (typeof f?.path !== 'string' || (f.url !== undefined && typeof f.url !== 'string')) throw bad(`each ${role} file needs a path, and a url as a string`);
      const url = f.url === undefined ? undefined : base ? new URL(f.url, base).href : f.url;
      if (remoteManifest && url !== undefined && !/^https?:/.test(url)) throw bad(`${role} file ${f.path}: ${url} is not an http(s) URL`);
      // A downloaded file is stored under its sha256, so one must be there and well formed;
      // a file already on this machine (Node: file: URLs, paths) is checked only if given one.
      const onDisk = url !== undefined && !/^https?:/.test(url);
      const needed = !f.blob && !onDisk;
      if ((needed || f.sha256 !== undefined) && !/^[0-9a-f]{64}$/.test(f.sha256 ?? '')) throw bad(`${role} file ${f.path}: sha256 must be 64 lowercase hex digits`);
      return url === undefined ? f : { ...f, url };
    });
    out[role] = { name: m.name, files };
  }
  const missing = (what) => new DocMemError(codes.MODEL_FETCH_FAILED, `the model manifest names no ${what}`);
  if (!hosted.embedder && !out.embedder) throw missing('embedder');
  if (!hosted.reader && !out.reader) throw missing('reader');
  if (!hosted.answerer && !out.answerer && !out.reader) throw missing('answerer (nor a reader to answer with)');
  return out;
}

/** Whether every model role is hosted, so that no manifest is needed. */
const allHosted = (remote) => remote !== null && ['reader', 'answerer', 'embedder'].every((r) => remote.roles[r]);

/**
 * The manifest at `url`: read by the platform (Node's file: URLs), else from the network
 * and, offline, from the copy the Cache API kept of it (where there is one).
 */
async function fetchManifest(url, platform) {
  const cacheName = 'docmem-models';
  try {
    const read = await platform.readManifest(url);
    if (read !== null) return read;
  } catch (e) {
    throw new DocMemError(codes.MODEL_FETCH_FAILED, `model manifest ${url}: ${e.message}`, { cause: e });
  }
  try {
    const response = await fetch(url, { cache: 'no-cache' });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    if (globalThis.caches) await (await caches.open(cacheName)).put(url, response.clone());
    return await response.json();
  } catch (e) {
    const cached = globalThis.caches ? await (await caches.open(cacheName)).match(url) : undefined;
    if (cached) return cached.json();
    throw new DocMemError(codes.MODEL_FETCH_FAILED, `model manifest ${url}: ${e.message}`, { cause: e });
  }
}

function firstHeading(text) {
  const m = /^\s*#+\s+(.+)$/m.exec(text) || /^\s*(\S.{0,60})/.exec(text);
  return m ? m[1].trim() : 'untitled';
}

/**
 * The DocMem API over a platform: each entry binds it (`class DocMem extends DocMemClient
 * { static platform = … }`), and an instance reads its platform from its class.
 */
export class DocMemClient {
  #platform;
  #name;
  #options;
  #init; // the init request's arguments (sent again after a restart)
  #worker = null;
  #ready = false;
  #queue = [];
  #running = null;
  #nextId = 1;
  #cancel = null; // Int32Array over a SharedArrayBuffer, when there is one (its slots: signals.js)
  #background = new Map(); // id → a background job (writeMemory, readAhead), outside the queue
  #pausedMemories = false;
  #info = null;
  #closed = false;
  #persistence = null; // {asked, granted}: the browser's answer to requestPersistence()
  #releaseLock = null; // releases this DocMem's hold on its library (library-lock.js)

  /**
   * Open (or create) the library `libraryName`, fetching the models on first use.
   * options: models (manifest URL or object), backend ('auto' | 'cpu' | 'webgpu'),
   * threads (the CPU kernels'; default: the cores, at most 8), method ('mom' | 'sentence'
   * | …), samples, onProgress, and in Node storageDir and modelCacheDir. workerUrl: the
   * package's worker.js where the app serves a copy of the package (a bundler that does
   * not copy the files a package names with `new URL(…, import.meta.url)`, as esbuild
   * and Rollup do not): the worker finds its wasm builds, thread helper and PDF.js beside
   * itself (in Node: a worker thread's script, as node/worker.js). wasm ({js, wasm,
   * threads: {js, wasm}, relaxed: {js, wasm}}): URLs of other
   * builds of the wasm package, in place of the package's own.
   */
  static async open(libraryName = 'default', options = {}) {
    const dm = new this(libraryName, options);
    try {
      await dm.#prepare();
      await dm.#start();
    } catch (e) {
      dm.close();
      throw e;
    }
    return dm;
  }

  constructor(libraryName, options) {
    this.#platform = new.target.platform;
    if (!this.#platform) throw new TypeError('DocMemClient is bound to a platform by its entry (docmem.js, node/docmem.js)');
    this.#name = libraryName;
    this.#options = options;
  }

  async #prepare() {
    const o = this.#options;
    const remote = hostedRoles(o.remote);
    const platform = this.#platform;
    let models = o.models ?? (allHosted(remote) ? undefined : platform.defaultModels());
    if (!models && allHosted(remote)) models = {};
    if (!models) throw new DocMemError(codes.MODEL_FETCH_FAILED, 'no models given');
    let base = null;
    if (typeof models === 'string' || models instanceof URL) {
      base = await platform.manifestUrl(models);
      models = await fetchManifest(base, platform);
    }
    if (o.damaged !== undefined && !['refuse', 'rebuild'].includes(o.damaged)) {
      throw new DocMemError(codes.BAD_ARGUMENT, `damaged must be 'refuse' or 'rebuild', not ${JSON.stringify(o.damaged)}`);
    }
    if (o.keepModels !== undefined && !(Array.isArray(o.keepModels) && o.keepModels.every((h) => typeof h === 'string' && /^[0-9a-f]{64}$/.test(h)))) {
      throw new DocMemError(codes.BAD_ARGUMENT, 'keepModels must be an array of sha256s (64 lowercase hex digits)');
    }
    // Checked before anything is locked, fetched or stored.
    const resolved = resolveManifest(models, base, remote ? remote.roles : {});
    // The package's own wasm builds are the worker's to find (beside it, where a bundler
    // put them); `options.wasm` replaces them with builds at other URLs.
    const pkg = o.wasm ?? null;
    // navigator.storage.persist() exists on pages only, not in the worker: ask here, once,
    // without waiting for the answer (a browser may hold it behind a permission prompt,
    // and opening must not wait on the user); `persistence` reads it when it comes.
    if (!this.#persistence) {
      const asking = platform.askPersistence();
      if (asking) {
        this.#persistence = { asked: false, granted: false };
        asking
          .then((answer) => {
            this.#persistence = answer;
          })
          .catch(() => {});
      }
    }
    // Where the platform keeps the library and the models, when that is a directory.
    const { storageDir, modelCacheDir } = platform.storage(this.#name, o);
    // One DocMem per library at a time (two would each write their own view of it).
    if (!this.#releaseLock) this.#releaseLock = await platform.lockLibrary(this.#name, storageDir);
    const shared = typeof SharedArrayBuffer !== 'undefined' && platform.sharedMemory();
    const cancel = shared ? new SharedArrayBuffer(SIGNAL_BYTES) : null;
    this.#cancel = cancel ? new Int32Array(cancel) : null;
    this.#init = {
      libraryName: this.#name,
      models: resolved,
      remote,
      wasm: pkg && {
        js: String(pkg.js),
        wasm: String(pkg.wasm),
        threads: pkg.threads ? { js: String(pkg.threads.js), wasm: String(pkg.threads.wasm) } : null,
        relaxed: pkg.relaxed ? { js: String(pkg.relaxed.js), wasm: String(pkg.relaxed.wasm) } : null,
      },
      backend: o.backend ?? 'auto',
      damaged: o.damaged ?? 'refuse',
      keepModels: o.keepModels ?? null,
      threads: o.threads ?? null,
      storageDir,
      modelCacheDir,
      cancel,
    };
  }

  async #start() {
    const worker = await this.#platform.spawnWorker(this.#options.workerUrl);
    this.#worker = worker;
    this.#ready = false;
    await new Promise((resolve, reject) => {
      worker.onError((e) => {
        if (worker !== this.#worker) return;
        const failed = new DocMemError(codes.INTERNAL, `the docmem worker failed: ${e.message}`);
        if (!this.#ready) {
          reject(failed);
          return;
        }
        // A crash mid-request (out of memory, say): fail it and start a fresh worker.
        if (this.#running) this.#finish(this.#running, failed);
        this.#ready = false;
        worker.terminate();
        this.#worker = null;
        this.#start().catch((err) => {
          for (const j of this.#queue.splice(0)) this.#finish(j, err);
        });
      });
      worker.onMessage((m) => {
        if (worker !== this.#worker) return; // a terminated worker's late message
        if (m.type === 'ready') resolve();
        else this.#onMessage(m);
      });
    });
    this.#info = await this.#send('init', this.#init, { onEvent: this.#options.onProgress, first: true });
    this.#ready = true;
    // Background memories (a fresh worker after a restart starts them again, each from
    // its first window) and whether they are paused.
    if (this.#cancel) {
      Atomics.store(this.#cancel, SIGNAL.WAITING, 0); // a new worker: no request of the old one is owed
      Atomics.store(this.#cancel, SIGNAL.STOP_MEMORY, 0);
    }
    if (this.#pausedMemories) this.#worker.post({ id: this.#nextId++, op: 'pauseMemories', args: { paused: true } });
    for (const job of this.#background.values()) this.#worker.post({ id: job.id, op: job.op, args: job.args });
    this.#pump();
  }

  /** Which backend runs the models, and why: {name, label, reason, webgpuAdapter, software}. */
  get backend() {
    return this.#info.backend;
  }

  /** The models in use: {reader, answerer, embedder, fromCache, wasmMemoryBytes}; a hosted one reads 'remote:NAME'. */
  get models() {
    return this.#info.models;
  }

  /** The hosted models, or null when everything runs here: {host, roles: {reader?, scorer?, answerer?, embedder?}}, each 'remote:NAME'. */
  get remote() {
    return this.#info.remote;
  }

  /**
   * Set when the stored library could not be opened and `damaged: 'rebuild'` rebuilt it:
   * {reason, documents, unreadable: [[key, why]], setAside}; null otherwise.
   */
  get rebuilt() {
    return this.#info.rebuilt ?? null;
  }

  get name() {
    return this.#name;
  }

  /**
   * Whether the browser keeps this origin's storage (models, library) under storage
   * pressure: {asked, granted}, as requestPersistence() answered (asked in the background
   * when this opened: {asked: false, granted: false} until the browser answers); null in
   * Node, where everything is in directories.
   */
  get persistence() {
    return this.#persistence;
  }

  // A request straight to the worker, ahead of the queue (init).
  #send(op, args, { onEvent, first }) {
    return new Promise((resolve, reject) => {
      const job = { id: this.#nextId++, op, args, resolve, reject, onEvent, first };
      this.#running = job;
      this.#worker.post({ id: job.id, op, args });
    });
  }

  #call(op, args = {}, { signal, onEvent, cancellable = false, transfer } = {}) {
    if (this.#closed) return Promise.reject(new DocMemError(codes.CLOSED, 'this DocMem is closed'));
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) {
        reject(abortError());
        return;
      }
      const job = { id: this.#nextId++, op, args, resolve, reject, onEvent, signal, cancellable, transfer };
      if (signal) {
        job.onAbort = () => this.#abort(job);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#queue.push(job);
      this.#pump();
    });
  }

  #pump() {
    if (!this.#ready || this.#running || this.#queue.length === 0) return;
    const job = this.#queue.shift();
    this.#running = job;
    if (this.#cancel) {
      Atomics.store(this.#cancel, SIGNAL.CANCEL, 0); // the client clears it; the worker only reads it
      Atomics.add(this.#cancel, SIGNAL.WAITING, 1); // a background memory's window gives way to this request (the worker takes it back)
    }
    this.#worker.post({ id: job.id, op: job.op, args: job.args }, job.transfer);
  }

  #onMessage(m) {
    const bg = this.#background.get(m.id);
    if (bg) {
      if (m.type === 'event') bg.onEvent?.(m.data);
      else this.#finishBackground(bg, m.type === 'error' ? fromWire(m.error) : null, m.data);
      return;
    }
    const job = this.#running;
    if (!job || m.id !== job.id) return;
    if (m.type === 'event') {
      if (job.onEvent) job.onEvent(m.data);
      return;
    }
    this.#finish(job, m.type === 'error' ? fromWire(m.error) : null, m.data);
  }

  #finish(job, error, data) {
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
    if (this.#running === job) this.#running = null;
    if (error) job.reject(error);
    else job.resolve(data);
    if (!job.first) this.#pump();
  }

  #abort(job) {
    const queued = this.#queue.indexOf(job);
    if (queued >= 0) {
      this.#queue.splice(queued, 1);
      this.#finish(job, abortError());
      return;
    }
    if (this.#running !== job) return;
    if (this.#cancel && job.cancellable) {
      // The worker's callbacks see the flag and stop; it answers with ABORTED. The message
      // reaches a worker waiting on a hosted model, which aborts its requests at once.
      Atomics.store(this.#cancel, SIGNAL.CANCEL, 1);
      this.#worker.post({ op: 'cancel', id: job.id });
      return;
    }
    // No way to reach into a synchronous call: end the worker and start another. The
    // library is as stored, since writes are applied only after a call succeeds.
    this.#worker.terminate();
    this.#worker = null;
    this.#ready = false;
    this.#finish(job, abortError());
    this.#start().catch((e) => {
      for (const j of this.#queue.splice(0)) this.#finish(j, e);
    });
  }

  /**
   * Add a document (a File/Blob named .txt, .md, .html or .pdf, or a string) and write its
   * memory. A PDF's text is read in the worker (PDF.js), its pages kept: an answer's
   * sources carry their `page`; a scan (no text layer) or an encrypted PDF is BAD_DOCUMENT. onProgress gets {stage: 'reading' | 'candidates' | 'indexing', fraction, …}.
   * Resolves to {id, title, added, chunks, outline, fallback, document} (`document`: its
   * entry as documents() lists it). An aborted `signal` cancels it (ABORTED): the library
   * is left as it was, nothing of the document stored. A MoM ingest stops at its next
   * progress report; a chunker's, which has none, ends the worker, which starts again
   * (the models reload) before the next request.
   */
  async addDocument(fileOrText, { title, onProgress, signal, method, samples, collection } = {}) {
    let text;
    let bytes;
    let name;
    let html = false;
    if (typeof fileOrText === 'string') {
      text = fileOrText;
      title = title ?? firstHeading(text);
    } else if (fileOrText && typeof fileOrText.text === 'function') {
      name = fileOrText.name ?? title ?? 'untitled.txt';
      if (!SUFFIXES.test(name)) {
        throw new DocMemError(codes.BAD_DOCUMENT, `'${name}' is not a .txt, .md, .html or .pdf file`);
      }
      html = /\.html?$/i.test(name);
      title = title ?? name;
      try {
        // A PDF goes to the worker as bytes (its buffer transferred, not copied), where
        // PDF.js reads its text.
        if (/\.pdf$/i.test(name)) bytes = new Uint8Array(await fileOrText.arrayBuffer());
        else text = await fileOrText.text();
      } catch (e) {
        throw new DocMemError(codes.BAD_DOCUMENT, `'${name}' could not be read: ${e.message}`);
      }
    } else {
      throw new DocMemError(codes.BAD_DOCUMENT, 'a document is a File, a Blob or a string');
    }
    const o = this.#options;
    const m = method ?? o.method ?? 'mom';
    const args = bytes ? { title, name, bytes } : { title, text, html };
    Object.assign(args, { method: m, samples: samples ?? o.samples ?? 1, collection });
    return this.#call('add', args, { signal, onEvent: onProgress, cancellable: m === 'mom', transfer: bytes ? [bytes.buffer] : undefined });
  }

  /**
   * Answer a question from the library, streaming text to onToken. Resolves to {answer,
   * citations: [{n, document: {id, title}, span: {start, end}, text, core, outline,
   * ranks}], sources, notInDocuments, …}; spans index the document's text as JS strings do.
   * `clues` ('off' | 'on' | 'auto') turns on clue-guided retrieval, `route` ('auto' or a
   * collection's name) routing across collections; the answer then carries their traces.
   * onProgress gets what is happening before the answer: {stage: 'search'}, then {stage:
   * 'read', found, passages, sources} as the answerer starts reading (sources: the
   * passages it reads, as the answer's `sources` will be), then {stage: 'write'} as the
   * first token comes. onPart gets the answer as the engine reads it while it is written,
   * {text} or {cite: [n, …]} (a citation as soon as its bracket closes), for drawing
   * without parsing the text; the answer's `parts` are the final word (citations the
   * engine moved to the passages that hold the answer's words, a refusal).
   */
  ask(question, { k = 8, maxTokens = 256, onToken, onPart, onProgress, signal, clues = 'off', route } = {}) {
    const onEvent = (d) => {
      if (d.token !== undefined) onToken?.(d.token);
      else if (d.part !== undefined) onPart?.(d.part);
      else onProgress?.(d);
    };
    return this.#call('ask', { question, k, maxTokens, clues, route }, { signal, onEvent, cancellable: true });
  }

  /**
   * Have the local reader write document `docId`'s memory in the background and swap it in
   * for the chunks it was added with, in one change (searches use the chunks until then).
   * Other requests go first: with cross-origin isolation the window being read stops
   * within one prompt piece or decoding step and goes on where it stopped after them (the
   * reader keeps its work); without it they wait for the window to end. One memory is written at a time, in the order asked. `samples`:
   * sampled candidates per window beside the greedy one (default 3 on WebGPU, 0 on the
   * CPU, where each costs about a greedy reading); `maxNewTokens` caps what the reader
   * writes per window (default: the window's length and 512 more, at most twice its length and 96 more);
   * `maxWindowTokens` caps a window's document tokens (default: half the reader's context).
   * Each window read is stored with the library: asked again after a reload or a crash,
   * the memory goes on from the next window (with the same reader and options). onProgress gets {stage: 'memory',
   * window, windows, tokensDone, tokensTotal, fraction, seconds, secondsLeft}, and within a
   * window windowRead, windowPrompt (its prompt's tokens) and windowWritten. Resolves to
   * {id, replaced, chunks, outline, fallback, reader, seconds, gaveWay, document}
   * (`gaveWay`: times a window stopped for other requests and went on); `replaced` is
   * false when the document was removed meanwhile. An aborted `signal` stops it (ABORTED)
   * and the document keeps its chunks.
   */
  writeMemory(docId, { samples, maxNewTokens, maxWindowTokens, onProgress, signal } = {}) {
    if (this.#closed) return Promise.reject(new DocMemError(codes.CLOSED, 'this DocMem is closed'));
    if (signal?.aborted) return Promise.reject(abortError());
    return new Promise((resolve, reject) => {
      const job = { id: this.#nextId++, op: 'memorize', args: { id: String(docId), samples, maxNewTokens, maxWindowTokens }, resolve, reject, onEvent: onProgress, signal };
      if (signal) {
        job.onAbort = () => {
          if (this.#cancel) Atomics.store(this.#cancel, SIGNAL.STOP_MEMORY, job.id);
          this.#worker?.post({ op: 'cancel', id: job.id });
        };
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.#background.set(job.id, job);
      if (this.#ready) this.#worker.post({ id: job.id, op: job.op, args: job.args });
    });
  }

  /**
   * Read ahead the answer to a question still being typed (`question`: what there is so
   * far; '' reads the answer prompt's instructions alone): the local answerer reads the
   * prompt that question would get, up to the question itself (the passages it finds
   * now), so that an ask whose passages start the same way runs only what differs. Call
   * it as the user types (say, after a pause); the latest call replaces the one before,
   * and any request ends it (an ask reuses what was read; answers are those of an ask
   * alone). Resolves to {kept} (prompt tokens the answerer keeps) when done or replaced,
   * with `superseded: true` then. Nothing is read with a hosted answerer.
   */
  readAhead(question, { k = 8 } = {}) {
    if (this.#closed) return Promise.reject(new DocMemError(codes.CLOSED, 'this DocMem is closed'));
    return new Promise((resolve, reject) => {
      // A read-ahead under way stops for this newer one: shared flag [4] counts them.
      const seq = this.#cancel ? Atomics.add(this.#cancel, SIGNAL.READ_AHEAD, 1) + 1 : 0;
      const job = { id: this.#nextId++, op: 'readAhead', args: { question: String(question ?? ''), k, seq }, resolve, reject };
      this.#background.set(job.id, job);
      if (this.#ready) this.#worker.post({ id: job.id, op: job.op, args: job.args });
    });
  }

  /** Hold (true) or go on with (false) the background memories; a window being read stops
   * at once and goes on where it stopped when they go on. */
  pauseMemories(paused) {
    if (this.#cancel) Atomics.store(this.#cancel, SIGNAL.PAUSE_MEMORIES, paused ? 1 : 0);
    this.#pausedMemories = Boolean(paused);
    this.#worker?.post({ id: this.#nextId++, op: 'pauseMemories', args: { paused: Boolean(paused) } });
  }

  #finishBackground(job, error, data) {
    this.#background.delete(job.id);
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
    if (error) job.reject(error);
    else job.resolve(data);
  }

  /** The collections: [{name, documents}]. */
  collections() {
    return this.#call('collections');
  }

  /** The wasm CPU kernels' threads and the tasks helpers ran: {threads, helperTasks}. */
  threadStats() {
    return this.#call('threadStats');
  }

  /** The documents: [{id, title, language, bytes, chunks, reader, fallback}]. */
  documents() {
    return this.#call('documents');
  }

  /** A document's text and memory: {id, title, text, outline, scenarios: [{span, core,
   * outlineItem}], provenance}. */
  memory(docId) {
    return this.#call('memory', { id: docId });
  }

  removeDocument(docId) {
    return this.#call('remove', { id: docId });
  }

  /** The whole library as bytes (a file to keep or move). */
  exportLibrary() {
    return this.#call('exportLibrary');
  }

  /** Replace the library with an exported one. */
  importLibrary(bytes) {
    return this.#call('importLibrary', { bytes: bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes) });
  }

  /** End the worker; pending requests fail with CLOSED. */
  close() {
    this.#closed = true;
    this.#releaseLock?.();
    this.#releaseLock = null;
    if (this.#worker) this.#worker.terminate();
    this.#worker = null;
    const closed = new DocMemError(codes.CLOSED, 'this DocMem is closed');
    for (const j of this.#queue.splice(0)) j.reject(closed);
    for (const j of this.#background.values()) j.reject(closed);
    this.#background.clear();
    if (this.#running) this.#running.reject(closed);
    this.#running = null;
  }
}
