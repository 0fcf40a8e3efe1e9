// Types of the docmem npm package (js/docmem.js). Hand-written; kept beside the code.
// The API reference (api/) is generated from this file by TypeDoc: scripts/api-docs.sh.

/**
 * docmem: private, on-device document question answering. Open a library with
 * {@link DocMem.open}, add documents, ask questions; answers cite spans of the documents.
 * @module docmem
 */

/** Stable error codes: branch on `error.code`, show `error.message`. */
export type DocMemErrorCode =
  | 'WEBGPU_UNAVAILABLE'
  | 'MODEL_FETCH_FAILED'
  | 'MODEL_CHECKSUM_MISMATCH'
  | 'MODEL_LOAD_FAILED'
  | 'MODEL_FAILED'
  | 'QUOTA_EXCEEDED'
  | 'STORAGE_FAILED'
  | 'BAD_DOCUMENT'
  | 'BAD_QUESTION'
  | 'BAD_LIBRARY'
  | 'BAD_ARGUMENT'
  | 'NOT_FOUND'
  | 'ABORTED'
  | 'CLOSED'
  | 'BUSY'
  | 'REMOTE_FAILED'
  | 'INTERNAL';

export declare const codes: { readonly [K in DocMemErrorCode]: K };

export declare class DocMemError extends Error {
  readonly name: 'DocMemError';
  readonly code: DocMemErrorCode;
}

/** One model file: where to get it and what it must be. */
export interface ModelFile {
  /** The file's name inside the model (e.g. `config.json`, `1_Pooling/config.json`). */
  path: string;
  /** Where to fetch it; relative URLs resolve against the manifest's URL. Node also takes `file:` URLs. */
  url: string;
  /** Size in bytes (for progress). */
  size?: number;
  /** Hex sha256; a download that differs is refused (MODEL_CHECKSUM_MISMATCH). */
  sha256: string;
}

export interface ModelSpec {
  /** The model's name (memories record it; a GGUF's file name). */
  name: string;
  /**
   * A reader or answerer is one GGUF file (llama, Llama 3 included, qwen2, qwen3, gemma3 or phi3), or a
   * Hugging Face checkpoint of a Llama, Qwen2 or Qwen3 model: `config.json`, `tokenizer.json`, `tokenizer_config.json` (where it has one) and
   * its `.safetensors` files (one, or every shard), matched by the file name at the end of
   * `path`. Either is read a slice at a time, never whole in memory; a checkpoint's
   * matrices are quantized to 8-bit blocks as they load.
   */
  files: ModelFile[];
}

/**
 * The model manifest (models.schema.json; `npx docmem-manifest DIR` writes one). A role played by a hosted
 * model (`OpenOptions.remote`) needs no entry; every local role needs its model.
 */
export interface ModelManifest {
  embedder?: ModelSpec;
  reader?: ModelSpec;
  /** Defaults to the reader. */
  answerer?: ModelSpec;
}

/**
 * Hosted models, off unless given: each role named here runs on an OpenAI-compatible host
 * (the docmem edge worker, or any such server) and **its text leaves this device**, sent
 * to `url` with `token`; every role not named runs here. What each role sends is said
 * below. Mistakes are BAD_ARGUMENT errors naming the option (`remote.url`, …); a host
 * that refuses or cannot be reached is REMOTE_FAILED, whose message carries the host's
 * status, code and words (e.g. "the hosted model refused (401 unauthorized): …").
 */
