// Answers as a user of the page gets them: the same questions `docmem eval answers` asked,
// asked again through the app in headless Chromium (CPU backend, the server's default
// models, background memories off so the library holds the same sentence chunks as the
// CLI's), scored with SQuAD's EM and F1 exactly as the CLI scores them, and printed beside
// the CLI's figures from the same JSON lines. An evaluation, not a test.
//
//   docmem eval answers --split test ... --out test.jsonl       # picks and answers them
//   node scripts/eval/page-answers.mjs test.jsonl [--limit N] [--out page.jsonl]
//   node scripts/eval/page-answers.mjs test.jsonl --skip 40 --out page.jsonl  # go on after a stop
//   node scripts/eval/page-answers.mjs --rescore page.jsonl                 # its figures again
//
// The questions are the CLI run's `ours` rows (their ids, in its order); `--limit N` asks an
// even spread of N of them, keeping the answerable/unanswerable mix.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const arg = (name, fallback) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : fallback);
const readRows = (file) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const rescore = arg('--rescore', null);
const cliRows = rescore ? [] : readRows(process.argv[2]).filter((r) => r.method === 'ours');
if (!rescore && cliRows.length === 0) throw new Error(`${process.argv[2]}: no "ours" rows of docmem eval answers`);
const data = arg('--data', path.join(root, '../shared/eval/squad-v2-dev-sample.json'));
const outPath = arg('--out', null);
const limit = Number(arg('--limit', cliRows.length));

