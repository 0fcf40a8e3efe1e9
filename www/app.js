// The docmem web app: drop documents, watch their memories being written, ask, follow
// citations. All work happens in the DocMem worker; this file only draws. Document text
// and model output are put on the page with textContent, never as HTML.
//
// Hosted models are off unless the user applies them in the "Hosted models" panel; while
// any role is hosted, a notice under the engine line says what leaves the device and where
// it goes. Those settings, token included, live in sessionStorage only (this tab).
import { DocMem } from '/js/docmem.js';

const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'text') node.textContent = v;
    else if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
};
const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;
const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const size = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : n >= 1e6 ? mb(n) : `${Math.max(n / 1e3, n > 0 ? 0.1 : 0).toFixed(1)} kB`);
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

let dm = null;
const memories = new Map(); // doc id → memory (with text)
let shown = null; // the document in the view
let hosted = null; // the hosted models in use: DocMem's `remote` option, or null
let readyLabel = ''; // the model line once the models are loaded (put back after a restart)

function showError(e) {
  const box = $('error');
  box.textContent = e && e.code ? `${e.message} (${e.code})` : String(e && e.message ? e.message : e);
  box.hidden = false;
}
function clearError() {
  $('error').hidden = true;
}

/** What the header of the model file the user chose last said (`stage: 'model'`). */
let chosenModelLine = null;

function modelProgress(p) {
  const bar = $('model-progress');
  const label = $('model-label');
  // Loaded already: the worker is starting again (a cancelled add ended it, or it failed).
  if (document.body.dataset.ready === 'true') {
    label.textContent = p.stage === 'loading' && p.fraction === 1 ? readyLabel : 'Starting the engine again (the models reload from this browser\u2019s cache)…';
    return;
  }
  if (p.stage === 'download') {
    bar.value = p.fraction;
    label.textContent = `Models: ${mb(p.loaded)} of ${mb(p.total)}`;
  } else if (p.stage === 'keeping') {
    bar.value = p.fraction;
    label.textContent = `Keeping ${p.model} in this browser for next time: ${mb(p.loaded)} of ${mb(p.total)}`;
  } else if (p.stage === 'rebuilding') {
    bar.value = p.fraction;
    label.textContent = `Rebuilding the library: adding ${p.document}…`;
  } else if (p.stage === 'loading') {
    bar.removeAttribute('value');
    label.textContent = 'Loading the models into the engine…';
  } else if (p.stage === 'model') {
    // A file the user chose, as its header describes it (refused next if it cannot run).
    chosenModelLine = p.line;
    $('model-picker-status').textContent = `${p.model}: ${p.line}`;
  }
}

// ---- documents -------------------------------------------------------------------

const notes = new Map(); // doc id → what adding it said this session ("added in 1.2 s")
let addController = null; // aborts every add in flight (the Cancel button)
let addsInFlight = 0;
let lastAddSettled = 0; // when the last add finished: the worker starts the next one then
const cancelledTitles = [];

/** The title a file gets: its name without the extension ("printing-press.md" → "printing-press"). */
const titleOf = (name) => name.replace(/\.[^./\\]{1,10}$/, '') || name;

function docItem(d) {
  const how = d.fallback ? `${d.reader}; fell back to sentence chunks` : d.reader;
  const note = notes.get(d.id);
  return el(
    'li',
    { class: 'doc', dataset: { id: d.id } },
    el('button', { type: 'button', class: 'link doc-open', text: d.title, onclick: () => openDocument(d.id) }),
    el('span', {
      class: 'muted doc-meta',
      text: `${plural(d.chunks, 'chunk')} · ${how}${d.collection !== 'default' ? ` · in ${d.collection}` : ''}${note ? ` · ${note}` : ''}`,
    }),
    memoryLine(d),
    el('button', {
      type: 'button',
      class: 'icon secondary',
      'aria-label': `Remove ${d.title}`,
      title: `Remove ${d.title}`,
      text: '×',
      onclick: () => removeDocument(d),
    }),
  );
}

// ---- memories in the background ----------------------------------------------------
// A document goes in with sentence chunks (searchable at once); then, unless the setting
// is off, the reader writes its memory in the background (DocMem.writeMemory), one
// document at a time, and it replaces the chunks when done. A document whose memory is
// still chunks is queued again when the page opens, so pending memories resume after a
// reload; one whose memory the user cancelled is not (remembered in localStorage).
//
// Whether they are written by default depends on the model and this device: on only when
// held-out articles showed the model's memories answering better than sentence chunks
// (the manifest's `memories` for the model) and this device writes one within the target
// (5 minutes for a 20 KB document), measured here from a memory it wrote (the model's
// decoding speed alone gives only a lower bound, which is shown but turns nothing on).
// Otherwise off by default, and the page says what a memory would cost here and what it
// gives. The user's own choice, once made, is kept.

const MEMORIES_KEY = 'docmem-memories'; // localStorage: 'background' | 'off' (the user's choice)
const MEMORY_COST_KEY = 'docmem-memory-cost'; // localStorage: {"<model id>|<backend>": seconds per 1,000 document tokens}
// A 20 KB article is about 4,100 tokens; the 1.5B wrote 3,900 tokens of memory for one
// (docs/benchmarks.md, "Writing a memory"); the page's target for it is 5 minutes.
const ARTICLE_TOKENS = 4100;
const MEMORY_TOKENS_WRITTEN = 3900;
const MEMORY_TARGET_MINUTES = 5;
const DECLINED_KEY = 'docmem-memory-declined'; // localStorage: ids whose memory was cancelled
const CHUNKERS = new Set(['sentence', 'fixed', 'recursive', 'semantic']);
const memoryJobs = new Map(); // doc id → {controller, text, declined}
let memoriesPaused = false;

const readJson = (key, fallback) => {
  try {
    return JSON.parse(localStorage.getItem(key)) ?? fallback;
  } catch {
    return fallback;
  }
};
const duration = (s) => (s >= 120 ? `${Math.round(s / 60)} min` : `${Math.max(1, Math.round(s))} s`);
const memoryFailed = new Set(); // ids whose memory failed this visit: not tried again until a reload
const needsMemory = (d) => CHUNKERS.has(d.reader) && !d.memoryVersion && !memoryFailed.has(d.id) && !readJson(DECLINED_KEY, []).includes(d.id);

/** The row's line about its background memory, with its Cancel button, or nothing. */
function memoryLine(d) {
  const job = memoryJobs.get(d.id);
  if (!job) return null;
  return el(
    'span',
    { class: 'muted doc-memory' },
    el('span', { class: 'doc-memory-text', text: job.text }),
    el('button', { type: 'button', class: 'link', text: 'Cancel memory', onclick: () => cancelMemory(d.id) }),
  );
}

function showMemoryLine(id) {
  const line = $('doc-list').querySelector(`li[data-id="${CSS.escape(id)}"] .doc-memory-text`);
  if (line) line.textContent = memoryJobs.get(id)?.text ?? '';
}

function memoryText(p) {
  const part = p.windows > 1 ? `part ${p.window} of ${p.windows}, ` : '';
  const left = p.secondsLeft ? `, about ${duration(p.secondsLeft)} left` : '';
  // Within a part (minutes on a CPU): how far its prompt is read, then what is written.
  const within = !p.windowPrompt
    ? ''
    : p.windowWritten > 0
      ? `; this part: ${p.windowWritten.toLocaleString()} tokens written`
      : `; this part: ${p.windowRead.toLocaleString()} of ${p.windowPrompt.toLocaleString()} prompt tokens read`;
  return `Memory: ${part}${Math.round(p.fraction * 100)}% of ${p.tokensTotal.toLocaleString()} tokens${left}${within}`;
}