export interface RemoteOptions {
  /** The host's base URL, https:// (http:// only to this machine, or with `allowHttp`; a trailing `/v1` is dropped: the API's paths carry it). */
  url: string | URL;
  /** Allow a plain http:// url that is not this machine: the token and the text then cross the network unencrypted. */
  allowHttp?: boolean;
  /** Sent as `Authorization: Bearer <token>` with every request (none when empty). Held in memory only, never stored. */
  token?: string;
  /** The context window assumed for the hosted chat models, in tokens (default 8192; the API does not say). */
  context?: number;
  /**
   * The model that writes each document's memory (ingest method 'mom'; the chunkers use
   * no reader). Sends: the whole text of every document added with 'mom', window by window.
   */
  reader?: string;
  /**
   * The model that scores the reader's sampled candidates (`samples` > 0); default: the
   * reader's model. Only with a hosted reader (a local reader scores its own candidates).
   * Sends: the documents' text again, with each candidate's chunks and cores. The host must
   * return the prompt's log-probabilities (`echo`, as vLLM does), else an ingest with
   * samples fails with REMOTE_FAILED; `samples: 0` needs no scorer.
   */
  scorer?: string;
  /**
   * The model that writes the answers. Sends: each question and the passages retrieved
   * for it (their text, titles, outline items and cores). With `clues`, also every
   * document's title, outline, cores and opening, once, to write the library's overview,
   * and the clues it writes; with `route`, the sub-queries and each step's passages.
   */
  answerer?: string;
  /**
   * The model that embeds text for search. Sends: every chunk of every document added
   * (any method), its outline items and cores, and every question. The library is made with its vectors (its name and
   * width): a library built with another embedder does not open with it (BAD_LIBRARY), so
   * use another library name. Connecting asks the host for one vector, to learn the width.
   */
  embedder?: string;
}

/** The hosted models in use (`DocMem.remote`): the host, and each hosted role's model as 'remote:NAME'. */
export interface RemoteInfo {
  /** The host's name and port, as the URL gives them (e.g. 'docmem.example.workers.dev'). */
  host: string;
  roles: { reader?: string; scorer?: string; answerer?: string; embedder?: string };
}

export type IngestMethod = 'mom' | 'sentence' | 'fixed' | 'recursive' | 'semantic';

export interface OpenOptions {
  /**
   * A manifest URL (browser default: /models/models.json) or the manifest itself. Not
   * needed when the reader, answerer and embedder are all hosted.
   */
  models?: string | URL | ModelManifest;
  /** Hosted models per role, off by default: the text of each role named leaves this device (see RemoteOptions). */
  remote?: RemoteOptions;
  /**
   * 'auto' (default): WebGPU on a hardware adapter whose kernel checks pass, else the CPU.
   * 'webgpu': WebGPU on any adapter that passes them (software ones included), else
   * WEBGPU_UNAVAILABLE. 'cpu': wasm on the CPU.
   */
  backend?: 'auto' | 'cpu' | 'webgpu';
  /** How addDocument writes memories unless told (default 'mom'). */
  method?: IngestMethod;
  /** Sampled MoM candidates besides the greedy one (default 1). */
  samples?: number;
  /** Model download and load progress. */
  onProgress?: (p: LoadProgress) => void;
  /**
   * What to do when the stored library cannot be opened (a damaged or missing key, an
   * unreadable manifest, another embedder): 'refuse' (default) rejects with BAD_LIBRARY
   * and changes nothing; 'rebuild' copies it, untouched, beside itself
   * (`<name>~damaged-<time>`), then builds a new library from the documents that still
   * read back (sentence chunks; see {@link DocMem.rebuilt}).
   */
  damaged?: 'refuse' | 'rebuild';
  /**
   * Browser: the sha256s of every model file the site may still use (all the models it
   * offers, the user's own kept files). Given, stored model files named neither here nor
   * in `models` are deleted before the models load (only when no other tab of the site
   * is using the model store; `models.pruned` says what went). Not given, nothing is
   * deleted. Ignored in Node.
   */
  keepModels?: string[];
  /** Node: the library's directory (default $DOCMEM_CACHE/libraries/<name>). */
  storageDir?: string;
  /** Node: where downloaded models are kept (default $DOCMEM_CACHE/model-cache). */
  modelCacheDir?: string;
  /**
   * Threads for the wasm CPU kernels (default: the cores the platform reports, at most 8).
   * More than one needs the threads build and shared memory: always in Node, and in a
   * browser only on a cross-origin isolated page (COOP/COEP); otherwise one, and
   * `backend.threadsNote` says why.
   */
  threads?: number;
  /** The wasm builds, where the package's own (wasm/ beside docmem.js, found by bundlers
   * and Node alike) are to be replaced (`threads`: the threads build; without it the CPU
   * runs on one thread). */
  wasm?: {
    js: string | URL;
    wasm: string | URL;
    threads?: { js: string | URL; wasm: string | URL };
    /** The threads build with relaxed SIMD's dot product, tried first where the engine has it. */
    relaxed?: { js: string | URL; wasm: string | URL };
  };
  /**
   * The package's worker script at another URL. An app bundled by a tool that does not copy
   * the files a package names with `new URL('./…', import.meta.url)` (esbuild, Rollup)
   * serves a copy of the package and names its `worker.js` here (e.g. `'/docmem/worker.js'`);
   * the worker finds its wasm builds, thread helper and PDF.js beside itself. webpack 5,
   * Vite, Parcel and Next.js build the package's own worker: leave it out there. In Node
   * it names a worker thread's script, such as the package's `node/worker.js`.
   */
  workerUrl?: string | URL;
}

