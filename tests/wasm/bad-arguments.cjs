// Hostile arguments at the wasm boundary (issue #20): every function, constructor and
// method the wasm package exports is called with bad arguments — wrong JS types, empty and
// huge values, NaN, objects that only pretend to be arrays, Uint8Arrays that are not
// UTF-8 or not a model, freed objects, callbacks that throw or call back in, transports
// to hosted models that throw or answer garbage (no network: JS objects). Each call
// must either return or throw an `Error` with a message; a `WebAssembly.RuntimeError`
// (a trap: a Rust panic or abort) fails the check. Afterwards every object still works.
// Exports not named here (new ones) are called too, with every wrong type in every
// position. Last, in a second instance of the module, a deliberate panic: its message
// and location reach console.error and lastPanic(), and later calls throw INTERNAL.
//
//   node tests/wasm/bad-arguments.cjs PKG_DIR MODELS_DIR
// (scripts/wasm-test.sh builds PKG_DIR with wasm-bindgen --target nodejs.)
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { types } = require('node:util');
const { readTree } = require('./common.cjs');

const [pkgDir, modelsDir] = process.argv.slice(2);
const wasm = require(path.resolve(pkgDir, 'docmem_wasm.js'));
const { Embedder, Library, Lm } = wasm;
const t0 = performance.now();

// ---- the check -------------------------------------------------------------------------

let calls = 0;
let errors = 0;
const failures = [];