function updateMemoryControls() {
  const n = memoryJobs.size;
  $('memory-controls').hidden = n === 0;
  $('memory-status').textContent = n === 0 ? '' : `${plural(n, 'memory')} to write${memoriesPaused ? ', paused' : ' in the background'}`.replace('memorys', 'memories');
  $('pause-memories').textContent = memoriesPaused ? 'Resume memories' : 'Pause memories';
}

/** What a 20 KB document's memory costs with the model in use on this device, in minutes
 * and words: measured from a memory written here, else bounded below by the model's
 * decoding speed measured here, else unknown (minutes null). */
function memoryCost() {
  const key = speedKey(choice?.id);
  const perK = readJson(MEMORY_COST_KEY, {})[key];
  if (perK > 0) {
    const minutes = (perK * ARTICLE_TOKENS) / 1000 / 60;
    return { minutes, measured: true, text: `about ${minutes.toFixed(minutes < 10 ? 1 : 0)} min per 20 KB document on this device (measured here)` };
  }
  const speed = readJson(SPEED_KEY, {})[key];
  if (speed?.tokensPerSecond > 0) {
    const minutes = MEMORY_TOKENS_WRITTEN / speed.tokensPerSecond / 60;
    return { minutes, measured: false, text: `at least ${Math.ceil(minutes)} min per 20 KB document on this device (about ${MEMORY_TOKENS_WRITTEN.toLocaleString()} tokens written at the ${speed.tokensPerSecond.toFixed(1)} tokens/s measured here)` };
  }
  return { minutes: null, measured: false, text: 'a time not yet measured on this device (an answer measures the model\u2019s speed)' };
}

/** Whether memories are written in the background by default here, and why, in words:
 * what they give and what one costs on this device. */
function memoryDefault() {
  const known = choice?.memories;
  const cost = memoryCost();
  const gives = known ? known.evidence : 'this model\u2019s memories have not been measured against sentence chunks';
  const on = Boolean(known?.pays && cost.measured && cost.minutes <= MEMORY_TARGET_MINUTES);
  return { on, facts: `${gives}; a memory ${on ? 'takes' : 'would take'} ${cost.text}.` };
}

/** Set the memories setting to the user's choice, or else to this model's and device's
 * default, and show why; when that changes the setting, act on it as a change would. */
function applyMemoryDefault() {
  const stored = localStorage.getItem(MEMORIES_KEY);
  const chosen = stored === 'off' || stored === 'background' ? stored : null;
  const rule = memoryDefault();
  const setting = $('memories');
  const before = setting.value;
  setting.value = chosen ?? (rule.on ? 'background' : 'off');
  const byDefault = rule.on ? 'on' : 'off';
  $('memories-why').textContent = chosen
    ? `Your choice (${byDefault} by default here: ${rule.facts})`
    : rule.on
      ? `On by default: ${rule.facts}`
      : `Off by default: ${rule.facts} Choose \u201cWritten in the background\u201d to write them anyway.`;
  if (setting.value !== before) memorySettingChanged();
}

/** Act on the memories setting: stop the memories being written, or queue those pending. */
async function memorySettingChanged() {
  if ($('memories').value === 'off') for (const job of memoryJobs.values()) job.controller.abort();
  else if (dm) await refreshDocuments();
}

/** Have the reader write document `d`'s memory in the background, when it needs one. */
function queueMemory(d) {
  if ($('memories').value !== 'background' || memoryJobs.has(d.id) || !needsMemory(d) || dm.remote?.roles.reader) return;
  const job = { controller: new AbortController(), text: 'Memory: waiting for the reader…', declined: false };
  memoryJobs.set(d.id, job);
  updateMemoryControls();
  const owner = dm;
  dm.writeMemory(d.id, {
    signal: job.controller.signal,
    onProgress: (p) => {
      job.text = memoryText(p);
      // A memory resumed after a reload reports the whole document but times only this
      // visit's windows: its cost counts the tokens read from here on.
      job.tokensFrom ??= p.tokensDone;
      job.tokensRead = p.tokensTotal - job.tokensFrom;
      showMemoryLine(d.id);
    },
  })
    .then((r) => {
      memories.delete(d.id);
      if (r.replaced) notes.set(d.id, `memory written in ${duration(r.seconds)}${r.fallback ? ' (the reader fell back to sentence chunks)' : ''}`);
      if (r.replaced && job.tokensRead > 0 && r.seconds > 0) {
        const costs = readJson(MEMORY_COST_KEY, {});
        costs[speedKey(choice?.id)] = (r.seconds * 1000) / job.tokensRead;
        localStorage.setItem(MEMORY_COST_KEY, JSON.stringify(costs));
        applyMemoryDefault();
      }
      memoryJobs.delete(d.id);
      if (r.document) listDocument(r.document);
      if (shown === d.id) openDocument(d.id);
    })
    .catch((e) => {
      memoryJobs.delete(d.id);
      if (e.code === 'CLOSED' || owner !== dm) return; // the engine restarted: queued again when it lists the library
      if (e.code !== 'ABORTED') memoryFailed.add(d.id);
      notes.set(d.id, e.code === 'ABORTED' ? (job.declined ? 'memory cancelled: its sentence chunks are kept' : 'memory stopped') : `memory not written: ${e.message}`);
      listDocument(d);
    })
    .finally(updateMemoryControls);
}

function cancelMemory(id) {
  const job = memoryJobs.get(id);
  if (!job) return;
  job.declined = true;
  localStorage.setItem(DECLINED_KEY, JSON.stringify([...new Set([...readJson(DECLINED_KEY, []), id])]));
  job.controller.abort();
}

/** Put document `d` in the list (replacing its row if it has one), above the files still being added. */
function listDocument(d) {
  const list = $('doc-list');
  // Queued first, so the row is drawn with its memory line.
  if (!memoryJobs.has(d.id) && needsMemory(d)) queueMemory(d);
  const row = docItem(d);
  const old = list.querySelector(`li[data-id="${CSS.escape(d.id)}"]`);
  if (old) old.replaceWith(row);
  else list.insertBefore(row, list.querySelector('li:not([data-id])'));
  $('no-docs').hidden = true;
}

async function refreshDocuments() {
  const docs = await dm.documents();
  const list = $('doc-list');
  for (const li of [...list.querySelectorAll('li[data-id]')]) li.remove();
  for (const d of docs) listDocument(d);
  $('no-docs').hidden = list.querySelector('li') !== null;
  // The search picker: every collection, the router, or one collection.
  const route = $('route');
  const chosen = route.value;
  for (const o of [...route.querySelectorAll('option[data-collection]')]) o.remove();
  for (const c of await dm.collections()) {
    route.append(el('option', { value: c.name, dataset: { collection: c.name }, text: `only ${c.name} (${c.documents})` }));
  }
  route.value = [...route.options].some((o) => o.value === chosen) ? chosen : '';
}

const STAGES = { reading: 'Reading', candidates: 'Scoring candidates', indexing: 'Indexing', download: 'Downloading' };

function addStatus(text) {
  $('add-status').textContent = text;
  $('add-status').hidden = !text;
}

/**
 * Add `files` one after another (the worker serves one request at a time). Each is listed
 * as soon as it is stored, so searchable, with the time it took; Cancel stops the rest.
 */
