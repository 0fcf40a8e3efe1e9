// The headers a cross-origin isolated page needs (the package's README): the preview server
// sends them; the test serves dist/ with its own server, with and without them.
const isolated = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
export default {
  server: { headers: isolated },
  preview: { headers: isolated },
  optimizeDeps: { exclude: ['docmem'] },
  build: { target: 'es2022' },
  worker: { format: 'es' },
};
