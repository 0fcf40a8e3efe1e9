// What a helper thread of the wasm CPU backend does (threads.js starts it): instantiate the
// threads build's glue on the compiled module and shared memory it was sent, say so, then
// serve the kernels' tasks in threadServe() for as long as the worker lives (it never
// returns). The entries (thread-worker.js, node/thread-worker.js) give it their message
// port and the way to import a glue module.
//
// `port`: {post(m), once(f)}; `importGlue(build, glueUrl)`: the glue module of the
// package's build named `build`, or of the one at `glueUrl` when the app gave its own.

export function serveThread(port, importGlue) {
  port.once(async ({ build, glueUrl, module, memory }) => {
    let w;
    try {
      w = await importGlue(build, glueUrl);
      await w.default({ module_or_path: module, memory });
    } catch (e) {
      port.post({ error: `a docmem thread could not start: ${e && e.message ? e.message : e}` });
      return;
    }
    port.post({ ready: true });
    w.threadServe();
  });
}