function addFiles(files) {
  if (files.length === 0) return;
  clearError();
  addStatus('');
  // Searchable at once with sentence chunks; the reader's memory follows in the background.
  const method = 'sentence';
  const collection = $('collection').value.trim() || 'default';
  addController ??= new AbortController();
  const { signal } = addController;
  $('cancel-add').hidden = false;
  $('cancel-add').disabled = false;
  for (const file of files) {
    const title = titleOf(file.name);
    const bar = el('progress', { max: '1', 'aria-label': `Memory of ${title}` });
    const status = el('span', { class: 'muted', text: 'waiting…' });
    const item = el('li', { class: 'doc pending' }, el('span', { class: 'doc-title', text: title }), status, bar);
    $('doc-list').append(item);
    $('no-docs').hidden = true;
    const queued = performance.now();
    addsInFlight += 1;
    dm.addDocument(file, {
      title,
      method,
      collection,
      signal,
      onProgress: (p) => {
        // A chunker's indexing reports only its start and end: no percentage to show.
        if (p.stage === 'indexing' && p.fraction === 0) {
          bar.removeAttribute('value');
          status.textContent = 'Indexing…';
          return;
        }
        bar.value = p.fraction;
        const where = p.stage === 'reading' && p.windows > 1 ? ` (part ${p.window} of ${p.windows})` : '';
        status.textContent = `${STAGES[p.stage] || p.stage}${where} ${Math.round(p.fraction * 100)}%`;
      },
    })
      .then((r) => {
        // Its own time: from when the worker took it up (the previous add ended) to now.
        const took = performance.now() - Math.max(queued, lastAddSettled);
        item.remove();
        notes.set(r.id, r.added ? `added in ${secs(took)}` : 'already in the library');
        if (r.document) listDocument(r.document);
      })
      .catch((e) => {
        if (e.code === 'ABORTED') {
          item.remove();
          cancelledTitles.push(title);
          return;
        }
        status.textContent = `not added: ${e.message}`;
        item.classList.add('failed');
        if (e.code) item.dataset.code = e.code;
        bar.remove();
      })
      .finally(() => {
        lastAddSettled = performance.now();
        addsInFlight -= 1;
        if (addsInFlight === 0) addsSettled();
      });
  }
}

/** Every add has settled: say what a cancel left out, and list the library as stored. */
async function addsSettled() {
  addController = null;
  $('cancel-add').hidden = true;
  if (cancelledTitles.length) {
    const names = cancelledTitles.splice(0);
    const which = names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ');
    addStatus(`Cancelled: ${which} ${names.length === 1 ? 'was' : 'were'} not added; nothing of ${names.length === 1 ? 'it' : 'them'} is stored.`);
  }
  if (!dm || document.body.dataset.ready !== 'true') return; // closed (hosted models applied): openDocMem lists the library
  try {
    await refreshDocuments(); // after the engine has started again, when a cancel ended it
    if (document.body.dataset.ready === 'true') $('model-label').textContent = readyLabel;
    readInstructions();
    await showStorage();
  } catch (e) {
    if (e.code !== 'CLOSED') showError(e);
  }
}

function cancelAdding() {
  if (!addController) return;
  addController.abort();
  $('cancel-add').disabled = true;
  addStatus('Cancelling…');
}

async function removeDocument(d) {
  clearError();
  const sure = await confirmDialog({
    title: `Remove ${d.title}?`,
    text: `Its memory (${plural(d.chunks, 'chunk')}) is deleted from this library, and answers no longer draw on it. Your file is not touched: adding it again writes the memory anew.`,
    yes: 'Remove',
    no: 'Keep',
  });
  if (!sure) return;
  try {
    await dm.removeDocument(d.id);
    memories.delete(d.id);
    notes.delete(d.id);
    if (shown === d.id) $('doc-view').hidden = true;
    await refreshDocuments();
    await showStorage();
  } catch (e) {
    showError(e);
  }
}

// ---- asking first ----------------------------------------------------------------

/**
 * Ask before something is lost, in the page's own dialog: resolves true when the user
 * chooses `yes`, false on `no`, Escape or a click outside it. The safe choice has focus.
 */
function confirmDialog({ title, text, yes, no = 'Cancel' }) {
  const dialog = $('confirm');
  $('confirm-h').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-yes').textContent = yes;
  $('confirm-no').textContent = no;
  dialog.returnValue = '';
  dialog.showModal();
  $('confirm-no').focus();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true }));
}

// ---- storage ---------------------------------------------------------------------

/**
 * What this page keeps in the browser: the models (the model cache's files in the Origin
 * Private File System, as model-cache.js counts them, plus any an older docmem kept in the
 * Cache API's docmem-models), the library (IndexedDB, from navigator.storage.estimate()'s
 * usageDetails where the browser gives them, else the rest of its usage) and the app's
 * own files (the service worker's cache), against the quota the browser allows.
 */
async function showStorage() {
  await measureStorage();
  // The browser counts a write a moment after it is done: look again shortly.
  clearTimeout(storageAgain);
  storageAgain = setTimeout(measureStorage, 2000);
}
let storageAgain = 0;

async function measureStorage() {
  const out = $('storage');
  if (!navigator.storage?.estimate) {
    out.textContent = 'not reported by this browser';
    return;
  }
  try {
    const estimate = await navigator.storage.estimate();
    let models = 0;
    let app = 0;
    try {
      const { storedModelBytes } = await import('/js/model-cache.js');
      if (storedModelBytes) models += await storedModelBytes();
    } catch {
      // No OPFS count: the Cache API's entries below are what there is.
    }
    if (globalThis.caches) {
      for (const name of await caches.keys()) {
        const cache = await caches.open(name);
        let bytes = 0;
        for (const request of await cache.keys()) {
          const response = await cache.match(request);
          if (response) bytes += (await response.blob()).size;
        }
        if (name.startsWith('docmem-models')) models += bytes;
        else app += bytes;
      }
    }
    const details = estimate.usageDetails;
    const library = details && details.indexedDB !== undefined ? details.indexedDB : Math.max(0, estimate.usage - models - app);
    // Asked once, before the worker started (DocMem.open): whether the browser keeps it all.
    const kept = navigator.storage.persisted ? await navigator.storage.persisted() : Boolean(dm?.persistence?.granted);
    out.textContent = `models ${size(models)} · library ${size(library)} · app ${size(app)} (of ${size(estimate.quota)} this browser allows) · ${kept ? 'kept (persistent)' : 'may be evicted'}`;
    out.title = `Models: the model cache (the Origin Private File System). Library: IndexedDB (every library of this page). App: the files kept for offline use. ${
      kept ? 'The browser keeps them under storage pressure (persistent storage granted).' : 'The browser may evict them under storage pressure (persistent storage not granted).'
    }`;
  } catch (e) {
    out.textContent = `not known (${e.message})`;
  }
}

// ---- the document view -----------------------------------------------------------

async function memoryOf(id) {
  if (!memories.has(id)) memories.set(id, await dm.memory(id));
  return memories.get(id);
}

/**
 * A stretch of a document's text as nodes: each form feed (a PDF's page mark) is drawn as
 * a page separator ("p. 2", from CSS, so the view's text is the document's without the
 * form feeds), not as the character. `pages` counts the form feeds before the stretch.
 */
function textWithPages(text, pages) {
  const nodes = [];
  text.split('\f').forEach((piece, i) => {
    if (i > 0) {
      pages.count += 1;
      const page = pages.count + 1;
      nodes.push(el('span', { class: 'page-break', role: 'separator', 'aria-label': `Page ${page}`, dataset: { page: String(page) } }));
    }
    if (piece) nodes.push(document.createTextNode(piece));
  });
  return nodes;
}

/**
 * The document's text, drawn once: it is cut at every chunk's start and end (and the
 * cited span's), and each stretch is one <span> shaded by the chunks that hold it, so the
 * text two neighbouring chunks share (sentence chunks overlap) is drawn once, marked as
 * shared, rather than once per chunk. `cite` (a span) is inside one <mark>. A paged
 * document's (a PDF's) page boundaries are drawn as separators.
 */