export type LoadProgress =
  | {
      stage: 'download';
      model: string;
      file: string;
      /** Bytes of every model file so far, those already stored included. */
      loaded: number;
      total: number;
      fraction: number;
      /** Of `loaded`, the bytes an interrupted download had stored and that were not fetched again. */
      resumed: number;
      /** Whether the browser keeps this origin's storage under pressure (always true in Node). */
      persisted: boolean;
    }
  | { stage: 'loading'; fraction: number }
  /** A model file the user chose (a File) being kept in this browser's storage. */
  | { stage: 'keeping'; model: string; loaded: number; total: number; fraction: number }
  /** `damaged: 'rebuild'`: a document of the damaged library being added again. */
  | { stage: 'rebuilding'; document: string; fraction: number }
  /**
   * A model file the user chose, as its header describes it, before its weights are read:
   * `line` for a person ("qwen3 · 751M parameters · Q4_K, Q6_K · 480 MB · about …"),
   * `facts` in detail; `fraction` is the load's (0: its weights are not read yet). A file
   * docmem cannot run is then refused (MODEL_LOAD_FAILED).
   */
  | { stage: 'model'; model: string; line: string; facts: ModelFacts; fraction: number };

/** What a model file's header says (`stage: 'model'` of {@link LoadProgress}). */
export interface ModelFacts {
  /** `general.architecture`. */
  architecture: string;
  /** `general.name`, if the file has one. */
  name: string | null;
  /** Why docmem cannot run it; null when it can. */
  refusal: string | null;
  parameters: number;
  /** Bytes of tensor data. */
  weightBytes: number;
  /** Block formats by the bytes each holds, largest first. */
  formats: [string, number][];
  layers: number | null;
  contextLength: number | null;
  /** Bytes the CPU's key/value cache takes per token of context. */
  cacheBytesPerToken: number | null;
}

export interface IngestProgress {
  stage: 'reading' | 'candidates' | 'indexing';
  /** 0..1 within the stage. */
  fraction: number;
  /** MoM only: the reader's own stage and position. */
  detail?: 'reading' | 'scoring' | 'fallback' | 'done';
  window?: number;
  windows?: number;
  tokensDone?: number;
  tokensTotal?: number;
  candidatesDone?: number;
  candidatesTotal?: number;
}

export interface BackendInfo {
  /** Where the local reader and answerer run (hosted models run on their host). */
  name: 'cpu-wasm-simd128' | 'webgpu';
  /** Where the embedder runs: on WebGPU beside the local language models (their device, shared), in wasm when they run there or are all hosted, or on the host. */
  embedder: 'webgpu' | 'cpu' | 'hosted';
  /** 'CPU (wasm simd128, 2 threads)' or 'WebGPU' */
  label: string;
  /** WebGPU: the adapter and its kernel checks. CPU: why not WebGPU ('no WebGPU adapter', a software adapter, failed checks). */
  reason: string;
  webgpuAdapter: boolean;
  /** WebGPU on a software adapter (SwiftShader), as backend 'webgpu' allows. */
  software?: boolean;
  /** Threads the wasm CPU kernels run on (the embedder's unless it runs on WebGPU), the caller's included. */
  threads: number;
  /** Why one thread, when it is one (not cross-origin isolated, no threads build, every model hosted, …). */
  threadsNote: string;
  /** The CPU kernels' instruction set: 'relaxed-simd' (the relaxed-SIMD threads build) or 'simd128'. */
  kernels?: 'simd128' | 'relaxed-simd';
  /** Why relaxed SIMD is not used, when the package has it and it was tried. */
  kernelsNote?: string;
}

