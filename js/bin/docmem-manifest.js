#!/usr/bin/env node
// Write the model manifest (models.schema.json) of a folder of models to stdout: what an
// app hosts beside the model files and passes to DocMem.open as `models`.
//
//   npx docmem-manifest DIR [--base-url URL] [--reader FILE.gguf] > models.json
//
// DIR holds one embedder folder (e.g. all-MiniLM-L6-v2/) and one or more .gguf files.
// Without --base-url the URLs are relative to the manifest, so it is served from DIR.
import { makeManifest } from '../manifest.js';

const args = process.argv.slice(2);
const take = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return null;
  const [, value] = args.splice(i, 2);
  if (value === undefined) usage(`${name} needs a value`);
  return value;
};
function usage(problem) {
  process.stderr.write(`docmem-manifest: ${problem}\nusage: docmem-manifest DIR [--base-url URL] [--reader FILE.gguf] > models.json\n`);
  process.exit(2);
}
const baseUrl = take('--base-url') ?? '';
const reader = take('--reader');
if (args.length !== 1 || args[0].startsWith('-')) usage(args.length === 0 ? 'no folder given' : `unexpected ${args.filter((a) => a !== args[0]).join(' ') || args[0]}`);
try {
  process.stdout.write(`${JSON.stringify(await makeManifest(args[0], { baseUrl, reader }), null, 1)}\n`);
} catch (e) {
  process.stderr.write(`docmem-manifest: ${e.message}\n`);
  process.exit(1);
}