function renderText(m, cite) {
  const box = $('doc-text');
  box.replaceChildren();
  const end = m.text.length;
  const clamp = (x) => Math.max(0, Math.min(end, x));
  const spans = m.scenarios.map((s) => ({ start: clamp(s.span.start), end: clamp(s.span.end) }));
  const range = cite ? { start: clamp(cite.start), end: clamp(cite.end) } : null;
  const cuts = new Set([0, end]);
  for (const s of spans) cuts.add(s.start).add(s.end);
  if (range) cuts.add(range.start).add(range.end);
  const at = [...cuts].sort((x, y) => x - y);
  const anchored = new Set();
  const pages = { count: 0 }; // form feeds drawn so far
  let mark = null;
  for (let k = 0; k + 1 < at.length; k++) {
    const [from, to] = [at[k], at[k + 1]];
    const chunks = [];
    spans.forEach((s, i) => {
      if (s.start <= from && to <= s.end) chunks.push(i);
    });
    const part = el(
      'span',
      { class: chunks.length === 0 ? 'gap' : chunks.length === 1 ? `chunk c${chunks[0] % 2}` : 'chunk shared' },
      ...textWithPages(m.text.slice(from, to), pages),
    );
    if (chunks.length) {
      part.dataset.chunks = chunks.join(' ');
      part.title = chunks.length === 1 ? `Chunk ${chunks[0] + 1}` : `Shared by chunks ${chunks.map((i) => i + 1).join(' and ')}`;
    }
    // Where each chunk begins: the outline's links scroll there.
    const starting = chunks.filter((i) => !anchored.has(i));
    starting.forEach((i) => anchored.add(i));
    const anchors = starting.slice(1).map((i) => el('span', { id: `chunk-${i}` }));
    if (starting.length) part.id = `chunk-${starting[0]}`;
    const inCite = range && from >= range.start && to <= range.end && range.end > range.start;
    let into = box;
    if (inCite) {
      if (!mark) {
        mark = el('mark', { id: 'cited', class: 'cited', tabindex: '-1' });
        box.append(mark);
      }
      into = mark;
    }
    into.append(...anchors, part);
  }
  return mark;
}

function renderOutline(m) {
  const tree = $('outline');
  tree.replaceChildren();
  const jump = (i) => () => {
    const target = document.getElementById(`chunk-${i}`);
    if (!target) return;
    target.scrollIntoView({ block: 'center', behavior: 'smooth' });
    const parts = document.querySelectorAll(`#doc-text [data-chunks~="${i}"]`);
    for (const p of parts) p.classList.add('flash');
    setTimeout(() => parts.forEach((p) => p.classList.remove('flash')), 1200);
  };
  const chunkItem = (s, i) =>
    el(
      'li',
      {},
      el('button', { type: 'button', class: 'link', text: `Chunk ${i + 1}`, onclick: jump(i) }),
      s.core ? el('p', { class: 'core', text: s.core }) : el('p', { class: 'core muted', text: m.text.slice(s.span.start, Math.min(s.span.end, s.span.start + 90)).replace(/\f/g, ' ').trim() + '…' }),
    );
  const groups = new Map();
  m.scenarios.forEach((s, i) => {
    const key = s.outlineItem ?? -1;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(chunkItem(s, i));
  });
  m.outline.forEach((item, k) => {
    const chunks = groups.get(k) || [];
    tree.append(el('li', {}, el('details', { open: '' }, el('summary', { text: item }), el('ul', {}, ...chunks))));
  });
  if (groups.has(-1)) {
    const label = m.outline.length ? 'Not under an outline item' : 'Chunks (no outline: written by a chunker)';
    tree.append(el('li', {}, el('details', { open: '' }, el('summary', { text: label }), el('ul', {}, ...groups.get(-1)))));
  }
}

async function openDocument(id, cite) {
  clearError();
  try {
    const m = await memoryOf(id);
    shown = id;
    $('view-h').textContent = m.title;
    const p = m.provenance;
    const pageCount = m.text.split('\f').length;
    $('view-meta').textContent = `${pageCount > 1 ? `${pageCount} pages, ` : ''}${m.scenarios.length} chunks, ${m.outline.length} outline items · memory by ${p.reader}${p.fallback ? ` (fell back: ${p.fallback})` : ''}`;
    renderOutline(m);
    const mark = renderText(m, cite);
    $('doc-view').hidden = false;
    const target = mark || $('doc-view');
    target.scrollIntoView({ block: mark ? 'center' : 'start' });
    if (mark) mark.focus({ preventScroll: true });
  } catch (e) {
    showError(e);
  }
}

// ---- asking ----------------------------------------------------------------------

let asking = null;
let passages = new Map(); // n → passage of the answer being written (from its 'read' stage)

/**
 * The link of a citation [n]. `source` is the passage, or just {n} when its passage is not
 * known yet: that link opens the passage once it is.
 */
function citeLink(source) {
  const known = source.document !== undefined;
  return el('a', {
    href: `#source-${source.n}`,
    class: 'cite',
    text: `[${source.n}]`,
    title: known ? `${whereFrom(source)}${source.outline ? ` — ${source.outline}` : ''}` : `Passage ${source.n}`,
    onclick: (e) => {
      e.preventDefault();
      const s = known ? source : passages.get(source.n);
      if (s) openDocument(s.document.id, s.span);
    },
  });
}

/** A passage's document, and its page where the document has pages: "printing-press, p. 2". */
const whereFrom = (source) => `${source.document.title}${source.page ? `, p. ${source.page}` : ''}`;

/** An answer's parts (the engine's: {text} or {cite: [n, …]}) as nodes, each cited passage a link. */
const partNodes = (part) => (part.cite ? part.cite.map((n) => citeLink(passages.get(n) ?? { n })) : [part.text]);

/** A writer of the streamed answer's parts into `box`, each citation a link as soon as the engine reads it. */
function streamInto(box) {
  box.replaceChildren();
  return (part) => box.append(...partNodes(part));
}

// Words too common to tell one sentence from another.
const COMMON = new Set(
  'the and was for his her its are but not had has have with from that this they their there were which what when where who whom how why can did does may out our she him you all any one also into than then them these those been being such only other some more most over after before about would could should'.split(' '),
);
const words = new Intl.Segmenter(undefined, { granularity: 'word' });

/**
 * The lower-cased words of `text` that tell its sentences apart, as a set: word-like
 * segments (so Chinese or Japanese text splits into its words too) of three letters or
 * more that are not among the most common, any number, and any CJK word.
 */
const wordsOf = (text) =>
  new Set(
    [...words.segment(text.toLowerCase())]
      .filter((w) => w.isWordLike)
      .map((w) => w.segment)
      .filter((w) => /\p{N}|[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}]/u.test(w) || (w.length > 2 && !COMMON.has(w))),
  );

const SNIPPET_CHARS = 240;
const sentences = new Intl.Segmenter(undefined, { granularity: 'sentence' });

/**
 * What a passage shows under its citation: the sentence of it that shares most of `words`
 * (the answer's, or the question's while the answer is being written; on a tie, one inside
 * its best retrieved piece), else that best retrieved piece, rather than the passage's
 * opening, which in a window grown around a hit is often a neighbour's sentence. `hits`
 * are in the document's coordinates, as `span` is; one outside the passage's text (there
 * should be none) is passed over. A passage with a core (a MoM memory's, found with clues
 * or routing) shows its core instead.
 */
