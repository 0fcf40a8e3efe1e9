// The worker of scripts/bench/library-browser.sh: a library grown in the browser the way
// the npm package's worker grows one (js/worker-ops.js): the wasm `Library` over the
// entries IndexedDB holds, each change's journal (`takeWrites`) applied in one
// transaction by the package's own IdbStore (js/idb-store.js), and merges of the index's
// parts made between changes, a slice at a time (`mergeStep`), as the worker makes them
// when its queue is idle: a slice as long as the add before it took, 1 to 50 ms.
// Documents get sentence chunks and the hashing embedder, so what is timed is the
// library's work, not a model's.
//
// Message in: {docs: [{title, text}], every, queries: [text], sliceMs (the longest slice),
// k, releaseIndex (default true: the library gives its index's entries up to the store,
// as the package's worker opens it)}. Out: {progress} lines, then {ok: true, result} or {ok: false, error}.
//
// Figures: per `every` documents, seconds per document (the add, its storage transaction
// and the merge slice after it) and bytes written per document (the journal's values);
// after the last, the merges left run to the end (when idle); then the library is opened
// again from IndexedDB in a fresh `Library` (what a reload pays: every entry read, the
// library decoded) and timed with its first search, and `queries` searches are timed in
// the open library; the wasm heap and the origin's storage use are read at the end.
import { IdbStore } from '/js/idb-store.js';

const MiB = 2 ** 20;

self.onmessage = async (e) => {
  try {
    self.postMessage({ ok: true, result: await runCase(e.data) });
  } catch (err) {
    self.postMessage({ ok: false, error: err && err.stack ? `${err.stack}${err.code ? ` [${err.code}]` : ''}` : String(err) });
  }
};

const written = (writes) => writes.reduce((sum, [, bytes]) => sum + (bytes ? bytes.byteLength : 0), 0);

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : null;
}

async function runCase(c) {
  const w = await import('/pkg/docmem_wasm.js');
  const { memory } = await w.default({ module_or_path: '/pkg/docmem_wasm_bg.wasm' });
  const embedder = w.Embedder.hashing(384);
  const name = `bench-${Date.now()}`;
  const store = await IdbStore.open(name);
  // As the package's worker opens it, unless asked to keep a copy of the index's entries.
  const openOptions = { releaseIndex: c.releaseIndex !== false };
  let lib = w.Library.open(await store.entries(), embedder, openOptions);
  lib.setBackgroundMerges(true);
  const rows = [];
  let merges = 0;
  let mergeSeconds = 0;
  const mergeSlice = async (ms) => {
    const t = performance.now();
    const r = lib.mergeStep(ms);
    if (r.applied) {
      merges += 1;
      await store.apply(lib.takeWrites());
    }
    mergeSeconds += (performance.now() - t) / 1000;
    return r;
  };
  let t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < c.docs.length; i++) {
    const tAdd = performance.now();
    await lib.addDocument(c.docs[i], { embedder, chunker: 'sentence' });
    const writes = lib.takeWrites();
    bytes += written(writes);
    await store.apply(writes);
    await mergeSlice(Math.min(c.sliceMs, Math.max(1, performance.now() - tAdd)));
    if ((i + 1) % c.every === 0 || i + 1 === c.docs.length) {
      const n = (i + 1) % c.every === 0 ? c.every : (i + 1) % c.every;
      const seconds = (performance.now() - t0) / 1000;
      rows.push({ documents: i + 1, s_per_document: seconds / n, bytes_per_document: Math.round(bytes / n), merges });
      self.postMessage({ progress: `${i + 1} documents, ${(seconds / n).toFixed(4)} s per document` });
      t0 = performance.now();
      bytes = 0;
    }
  }
  // Idle: the merges still due run to the end.
  const tIdle = performance.now();
  for (;;) {
    const r = await mergeSlice(c.sliceMs);
    if (!r.merging && !r.applied) break;
  }
  const idleMergeS = (performance.now() - tIdle) / 1000;
  lib.free();
  // A reload: every entry read back from IndexedDB, the library opened, one search.
  const tOpen = performance.now();
  const entries = await store.entries();
  const readS = (performance.now() - tOpen) / 1000;
  lib = w.Library.open(entries, embedder, openOptions);
  const openS = (performance.now() - tOpen) / 1000;
  await lib.search(c.queries[0], { embedder, k: c.k });
  const openSearchS = (performance.now() - tOpen) / 1000;
  const times = [];
  for (const q of c.queries) {
    const t = performance.now();
    const hits = await lib.search(q, { embedder, k: c.k });
    times.push(performance.now() - t);
    if (hits.length === 0) throw new Error(`no passage for "${q}"`);
  }
  times.sort((a, b) => a - b);
  const estimate = navigator.storage && navigator.storage.estimate ? await navigator.storage.estimate() : {};
  const keys = Object.keys(entries);
  const result = {
    rows,
    merges,
    merge_s_between_adds: mergeSeconds,
    idle_merge_s: idleMergeS,
    entries: keys.length,
    parts: keys.filter((k) => k.startsWith('index/parts/')).length,
    stored_mib: Object.values(entries).reduce((s, b) => s + b.byteLength, 0) / MiB,
    read_entries_s: readS,
    open_s: openS,
    open_and_search_s: openSearchS,
    search_p50_ms: percentile(times, 50),
    search_p99_ms: percentile(times, 99),
    wasm_heap_mib: memory.buffer.byteLength / MiB,
    release_index: openOptions.releaseIndex,
    origin_usage_mib: estimate.usage != null ? estimate.usage / MiB : null,
  };
  lib.free();
  store.close();
  indexedDB.deleteDatabase(`docmem-library:${name}`);
  return result;
}
