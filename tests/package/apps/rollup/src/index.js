// Rollup does not copy the files a package references with new URL(…, import.meta.url)
// either, so the app copies the package into dist/docmem and names its worker.
import { DocMem } from 'docmem';
import { run } from './page.js';

run(DocMem, { workerUrl: '/docmem/worker.js' });