function snippetOf(s, words) {
  const hit = (s.hits ?? [])
    .map(([start, end]) => [start - s.span.start, end - s.span.start])
    .find(([a, b]) => a >= 0 && b > a && b <= s.text.length);
  const inHit = ([a, b]) => hit !== undefined && a >= hit[0] && b <= hit[1];
  let best = hit ?? [0, s.text.length];
  let bestShared = 0;
  if (words.size > 0) {
    // A single line break inside a paragraph (a PDF's or a hard-wrapped file's lines) does
    // not end a sentence; as a space it keeps every index where it was.
    for (const { index, segment } of sentences.segment(s.text.replace(/(?<!\n)\n(?!\n)/g, ' '))) {
      let shared = 0;
      for (const w of wordsOf(segment)) if (words.has(w)) shared += 1;
      const piece = [index, index + segment.length];
      if (shared > bestShared || (shared > 0 && shared === bestShared && inHit(piece) && !inHit(best))) [best, bestShared] = [piece, shared];
    }
  }
  const [a, b] = best;
  const chars = Array.from(s.text.slice(a, b).trim()); // whole characters, not UTF-16 halves
  const cut = chars.length > SNIPPET_CHARS ? `${chars.slice(0, SNIPPET_CHARS).join('').replace(/\s+\S*$/, '')}…` : chars.join('');
  return `${a > 0 ? '…' : ''}${cut}${b < s.text.length && !cut.endsWith('…') ? ' …' : ''}`;
}

/** A passage in the list under an answer: its [n], where it is from, and its snippet as [snippetOf] picks it by `words`. */
function passageItem(s, words) {
  return el(
    'li',
    { id: `source-${s.n}` },
    citeLink(s),
    ' ',
    el('strong', { text: whereFrom(s) }),
    s.outline ? el('span', { class: 'muted', text: ` — ${s.outline}` }) : null,
    el('p', { class: 'snippet', text: s.core || snippetOf(s, words) }),
  );
}

/**
 * The passages the answerer is reading, listed while it reads them (on a CPU, most of an
 * answer's wait), each showing its sentence that shares most words with the question (as a
 * search engine's snippet does; a retrieved piece can run to several sentences): the answer
 * can often be read there before it is written. The answer's own list replaces this one.
 */
function showReading(sources, question) {
  const words = wordsOf(question);
  $('sources-h').textContent = 'Reading these passages';
  $('sources').replaceChildren(...sources.map((s) => passageItem(s, words)));
}

function renderAnswer(r) {
  const answer = $('answer');
  passages = new Map(r.sources.map((s) => [s.n, s]));
  // The engine's parts: the answer's text and its citations, placed where the answer put
  // them, or after it where they were found from the passages' words ('moved': the
  // passages the answer's own [n] named do not hold its words, so those are dropped).
  answer.replaceChildren(...r.parts.flatMap(partNodes));
  if (r.citationsFrom === 'moved') answer.append(el('span', { class: 'muted', text: ' (the passages the answer cited do not hold its words; these do)' }));
  // A refusal the check made says so (a withheld answer's status line says it already).
  if (r.notInDocuments && r.finish !== 'withheld' && r.draft) {
    answer.append(el('span', { class: 'muted', text: ' (an answer was written, but the passages read do not support it)' }));
  }
  const cited = new Set(r.citations.map((c) => c.n));
  const answerText = r.parts.map((p) => p.text ?? '').join('');
  const answerWords = r.notInDocuments ? new Set() : wordsOf(answerText);
  const item = (s) => passageItem(s, answerWords);
  $('sources').replaceChildren(...r.sources.filter((s) => cited.has(s.n)).map(item));
  $('sources-h').textContent = cited.size ? 'Cited' : 'No passage cited';
  const others = r.sources.filter((s) => !cited.has(s.n));
  $('other-sources').replaceChildren(...others.map(item));
  $('other-count').textContent = String(others.length);
  $('others').hidden = others.length === 0;
  renderTrace(r);
}

/** The clues and the router's segments under an answer: how its passages were found. */
function renderTrace(r) {
  const items = [];
  if (r.clues) {
    if (r.clues.scope) items.push(el('li', { text: `Question read as ${r.clues.scope.scope} (by ${r.clues.scope.by}).` }));
    if (r.clues.overview) items.push(el('li', { text: 'Answered from the outline layer and the library overview.' }));
    r.clues.queries.forEach((q, i) => {
      if (i === 0) return;
      const found = r.clues.foundBy.map((list, s) => (list.some((f) => f.query === i) ? `[${r.sources[s].n}]` : null)).filter(Boolean);
      items.push(el('li', { class: 'clue', text: `Clue (${q.kind}): ${q.text}${found.length ? ` → found ${found.join(' ')}` : ''}` }));
    });
  }
  if (r.route) {
    for (const g of r.route.segments) {
      items.push(
        el('li', {
          class: 'segment',
          text: `${g.collection} (${g.chosenBy}): “${g.subQuery}” → ${g.passages} passages, ${g.satisfied ? 'enough' : 'not enough'}: ${g.reflection}`,
        }),
      );
    }
  }
  $('trace-list').replaceChildren(...items);
  $('trace-summary').textContent = r.route ? `Routing: ${r.route.segments.length} step${r.route.segments.length === 1 ? '' : 's'}` : `Clues: ${Math.max(0, (r.clues?.queries.length ?? 1) - 1)}`;
  $('trace').hidden = items.length === 0;
}

/** The line above the answer: what is happening (`busy`), or how it went. */
function answerStatus(text, busy = false) {
  const status = $('answer-status');
  status.textContent = text;
  status.classList.toggle('busy', busy);
  status.hidden = !text;
}

// Passages shown to the answerer: each costs prefill time on the CPU.
const ASK_K = 4;

// The answer prompt's instructions, which every answer starts with, read while the page
// waits for a question: when it is ready, when the question box takes the focus, and
// again once documents have been added (any request ends a read-ahead). On two CPU cores
// they take the 1.5B about three seconds, which a question pasted in would otherwise wait
// for; nothing is read when they are kept (an earlier answer's prompt starts with them).
// A question being typed reads ahead its own prompt instead.
function readInstructions() {
  if (!dm || document.body.dataset.ready !== 'true' || asking || $('question').value.trim()) return;
  dm.readAhead('', { k: ASK_K }).catch(() => {});
}

// Reading ahead: as a question is typed, the answerer reads the passages it finds so far
// (DocMem.readAhead), so that on a CPU most of the answer's prompt is read by the time Ask
// is pressed. Each finished word (and a short pause) sends what there is; a newer
// read-ahead replaces the last one and keeps the passages both share, so work is only
// lost when the passages found change. Plain asks only: clues and routing search apart.
let aheadTimer = 0;
let aheadSent = '';
function readAheadSoon(e) {
  clearTimeout(aheadTimer);
  const send = () => {
    const q = $('question').value.trim();
    const plain = $('clues').value === 'off' && !$('route').value;
    if (!dm || document.body.dataset.ready !== 'true' || asking || !plain || q.length < 8 || q === aheadSent) return;
    aheadSent = q;
    // What was read, for the curious (and the tests): the prompt tokens kept for `q`.
    dm.readAhead(q, { k: ASK_K })
      .then((r) => !r.superseded && ($('question').dataset.readAhead = `${r.kept} ${q}`))
      .catch(() => {});
  };
  if (/[\s?,.]$/.test($('question').value) && e?.inputType !== 'deleteContentBackward') send();
  else aheadTimer = setTimeout(send, 300);
}