/** A short name for a value in a failure message. */
function describe(v) {
  if (typeof v === 'string') return v.length > 24 ? `string(${v.length})` : JSON.stringify(v);
  if (typeof v === 'symbol' || typeof v === 'bigint') return `${v.toString()}${typeof v === 'bigint' ? 'n' : ''}`;
  if (typeof v === 'function') return 'function';
  if (v === null || typeof v !== 'object') return String(v);
  if (types.isProxy(v)) return 'Proxy';
  if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.length})`;
  if (Array.isArray(v)) return `array(${v.length})`;
  return (v.constructor && v.constructor.name) || 'object';
}

/** Judge what a call threw (or a promise it returned rejected with). */
function judge(what, e) {
  if (e instanceof WebAssembly.RuntimeError) {
    failures.push(`${what}: trapped (${e.message})`);
    if (process.env.DOCMEM_VERBOSE) console.error(failures[failures.length - 1], e.stack);
  } else if (!(e instanceof Error)) failures.push(`${what}: threw a non-Error ${describe(e)}`);
  else if (typeof e.message !== 'string' || e.message.length === 0) failures.push(`${what}: threw an Error without a message`);
  else errors += 1;
  return e;
}

/** Promises returned by calls (async exports): each must settle, within a minute. */
const pending = [];
function settles(what, promise) {
  return new Promise((done) => {
    const timer = setTimeout(() => {
      failures.push(`${what}: its promise never settled (a trap inside an async export leaves it so)`);
      done();
    }, 60_000);
    Promise.resolve(promise).then(
      () => done(clearTimeout(timer)),
      (e) => done(clearTimeout(timer), judge(`${what} (rejected)`, e)),
    );
  });
}
// Node exits with 0 when only unsettled promises are left: that is not a pass.
let finished = false;
process.on('exit', (code) => {
  if (!finished && code === 0) {
    console.error(`wasm bad arguments: the check did not finish\n${failures.join('\n')}`);
    process.exitCode = 1;
  }
});
// A trap in an async export's continuation surfaces outside any call: count it too
// (anything else thrown there is this script's own failure).
for (const event of ['uncaughtException', 'unhandledRejection']) {
  process.on(event, (e) => {
    if (!(e instanceof WebAssembly.RuntimeError)) {
      console.error(e);
      process.exit(1);
    }
    judge(`an async export, later (${event})`, e);
  });
}

/** Run `f` (one call with bad arguments): it returns, or throws an Error with a message. */
function call(what, f) {
  calls += 1;
  try {
    const r = f();
    if (r && typeof r.then === 'function') pending.push(settles(what, r));
    return r;
  } catch (e) {
    return judge(what, e);
  }
}

/**
 * Call `f(...args)` once per bad value in each position named in `bad` (position →
 * values), the other positions keeping `good`'s argument.
 */
function sweep(name, f, good, bad) {
  for (const [at, values] of Object.entries(bad)) {
    for (const v of values) {
      const args = good.slice();
      args[Number(at)] = v;
      const t = performance.now();
      call(`${name} argument ${at} = ${describe(v)}`, () => f(...args));
      const ms = performance.now() - t;
      if (process.env.DOCMEM_VERBOSE && ms > 1000) console.error(`slow: ${name} argument ${at} = ${describe(v)}: ${(ms / 1000).toFixed(1)} s`);
    }
  }
}

// ---- bad values ------------------------------------------------------------------------

/** Bytes that are not UTF-8: stray continuation bytes, overlong and surrogate encodings, 0xFF. */
const notUtf8 = Uint8Array.of(0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x90, 0x28, 0xbc, 0xff, 0xfe, 0xed, 0xa0, 0x80, 0xc0, 0xaf);
/** Values of every JS type, none of them what any parameter wants. */
const wrongTypes = [
  undefined,
  null,
  true,
  0,
  -1,
  NaN,
  Infinity,
  1e12,
  10n,
  Symbol('bad'),
  {},
  [],
  ['a', 1, null],
  () => 1,
  Object.create(null),
  new Date(0),
  notUtf8,
  new Uint8Array(0),
  new Float64Array(4),
  new ArrayBuffer(8),
  // Array-likes whose length is huge: nothing may allocate by it.
  { length: 1e12 },
  { length: 2 ** 31 },
  new Proxy({}, {
    ownKeys() {
      throw new Error('hostile proxy: no keys');
    },
    get() {
      throw new Error('hostile proxy: no properties');
    },
  }),
];
/** Strings that are odd but strings. */
const oddStrings = ['', ' ', '\0', '\ud800 lone surrogates \udfff', '\u202e\u{1F916}'.repeat(1000), 'x'.repeat(200_000)];
const strings = [...oddStrings, ...wrongTypes];
/** Where a count or size is taken. */
const sizes = [NaN, -1, -0, 1.5, 1e12, 2 ** 32, 2 ** 32 - 1, 2 ** 53, Infinity, -Infinity, '7', ...wrongTypes];

// A GGUF file and broken copies of it.
const smolPath = path.join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf');
const smol = new Uint8Array(fs.readFileSync(smolPath));
const u64At = (bytes, at, value) => {
  const b = bytes.slice();
  new DataView(b.buffer).setBigUint64(at, value, true);
  return b;
};
const head = smol.subarray(0, 4 << 20); // the metadata, tokenizer included
const badGgufs = [
  new Uint8Array(0),
  notUtf8,
  Uint8Array.from('GGUF', (c) => c.charCodeAt(0)),
  Uint8Array.of(0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, ...new Array(16).fill(0xff)),
  smol.subarray(0, 100),
  smol.subarray(0, 64 << 10),
  head,
  u64At(head, 8, 2n ** 40n), // tensor count
  u64At(head, 16, 2n ** 40n), // metadata count
  u64At(head, 24, 2n ** 40n), // the first key's length
  u64At(head, 24, 2n ** 64n - 1n),
  (() => {
    // The first key's bytes not UTF-8.
    const b = head.slice();
    b.set(notUtf8.subarray(0, 8), 32);
    return b;
  })(),
  (() => {
    // The architecture's name not UTF-8.
    const b = head.slice();
    const at = Buffer.from(b.buffer, b.byteOffset, b.length).indexOf('llama');
    b.fill(0xff, at, at + 5);
    return b;
  })(),
  smol.subarray(0, smol.length - 1000), // tensor data cut short
];
/** A Uint8Array larger than wasm32 memory can hold (Node may refuse to make one). */
let huge = null;
try {
  huge = new Uint8Array(2 ** 32 - 1);
} catch {
  huge = null;
}
const bytesValues = [...badGgufs, ...wrongTypes, ...(huge ? [huge] : [])];

// ---- the objects to call methods on ----------------------------------------------------
// (In an async function: the library's addDocument and ask are Promises.)

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

async function main() {

const minilm = readTree(path.join(modelsDir, 'all-MiniLM-L6-v2'));
const embedder = new Embedder(minilm, 'all-MiniLM-L6-v2', '');
const lm = new Lm(smol);
lm.setName('SmolLM2-135M-Instruct.Q4_1.gguf');
const lib = Library.open({}, embedder);
const doc = await lib.addDocument({ title: 'press.md', text: 'Gutenberg printed the Bible in 1455. Caxton brought printing to England in 1476.' }, { embedder, chunker: 'sentence' });
lib.takeWrites();
const exported = lib.exportLibrary();
const freed = Library.open({}, embedder);
freed.free();
// Documents added by the sweeps go here, so that `lib` stays one short document and the
// answers' prompts stay short.
const scratch = Library.open({}, embedder);
const stop = () => false; // cancels at the first progress report or token

// ---- free functions --------------------------------------------------------------------

sweep('chunkText', wasm.chunkText, ['One. Two. Three.', 'sentence', 0, 0], {
  0: strings,
  1: [...strings, 'nope', 'SENTENCE'],
  2: sizes,
  3: sizes,
});
for (const chunker of ['fixed', 'sentence', 'recursive', 'semantic']) {
  for (const [size, overlap] of [[1, 0], [1, 1], [2, 5], [1, 2 ** 32 - 1], [2 ** 32 - 1, 2 ** 32 - 1], [1e12, 1e12]]) {
    call(`chunkText ${chunker} size ${size} overlap ${overlap}`, () => wasm.chunkText('One sentence. Another one here. \u{1F916}'.repeat(20), chunker, size, overlap));
  }
}
sweep('htmlToText', wasm.htmlToText, ['<p>x</p>'], { 0: [...strings, '<', '<script>', '<!--', '&#xFFFFFFFF;&#0;&#xD800;', '<a '.repeat(10_000)] });
sweep('parseAndAlign', wasm.parseAndAlign, ['Some text here.', '<chunk>Some text</chunk>'], {
  0: strings,
  1: [...strings, '<chunk>', '</chunk>'.repeat(1000), '<chunk>4-2</chunk>', '<chunk>1-4294967296</chunk>', '<outline>\n- a\n</outline>'.repeat(100)],
});

// ---- Lm --------------------------------------------------------------------------------

sweep('new Lm', (b) => new Lm(b), [smol], { 0: bytesValues });
const reads = {
  zeros: (_o, n) => new Uint8Array(n),
  ones: (_o, n) => new Uint8Array(n).fill(0xff),
  short: (o, n) => smol.subarray(o, o + Math.max(0, n - 1)),
  long: (o, n) => new Uint8Array(n + 1),
  string: () => 'bytes',
  undefined: () => undefined,
  array: (_o, n) => new Array(n).fill(0),
  throwsError: () => {
    throw new Error('read failed');
  },
  throwsString: () => {
    throw 'read failed';
  },
  smolThenZeros: (o, n) => (o < 1 << 20 ? smol.subarray(o, o + n) : new Uint8Array(n)),
};
sweep('Lm.fromReader', Lm.fromReader, [smol.length, (o, n) => smol.subarray(o, o + n)], {
  0: [0, 24, 1e12, 9e15, ...sizes],
  1: [...Object.values(reads), ...wrongTypes],
});
sweep('Lm.setName', (n) => lm.setName(n), ['SmolLM2-135M-Instruct.Q4_1.gguf'], { 0: strings });
lm.setName('SmolLM2-135M-Instruct.Q4_1.gguf');
sweep('Lm.tokenize', (t) => lm.tokenize(t), ['hello'], { 0: strings });
sweep('Lm.greedy', (t, n) => lm.greedy(t, n), [[1, 2], 1], {
  0: [...wrongTypes, [], [2 ** 32], [-1], new Array(100_000).fill(1)],
  1: [...wrongTypes, -1, 1.5, NaN, Infinity, 4097, 2 ** 53],
});
sweep('Lm.generate', (p, q) => lm.generate(p, q), ['Hi', '{"max_tokens":2}'], {
  0: [...strings, 'word '.repeat(5000)],
  1: [
    ...strings,
    '{',
    'null',
    '[]',
    '"x"',
    '{"max_tokens":1e12}',
    '{"max_tokens":18446744073709551616}',
    '{"max_tokens":-1}',
    '{"max_tokens":0}',
    '{"temperature":-1,"max_tokens":2}',
    '{"temperature":1e38,"max_tokens":2}',
    '{"temperature":1e-38,"max_tokens":2}',
    '{"top_p":-1,"temperature":1,"max_tokens":2}',
    '{"top_p":0,"temperature":1,"max_tokens":2}',
    '{"top_p":1e38,"temperature":1,"max_tokens":2}',
    '{"top_k":4294967295,"temperature":1,"max_tokens":2}',
    '{"top_k":1,"temperature":1,"max_tokens":2}',
    '{"repetition_penalty":0,"temperature":1,"max_tokens":2}',
    '{"repetition_penalty":-5,"temperature":1,"max_tokens":2}',
    '{"repetition_penalty":1e38,"max_tokens":2}',
    '{"repetition_window":4294967295,"max_tokens":2}',
    '{"seed":18446744073709551615,"temperature":1,"max_tokens":2}',
    '{"stop":[""],"max_tokens":2}',
    '{"stop":["\\u0000","\\ud800"],"max_tokens":2}',
    '{"stop":"x","max_tokens":2}',
    '{"unknown":1,"max_tokens":2}',
  ],
});

// ---- Embedder --------------------------------------------------------------------------

const withFile = (name, bytes) => ({ ...minilm, [name]: bytes });
const enc = (s) => new TextEncoder().encode(s);
sweep('new Embedder', (f, n, p) => new Embedder(f, n, p), [minilm, 'all-MiniLM-L6-v2', ''], {
  0: [
    ...wrongTypes,
    { 'config.json': enc('{}') },
    withFile('config.json', notUtf8),
    withFile('config.json', enc('{"hidden_size":4294967296,"num_attention_heads":0}')),
    withFile('config.json', enc('{"hidden_size":384,"num_attention_heads":0,"num_hidden_layers":6,"intermediate_size":1536,"vocab_size":30522,"max_position_embeddings":512}')),
    withFile('model.safetensors', notUtf8),
    withFile('model.safetensors', u64At(minilm['model.safetensors'].subarray(0, 4096), 0, 2n ** 40n)),
    withFile('model.safetensors', minilm['model.safetensors'].subarray(0, 4096)),
    withFile('tokenizer.json', notUtf8),
    withFile('tokenizer.json', enc('{"model":{"type":"WordPiece","vocab":{}}}')),
    withFile('modules.json', notUtf8),
    withFile('1_Pooling/config.json', enc('{"word_embedding_dimension":-1}')),
    withFile('tokenizer.json', 'not bytes'),
    { ...minilm, 42: new Uint8Array(1) },
  ],
  1: strings,
  2: [...strings, 'f64', 'Q8_0 ', 'int4'],
});
sweep('Embedder.fromGguf', Embedder.fromGguf, [head, 'x', ''], { 0: [...bytesValues, smol], 1: strings, 2: strings });
sweep('Embedder.embed', (t, q) => embedder.embed(t, q), [['hello'], false], {
  0: [
    ...wrongTypes,
    [],
    [''],
    [notUtf8],
    [1, 2],
    [null],
    [undefined],
    [Symbol('s')],
    ['\ud800\udfff'],
    ['x '.repeat(100_000)],
    new Array(300).fill('a text'),
  ],
  1: wrongTypes,
});
call('Embedder.dim with junk arguments', () => embedder.dim(1e12, null));
call('Embedder.precision with junk arguments', () => embedder.precision(notUtf8));

// ---- Library ---------------------------------------------------------------------------

sweep('Library.open', Library.open, [{}, embedder], {
  0: [
    ...wrongTypes,
    { 'manifest.json': notUtf8 },
    { 'manifest.json': enc('{}') },
    { 'manifest.json': enc('{"format_version":4294967296}') },
    { 'manifest.json': enc('null') },
    { 'manifest.json': 'text' },
    { 'manifest.json': new Uint8Array(0) },
    { 'manifest.json': { length: 1e12 } },
    { '../../etc/passwd': new Uint8Array(1) },
  ],
  1: [...wrongTypes, freed, lm, Object.create(Embedder.prototype)],
});
sweep('Library.importLibrary', Library.importLibrary, [exported, embedder], {
  0: [...bytesValues, exported.subarray(0, 10), exported.subarray(0, exported.length - 1), u64At(exported, 8, 2n ** 40n)],
  1: [...wrongTypes, freed, lm],
});
/** A model JavaScript has freed (a hosted one: cheap to make). */
function freedModel() {
  const m = new wasm.RemoteModel({ post() {}, postStream() {}, postSync() {} }, 'gone', 0);
  m.free();
  return m;
}
const throwingCallback = () => {
  throw new Error('callback failed');
};
/** Documents and options objects that are not what they claim: each field swept in turn. */
const objects = [...wrongTypes.filter((v) => v !== undefined && v !== null)];
const models = [...wrongTypes, freedModel(), freed, embedder, Object.create(Lm.prototype), { handleId: 1e12 }, { handleId: -1 }, { handleId: '1' }];
const embedders = [...wrongTypes, freedModel(), freed, lm, Object.create(Embedder.prototype), { handleId: NaN }];
/** Call `f(...args)` with field `key` of argument `at` set to each of `values` in turn. */
function sweepFields(name, f, good, at, bad) {
  for (const [key, values] of Object.entries(bad)) {
    for (const v of values) {
      const args = good.slice();
      args[at] = { ...good[at], [key]: v };
      call(`${name} ${at === 0 ? 'doc' : 'options'}.${key} = ${describe(v)}`, () => f(...args));
    }
  }
}
const addGood = [{ title: 't.txt', text: 'Bells rang at noon.' }, { embedder, chunker: 'sentence', collection: 'c' }];
const addDocument = (...a) => scratch.addDocument(...a);
sweep('Library.addDocument', addDocument, addGood, { 0: objects, 1: objects });
sweepFields('Library.addDocument', addDocument, addGood, 0, { title: strings, text: strings });
sweepFields('Library.addDocument', addDocument, addGood, 1, {
  chunker: [...strings, 'mom', 'nope'],
  embedder: embedders,
  collection: [...strings, 'x'.repeat(200), 'a\u0000b'],
  reader: [lm],
});
const momGood = [{ title: 'bells.txt', text: 'The bell rang at noon and again at dusk.' }, { embedder, reader: lm, samples: 0, progress: stop }];
sweepFields('Library.addDocument', addDocument, momGood, 1, { reader: models, scorer: models, samples: sizes });
// Progress callbacks that are not functions, that throw, or that call back into the
// library (which is busy): each run goes on or stops, and throws nothing worse.
for (const [name, progress] of [
  ['a number', 42],
  ['an object', {}],
  ['a throwing function', () => {
    throw new Error('progress failed');
  }],
  ['a function throwing a string', () => {
    throw 'progress failed';
  }],
  ['a re-entrant function', () => {
    scratch.documents();
    return false;
  }],
  ['a function calling into the busy embedder', () => {
    embedder.dim();
    return false;
  }],
]) {
  call(`Library.addDocument progress = ${name}`, () => scratch.addDocument({ title: 'bells.txt', text: 'Bells.' }, { embedder, reader: lm, progress }));
}
// One at a time from here: a sweep's calls would otherwise find the library busy.
await Promise.all(pending);
scratch.takeWrites();
const searchGood = ['printing', { embedder, k: 2 }];
sweep('Library.search', (...a) => lib.search(...a), searchGood, { 0: strings, 1: objects });
sweepFields('Library.search', (...a) => lib.search(...a), searchGood, 1, { k: sizes, embedder: embedders, answerer: [lm] });
// Each answer that gets past its arguments prefills a prompt (seconds in wasm), so the
// counts and callbacks here are the ones that do not repeat another's path.
const askSizes = [NaN, -1, 1.5, 1e12, 2 ** 32, 2 ** 32 - 1, Infinity, 10n, Symbol('k'), { length: 1e12 }];
const askGood = ['Who printed the Bible?', { embedder, answerer: lm, k: 1, maxTokens: 1, onToken: stop }];
const ask = (...a) => lib.ask(...a);
sweep('Library.ask', ask, askGood, { 0: strings, 1: objects });
sweepFields('Library.ask', ask, askGood, 1, {
  k: askSizes,
  maxTokens: askSizes,
  embedder: embedders,
  answerer: models,
  clues: [...strings, 'sometimes'],
  route: [...strings.filter((v) => v !== undefined && v !== null), 'nowhere'],
  onToken: [
    42,
    { length: 1e12 },
    () => {
      throw new Error('on token failed');
    },
    // Re-entrant: an answer holds the library only while it searches, so a call from
    // its token callback goes through (a removal there would take the document away).
    () => {
      lib.documents();
      return false;
    },
  ],
});
sweep('Library.readAhead', (...a) => lib.readAhead(...a), ['Who printed', { embedder, answerer: lm, interrupt: () => true }], { 0: strings, 1: objects });
sweepFields('Library.readAhead', (...a) => lib.readAhead(...a), ['Who printed', { embedder, answerer: lm, interrupt: () => true }], 1, {
  k: askSizes,
  embedder: embedders,
  answerer: models,
  interrupt: [42, {}, throwingCallback],
});
await Promise.all(pending);
for (const method of ['memory', 'text', 'removeDocument']) {
  sweep(`Library.${method}`, (d) => lib[method](d), ['nope'], { 0: [...strings, `${doc.id}\0`, doc.id.toUpperCase()] });
}
call('Library.documents with junk arguments', () => lib.documents(notUtf8, 1e12));
call('Library.takeWrites with junk arguments', () => lib.takeWrites(null));
call('Library.exportLibrary with junk arguments', () => lib.exportLibrary({ length: 1e12 }));
for (const method of ['documents', 'takeWrites', 'exportLibrary', 'free']) {
  call(`Library.${method} on a freed library`, () => freed[method]());
}
call('Library.search on an object that only looks like a library', () => Library.prototype.search.call({}, 'x', 1, embedder));

call('Lm.logits', () => lm.logits([1, 2]));
sweep('Lm.logits', (t) => lm.logits(t), [[1, 2]], {
  0: [...wrongTypes, [], [2 ** 32], [2 ** 32 - 1], [-1], [1.5], [NaN], ['1'], new Uint32Array([4e9]), new Array(100_000).fill(1)],
});

// ---- hosted models: RemoteModel, Embedder.remote and the library's Promise entry points --
// Transports are plain JS objects here (no network): a good one that answers as an
// OpenAI-compatible host would, and hostile ones that throw, return the wrong shapes, stream
// bytes that are not events, or call back into the busy library and embedder.

const utf8 = (s) => new TextEncoder().encode(s);
const replyOf = (status, value) => ({ status, body: typeof value === 'string' ? value : JSON.stringify(value) });
/** What a host answers to `path`: vectors of width 4, or a chat reply. */
function hostReply(path, body) {
  const input = JSON.parse(body).input;
  if (path === '/v1/embeddings') return replyOf(200, { data: input.map((_, index) => ({ index, embedding: [1, 0.5, 0.25, 0.125] })) });
  return replyOf(200, { choices: [{ message: { content: 'A reply.' }, finish_reason: 'stop' }] });
}
const events = ['data: {"choices":[{"delta":{"content":"An answer [1]."},"finish_reason":null}]}\n\n', 'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n', 'data: [DONE]\n\n'];
/** A stream of `pieces` (Uint8Arrays or anything else), as postStream resolves to. */
const streamOf = (pieces, extra = {}) => ({ status: 200, body: '', next: async () => (pieces.length ? pieces.shift() : null), cancel: () => {}, ...extra });
const goodTransport = {
  post: async (path, body) => hostReply(path, body),
  postStream: async () => streamOf(events.map(utf8)),
  postSync: (path, body) => hostReply(path, body),
};
const throwing = () => {
  throw new Error('transport failed');
};
const throwingString = () => {
  throw 'transport failed';
};
/** Transports with all three methods, each broken in its own way. */
const badTransports = [
  { ...goodTransport, postSync: throwing },
  { ...goodTransport, postSync: throwingString },
  { ...goodTransport, postSync: () => undefined },
  { ...goodTransport, postSync: () => ({ status: 'ok', body: '{}' }) },
  { ...goodTransport, postSync: () => ({ status: 700, body: '{}' }) },
  { ...goodTransport, postSync: () => ({ status: NaN, body: '{}' }) },
  { ...goodTransport, postSync: () => ({ status: 200, body: 42 }) },
  { ...goodTransport, postSync: () => replyOf(200, 'not json') },
  { ...goodTransport, postSync: () => replyOf(200, { data: [] }) },
  { ...goodTransport, postSync: () => replyOf(200, { data: [{ embedding: [] }] }) },
  { ...goodTransport, postSync: () => replyOf(200, { data: [{ index: 4294967296, embedding: [1] }] }) },
  { ...goodTransport, postSync: () => replyOf(200, { data: [{ embedding: ['1', null] }] }) },
  { ...goodTransport, postSync: () => replyOf(200, { data: [{ embedding: [1e39] }] }) },
  { ...goodTransport, postSync: () => replyOf(200, { data: [{ embedding: new Array(200_000).fill(1) }] }) },
  { ...goodTransport, postSync: () => replyOf(401, { error: { code: 'unauthorized', message: 'no' } }) },
  { ...goodTransport, postSync: () => replyOf(500, '\ud800'.repeat(10_000)) },
  { ...goodTransport, post: throwing, postStream: throwingString },
  { ...goodTransport, post: () => 'not a promise', postStream: () => 42 },
  { ...goodTransport, post: async () => ({}), postStream: async () => ({ status: 200 }) },
  { ...goodTransport, post: () => Promise.reject(new Error('down')), postStream: () => Promise.reject('down') },
  { ...goodTransport, post: async () => replyOf(200, { choices: [] }), postStream: async () => replyOf(429, { error: { code: 'rate_limited', message: 'slow down' } }) },
  { ...goodTransport, post: async () => replyOf(200, { choices: [{ message: { content: 7 } }] }), postStream: async () => streamOf(['a string', 42]) },
  { ...goodTransport, postStream: async () => streamOf([notUtf8]) },
  { ...goodTransport, postStream: async () => streamOf([utf8('data: {not json}\n\n')]) },
  { ...goodTransport, postStream: async () => streamOf([utf8('data: {"error":{"code":"upstream_timeout","message":"quiet"}}\n\n')]) },
  { ...goodTransport, postStream: async () => streamOf([utf8('data: ' + 'x'.repeat(5 << 20))]) },
  { ...goodTransport, postStream: async () => streamOf([]) }, // ends before the reply does
  { ...goodTransport, postStream: async () => streamOf(events.map(utf8), { next: throwing, cancel: throwing }) },
  {
    ...goodTransport,
    post: async () => {
      scratch.documents(); // the library is busy: BUSY, thrown inside the transport
      return replyOf(200, { choices: [] });
    },
    postSync: (path, body) => {
      embedder.dim(); // the embedder too, when it is the one embedding
      return hostReply(path, body);
    },
  },
];
const transports = [...wrongTypes, {}, { post: 1, postStream: 1, postSync: 1 }, { post() {}, postStream() {} }];
const remoteModel = new wasm.RemoteModel(goodTransport, 'fake-model', 0);
sweep('new RemoteModel', (t, m, c) => new wasm.RemoteModel(t, m, c), [goodTransport, 'fake-model', 0], {
  0: transports,
  1: [...strings, '\t'],
  2: [...sizes, 2 ** 22 + 1],
});
sweep('Embedder.remote', Embedder.remote, [goodTransport, 'fake-embedder'], { 0: [...transports, ...badTransports], 1: strings });
const remoteEmbedder = Embedder.remote(goodTransport, 'fake-embedder');
call('RemoteModel.name with junk arguments', () => remoteModel.name(notUtf8, 1e12));
// Each broken transport behind a reader and an answerer, and behind an embedder whose
// later calls (after a good probe) meet the broken postSync.
const brokenModels = badTransports.map((t) => new wasm.RemoteModel(t, 'broken', 0));
for (const [i, t] of badTransports.entries()) {
  const m = brokenModels[i];
  call(`Library.addDocument with a reader behind broken transport ${i}`, () => scratch.addDocument({ title: 'bells.txt', text: `The bell rang ${i} times.` }, { embedder, reader: m, scorer: m, samples: 1 }));
  call(`Library.ask with an answerer behind broken transport ${i}`, () => lib.ask('Who printed the Bible?', { embedder, answerer: m, k: 1, maxTokens: 4, clues: 'on' }));
  let connected = false; // the probe gets a good reply, later calls the broken one
  const e = call(`Embedder.remote with broken transport ${i}`, () => Embedder.remote({ ...t, postSync: (p, b) => (connected ? t.postSync(p, b) : hostReply(p, b)) }, 'flaky'));
  connected = true;
  if (e instanceof Embedder) {
    call(`a remote Embedder's embed with broken transport ${i}`, () => e.embed(['hello', 'world'], true));
    call(`Library.open with a remote Embedder with broken transport ${i}`, () => Library.open({}, e).addDocument({ title: 't.txt', text: 'Bells rang.' }, { embedder: e }));
  }
}
await Promise.all(pending);
const hostedAdd = [{ title: 'bells.txt', text: 'The bell rang at noon and again at dusk.' }, { embedder, reader: remoteModel, scorer: remoteModel, samples: 0, progress: stop, collection: 'c' }];
sweepFields('Library.addDocument (hosted)', addDocument, hostedAdd, 1, {
  reader: [...models, Object.create(wasm.RemoteModel.prototype)],
  scorer: [...models, Object.create(wasm.RemoteModel.prototype)],
  progress: [42, {}, throwing, () => {
    scratch.documents();
    return false;
  }],
});
await Promise.all(pending);
const hostedAsk = ['Who printed the Bible?', { embedder, answerer: remoteModel, k: 1, maxTokens: 4, clues: 'off', onToken: stop }];
sweepFields('Library.ask (hosted)', ask, hostedAsk, 1, {
  answerer: [...models, Object.create(wasm.RemoteModel.prototype)],
  clues: [...strings, 'sometimes'],
  onToken: [42, {}, throwing, () => {
    lib.documents();
    return false;
  }],
});
await Promise.all(pending);

