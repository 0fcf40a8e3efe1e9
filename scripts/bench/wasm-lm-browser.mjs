// docmem's wasm CPU backend against wllama (llama.cpp in wasm, npm @wllama/wllama) in the
// same headless Chromium, on the same GGUF files, at 1 and 2 threads: prefill and decode
// tokens per second of each, and the ratios ours / wllama's.
//
//   node scripts/bench/wasm-lm-browser.mjs [--gen-tokens 64] [--prompt-tokens 128]
//        [--models SUBSTR,...] [--threads 1,2] [--case-timeout SECONDS]
// (scripts/bench/wasm-lm-browser.sh installs wllama and checks the packages first.)
// Environment: DOCMEM_CACHE (~/.cache/docmem), DOCMEM_MODELS ($DOCMEM_CACHE/models),
// CHROMIUM (/usr/bin/chromium).
//
// A small static server (every response cross-origin isolated: COOP, COEP, CORP) serves
// the page (scripts/bench/wasm-lm-browser{.html,-page.js,-worker.js}) at /bench/, the
// repo's js/ at /js/, the web wasm packages at /pkg/, /pkg-threads/ and
// /pkg-threads-relaxed/, wllama's esm/ dist at /wllama/ and the model files at /models/
// (the server, the launch options, the argument loop, the model list and the page's run
// are shared with gpu-load-browser.mjs in browser-bench.mjs). Each (engine, model, threads)
// case runs in a fresh page, so no wasm instance or thread of one case outlives it. Before the cases of a
// model, one more page has docmem's tokenizer pick the prompt: a paragraph of English
// repeated to about --prompt-tokens tokens, given to both engines as raw text. How each
// engine's figures are taken is written in wasm-lm-browser-page.js (wllama) and
// wasm-lm-browser-worker.js (docmem).
//
// Output (stdout): one JSON object per case, then a markdown table and the ratio of our
// best (over thread counts) to wllama's best per model and phase (the target is >= 1.2x).
// Progress and errors go to stderr. A failed case is printed with its error and the
// script exits 1 at the end.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { browserLabel, cache, findModels, launchOptions, parseArgs, reporter, root, round, runBenchPage, startServer } from './browser-bench.mjs';

const wllamaDir = path.join(cache, 'bench-node', 'node_modules', '@wllama', 'wllama');

const TARGET = 1.2;

const { die, log } = reporter('wasm-lm-browser');

// ---- arguments
const opts = { genTokens: 64, promptTokens: 128, models: null, threads: [1, 2], caseTimeout: null, engines: ['docmem', 'docmem-relaxed', 'wllama'] };
parseArgs(process.argv.slice(2), {
  die,
  usage: 'usage: wasm-lm-browser.mjs [--gen-tokens N] [--prompt-tokens N] [--models SUBSTR,...] [--threads 1,2] [--engines docmem,docmem-relaxed,wllama] [--case-timeout SECONDS]',
  handle: (a, value, int) => {
    const positive = (v) => int(v, 1, 'a positive integer');
    if (a === '--gen-tokens') opts.genTokens = positive(value());
    else if (a === '--prompt-tokens') opts.promptTokens = positive(value());
    else if (a === '--models') opts.models = value().split(',').filter(Boolean);
    else if (a === '--threads') opts.threads = value().split(',').map(positive);
    else if (a === '--engines') opts.engines = value().split(',');
    else if (a === '--case-timeout') opts.caseTimeout = positive(value());
    else return false;
  },
});

// ---- what to run
for (const [dir, what] of [
  [path.join(cache, 'wasm-pkg-web'), 'the web wasm package'],
  [path.join(cache, 'wasm-pkg-web-threads'), 'the web wasm threads package'],
  ...(opts.engines.includes('docmem-relaxed') ? [[path.join(cache, 'wasm-pkg-web-threads-relaxed'), 'the web wasm threads package with relaxed SIMD']] : []),
  ...(opts.engines.includes('wllama') ? [[path.join(wllamaDir, 'esm'), 'wllama (bash scripts/bench/setup-peers.sh installs it)']] : []),
]) {
  if (!fs.existsSync(dir)) die(`no ${what} in ${dir}`);
}
const models = findModels(opts.models, { log, die });
const wllamaVersion = JSON.parse(fs.readFileSync(path.join(wllamaDir, 'package.json'), 'utf8')).version;

// A case's time limit: a generous bound on load + warm-up + timed run at one thread on a
// 2-core machine (the 1.5B model at one thread takes minutes).
function caseTimeoutMs(model) {
  if (opts.caseTimeout) return opts.caseTimeout * 1000;
  const scale = (opts.promptTokens + opts.genTokens) / 192;
  return Math.round(Math.max(180, (model.size / 1e9) * 600 * Math.max(1, scale)) * 1000);
}