// SQuAD's answer normalisation and scores, as docmem_core::eval has them.
const PUNCT = /[!-\/:-@[-`{-~‘’“”–—…，。、；：？！（）《》]/gu;
const normalize = (s) => s.toLowerCase().replace(PUNCT, ' ').split(/\s+/).filter((w) => w && !['a', 'an', 'the'].includes(w)).join(' ');
const withoutCitations = (s) => s.replace(/\[[\d,，\s]+\]/g, '').replace(/\s+/g, ' ').trim();
const exactMatch = (p, golds) => (golds.some((g) => normalize(g) === normalize(p)) ? 1 : 0);
const f1 = (p, golds) => Math.max(0, ...golds.map((g) => {
  const pt = normalize(p).split(' ').filter(Boolean);
  const gt = normalize(g).split(' ').filter(Boolean);
  if (!pt.length || !gt.length) return pt.length === gt.length ? 1 : 0;
  const pool = [...gt];
  let common = 0;
  for (const w of pt) {
    const i = pool.indexOf(w);
    if (i >= 0) { pool.splice(i, 1); common += 1; }
  }
  if (!common) return 0;
  const precision = common / pt.length;
  const recall = common / gt.length;
  return (2 * precision * recall) / (precision + recall);
}));
const refused = (a) => /not in the documents|don't know|do not know/i.test(a) || !a.trim();

/** The scores of the page's answer `text` to question `q` (its golds), as the CLI scores its own. */
const scores = (q, text) => {
  const answer = withoutCitations(text);
  return {
    refused: refused(answer),
    exact_match: q.answerable ? exactMatch(answer, q.golds) : 0,
    f1: q.answerable ? f1(answer, q.golds) : 0,
    contains_gold: q.answerable && q.golds.some((g) => normalize(answer).includes(normalize(g))),
  };
};

/** The figures of `rows`, the page's and the CLI's (each row's `cli`) on the same questions, as JSON and a table. */
function report(rows, models) {
  // The run's figures, from each row's own scores (`cli`: the CLI's answer to the same question).
  const figures = (rs, get) => {
    const mean = (xs) => (xs.length ? xs.reduce((sum, x) => sum + x, 0) / xs.length : 0);
    const a = rs.filter((r) => r.answerable);
    const u = rs.filter((r) => !r.answerable);
    return {
      answerable: a.length,
      em: mean(a.map((r) => get(r).exact_match)),
      f1: mean(a.map((r) => get(r).f1)),
      answerable_refused: mean(a.map((r) => +get(r).refused)),
      unanswerable: u.length,
      unanswerable_refused: mean(u.map((r) => +get(r).refused)),
    };
  };
  // A withheld answer (nothing streamed; rows of an older page give 0) shows its refusal at the end.
  const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;
  const page_ = figures(rows, (r) => r);
  const cli = figures(rows, (r) => r.cli);
  const timing = { median_first_words_seconds: median(rows.map((r) => r.first_words_seconds || r.seconds)), median_answer_seconds: median(rows.map((r) => r.seconds)) };
  console.log(JSON.stringify({ models, page: { ...page_, ...timing }, cli }));
  const line = (name, f, first) => `| ${name} | ${f.answerable} | ${f.em.toFixed(2)} | ${f.f1.toFixed(2)} | ${Math.round(100 * f.answerable_refused)}% | ${f.unanswerable} | ${Math.round(100 * f.unanswerable_refused)}% | ${first} |`;
  console.log('| method | answerable | EM | F1 | answerable refused | unanswerable | unanswerable refused | median first words (s) |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  console.log(line('ours, in the page', page_, timing.median_first_words_seconds.toFixed(0)));
  console.log(line('ours, `docmem eval answers` (same questions)', cli, ''));
}

// --rescore page.jsonl: a run's rows scored again (a run stopped early, or rows written before
// the page's notes were left out of the answer's text).
const withoutNotes = (s) => s.replace(/\s*\((?:the passages the answer cited do not hold its words; these do|the documents do not say|an answer was written, but the passages read do not support it)\)/g, '');
if (rescore) {
  const rows = readRows(rescore).filter((r) => r.method === 'page').map((r) => ({ ...r, answer: withoutNotes(r.answer), ...scores(r, withoutNotes(r.answer)) }));
  report(rows, '(rescored)');
  process.exit(0);
}

// An even spread of `n` rows of each kind, as the CLI spreads its questions.
const spread = (rows, n) => (n >= rows.length ? rows : Array.from({ length: n }, (_, i) => rows[Math.floor((i * rows.length) / n)]));
const answerableRows = cliRows.filter((r) => r.answerable);
const unanswerableRows = cliRows.filter((r) => !r.answerable);
const nAnswerable = Math.round((limit * answerableRows.length) / cliRows.length);
// Interleaved, so that a run stopped early (its rows are written as they come) still holds both kinds.
const interleave = (xs, ys) => Array.from({ length: Math.max(xs.length, ys.length) }, (_, i) => [xs[i], ys[i]]).flat().filter(Boolean);
// --skip N: leave out the first N (those a stopped run asked already; append with the same --out).
const asked = interleave(spread(answerableRows, nAnswerable), spread(unanswerableRows, limit - nAnswerable)).slice(Number(arg('--skip', 0)));

const articles = JSON.parse(fs.readFileSync(data, 'utf8')).data;
const files = articles.map((a) => ({ name: `${a.title}.txt`, mimeType: 'text/plain', buffer: Buffer.from(a.paragraphs.map((p) => p.context).join('\n\n')) }));

const { chromium } = await import('playwright-core'); // not needed to --rescore
const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => server.kill());
const url = await new Promise((resolve) => server.stdout.on('data', (d) => {
  const m = /serving on (http:\S+)/.exec(String(d));
  if (m) resolve(m[1]);
}));
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-page-eval-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--disable-features=WebGPU,Vulkan', '--no-first-run'],
});
await context.addInitScript(() => localStorage.setItem('docmem-memories', 'off'));
const page = context.pages()[0];
await page.goto(url);
await page.waitForSelector('body[data-ready="true"], #error:not([hidden])', { timeout: 30 * 60_000 });
const models = await page.locator('#models').textContent();
console.error(`page ready: ${models}; adding ${files.length} articles`);
await page.setInputFiles('#files', files);
await page.waitForFunction((n) => document.querySelectorAll('#doc-list li[data-id]').length >= n, files.length, { timeout: 60 * 60_000 });

const out = outPath ? fs.openSync(outPath, 'a') : null;
const rows = [];
for (const [i, q] of asked.entries()) {
  await page.fill('#question', q.question);
  await page.click('#ask-button');
  await page.waitForFunction(() => /Answered in|Stopped|failed/i.test(document.querySelector('#answer-status').textContent), null, { timeout: 20 * 60_000 });
  const got = await page.evaluate(() => ({
    // The answer as written, without the page's own notes beside it (muted spans such as
    // "(the documents do not say)"), which are not the model's words.
    answer: [...document.querySelector('#answer').childNodes].filter((n) => !n.classList?.contains('muted')).map((n) => n.textContent).join(''),
    first: Number(document.querySelector('#answer-box').dataset.firstToken),
    seconds: Number(document.querySelector('#answer-box').dataset.seconds),
  }));
  const row = {
    method: 'page',
    id: q.id,
    question: q.question,
    answerable: q.answerable,
    golds: q.golds,
    answer: got.answer,
    ...scores(q, got.answer),
    first_words_seconds: got.first,
    seconds: got.seconds,
    cli: { answer: q.answer, exact_match: q.exact_match, f1: q.f1, refused: q.refused },
  };
  rows.push(row);
  if (out !== null) fs.writeSync(out, `${JSON.stringify(row)}\n`);
  console.error(`page ${i + 1}/${asked.length}: ${JSON.stringify(got.answer.slice(0, 100))} (gold ${JSON.stringify(q.golds[0] ?? null)}) first words ${got.first} s, end ${got.seconds} s`);
}

report(rows, models);
await context.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(0);