async function ask(question) {
  clearTimeout(aheadTimer);
  clearError();
  const answer = $('answer');
  $('answer-box').hidden = false;
  // The box's figures are the last finished answer's: none while this one is asked.
  for (const key of ['seconds', 'firstToken', 'reusedTokens', 'retrieveSeconds', 'prefillSeconds', 'promptTokens']) delete $('answer-box').dataset[key];
  $('sources').replaceChildren();
  $('sources-h').textContent = '';
  $('others').hidden = true;
  $('trace').hidden = true;
  $('ask-button').disabled = true;
  $('stop').hidden = false;
  asking = new AbortController();
  passages = new Map();
  const write = streamInto(answer);
  const route = $('route').value || undefined;
  const clues = $('clues').value;
  const searching = route === 'auto' ? 'Choosing a collection and searching it…' : clues !== 'off' ? 'Searching, with clues…' : 'Searching the documents…';
  // Queued behind documents being added, it waits for them (one request at a time).
  answerStatus(addsInFlight ? `Waiting for ${plural(addsInFlight, 'document')} being added…` : searching, true);
  const t0 = performance.now();
  let first = 0;
  try {
    const r = await dm.ask(question, {
      k: ASK_K,
      signal: asking.signal,
      clues,
      route,
      onProgress: (p) => {
        if (p.stage === 'search') answerStatus(searching, true);
        else if (p.stage === 'read') {
          passages = new Map(p.sources.map((s) => [s.n, s]));
          if (p.passages > 0) showReading(p.sources, question);
          answerStatus(p.passages > 0 ? `Reading ${plural(p.passages, 'passage')}…` : 'Nothing found in the documents; writing…', true);
        } else if (p.stage === 'write') answerStatus('Writing…', true);
      },
      onToken: () => {
        if (!first) first = performance.now() - t0;
      },
      onPart: write,
    });
    renderAnswer(r);
    recordSpeed(r, first);
    const took = performance.now() - t0;
    const reused = r.reusedTokens > 0 ? `; ${r.reusedTokens} prompt tokens were read already` : '';
    // 'withheld': the answerer's probe judged the passages not to hold the answer once it
    // had read them, so nothing was written.
    const withheld = r.finish === 'withheld' ? ': the passages found do not answer it (judged before anything was written)' : '';
    answerStatus(`Answered in ${secs(took)}${first ? ` (first words after ${secs(first)}${reused})` : ''}${withheld}.`);
    $('answer-box').dataset.reusedTokens = String(r.reusedTokens ?? 0);
    $('answer-box').dataset.seconds = (took / 1000).toFixed(1);
    // Where the time went, for the speed benchmark: the search, then the prompt's reading.
    $('answer-box').dataset.retrieveSeconds = (r.seconds?.retrieve ?? 0).toFixed(1);
    $('answer-box').dataset.prefillSeconds = (r.seconds?.prefill ?? 0).toFixed(1);
    $('answer-box').dataset.promptTokens = String(r.promptTokens ?? 0);
    // When the first answer text appeared: a withheld answer's refusal appears whole at the end.
    $('answer-box').dataset.firstToken = ((first || took) / 1000).toFixed(1);
  } catch (e) {
    if (e.code !== 'ABORTED') {
      answerStatus('');
      showError(e);
    } else answerStatus(`Stopped after ${secs(performance.now() - t0)}${answer.textContent ? ': the answer is cut short' : ''}.`);
  } finally {
    // Stopped or failed while reading: the list stays, as what was found.
    if ($('sources-h').textContent === 'Reading these passages') $('sources-h').textContent = 'Passages found';
    $('ask-button').disabled = false;
    $('stop').hidden = true;
    asking = null;
  }
}

// ---- the model picker -----------------------------------------------------------------
// The models the server offers (/models/models.json's `choices`: the 1.5B by default,
// SmolLM2 as the small one) and the GGUF files the user chose, kept in this browser's
// storage by sha256. For each: its size, whether it is kept here already, where it runs
// and the speed measured on this device (from the answers it gave here). The choice is
// remembered; choosing starts the engine again with that model.

const MODEL_KEY = 'docmem-model'; // localStorage: the chosen model's id
const OWN_KEY = 'docmem-own-models'; // localStorage: [{id, name, size, sha256, files?: [{path, size, sha256}]}]
const SPEED_KEY = 'docmem-speed'; // localStorage: {"<model id>|<backend>": {tokensPerSecond, firstToken}}
const MANIFEST_KEY = 'docmem-manifest'; // localStorage: the last manifest (an offline visit)
let manifest = null;
let choice = null; // the model in use: a choice, or {id: 'file', name, blobs: [{path, blob}]} while chosen files load

async function loadManifest() {
  try {
    const r = await fetch('/models/models.json', { cache: 'no-cache' });
    if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
    manifest = await r.json();
    localStorage.setItem(MANIFEST_KEY, JSON.stringify(manifest));
  } catch (e) {
    manifest = readJson(MANIFEST_KEY, null);
    if (!manifest) throw Object.assign(new Error(`the model list could not be loaded: ${e.message}`), { code: 'MODEL_FETCH_FAILED' });
  }
}

function modelChoices() {
  const served = manifest.choices ?? [{ id: manifest.reader.name, name: manifest.reader.name, label: manifest.reader.name, note: '', size: manifest.reader.files[0].size, default: true, files: manifest.reader.files }];
  const own = readJson(OWN_KEY, []).map((o) => ({
    id: o.id,
    name: o.name,
    label: titleOf(o.name),
    note: o.files ? 'your folder, kept in this browser' : 'your file, kept in this browser',
    size: o.size,
    own: true,
    // A GGUF file is one file; a Hugging Face folder lists its files.
    files: o.files ?? [{ path: o.name, size: o.size, sha256: o.sha256 }],
  }));
  return [...served, ...own];
}

function chosenModel() {
  const all = modelChoices();
  const id = localStorage.getItem(MODEL_KEY);
  return all.find((c) => c.id === id) ?? all.find((c) => c.default) ?? all[0];
}

/** DocMem.open's `models` for `c`: the embedder and `c` as reader and answerer. */
function modelsFor(c) {
  const base = new URL('/models/', location.href);
  const spec = (m) => ({ name: m.name, files: m.files.map((f) => (f.url ? { ...f, url: new URL(f.url, base).href } : f)) });
  const lm = c.blobs ? { name: c.name, files: c.blobs.map(({ path, blob }) => ({ path, size: blob.size, blob })) } : spec(c);
  return { embedder: spec(manifest.embedder), reader: lm, answerer: lm };
}

const speedKey = (id) => `${id}|${dm?.backend?.name ?? ''}`;

function recordSpeed(r, firstMs) {
  if (!choice || !r.tokens || !(r.seconds?.decode > 0)) return;
  const speeds = readJson(SPEED_KEY, {});
  speeds[speedKey(choice.id)] = { tokensPerSecond: r.tokens / r.seconds.decode, firstToken: firstMs / 1000 };
  localStorage.setItem(SPEED_KEY, JSON.stringify(speeds));
  renderPicker();
  applyMemoryDefault();
}

async function renderPicker() {
  if (!manifest || !dm) return;
  const { WebModelCache } = await import('/js/model-cache.js');
  const cache = new WebModelCache();
  const speeds = readJson(SPEED_KEY, {});
  const b = dm.backend;
  $('model-where').textContent = b.name === 'webgpu' ? `WebGPU: ${b.reason.split(':')[0]}` : `CPU, ${plural(b.threads, 'thread')}`;
  $('model-choice').textContent = choice ? choice.label ?? titleOf(choice.name) : '…';
  const rows = [];
  for (const c of modelChoices()) {
    const kept = await cache.has({ files: c.files }).catch(() => false);
    const speed = speeds[speedKey(c.id)];
    const measured = speed ? `${speed.tokensPerSecond.toFixed(1)} tokens/s, first words after ${speed.firstToken.toFixed(0)} s (measured here)` : 'speed not yet measured here';
    const input = el('input', { type: 'radio', name: 'model', value: c.id });
    input.checked = choice?.id === c.id;
    input.addEventListener('change', () => switchModel(c));
    rows.push(
      el(
        'li',
        { dataset: { id: c.id } },
        el('label', {}, input, el('span', {}, el('strong', { text: c.label }), ` ${c.note ? `— ${c.note}` : ''}`, el('br'), el('span', { class: 'muted', text: `${size(c.size)} · ${kept ? 'kept in this browser' : 'downloaded on first use'} · ${measured}` }))),
      ),
    );
  }
  $('model-list').replaceChildren(...rows);
}