// ---- every other export: each wrong type in every position -----------------------------

const explicit = {
  functions: new Set(['chunkText', 'htmlToText', 'parseAndAlign', 'lastPanic', '__panicForTests']),
  Lm: new Set(['fromReader', 'setName', 'tokenize', 'greedy', 'generate', 'logits']),
  Embedder: new Set(['fromGguf', 'remote', 'embed', 'dim', 'precision']),
  Library: new Set([
    'open', 'importLibrary', 'addDocument', 'search', 'ask', 'readAhead',
    'memory', 'text', 'removeDocument', 'documents', 'takeWrites', 'exportLibrary',
    // Takes no arguments, and would make exportLibrary refuse, which the end checks.
    'releaseIndex',
  ]),
  RemoteModel: new Set(['name']),
};
const instances = new Map([[Lm, lm], [Embedder, embedder], [Library, lib], [wasm.RemoteModel, remoteModel]]);
const skip = new Set(['constructor', 'free', '__destroy_into_raw', '__wrap', 'length', 'name', 'prototype']);
const generic = [];
const each = (name, f, arity) => {
  generic.push(name);
  call(`${name}()`, () => f());
  for (const v of wrongTypes) call(`${name}(${describe(v)} × ${arity})`, () => f(...new Array(Math.max(arity, 1)).fill(v)));
};
for (const [name, value] of Object.entries(wasm)) {
  if (typeof value !== 'function') continue;
  const isClass = /^class\b/.test(Function.prototype.toString.call(value));
  if (!isClass) {
    if (!explicit.functions.has(name)) each(name, value, value.length);
    continue;
  }
  const known = explicit[name] || new Set();
  if (!instances.has(value)) each(`new ${name}`, (...a) => new value(...a), value.length);
  for (const s of Object.getOwnPropertyNames(value)) {
    if (!skip.has(s) && !known.has(s) && typeof value[s] === 'function') each(`${name}.${s}`, (...a) => value[s](...a), value[s].length);
  }
  for (const m of Object.getOwnPropertyNames(value.prototype)) {
    const property = Object.getOwnPropertyDescriptor(value.prototype, m);
    if (property.get) {
      // A getter (handleId): read on an object without a Rust object behind it.
      call(`${name}.prototype.${m} read on a bare prototype`, () => property.get.call(Object.create(value.prototype)));
      continue;
    }
    if (skip.has(m) || known.has(m) || typeof property.value !== 'function') continue;
    // On our instance of the class where there is one, else on one without a Rust object.
    const self = instances.get(value) || Object.create(value.prototype);
    each(`${name}.prototype.${m}`, (...a) => self[m](...a), value.prototype[m].length);
  }
}
await Promise.all(pending);