// ---- the server (browser-bench.mjs)
const { server, origin } = await startServer({
  page: 'wasm-lm-browser',
  models,
  mounts: [
    ['/js/', path.join(root, 'js')],
    ['/pkg/', path.join(cache, 'wasm-pkg-web')],
    ['/pkg-threads/', path.join(cache, 'wasm-pkg-web-threads')],
    ['/pkg-threads-relaxed/', path.join(cache, 'wasm-pkg-web-threads-relaxed')],
    ['/wllama/', path.join(wllamaDir, 'esm')],
  ],
});

// ---- the browser
// (playwright's launch() gives the browser a fresh temporary profile of its own)
const browser = await chromium.launch(launchOptions());
const context = await browser.newContext();

// One case in a fresh page. Resolves with {ok, result | error, info, console}.
async function inPage(c, timeoutMs) {
  const page = await context.newPage();
  try {
    return await runBenchPage(page, { url: `${origin}/bench/wasm-lm-browser.html`, c, timeoutMs, readyTimeoutMs: 30000 });
  } finally {
    await page.close().catch(() => {});
  }
}

// Rates from an engine's raw figures.
function rates(r) {
  return {
    prefill_tok_s: r.prompt_tokens / r.prefill_seconds,
    decode_tok_s: r.gen_tokens / r.decode_seconds,
  };
}

const results = []; // {engine, model, threads, ok, ...}
let failed = 0;
let browserInfo = null;

for (const model of models) {
  const modelUrl = `/models/${model.file}`;
  const timeoutMs = caseTimeoutMs(model);
  // The prompt: docmem's tokenizer (the one-thread package) sizes it once for all cases.
  log(`${model.name}: building a ~${opts.promptTokens}-token prompt`);
  const built = await inPage(
    { engine: 'docmem', model: modelUrl, threads: 1, prompt: null, promptTokens: opts.promptTokens, genTokens: opts.genTokens },
    timeoutMs,
  );
  let prompt;
  if (built.ok) {
    prompt = built.result.prompt;
    log(`${model.name}: prompt of ${built.result.tokens} tokens (docmem's tokenizer, no BOS), ${prompt.length} characters`);
  } else {
    // Without docmem's tokenizer: about 0.75 words a token (both engines still get the same text).
    console.error(`[wasm-lm-browser] ${model.name}: docmem could not build the prompt: ${built.error}\n  ${built.console.join('\n  ')}`);
    const words = 'The printing press changed how knowledge moved through Europe.'.split(' ');
    prompt = Array.from({ length: Math.round(opts.promptTokens * 0.75) }, (_, i) => words[i % words.length]).join(' ');
  }
  // Both engines warm up (one generate of 2 tokens, untimed) on the first quarter of the
  // prompt's words: enough tokens for the batched prefill kernels, and cheaper than the
  // whole prompt at one thread on the 1.5B model.
  const words = prompt.split(' ');
  const warmup = words.slice(0, Math.max(8, Math.ceil(words.length / 4))).join(' ');
  for (const threads of opts.threads) {
    for (const engine of opts.engines) {
      log(`${model.name}: ${engine}, ${threads} thread(s)`);
      const c = { engine, model: modelUrl, threads, prompt, warmup, promptTokens: opts.promptTokens, genTokens: opts.genTokens };
      const t0 = Date.now();
      const out = await inPage(c, timeoutMs);
      const base = { engine, model: model.name, threads };
      let row;
      browserInfo = browserInfo || out.info;
      if (out.ok) {
        const r = out.result;
        row = {
          ...base,
          prompt_tokens: r.prompt_tokens,
          gen_tokens: r.gen_tokens,
          ...rates(r),
          prefill_s: r.prefill_seconds,
          decode_s: r.decode_seconds,
          wall_s: r.wall_s,
          load_s: r.load_s,
          ...(engine.startsWith('docmem') ? { wasm_memory_mb: r.wasm_memory_mb, file_mb: r.file_mb } : {}),
          finish: r.finish,
          text: r.text,
        };
        if (engine.startsWith('docmem')) {
          row.thread_stats = r.thread_stats;
          const ts = r.thread_stats || {};
          const bad =
            ts.threads !== threads
              ? `docmem ran ${ts.threads} thread(s), not ${threads}`
              : threads > 1 && !(ts.helperTasks > 0)
                ? 'docmem helper threads ran no tasks'
                : null;
          if (bad) {
            row.ok = false;
            row.error = bad;
          }
        } else {
          row.first_s = r.first_s;
          row.libllama = r.libllama;
          row.wllama = wllamaVersion;
        }
        if (row.ok !== false) row.ok = true;
      } else {
        row = { ...base, ok: false, error: out.error };
      }
      row.case_s = (Date.now() - t0) / 1000;
      if (!row.ok) {
        failed++;
        console.error(`[wasm-lm-browser] FAILED ${engine} ${model.name} ${threads} thread(s): ${row.error}`);
        if (out.console && out.console.length) console.error(`  last console lines:\n  ${out.console.join('\n  ')}`);
      }
      results.push(row);
      const printed = { ...row };
      for (const k of ['prefill_tok_s', 'decode_tok_s']) printed[k] = round(printed[k], 2);
      for (const k of ['prefill_s', 'decode_s', 'wall_s', 'load_s', 'case_s', 'first_s']) printed[k] = round(printed[k], 3);
      console.log(JSON.stringify(printed));
    }
  }
}