/** Start the engine again with model `c`; on failure, go back to the model in use. */
async function switchModel(c) {
  const previous = choice;
  clearError();
  $('model-picker-status').textContent = `Starting with ${c.label ?? c.name}…`;
  chosenModelLine = null;
  choice = c;
  document.body.dataset.ready = 'false'; // the model line shows the new model's download
  try {
    dm?.close();
    await openDocMem(hosted);
    if (c.blobs) {
      // Kept by the worker once it loaded: remember it for the next visit. A folder is
      // known by its first weights file's sha256.
      const kept = (dm.models.adopted ?? []).filter((a) => a.name === c.name);
      const key = (kept.find((a) => /\.safetensors$/i.test(a.path)) ?? kept[0])?.sha256;
      if (key) {
        const own = readJson(OWN_KEY, []).filter((o) => o.sha256 !== key);
        const files = kept.map((a) => ({ path: a.path, size: a.size, sha256: a.sha256 }));
        own.push({ id: `own:${key}`, name: c.name, size: files.reduce((n, f) => n + f.size, 0), sha256: key, ...(c.folder ? { files } : {}) });
        localStorage.setItem(OWN_KEY, JSON.stringify(own));
        choice = modelChoices().find((m) => m.id === `own:${key}`);
      }
    }
    localStorage.setItem(MODEL_KEY, choice.id);
    $('model-picker-status').textContent = `Now using ${choice.label ?? choice.name}.${chosenModelLine ? ` ${chosenModelLine}.` : ''}`;
  } catch (e) {
    $('model-picker-status').textContent = `${c.label ?? c.name} could not be used: ${e.message}`;
    showError(e);
    choice = previous;
    if (previous) await openDocMem(hosted).catch(showError);
  }
  renderPicker();
}

function useOwnModel(file) {
  if (!/\.gguf$/i.test(file.name)) {
    $('model-picker-status').textContent = `${file.name} is not a .gguf file: docmem reads GGUF files of Llama (Llama 3 included), Qwen2, Qwen3, Gemma 3 and Phi-3 models.`;
    return;
  }
  switchModel({ id: 'file', name: file.name, label: titleOf(file.name), blobs: [{ path: file.name, blob: file }] });
}

/**
 * Use a Hugging Face folder the user chose: its config.json, tokenizer.json,
 * tokenizer_config.json and .safetensors files (the folder's own, not its subfolders'),
 * read where they lie as a GGUF file is. Named after the folder.
 */
function useOwnFolder(files) {
  const top = files.filter((f) => (f.webkitRelativePath || f.name).split('/').length <= 2);
  const folder = (files[0]?.webkitRelativePath || '').split('/')[0] || 'model';
  const wanted = top.filter((f) => /^(config\.json|tokenizer\.json|tokenizer_config\.json)$/.test(f.name) || /\.safetensors$/i.test(f.name));
  const missing = ['config.json', 'tokenizer.json'].filter((n) => !wanted.some((f) => f.name === n));
  if (!wanted.some((f) => /\.safetensors$/i.test(f.name))) missing.push('a .safetensors file');
  if (missing.length) {
    const list = missing.length > 1 ? `${missing.slice(0, -1).join(', ')} and ${missing.at(-1)}` : missing[0];
    $('model-picker-status').textContent = `${folder} is not a Hugging Face model folder: it lacks ${list}.`;
    return;
  }
  const blobs = wanted.map((f) => ({ path: `${folder}/${f.name}`, blob: f }));
  switchModel({ id: 'file', name: folder, label: folder, folder: true, blobs });
}

// ---- start -----------------------------------------------------------------------

function wire() {
  $('files').addEventListener('change', (e) => {
    addFiles([...e.target.files]);
    e.target.value = '';
  });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    addFiles([...e.dataTransfer.files]);
  });
  const setting = $('memories');
  // Off until the model and device are known (applyMemoryDefault, once the engine is up).
  setting.value = localStorage.getItem(MEMORIES_KEY) === 'background' ? 'background' : 'off';
  setting.addEventListener('change', async () => {
    localStorage.setItem(MEMORIES_KEY, setting.value);
    applyMemoryDefault();
    await memorySettingChanged();
  });
  $('pause-memories').addEventListener('click', () => {
    memoriesPaused = !memoriesPaused;
    dm?.pauseMemories(memoriesPaused);
    updateMemoryControls();
  });
  $('own-model').addEventListener('change', (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (file) useOwnModel(file);
  });
  $('own-folder').addEventListener('change', (e) => {
    const files = [...e.target.files];
    e.target.value = '';
    if (files.length) useOwnFolder(files);
  });
  $('question').addEventListener('input', readAheadSoon);
  $('question').addEventListener('focus', readInstructions);
  $('ask-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const q = $('question').value.trim();
    if (q && !asking) ask(q);
  });
  $('stop').addEventListener('click', () => asking && asking.abort());
  $('cancel-add').addEventListener('click', cancelAdding);
  const dialog = $('confirm');
  $('confirm-yes').addEventListener('click', () => dialog.close('yes'));
  $('confirm-no').addEventListener('click', () => dialog.close('no'));
  // A click on the backdrop (outside the dialog's box) is a no.
  dialog.addEventListener('click', (e) => {
    if (e.target === dialog) dialog.close('no');
  });
  $('export').addEventListener('click', async () => {
    try {
      const bytes = await dm.exportLibrary();
      const a = el('a', { href: URL.createObjectURL(new Blob([bytes])), download: 'library.docmem' });
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    } catch (e) {
      showError(e);
    }
  });
  $('hosted-form').addEventListener('submit', (e) => {
    e.preventDefault();
    applyHosted(hostedFromForm());
  });
  $('hosted-off').addEventListener('click', () => applyHosted(null));
  $('import').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (!file) return;
    clearError();
    try {
      const docs = await dm.documents();
      if (docs.length > 0) {
        const names = docs.length > 3 ? `${docs.slice(0, 3).map((d) => d.title).join(', ')} and ${docs.length - 3} more` : docs.map((d) => d.title).join(', ');
        const sure = await confirmDialog({
          title: 'Replace this library?',
          text: `Importing ${file.name} replaces this library: ${docs.length === 1 ? 'its document' : `its ${docs.length} documents`} (${names}) ${docs.length === 1 ? 'is' : 'are'} removed and the file's documents take their place. Export this library first to keep a copy.`,
          yes: 'Replace',
          no: 'Keep this library',
        });
        if (!sure) return;
      }
      await dm.importLibrary(new Uint8Array(await file.arrayBuffer()));
      memories.clear();
      notes.clear();
      $('doc-view').hidden = true;
      await refreshDocuments();
      await showStorage();
    } catch (err) {
      showError(err);
    }
  });
}

// ---- hosted models ---------------------------------------------------------------

const HOSTED_KEY = 'docmem-hosted'; // sessionStorage: {on, url, token, reader, scorer, answerer, embedder}
const ROLES = ['reader', 'scorer', 'answerer', 'embedder'];

/** The panel's settings kept for this tab ({on, …the `remote` option}), or null. */
function storedHosted() {
  try {
    return JSON.parse(sessionStorage.getItem(HOSTED_KEY));
  } catch {
    return null;
  }
}

/** The panel's fields as DocMem's `remote` option (empty roles left out: they stay here). */
function hostedFromForm() {
  const r = { url: $('hosted-url').value.trim(), token: $('hosted-token').value };
  for (const role of ROLES) {
    const name = $(`hosted-${role}`).value.trim();
    if (name) r[role] = name;
  }
  return r;
}

