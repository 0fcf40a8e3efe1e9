// Speed a user feels in the app, with the server's default models (the 1.5B when
// `npm start` fetched it), on the CPU backend in headless Chromium: first visit to models
// ready (downloaded over localhost into a fresh profile), a ~45 KB article searchable, a
// question's first words and its end (pasted, then another question typed while the page
// reads its answer ahead), an unanswerable question's refusal, the background memory's
// first estimate, and a question over a two-page PDF answered with its page cited
// (screenshot). A benchmark, not a test: it prints JSON and a table.
//
//   node scripts/bench/app-speed.mjs [--shot FILE.png]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const shotAt = process.argv.indexOf('--shot');
const shot = shotAt > 0 ? process.argv[shotAt + 1] : path.join(root, 'tests/browser/out/app-speed.png');
const squad = JSON.parse(fs.readFileSync(path.join(root, '../shared/eval/squad-v2-dev-sample.json'), 'utf8')).data;
const article = squad.find((a) => a.title === 'Yuan_dynasty');
const text = article.paragraphs.map((p) => p.context).join('\n\n');
const question = article.paragraphs.flatMap((p) => p.qas).find((q) => !q.is_impossible);

const server = spawn(process.execPath, [path.join(root, 'scripts/serve.mjs'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => server.kill());
const url = await new Promise((r) => server.stdout.on('data', (d) => (/serving on (http:\S+)/.exec(String(d)) || [])[1] && r(/serving on (http:\S+)/.exec(String(d))[1])));
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'docmem-speed-'));
const context = await chromium.launchPersistentContext(profile, { executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--disable-features=WebGPU,Vulkan', '--no-first-run'], viewport: { width: 1280, height: 1000 } });
const page = context.pages()[0];
const figures = {};
const clock = async (name, f) => {
  const t = performance.now();
  await f();
  figures[name] = Number(((performance.now() - t) / 1000).toFixed(1));
  console.error(`${name}: ${figures[name]} s`);
};
// A question pasted (filled at once), or typed at `typing` ms a character (250: about 48
// words a minute), in which case the page reads its answer ahead during the pauses.
const ask = async (q, typing = 0) => {
  if (typing) {
    await page.fill('#question', '');
    await page.type('#question', q, { delay: typing });
  } else await page.fill('#question', q);
  await page.click('#ask-button');
  await page.waitForFunction(() => /Answered in|Stopped/.test(document.querySelector('#answer-status').textContent), null, { timeout: 20 * 60_000 });
  return page.evaluate(() => ({ answer: document.querySelector('#answer').textContent, first: Number(document.querySelector('#answer-box').dataset.firstToken), end: Number(document.querySelector('#answer-box').dataset.seconds), reused: Number(document.querySelector('#answer-box').dataset.reusedTokens), retrieve: Number(document.querySelector('#answer-box').dataset.retrieveSeconds), prefill: Number(document.querySelector('#answer-box').dataset.prefillSeconds), prompt: Number(document.querySelector('#answer-box').dataset.promptTokens), sources: document.querySelector('#sources').textContent.slice(0, 200) }));
};

await clock('first visit to models ready', async () => {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"], #error:not([hidden])', { timeout: 30 * 60_000 });
});
figures.models = await page.locator('#models').textContent();
figures.backend = await page.locator('#backend').textContent();
await clock(`${(text.length / 1000).toFixed(0)} KB article searchable`, async () => {
  await page.setInputFiles('#files', { name: 'Yuan_dynasty.txt', mimeType: 'text/plain', buffer: Buffer.from(text) });
  await page.locator('#doc-list li[data-id]').first().waitFor({ timeout: 10 * 60_000 });
});
const a = await ask(question.question);
Object.assign(figures, { question: question.question, gold: question.answers[0].text, answer: a.answer, 'first words (s)': a.first, 'answer end (s)': a.end, 'prompt tokens': a.prompt, 'prompt tokens reused': a.reused, 'search (s)': a.retrieve, 'prompt read (s)': a.prefill });
// Another question of the article, typed: first words counted from the click on Ask.
const typed = article.paragraphs.flatMap((p) => p.qas).filter((q) => !q.is_impossible)[1];
const t = await ask(typed.question, 250);
Object.assign(figures, { 'typed question': typed.question, 'typed gold': typed.answers[0].text, 'typed answer': t.answer, 'typed: first words after Ask (s)': t.first, 'typed: answer end (s)': t.end, 'typed: prompt tokens': t.prompt, 'typed: prompt tokens read ahead': t.reused, 'typed: prompt read (s)': t.prefill, 'typing (s)': Number(((typed.question.length * 250) / 1000).toFixed(1)) });
// A question the article does not answer (SQuAD v2's is_impossible), pasted: where the
// answerer's probe reads the passages as not answering, nothing is written and the refusal
// comes once the prompt is read.
const impossible = article.paragraphs.flatMap((p) => p.qas).find((q) => q.is_impossible);
const u = await ask(impossible.question);
Object.assign(figures, { 'unanswerable question': impossible.question, 'unanswerable answer': u.answer, 'unanswerable: answer end (s)': u.end });
// The background memory's first estimate of its time left (after its first window).
await page.waitForFunction(() => /left/.test(document.querySelector('#doc-list').textContent), null, { timeout: 3 * 60_000 }).catch(() => {});
figures['memory progress'] = (await page.locator('#doc-list .doc-memory-text').first().textContent().catch(() => '')) || 'none';
await page.setInputFiles('#files', path.join(root, 'tests/fixtures/pdf/two-pages.pdf'));
await page.locator('#doc-list li[data-id]', { hasText: 'two-pages' }).waitFor({ timeout: 10 * 60_000 });
const b = await ask('When was the Gutenberg Bible printed?');
Object.assign(figures, { 'pdf answer': b.answer, 'pdf sources': b.sources, 'pdf first words (s)': b.first });
await page.screenshot({ path: shot, fullPage: true });
console.log(JSON.stringify(figures, null, 1));
for (const [k, v] of Object.entries(figures)) console.log(`| ${k} | ${String(v).replace(/\s+/g, ' ').slice(0, 140)} |`);
await context.close();
fs.rmSync(profile, { recursive: true, force: true });
process.exit(0);