await context.close().catch(() => {});
await browser.close().catch(() => {});
server.close();

// ---- the table
const fmt = (x) => (x == null || !Number.isFinite(x) ? '–' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const ratio = (a, b) => (a == null || b == null || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : a / b);
const fmtRatio = (x) => (x == null ? '–' : `${x.toFixed(2)}×`);
const find = (engine, model, threads) => results.find((r) => r.engine === engine && r.model === model && r.threads === threads && r.ok);
const pair = (r) => (r ? `${fmt(r.prefill_tok_s)} / ${fmt(r.decode_tok_s)}` : 'failed');

const lines = [];
lines.push('');
lines.push(
  `docmem (wasm CPU backend) vs wllama ${wllamaVersion} in headless ${browserLabel(browserInfo)}, prompt ~${opts.promptTokens} tokens, ${opts.genTokens} generated, greedy; tokens per second.`,
);
lines.push('');
lines.push('| model | threads | docmem simd128 prefill / decode | docmem relaxed SIMD prefill / decode | wllama prefill / decode | ratio (docmem best build) prefill / decode |');
lines.push('|---|---|---|---|---|---|');
const warnings = [];
// The faster of docmem's two builds for a phase (the package picks the relaxed one where
// the engine has relaxed SIMD).
const better = (a, b, key) => (!a ? b : !b ? a : b[key] > a[key] ? b : a);
for (const model of models) {
  for (const threads of opts.threads) {
    const plain = find('docmem', model.name, threads);
    const relaxed = find('docmem-relaxed', model.name, threads);
    const d = relaxed ?? plain;
    const l = find('wllama', model.name, threads);
    const dp = better(plain, relaxed, 'prefill_tok_s');
    const dd = better(plain, relaxed, 'decode_tok_s');
    lines.push(
      `| ${model.name} | ${threads} | ${pair(plain)} | ${pair(relaxed)} | ${pair(l)} | ${fmtRatio(ratio(dp?.prefill_tok_s, l?.prefill_tok_s))} / ${fmtRatio(ratio(dd?.decode_tok_s, l?.decode_tok_s))} |`,
    );
    if (d && l && d.prompt_tokens !== l.prompt_tokens) {
      warnings.push(`${model.name}, ${threads} thread(s): the prompt was ${d.prompt_tokens} tokens to docmem and ${l.prompt_tokens} to wllama`);
    }
    if (d && l && d.gen_tokens !== l.gen_tokens) {
      warnings.push(`${model.name}, ${threads} thread(s): docmem generated ${d.gen_tokens} tokens and wllama ${l.gen_tokens}`);
    }
    if (d && l && d.text !== l.text) {
      warnings.push(`${model.name}, ${threads} thread(s): the greedy continuations differ (docmem ${JSON.stringify(d.text.slice(0, 60))}…, wllama ${JSON.stringify(l.text.slice(0, 60))}…)`);
    }
  }
}
lines.push('');
for (const model of models) {
  const best = (engine, key) => {
    const rs = results.filter((r) => r.engine === engine && r.model === model.name && r.ok);
    if (!rs.length) return null;
    return rs.reduce((a, b) => (b[key] > a[key] ? b : a));
  };
  const parts = [];
  for (const [phase, key] of [
    ['prefill', 'prefill_tok_s'],
    ['decode', 'decode_tok_s'],
  ]) {
    const d = better(best('docmem', key), best('docmem-relaxed', key), key);
    const l = best('wllama', key);
    const r = ratio(d?.[key], l?.[key]);
    parts.push(
      `${phase} ${fmtRatio(r)} (docmem ${d ? `${fmt(d[key])} at ${d.threads}t` : 'failed'} / wllama ${l ? `${fmt(l[key])} at ${l.threads}t` : 'failed'})` +
        (r == null ? '' : r >= TARGET ? ' meets' : ' below'),
    );
  }
  lines.push(`Best over threads, ours / wllama's, ${model.name}: ${parts.join('; ')} (target >= ${TARGET}×).`);
}
for (const w of warnings) lines.push(`Note: ${w}.`);
if (failed) lines.push(`${failed} case(s) failed (see above).`);
console.log(lines.join('\n'));
process.exit(failed ? 1 : 0);