function fillHostedForm(r) {
  $('hosted-url').value = r?.url ?? '';
  $('hosted-token').value = r?.token ?? '';
  for (const role of ROLES) $(`hosted-${role}`).value = r?.[role] ?? '';
}

/** What leaves the device and where, in one sentence (DocMem's `remote` info), or ''. */
function hostedNotice(remote) {
  if (!remote) return '';
  const r = remote.roles;
  const documents = r.reader || r.scorer || r.embedder;
  const questions = r.answerer || r.embedder;
  const what = documents && questions ? 'your documents and questions go' : documents ? 'your documents go' : 'your questions and the passages found for them go';
  const models = Object.entries(r).map(([role, name]) => `${role}: ${name.replace(/^remote:/, '')}`).join(', ');
  return `${what} to ${remote.host} (${models}).`;
}

/** The library for an embedder: a hosted one keeps its own (its vectors differ). */
const libraryFor = (remote) => (remote && remote.embedder ? `default (embedder remote:${remote.embedder})` : 'default');

/** Apply `next` (a `remote` option, or null for none): reopen DocMem with it, or, when it fails, as it was. */
async function applyHosted(next) {
  clearError();
  if (asking) asking.abort();
  const controls = document.querySelectorAll('#hosted-form button, #ask-form button, #export, #files, #import');
  for (const c of controls) c.disabled = true;
  document.body.dataset.ready = 'false';
  $('hosted-status').textContent = next ? 'Connecting…' : 'Turning off…';
  const previous = hosted;
  dm?.close();
  dm = null;
  try {
    await openDocMem(next);
    // Turning off forgets the token; the host and model names stay for this tab.
    sessionStorage.setItem(HOSTED_KEY, JSON.stringify(next ? { on: true, ...next } : { ...previous, on: false, token: '' }));
    if (!next) $('hosted-token').value = '';
  } catch (e) {
    showError(e);
    try {
      await openDocMem(previous);
    } catch (e2) {
      showError(e2);
      return;
    }
    $('hosted-status').textContent = `Not applied: ${e.message}`;
  } finally {
    for (const c of document.querySelectorAll('#hosted-form button')) c.disabled = false;
  }
}

// ---- start -----------------------------------------------------------------------

const query = new URLSearchParams(location.search);

/** Open the library with `remote` (or no hosted model) and show the engine. */
/** Whether the next open rebuilds a library that cannot be opened (the user asked to). */
let rebuildDamaged = false;

async function openDocMem(remote) {
  const backend = query.get('backend') || 'auto';
  // ?threads=N overrides the CPU kernels' thread count (default: the cores, at most 8).
  const threads = query.has('threads') ? Number(query.get('threads')) : undefined;
  const t0 = performance.now();
  $('model-status').classList.remove('done');
  memories.clear();
  $('doc-view').hidden = true;
  $('answer-box').hidden = true;
  try {
    choice ??= chosenModel();
    const damaged = rebuildDamaged ? 'rebuild' : 'refuse';
    // Every model file the picker offers (and the embedder's) stays stored; others go.
    const keepModels = [...manifest.embedder.files, ...modelChoices().flatMap((c) => c.files)].map((f) => f.sha256).filter(Boolean);
    dm = await DocMem.open(libraryFor(remote), { models: modelsFor(choice), onProgress: modelProgress, backend, threads, damaged, keepModels, ...(remote ? { remote } : {}) });
    rebuildDamaged = false;
    if (memoriesPaused) dm.pauseMemories(true);
    showRebuilt(dm.rebuilt);
  } catch (e) {
    if (e.code === 'BAD_LIBRARY') {
      offerRebuild(e, remote);
      $('model-label').textContent = 'The library could not be opened.';
      $('backend').textContent = 'not started';
      throw e;
    }
    $('model-label').textContent = 'The models could not be loaded.';
    $('backend').textContent = e.code === 'WEBGPU_UNAVAILABLE' ? 'WebGPU unavailable' : 'not started';
    throw e;
  }
  hosted = remote;
  const notice = hostedNotice(dm.remote);
  $('remote-notice').replaceChildren(el('strong', { text: 'Text leaves this device: ' }), notice);
  $('remote-notice').hidden = !notice;
  $('tagline-local').hidden = Boolean(notice);
  $('hosted-status').textContent = notice ? `On: ${notice}` : 'Off: every model runs on this device.';
  const b = dm.backend;
  $('backend').textContent = `${b.label} — ${b.reason}${b.threadsNote ? `; one thread: ${b.threadsNote}` : ''}`;
  $('backend').dataset.name = b.name;
  const m = dm.models;
  // The embedder runs where the backend line says the models do (in wasm when every
  // language model is hosted).
  const embedderRole = b.name === 'webgpu' && b.embedder === 'cpu' ? 'embedder, in wasm' : 'embedder';
  $('models').textContent = m.reader === m.answerer ? `${m.reader} (reader and answerer), ${m.embedder} (${embedderRole})` : `${m.reader} (reader), ${m.answerer} (answerer), ${m.embedder} (${embedderRole})`;
  readyLabel = `Models ready in ${secs(performance.now() - t0)}${m.fromCache ? ' (from this browser\u2019s cache)' : ''}, ${Math.round(m.wasmMemoryBytes / 2 ** 20)} MB of wasm memory.`;
  $('model-label').textContent = readyLabel;
  $('model-progress').value = 1;
  $('model-status').classList.add('done');
  for (const b2 of document.querySelectorAll('#ask-form button, #export, #files, #import')) b2.disabled = false;
  applyMemoryDefault();
  await refreshDocuments();
  // Ready once the stored library is listed (tests read the list right after this).
  document.body.dataset.ready = 'true';
  showStorage();
  renderPicker();
  readInstructions();
}

/**
 * A stored library that no longer opens (damaged storage, another embedder, a newer
 * docmem): say why and offer the way out, a rebuild from the documents it still holds.
 * The damaged copy is kept beside it, so choosing this loses nothing.
 */
function offerRebuild(e, remote) {
  $('library-damaged-text').textContent = `Your library could not be opened: ${e.message.replace(/\. Opening it with .*$/, '')}.`;
  $('library-damaged').hidden = false;
  $('rebuild-library').onclick = async () => {
    $('rebuild-library').disabled = true;
    $('library-damaged').hidden = true;
    clearError();
    rebuildDamaged = true;
    try {
      await openDocMem(remote);
    } catch (e2) {
      showError(e2);
    } finally {
      $('rebuild-library').disabled = false;
    }
  };
}

function showRebuilt(r) {
  if (!r) return;
  const lost = r.unreadable.length ? ` ${plural(r.unreadable.length, 'document')} could not be read back.` : '';
  $('library-rebuilt').textContent = `The library was rebuilt from ${plural(r.documents, 'document')} it still held; their memories are being written again.${lost} The damaged copy is kept in this browser as “${r.setAside}”.`;
  $('library-rebuilt').hidden = false;
}

async function start() {
  wire();
  try {
    await loadManifest();
  } catch (e) {
    showError(e);
    return;
  }
  for (const b of document.querySelectorAll('#ask-form button, #export, #files, #import')) b.disabled = true;
  if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
  const stored = storedHosted();
  fillHostedForm(stored);
  const { on, ...applied } = stored ?? {};
  try {
    await openDocMem(on ? applied : null);
  } catch (e) {
    // A library that cannot be opened has its own panel, with the way out.
    if (e.code !== 'BAD_LIBRARY') showError(e);
    if (!on) return;
    // Hosted models applied before this reload fail now: run here, and say why.
    try {
      await openDocMem(null);
    } catch (e2) {
      showError(e2);
      return;
    }
    $('hosted-status').textContent = `Not applied: ${e.message}`;
  }
}

start();