// Model files whose size this module's memory cannot hold (past 4 GiB, or past what one
// allocation may take): refused as MODEL_LOAD_FAILED naming the file, before any read.
{
  const device = await wasm.Device.choose('cpu');
  const unread = () => {
    throw new Error('read was called');
  };
  const huge = [
    ['Device.loadEmbedder, a config of 2^32 + 10 bytes', () => device.loadEmbedder('big', [{ path: 'config.json', size: 2 ** 32 + 10, read: unread }])],
    ['Device.loadEmbedder, weights of 3 GB', () => device.loadEmbedder('big', [{ path: 'model.safetensors', size: 3e9, read: unread }])],
    [
      'Device.loadLm, a checkpoint whose config.json is 3 GB',
      () => device.loadLm('big', [{ path: 'config.json', size: 3e9, read: unread }, { path: 'tokenizer.json', size: 2, read: unread }, { path: 'model.safetensors', size: 8, read: unread }]),
    ],
  ];
  for (const [what, f] of huge) {
    calls += 1;
    try {
      f();
      failures.push(`${what}: loaded`);
    } catch (e) {
      judge(what, e);
      if (e.code !== 'MODEL_LOAD_FAILED' || !/do not fit in this module's memory/.test(e.message)) failures.push(`${what}: ${e.code} ${e.message}`);
    }
  }
  device.free();
}
await finish();

// ---- afterwards, everything still works ------------------------------------------------

async function finish() {
  finished = true;
  const problems = failures.length;
  await stillWorks();
  panicHook();
  if (failures.length) {
    console.error(failures.join('\n'));
    console.error(`wasm bad arguments: ${failures.length} failures (${problems} in ${calls} calls with bad arguments)`);
    process.exit(1);
  }
  console.log(
    `wasm bad arguments: ${calls} calls with bad arguments (${generic.length} more exports with every wrong type in every position${generic.length ? `: ${generic.join(', ')}` : ''}), ` +
      `${errors} threw an Error, none trapped; the module works afterwards; a panic reaches console.error, lastPanic() and the next call (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
}

async function stillWorks() {
  try {
    assert.deepEqual(JSON.parse(wasm.chunkText('One. Two.', 'sentence', 0, 0)).length, 1);
    assert.equal(wasm.htmlToText('<p>still</p>').trim(), 'still');
    assert.ok(lm.tokenize('hello').length > 0);
    assert.equal(JSON.parse(await lm.generate('Hello', '{"max_tokens":2}')).tokens.length, 2);
    assert.deepEqual(Array.from(await lm.greedy(lm.tokenize('Hello'), 2)).length, 2);
    assert.equal((await embedder.embed(['hello'], true)).vectors.length, embedder.dim());
    assert.equal(remoteModel.name(), 'remote:fake-model');
    assert.deepEqual([remoteEmbedder.dim(), remoteEmbedder.precision(), (await remoteEmbedder.embed(['hello'], false)).vectors.length], [4, 'remote', 4]);
    const docs = lib.documents();
    assert.ok(docs.some((d) => d.id === doc.id), 'the document is still there');
    assert.ok((await lib.search('Who brought printing to England?', { embedder, k: 2 })).some((h) => h.text.includes('Caxton')));
    assert.ok(Library.importLibrary(lib.exportLibrary(), embedder).documents().some((d) => d.id === doc.id));
    assert.equal(wasm.lastPanic(), undefined, `no call panicked: ${wasm.lastPanic()}`);
  } catch (e) {
    failures.push(`the module does not work after the bad calls: ${e instanceof WebAssembly.RuntimeError ? 'trapped: ' : ''}${e.message}`);
  }
}

// ---- the panic hook, in a second instance of the module --------------------------------

function panicHook() {
  const bindings = require.resolve(path.resolve(pkgDir, 'docmem_wasm.js'));
  delete require.cache[bindings];
  const second = require(bindings);
  assert.notEqual(second, wasm);
  const logged = [];
  const consoleError = console.error;
  console.error = (...a) => logged.push(a.join(' '));
  let trap = null;
  try {
    second.__panicForTests();
  } catch (e) {
    trap = e;
  } finally {
    console.error = consoleError;
  }
  try {
    assert.ok(trap instanceof WebAssembly.RuntimeError, `a panic traps: ${trap}`);
    assert.match(second.lastPanic(), /panicked at crates.wasm.src.boundary\.rs:\d+:\d+: a panic on purpose, for the tests/);
    assert.deepEqual(logged, [second.lastPanic()], 'the panic went to console.error');
    assert.throws(() => second.chunkText('One. Two.', 'sentence', 0, 0), (e) => e instanceof Error && e.code === 'INTERNAL' && e.message.includes('a panic on purpose'));
    // The first instance is untouched.
    assert.equal(wasm.lastPanic(), undefined);
    assert.equal(JSON.parse(wasm.chunkText('One. Two.', 'sentence', 0, 0)).length, 1);
  } catch (e) {
    failures.push(`the panic hook: ${e.message}`);
}
}
}
