// What js/README.md gives for Vite, and nothing more: the headers a cross-origin isolated
// page needs, for the dev and preview servers (the test serves dist/ with its own server,
// with and without them), and the package kept out of the dev server's pre-bundling.
// `vite build` itself needs nothing.
const isolated = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
export default { server: { headers: isolated }, preview: { headers: isolated }, optimizeDeps: { exclude: ['docmem'] } };