export interface ThreadStats {
  threads: number;
  /** Kernel tasks helper threads have run since the models loaded: > 0 when more than one thread works. */
  helperTasks: number;
}

/** A span of a document's text in JS string indices (UTF-16 code units), end exclusive. */
export interface Span {
  start: number;
  end: number;
}

export interface Added {
  id: string;
  title: string;
  /** False when the same content was already in the library. */
  added: boolean;
  chunks: number;
  outline: number;
  /** Why the reader's memory fell back to sentence chunks, if it did. */
  fallback: string | null;
  /** Its entry as `documents()` lists it (null only if it is gone already). */
  document: DocumentInfo | null;
}

export interface DocumentInfo {
  id: string;
  title: string;
  language: string;
  bytes: number;
  chunks: number;
  /** The reader model or chunker that wrote the memory. */
  reader: string;
  fallback: string | null;
  /** The collection it belongs to ('default' unless added with one). */
  collection: string;
  /** How many times a reader's memory replaced the one it was added with (writeMemory); 0: as added. */
  memoryVersion: number;
}

/** A background memory's progress (writeMemory). */
export interface MemoryProgress {
  stage: 'memory';
  /** The window being read (from 1) and how many there are. */
  window: number;
  windows: number;
  /** Document tokens in the windows read, and in all of them. */
  tokensDone: number;
  tokensTotal: number;
  /** 0 to 1, moving within a window too (an estimate there: the window's prompt tokens read
   * and tokens written against its prompt and its expected memory); it never goes back. */
  fraction: number;
  /** Seconds spent reading so far, and an estimate of those left (null until there is one). */
  seconds: number;
  secondsLeft: number | null;
  /** Within the window being read, while it is read: its prompt tokens read so far and in
   * all (`windowRead` of `windowPrompt`), then the tokens written (`windowWritten`). A
   * window that gave way to other requests goes on from where it was. */
  windowRead?: number;
  windowPrompt?: number;
  windowWritten?: number;
}

/** A background memory that landed (writeMemory). */
export interface MemoryWritten {
  id: string;
  /** False when the document was removed while its memory was written (nothing stored). */
  replaced: boolean;
  chunks: number;
  outline: number;
  /** Why a window fell back to sentence chunks, if one did. */
  fallback: string | null;
  /** The reader and its prompt, as the memory's provenance names them. */
  reader: string;
  seconds: number;
  /** Times a window stopped halfway for other requests (it went on where it stopped). */
  gaveWay: number;
  document: DocumentInfo | null;
}

export interface Memory {
  id: string;
  title: string;
  text: string;
  outline: string[];
  scenarios: { span: Span; byteSpan: { start: number; end: number }; core: string; outlineItem: number | null }[];
  provenance: Record<string, unknown>;
}

export interface Citation {
  /** The passage's number in the prompt: the answer's `[n]`. */
  n: number;
  document: { id: string; title: string };
  span: Span;
  byteSpan: { start: number; end: number };
  /** The passage's text (a page break in it is a newline). */
  text: string;
  /** The page (from 1) of its best retrieved piece, for a paged document (a PDF); null otherwise. */
  page: number | null;
  /** The retrieved pieces inside the passage, best first: [start, end) of the document's text in JS string indices, as `span`. */
  hits: [number, number][];
  core: string;
  outline: string | null;
  /** Where each layer's lists ranked it. */
  ranks: { layer: string; kind: string; rank: number; score: number }[];
  score: number;
}

/** A part of an answer as the engine reads it: its text, or a citation of the numbered passages (`[n]` of `sources`). */
export type AnswerPart = { text: string } | { cite: number[] };

