// webpack's default configuration (no webpack.config.js) needs nothing more: it builds the
// package's worker, thread helper, wasm glue and PDF.js itself and emits its files.
import { DocMem } from 'docmem';
import { run } from './page.js';

run(DocMem);
