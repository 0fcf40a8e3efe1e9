// The local models' files, made readable for the wasm package to load: each fetched into
// the model store (model-cache.js in a browser, node/fs-model-cache.js in Node) with
// progress over all bytes, a file the user chose read where it lies, one chosen on an
// earlier visit found in the store by its sha256. What the files are and where the model
// runs is the wasm package's to say (Device.loadLm, loadEmbedder); this module is storage.
//
// A browser's model store is shared by every tab of the origin: files are read under a
// shared lock, and pruned (`keepModels`) only when no other tab holds it.

import { DocMemError, codes } from './errors.js';

/**
 * Fetch every file of `specs` (the local models, each {name, files}), then call
 * `load(filesOf)` with the store held, where `filesOf(spec)` gives the spec's files as the
 * wasm package takes them ({path, size, read(offset, length)}, read synchronously a slice
 * at a time). The files the user chose are kept in the store once `load` has returned
 * (their architecture is one that runs). `options`: `cacheDir` (Node's model directory),
 * `hasher()` (an incremental Sha256, where the platform has none of its own: WebCrypto
 * would need the whole file in memory), `keep` (sha256s to keep when pruning; no pruning
 * without it) and `emit` (progress: download, keeping, loading). Returns {fromCache,
 * adopted: [{name, path, sha256, size}], pruned: {files, bytes} | null}.
 */
export async function withModelFiles(platform, specs, { cacheDir, hasher, keep, emit }, load) {
  const cache = await platform.modelCache(cacheDir, hasher);
  let pruned = null;
  if (keep && cache.prune) pruned = await platform.withModelStore('prune', () => cache.prune(keep));
  const loaded = await platform.withModelStore('shared', () => fetchAndLoad(platform, cache, specs, emit, load));
  return { ...loaded, pruned };
}

async function fetchAndLoad(platform, cache, specs, emit, load) {
  const all = specs.flatMap((m) => m.files.map((f) => ({ model: m.name, file: f })));
  const total = all.reduce((s, x) => s + (x.file.size || 0), 0);
  const done = new Map(); // bytes of each file so far
  const resumed = new Map(); // bytes an interrupted download had stored, not fetched again
  const got = new Map(); // url or path → the readable file
  let fromCache = true;
  // Refuses (QUOTA_EXCEEDED) before any download when the storage cannot take the files.
  const room = await cache.prepare(all.map((x) => (x.file.blob ? { path: x.file.path, size: x.file.blob.size } : x.file)));
  const sumOf = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  const adoptions = []; // model files the user chose, kept in storage once they load
  for (const { model, file } of all) {
    const report = (n) => {
      done.set(file.url ?? file.path, n);
      const sum = sumOf(done);
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
  const filesOf = (spec) =>
    spec.files.map((f) => {
      const file = got.get(f.url ?? f.path);
      return { path: f.path, size: file.size, read: (offset, length) => file.read(offset, length) };
    });
  try {
    load(filesOf);
  } finally {
    for (const f of got.values()) f.close?.();
  }
  // The chosen files loaded (a supported architecture): keep them for the next visit.
  const adopted = [];
  for (const { model, file } of adoptions) {
    const kept = await cache.adopt(file.blob, file.path, (n, t) => emit({ stage: 'keeping', model, loaded: n, total: t, fraction: t ? n / t : 1 }));
    adopted.push({ name: model, path: file.path, ...kept });
  }
  emit({ stage: 'loading', fraction: 1 });
  return { fromCache, adopted };
}
