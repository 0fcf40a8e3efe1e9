// Which build of the wasm package this engine runs, and on how many threads: the worker
// loads it before anything else (worker-ops.js's init). Three builds
// (scripts/build-wasm.sh): plain (simd128, one thread), threads (shared memory) and
// relaxed (threads + relaxed SIMD's dot product). The threads builds need shared memory
// (a cross-origin isolated page, or Node) and start their helper workers (threads.js)
// before any model loads; where that fails, the plain build runs on one thread and the
// note says why.

/** A build of the wasm package at URLs the app gave (DocMem's `wasm` option). */
const importUrl = (url) => import(/* webpackIgnore: true */ /* @vite-ignore */ url);
const givenBuild = (name, b) => b && { name, url: b.js, glue: () => importUrl(b.js), wasm: b.wasm };

/** Whether this engine has relaxed SIMD: a 60-byte module using its dot product validates
 * (so an engine without it never downloads or compiles the relaxed build). */
function hasRelaxedSimd() {
  const v128 = [0xfd, 0x0c, ...new Array(16).fill(0)]; // v128.const 0
  const body = [0x00, ...v128, ...v128, ...v128, 0xfd, 0x93, 0x02, 0x0b]; // i32x4.relaxed_dot_i8x16_i7x16_add_s
  const code = [0x01, body.length, ...body];
  const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03, 0x02, 0x01, 0x00];
  try {
    return WebAssembly.validate(new Uint8Array([...header, 0x0a, code.length, ...code]));
  } catch {
    return false;
  }
}

/**
 * Load the wasm package: the threads build on `threads` threads where that is asked for
 * (a number, or the platform's core count when not given) and possible, else the plain
 * build on one. Where the package has a relaxed-SIMD threads build and the engine compiles
 * it, that one is tried first and kept only if its kernels pass the check against the
 * portable ones (an engine may compute relaxed products its own way: V8 11.3 doubles them
 * on some x86 machines). Returns {module, memory, count, note, kernels, kernelsNote}: the
 * package's glue module and its linear memory (WebAssembly.Memory: it only grows, so its
 * size is the peak), the threads started, why only one when so, 'simd128' or
 * 'relaxed-simd', and why relaxed SIMD was not used when so. `platform` is the worker's
 * (worker-ops.js).
 */
export async function loadWasm(platform, given, wanted) {
  // The package's own builds, or the ones the app named by URL.
  const pkg = given ? { plain: givenBuild('plain', given), threads: givenBuild('threads', given.threads), relaxed: givenBuild('relaxed', given.relaxed) } : platform.builds;
  let count = wanted === undefined || wanted === null ? await platform.defaultThreadCount() : Math.max(1, Math.floor(Number(wanted)) || 1);
  let note = count === 1 ? (wanted !== undefined && wanted !== null ? 'one thread was asked for' : 'this device reports one core') : '';
  let kernelsNote = '';
  const support = platform.threadSupport();
  if (count > 1 && !pkg.threads) [count, note] = [1, 'the wasm package has no threads build'];
  if (count > 1 && !support.ok) [count, note] = [1, support.reason];
  const message = (e) => (e && e.message ? e.message : String(e));
  // One threads build: compiled, instantiated on shared memory and (relaxed) checked, as
  // {glue, module, memory}; its helpers are started by `start`.
  const prepare = async (build, check) => {
    const glue = await build.glue();
    const module = await platform.compileWasm(build.wasm);
    // Shared memory (up to 4 GiB reserved) can fail to be made.
    const exports = await glue.default({ module_or_path: module });
    if (check) glue.cpuKernelCheck();
    return { glue, module, memory: exports.memory };
  };
  const start = async (build, b, kernels) => {
    const started = await platform.startThreads(b.glue, { build: build.name, glueUrl: build.url, module: b.module, memory: b.memory, count });
    return { module: b.glue, memory: b.memory, count: started, note, kernels, kernelsNote };
  };
  if (count > 1) {
    // The relaxed build where the engine has relaxed SIMD and its kernels pass the check,
    // else the simd128 threads build. (A build that compiled but failed its check stays in
    // memory, unused: only an engine that computes relaxed products wrongly gets there.)
    let chosen = null;
    if (pkg.relaxed && hasRelaxedSimd()) {
      try {
        chosen = { build: pkg.relaxed, b: await prepare(pkg.relaxed, true), kernels: 'relaxed-simd' };
      } catch (e) {
        kernelsNote = `relaxed SIMD not used: ${message(e)}`;
      }
    } else if (pkg.relaxed) {
      kernelsNote = 'relaxed SIMD not used: this engine does not have it';
    }
    try {
      chosen = chosen ?? { build: pkg.threads, b: await prepare(pkg.threads, false), kernels: 'simd128' };
      // startThreads stops its helpers when they fail; the plain build then runs on one
      // thread (helpers that failed once would fail again with the other build).
      return await start(chosen.build, chosen.b, chosen.kernels);
    } catch (e) {
      [count, note] = [1, `the threads build could not start (${message(e)})`];
    }
  }
  const module = await pkg.plain.glue();
  const { memory } = await module.default({ module_or_path: await platform.wasmSource(pkg.plain.wasm) });
  return { module, memory, count, note, kernels: 'simd128', kernelsNote };
}
