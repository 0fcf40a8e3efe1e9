// Vite finds the package's worker and wasm files by their new URL(…, import.meta.url) (see vite.config.js).
import { DocMem } from 'docmem';
import { run } from './page.js';

run(DocMem);