export interface Answer {
  answer: string;
  /** The answer as text and citations, to draw without parsing `answer`: the answer's own [n] where it put them; citations found from the passages' words after the text ('overlap', 'moved', whose markers are dropped); a refusal as its text. */
  parts: AnswerPart[];
  notInDocuments: boolean;
  /** The passages the answer cites. */
  citations: Citation[];
  /** 'model' (the answer's own [n]), 'overlap' (it cited none: the passages holding its words), 'moved' (the passages it cited do not hold its words: those that do) or 'none'. */
  citationsFrom: string;
  /** Every passage shown to the answerer. */
  sources: Citation[];
  /**
   * Why the answer ended: 'end_of_text', 'stop' (a blank line), 'length' (`maxTokens`),
   * 'cancelled', 'context_full', or 'withheld': the default answerer's answerability probe
   * read the passages as not answering before anything was written (`answer` is then the
   * refusal, `notInDocuments` true).
   */
  finish: string;
  /**
   * The answer the model wrote when the answerability check judged the passages not to
   * support it and gave the refusal instead (`notInDocuments` true); null otherwise.
   */
  draft: string | null;
  seconds: { retrieve: number; prefill: number; decode: number };
  /** Prompt tokens the answerer did not run again: read ahead ({@link DocMem.readAhead}), or shared with the last answer's prompt. */
  reusedTokens: number;
  /** The prompt's tokens, the reused ones included (0 for a hosted answerer: its count is not asked for). */
  promptTokens: number;
  /** Clue-guided retrieval's trace, when `clues` was on or auto. */
  clues?: ClueTrace;
  /** The router's trace, when `route` was given. */
  route?: RouteTrace;
}

/**
 * What an ask is doing before and as its answer streams (`onProgress`), in this order:
 * 'search' as retrieval starts; 'read' once the passages are found and the answerer
 * starts reading them (its prompt's prefill, the long wait on a CPU), with the passages
 * themselves (with clues or routing too, once they have found them); 'write' as the first
 * token comes, just before it reaches `onToken`.
 */
export type AskProgress =
  | { stage: 'search' }
  | {
      stage: 'read';
      /** How many of the pieces the search found the passages hold (several may share one passage: the passages are windows of text grown around them, neighbours merged; a piece whose window did not fit the answerer's budget is not counted). */
      found: number;
      /** How many passages the answerer reads. */
      passages: number;
      /** The passages the answerer reads, numbered as the answer's `[n]` will cite them: the answer's `sources`, known before it is written. */
      sources: Citation[];
    }
  | { stage: 'write' };

/** When clue-guided retrieval (MemoRAG) is used: see the README. */
export type CluesMode = 'off' | 'on' | 'auto';

export interface ClueTrace {
  /** Auto mode's classification of the question, and who made it. */
  scope: { scope: 'global' | 'local'; by: 'model' | 'keywords' } | null;
  /** The queries searched: the question first, then the clues the model wrote. */
  queries: { kind: 'question' | 'span' | 'surrogate' | 'draft'; text: string }[];
  /** Per source (as `sources`), the queries that found it: index into `queries`, and rank. */
  foundBy: { query: number; rank: number }[][];
  /** True when the answer was written from the outline layer and the library's global memory. */
  overview: boolean;
}

export interface RouteSegment {
  step: number;
  collection: string;
  /** Why the router chose it: 'rule …', 'descriptor …', 'episodes …', 'explore …', 'fixed', 'random', … */
  chosenBy: string;
  subQuery: string;
  passages: number;
  satisfied: boolean;
  reflection: string;
  judgedBy: 'model' | 'overlap';
}

export interface RouteTrace {
  /** The collection answered from (null when no segment satisfied its judge). */
  collection: string | null;
  segments: RouteSegment[];
  /** How the router's memory ranked the collections for the question. */
  scores: Record<string, unknown>[];
}

