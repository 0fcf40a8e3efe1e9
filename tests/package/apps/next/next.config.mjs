// A static export (next build writes the site to out/) is this app's own choice, so that the
// test can serve it like the other apps' dist/: docmem needs no Next.js setting.
export default { output: 'export' };
