// A Node script using the installed package: open a library in a temporary folder, add a
// document, ask, print the cited answer. The models: the manifest given as argv[2].
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DocMem } from 'docmem';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-node-app-'));
const models = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const dm = await DocMem.open('notes', { models, storageDir: path.join(tmp, 'library'), modelCacheDir: path.join(tmp, 'models'), threads: 2 });
await dm.addDocument('William Caxton set up the first printing press in England, at Westminster, in 1476.', { title: 'Printing in England', method: 'sentence' });
const a = await dm.ask('Who set up the first printing press in England?', { maxTokens: 32 });
console.log(JSON.stringify({ answer: a.answer, citations: a.citations.map((c) => ({ title: c.document.title, text: c.text })), backend: dm.backend.label }));
dm.close();
fs.rmSync(tmp, { recursive: true, force: true });
