// The worker of scripts/bench/gpu-load-browser.sh: one GGUF model loaded straight onto the
// browser's WebGPU device with docmem's `Device.loadLm` (crates/wasm/src/load.rs), as
// the npm package loads a model for the 'webgpu' backend, and then one short greedy call
// to show that the loaded model works. It answers issue #6: how long the load takes from a
// local URL, and how large the wasm heap (linear memory) gets with the model loaded (the
// loader streams weights to GPU buffers a tensor at a time, in writes of at most 64 MiB,
// so the file should never be whole in wasm memory).
//
// Message in: {model: URL, name, size, prompt, tokens (0: no greedy call)}. Messages out: {progress: text}
// while loading, then {ok: true, result} or {ok: false, error}.
//
// How the figures are taken:
// - The reader is synchronous XMLHttpRequest with a Range header (one request per read;
//   the server answers 206). The driver's server is local, so this is the load from a
//   local URL with nothing cached in the browser (responses are no-store).
// - load_s: wall time of `device.loadLm(name, [{path, size, read}])` on the device
//   `Device.choose('webgpu')` gave before it (SwiftShader is a software adapter, which
//   'webgpu' takes): parsing the header and tokenizer, the reads and the uploads. read_s
//   is the part spent inside read().
// - wasm memory: `memory.buffer.byteLength` of the instance, after init (before), sampled
//   at the start of every read() (while loading: the buffer the read fills is already
//   allocated then), after the load, and after the first greedy call. Linear memory only
//   grows, so the last value is the peak; peak_during_load is the largest sample up to the
//   end of the load.
// - first_s: wall time of the first `greedy(tokens, n)` on the prompt (a cold figure, not
//   a decode speed: the device's checks compiled most kernels, the model's shapes the rest).

let w = null;
let memory = null;

const MiB = 2 ** 20;
const mib = (bytes) => Math.round((bytes / MiB) * 10) / 10;

self.onmessage = async (e) => {
  try {
    self.postMessage({ ok: true, result: await runCase(e.data) });
  } catch (err) {
    let panic;
    try {
      panic = w && typeof w.lastPanic === 'function' ? w.lastPanic() : undefined;
    } catch {
      panic = undefined;
    }
    const message = err && err.stack ? err.stack : String(err && err.message ? err.message : err);
    const code = err && err.code ? ` [${err.code}]` : '';
    self.postMessage({ ok: false, error: `${message}${code}${panic ? `\nwasm panic: ${panic}` : ''}` });
  }
};

// The adapter the browser offers by default, for the report (docmem's loader asks wgpu for
// its own; the limits say why a large buffer would be refused).
async function adapterInfo() {
  if (!navigator.gpu) return { webgpu: false };
  const a = await navigator.gpu.requestAdapter();
  if (!a) return { webgpu: true, adapter: null };
  const info = a.info || {};
  return {
    webgpu: true,
    adapter: [info.vendor, info.architecture, info.description].filter(Boolean).join(' / ') || '?',
    fallback: info.isFallbackAdapter ?? a.isFallbackAdapter ?? null,
    maxBufferSize: a.limits.maxBufferSize,
    maxStorageBufferBindingSize: a.limits.maxStorageBufferBindingSize,
  };
}

async function runCase(c) {
  const progress = (text) => self.postMessage({ progress: `${c.name}: ${text}` });
  w = await import('/pkg/docmem_wasm.js');
  memory = (await w.default({ module_or_path: '/pkg/docmem_wasm_bg.wasm' })).memory;
  const gpuInfo = await adapterInfo();
  const memBefore = memory.buffer.byteLength;

  let reads = 0;
  let bytesRead = 0;
  let largestRead = 0;
  let readSeconds = 0;
  let peak = memBefore;
  const trace = []; // [offset, length, wasm MiB at the read's start] per read
  let nextReport = 0.1;
  let lastReport = performance.now();
  const read = (offset, length) => {
    const mem = memory.buffer.byteLength;
    if (mem > peak) peak = mem;
    trace.push([offset, length, mib(mem)]);
    const t = performance.now();
    const xhr = new XMLHttpRequest();
    xhr.open('GET', c.model, false);
    xhr.responseType = 'arraybuffer';
    xhr.setRequestHeader('Range', `bytes=${offset}-${offset + length - 1}`);
    xhr.send();
    if (xhr.status !== 206) throw new Error(`read(${offset}, ${length}): HTTP ${xhr.status} (a 206 range answer was expected)`);
    const bytes = new Uint8Array(xhr.response);
    if (bytes.length !== length) throw new Error(`read(${offset}, ${length}): got ${bytes.length} bytes`);
    readSeconds += (performance.now() - t) / 1000;
    reads++;
    bytesRead += length;
    if (length > largestRead) largestRead = length;
    const now = performance.now();
    if (bytesRead / c.size >= nextReport || now - lastReport > 30000) {
      while (bytesRead / c.size >= nextReport) nextReport += 0.1;
      lastReport = now;
      progress(`${mib(bytesRead)} MiB read in ${reads} reads (${Math.round((bytesRead / c.size) * 100)}% of the file), wasm memory ${mib(mem)} MiB`);
    }
    return bytes;
  };

  progress(`loading ${mib(c.size)} MiB onto WebGPU (${gpuInfo.adapter || 'no adapter'}), wasm memory ${mib(memBefore)} MiB`);
  // The device first, as the package's worker chooses it: its kernel checks (which
  // compile the kernels the model then runs) are not part of the load.
  const device = await w.Device.choose('webgpu');
  const t0 = performance.now();
  const lm = device.loadLm(c.name, [{ path: `${c.name}.gguf`, size: c.size, read }]);
  const loadSeconds = (performance.now() - t0) / 1000;
  const memAfterLoad = memory.buffer.byteLength;
  if (memAfterLoad > peak) peak = memAfterLoad;
  const adapter = lm.adapter();
  progress(`loaded in ${loadSeconds.toFixed(1)} s on ${adapter}; wasm memory ${mib(memAfterLoad)} MiB${c.tokens > 0 ? "; first greedy call" : ""}`);

  const prompt = Uint32Array.from(lm.tokenize(c.prompt));
  let ids = [];
  let firstSeconds = null;
  if (c.tokens > 0) {
    const t1 = performance.now();
    ids = Array.from(await lm.greedy(prompt, c.tokens));
    firstSeconds = (performance.now() - t1) / 1000;
  }
  const memAfterFirst = memory.buffer.byteLength;
  lm.free();

  return {
    adapter,
    gpu: gpuInfo,
    load_s: loadSeconds,
    read_s: readSeconds,
    reads,
    bytes_read: bytesRead,
    largest_read: largestRead,
    wasm_before_mib: mib(memBefore),
    wasm_peak_load_mib: mib(peak),
    wasm_after_load_mib: mib(memAfterLoad),
    wasm_after_first_mib: mib(memAfterFirst),
    prompt_tokens: Array.from(prompt),
    first_s: firstSeconds,
    first_ids: ids,
    trace,
  };
}