export declare class DocMem {
  /** Open (or create) a library; fetches and checks the models on first use. */
  static open(libraryName?: string, options?: OpenOptions): Promise<DocMem>;
  readonly name: string;
  readonly backend: BackendInfo;
  /**
   * Each role's model (a hosted one reads 'remote:NAME'). wasmMemoryBytes: the module's
   * linear memory once every local model is loaded (it only grows: the peak).
   */
  readonly models: {
    reader: string;
    answerer: string;
    embedder: string;
    fromCache: boolean;
    wasmMemoryBytes: number;
    /** Model files the user chose (Files), now kept by sha256. */
    adopted?: { name: string; path: string; sha256: string; size: number }[];
    /** With `keepModels`: the stored files removed, or null when another tab held the store. */
    pruned?: { files: number; bytes: number } | null;
  };
  /** The hosted models, or null when every role runs on this device. */
  readonly remote: RemoteInfo | null;
  /**
   * Set when `damaged: 'rebuild'` rebuilt a library that could not be opened: why it
   * could not, how many documents came back, the document keys that did not (with why),
   * and where the untouched copy is (a library name in a browser, a directory in Node).
   * Null otherwise.
   */
  readonly rebuilt: { reason: string; documents: number; unreadable: [string, string][]; setAside: string } | null;
  /**
   * Browser: whether this origin's storage (models, library) is kept under storage
   * pressure, as the browser answered when this opened (asked once per origin); null in Node.
   */
  readonly persistence: { asked: boolean; granted: boolean } | null;
  /**
   * A File/Blob named .txt, .md, .html or .pdf (its text read with PDF.js in the worker,
   * its pages kept for citations; a scan or an encrypted PDF is BAD_DOCUMENT), or a string;
   * a File's title defaults to its name. Aborting `signal` cancels it with ABORTED and leaves the library as it was: a
   * 'mom' ingest stops at its next progress report; a chunker's ends the worker, which
   * starts again (reloading the models) before the next request.
   */
  addDocument(
    fileOrText: Blob | string,
    options?: {
      title?: string;
      onProgress?: (p: IngestProgress) => void;
      signal?: AbortSignal;
      method?: IngestMethod;
      samples?: number;
      /** The collection it goes into (routing chooses among collections). */
      collection?: string;
    },
  ): Promise<Added>;
  ask(
    question: string,
    options?: {
      k?: number;
      maxTokens?: number;
      onToken?: (text: string) => void;
      /** The answer as the engine reads it while it is written: text, and each citation as soon as its bracket closes. The answer's `parts` are the final word. */
      onPart?: (part: AnswerPart) => void;
      /** Searching, reading N passages, writing: see AskProgress. */
      onProgress?: (p: AskProgress) => void;
      signal?: AbortSignal;
      clues?: CluesMode;
      /** 'auto' (the router chooses) or a collection's name; leave out to search every collection at once. */
      route?: string;
    },
  ): Promise<Answer>;
  /**
   * Read ahead the answer to a question still being typed (`question`: what there is so
   * far; '' reads the answer prompt's instructions alone): the local answerer reads the
   * prompt that question would get, up to the question itself (the passages it finds
   * now), so that an ask whose passages start the same way runs only what differs. On a
   * CPU this is most of an answer's wait before its first words. Call it as the user
   * types (after a pause), and with '' while the app waits for a question; the latest
   * call replaces the one before and any request ends it, so it delays one by at most a
   * piece of 16 prompt tokens (about half a second for the 1.5B on two CPU cores).
   * Answers are those an ask gives alone. Resolves when done or replaced (`superseded`);
   * `kept` is the prompt tokens the answerer keeps. A hosted answerer reads nothing ahead.
   */
  readAhead(question: string, options?: { k?: number }): Promise<{ kept: number; superseded?: boolean; error?: string }>;
  documents(): Promise<DocumentInfo[]>;
  /** The collections and how many documents each holds. */
  collections(): Promise<{ name: string; documents: number }[]>;
  memory(docId: string): Promise<Memory>;
  removeDocument(docId: string): Promise<boolean>;
  /**
   * Have the local reader write a document's memory in the background and swap it in for
   * the chunks it was added with, in one change; other requests go first (a window being
   * read stops within one decoding step where the page is cross-origin isolated). One at
   * a time, in the order asked. An aborted signal stops it (ABORTED); the chunks stay.
   * Each window read is stored: after a reload or a crash, the same memory asked again
   * goes on from the next window.
   */
  writeMemory(
    docId: string,
    options?: { samples?: number; maxNewTokens?: number; maxWindowTokens?: number; onProgress?: (p: MemoryProgress) => void; signal?: AbortSignal },
  ): Promise<MemoryWritten>;
  /** Hold (true) or go on with (false) the background memories. */
  pauseMemories(paused: boolean): void;
  exportLibrary(): Promise<Uint8Array>;
  /** Replace the library with an exported one (BAD_LIBRARY if it is not one). */
  importLibrary(bytes: Uint8Array | ArrayBuffer): Promise<boolean>;
  /** The wasm CPU kernels' threads and how much the helpers have done. */
  threadStats(): Promise<ThreadStats>;
  /** End the worker; pending requests fail with CLOSED. */
  close(): void;
}
