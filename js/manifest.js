// The model manifest for a folder of model files (Node only): what an app developer hosts
// beside the models, and what `DocMem.open(name, {models: URL})` reads. Its format is
// models.schema.json; scripts/serve.mjs and `npx docmem-manifest` both write it with this.
//
// A folder holds one embedder (a sentence-transformers folder: config.json,
// tokenizer.json, model.safetensors, and modules.json and 1_Pooling/config.json where it
// has them) and one or more language models (.gguf files). Each GGUF is a `choice`; the
// one named by `reader` (else the first by name) is the reader and the answerer.
//
//   import { makeManifest } from 'docmem/manifest';
//   const manifest = await makeManifest('./models', { baseUrl: 'https://cdn.example/models/' });

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The hex sha256 of a file, read 4 MiB at a time (a model is far larger than memory allows to hold twice). */
export async function sha256File(file) {
  const h = createHash('sha256');
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 22 })) h.update(chunk);
  return h.digest('hex');
}

/** The URL of `rel` (a '/'-separated path inside the folder), each segment encoded, under `baseUrl` ('' keeps it relative to the manifest). */
function urlOf(rel, baseUrl) {
  const encoded = rel.split('/').map(encodeURIComponent).join('/');
  if (!baseUrl) return encoded;
  return new URL(encoded, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).href;
}

/** The embedder's folder: the one subfolder holding config.json, tokenizer.json and model.safetensors. */
function findEmbedder(dir) {
  const folders = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory() && !e.name.startsWith('.'));
  const found = folders.filter((e) => ['config.json', 'tokenizer.json', 'model.safetensors'].every((f) => fs.existsSync(path.join(dir, e.name, f))));
  if (found.length === 0) throw new Error(`${dir}: no embedder folder (one holding config.json, tokenizer.json and model.safetensors, as all-MiniLM-L6-v2 is published)`);
  if (found.length > 1) throw new Error(`${dir}: more than one embedder folder (${found.map((e) => e.name).join(', ')}); keep one`);
  return found[0].name;
}

/**
 * The manifest of the models in `dir`: {embedder, reader, answerer, choices}. Options:
 * `baseUrl` (where the folder will be served; default: URLs relative to the manifest, so
 * it is served from the folder itself), `reader` (the GGUF file to read and answer with),
 * `hash` (file → hex sha256 or its Promise; default sha256File), `labels` (GGUF file →
 * {label, note, memories} for the choices; `memories`: what held-out articles showed of
 * its memories against sentence chunks, {pays, evidence}, for a page's default).
 */
export async function makeManifest(dir, { baseUrl = '', reader = null, hash = sha256File, labels = {} } = {}) {
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new Error(`${dir}: not a folder`);
  const entry = async (rel, name = rel) => {
    const file = path.join(dir, ...rel.split('/'));
    return { path: name, url: urlOf(rel, baseUrl), size: fs.statSync(file).size, sha256: await hash(file) };
  };
  const embedderDir = findEmbedder(dir);
  const embedderFiles = [];
  const walk = async (sub) => {
    const entries = fs.readdirSync(path.join(dir, ...sub.split('/')), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const rel = `${sub}/${e.name}`;
      if (e.isDirectory()) await walk(rel);
      else if (e.isFile()) embedderFiles.push(await entry(rel, rel.slice(embedderDir.length + 1)));
    }
  };
  await walk(embedderDir);
  const ggufs = fs.readdirSync(dir).filter((f) => /\.gguf$/i.test(f) && fs.statSync(path.join(dir, f)).isFile()).sort();
  if (reader !== null && !ggufs.includes(reader)) throw new Error(`${dir}: no ${reader} (the GGUF files here: ${ggufs.join(', ') || 'none'})`);
  const chosen = reader ?? ggufs[0];
  if (!chosen) throw new Error(`${dir}: no language model (a .gguf file)`);
  // The chosen model first, then the others by name.
  const order = [chosen, ...ggufs.filter((f) => f !== chosen)];
  const choices = [];
  for (const file of order) {
    const files = [await entry(file)];
    const { label = file.replace(/\.gguf$/i, ''), note = '', memories } = labels[file] ?? {};
    choices.push({ id: file, name: file, label, note, ...(memories ? { memories } : {}), size: files[0].size, default: file === chosen, files });
  }
  const lm = { name: choices[0].name, files: choices[0].files };
  return { embedder: { name: embedderDir, files: embedderFiles }, reader: lm, answerer: lm, choices };
}
