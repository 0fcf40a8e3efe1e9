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

let dm = null;
const memories = new Map(); // doc id → memory (with text)
let shown = null; // the document in the view
let hosted = null; // the hosted models in use: DocMem's `remote` option, or null

function showError(e) {
  const box = $('error');
  box.textContent = e && e.code ? `${e.message} (${e.code})` : String(e && e.message ? e.message : e);
  box.hidden = false;
}
function clearError() {
  $('error').hidden = true;
}

function modelProgress(p) {
  const bar = $('model-progress');
  const label = $('model-label');
  if (p.stage === 'download') {
    bar.value = p.fraction;
    label.textContent = `Models: ${mb(p.loaded)} of ${mb(p.total)}`;
  } else if (p.stage === 'loading') {
    bar.removeAttribute('value');
    label.textContent = 'Loading the models into the engine…';
  }
}

// ---- documents -------------------------------------------------------------------

async function refreshDocuments() {
  const docs = await dm.documents();
  const list = $('doc-list');
  for (const li of [...list.querySelectorAll('li[data-id]')]) li.remove();
  for (const d of docs) {
    const how = d.fallback ? `${d.reader}; fell back to sentence chunks` : d.reader;
    list.append(
      el(
        'li',
        { class: 'doc', dataset: { id: d.id } },
        el('button', { type: 'button', class: 'link doc-open', text: d.title, onclick: () => openDocument(d.id) }),
        el('span', {
          class: 'muted doc-meta',
          text: `${d.chunks} chunk${d.chunks === 1 ? '' : 's'} · ${how}${d.collection !== 'default' ? ` · in ${d.collection}` : ''}`,
        }),
        el('button', {
          type: 'button',
          class: 'icon secondary',
          'aria-label': `Remove ${d.title}`,
          title: `Remove ${d.title}`,
          text: '×',
          onclick: () => removeDocument(d),
        }),
      ),
    );
  }
  $('no-docs').hidden = docs.length > 0 || list.querySelector('li') !== null;
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

async function addFiles(files) {
  clearError();
  const method = $('method').value;
  for (const file of files) {
    const bar = el('progress', { max: '1', 'aria-label': `Memory of ${file.name}` });
    const status = el('span', { class: 'muted', text: 'waiting…' });
    const item = el('li', { class: 'doc pending' }, el('span', { class: 'doc-title', text: file.name }), status, bar);
    $('doc-list').append(item);
    $('no-docs').hidden = true;
    const t0 = performance.now();
    dm.addDocument(file, {
      method,
      collection: $('collection').value.trim() || 'default',
      onProgress: (p) => {
        bar.value = p.fraction;
        const where = p.stage === 'reading' && p.windows > 1 ? ` (part ${p.window} of ${p.windows})` : '';
        status.textContent = `${STAGES[p.stage] || p.stage}${where} ${Math.round(p.fraction * 100)}%`;
      },
    })
      .then(async (r) => {
        item.remove();
        await refreshDocuments();
        const li = document.querySelector(`li[data-id="${r.id}"] .doc-meta`);
        if (li) li.textContent += r.added ? ` · written in ${secs(performance.now() - t0)}` : ' · already in the library';
      })
      .catch((e) => {
        status.textContent = `not added: ${e.message}`;
        item.classList.add('failed');
        if (e.code) item.dataset.code = e.code;
        bar.remove();
      });
  }
}

async function removeDocument(d) {
  clearError();
  try {
    await dm.removeDocument(d.id);
    memories.delete(d.id);
    if (shown === d.id) $('doc-view').hidden = true;
    await refreshDocuments();
  } catch (e) {
    showError(e);
  }
}

// ---- the document view -----------------------------------------------------------

async function memoryOf(id) {
  if (!memories.has(id)) memories.set(id, await dm.memory(id));
  return memories.get(id);
}

/** The text with each chunk shaded, and `cite` (a span) inside one <mark>. */
function renderText(m, cite) {
  const box = $('doc-text');
  box.replaceChildren();
  const pieces = [];
  let at = 0;
  m.scenarios.forEach((s, i) => {
    if (s.span.start > at) pieces.push({ start: at, end: s.span.start, chunk: -1 });
    const cuts = [s.span.start, s.span.end];
    if (cite) for (const c of [cite.start, cite.end]) if (c > s.span.start && c < s.span.end) cuts.push(c);
    cuts.sort((a, b) => a - b);
    for (let k = 0; k + 1 < cuts.length; k++) pieces.push({ start: cuts[k], end: cuts[k + 1], chunk: i });
    at = s.span.end;
  });
  if (at < m.text.length) pieces.push({ start: at, end: m.text.length, chunk: -1 });
  let mark = null;
  const seen = new Set();
  for (const p of pieces) {
    const inCite = cite && p.start >= cite.start && p.end <= cite.end && p.end > p.start;
    const span = el('span', { class: p.chunk < 0 ? 'gap' : `chunk c${p.chunk % 2}`, text: m.text.slice(p.start, p.end) });
    if (p.chunk >= 0 && !seen.has(p.chunk)) {
      span.id = `chunk-${p.chunk}`;
      seen.add(p.chunk);
    }
    if (inCite) {
      if (!mark) {
        mark = el('mark', { id: 'cited', class: 'cited', tabindex: '-1' });
        box.append(mark);
      }
      mark.append(span);
    } else {
      box.append(span);
    }
  }
  return mark;
}

function renderOutline(m) {
  const tree = $('outline');
  tree.replaceChildren();
  const jump = (i) => () => {
    const target = document.getElementById(`chunk-${i}`);
    if (target) {
      target.scrollIntoView({ block: 'center', behavior: 'smooth' });
      target.classList.add('flash');
      setTimeout(() => target.classList.remove('flash'), 1200);
    }
  };
  const chunkItem = (s, i) =>
    el(
      'li',
      {},
      el('button', { type: 'button', class: 'link', text: `Chunk ${i + 1}`, onclick: jump(i) }),
      s.core ? el('p', { class: 'core', text: s.core }) : el('p', { class: 'core muted', text: m.text.slice(s.span.start, Math.min(s.span.end, s.span.start + 90)).trim() + '…' }),
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
    $('view-meta').textContent = `${m.scenarios.length} chunks, ${m.outline.length} outline items · memory by ${p.reader}${p.fallback ? ` (fell back: ${p.fallback})` : ''}`;
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

function citeLink(source) {
  return el('a', {
    href: `#source-${source.n}`,
    class: 'cite',
    text: `[${source.n}]`,
    title: `${source.document.title}${source.outline ? ` — ${source.outline}` : ''}`,
    onclick: (e) => {
      e.preventDefault();
      openDocument(source.document.id, source.span);
    },
  });
}

function renderAnswer(r) {
  const answer = $('answer');
  answer.replaceChildren();
  const byN = new Map(r.sources.map((s) => [s.n, s]));
  const parts = r.answer.split(/(\[\d+(?:\s*,\s*\d+)*\])/);
  for (const part of parts) {
    const m = /^\[([\d,\s]+)\]$/.exec(part);
    const ns = m ? m[1].split(',').map((x) => Number(x.trim())) : [];
    if (m && ns.every((n) => byN.has(n))) ns.forEach((n) => answer.append(citeLink(byN.get(n))));
    else answer.append(document.createTextNode(part));
  }
  // An answer without its own [n] still links the passages that hold its words.
  if (!answer.querySelector('a.cite') && r.citations.length > 0) {
    answer.append(' ');
    for (const c of r.citations) answer.append(citeLink(c));
  }
  if (r.notInDocuments) answer.append(el('span', { class: 'muted', text: ' (the documents do not say)' }));
  const cited = new Set(r.citations.map((c) => c.n));
  const item = (s) =>
    el(
      'li',
      { id: `source-${s.n}` },
      citeLink(s),
      ' ',
      el('strong', { text: s.document.title }),
      s.outline ? el('span', { class: 'muted', text: ` — ${s.outline}` }) : null,
      el('p', { class: 'snippet', text: s.core || s.text.slice(0, 180) + (s.text.length > 180 ? '…' : '') }),
    );
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

async function ask(question) {
  clearError();
  const answer = $('answer');
  $('answer-box').hidden = false;
  answer.textContent = '';
  $('sources').replaceChildren();
  $('sources-h').textContent = '';
  $('others').hidden = true;
  $('trace').hidden = true;
  $('ask-button').disabled = true;
  $('stop').hidden = false;
  asking = new AbortController();
  const t0 = performance.now();
  let first = 0;
  try {
    const r = await dm.ask(question, {
      k: 4, // passages shown to the answerer: each costs prefill time on the CPU
      signal: asking.signal,
      clues: $('clues').value,
      route: $('route').value || undefined,
      onToken: (t) => {
        if (!first) first = performance.now() - t0;
        answer.textContent += t;
      },
    });
    renderAnswer(r);
    $('answer-box').dataset.seconds = ((performance.now() - t0) / 1000).toFixed(1);
    $('answer-box').dataset.firstToken = (first / 1000).toFixed(1);
  } catch (e) {
    if (e.code !== 'ABORTED') showError(e);
    else answer.append(el('span', { class: 'muted', text: ' (stopped)' }));
  } finally {
    $('ask-button').disabled = false;
    $('stop').hidden = true;
    asking = null;
  }
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
  const method = $('method');
  method.value = localStorage.getItem('docmem-method') || 'sentence';
  method.addEventListener('change', () => localStorage.setItem('docmem-method', method.value));
  $('ask-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const q = $('question').value.trim();
    if (q && !asking) ask(q);
  });
  $('stop').addEventListener('click', () => asking && asking.abort());
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
    try {
      await dm.importLibrary(new Uint8Array(await file.arrayBuffer()));
      memories.clear();
      $('doc-view').hidden = true;
      await refreshDocuments();
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
    dm = await DocMem.open(libraryFor(remote), { onProgress: modelProgress, backend, threads, ...(remote ? { remote } : {}) });
  } catch (e) {
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
  // The embedder runs where the backend line says the models do, unless a hosted answerer
  // keeps it in wasm beside models on WebGPU.
  const embedderRole = b.name === 'webgpu' && b.embedder === 'cpu' ? 'embedder, in wasm' : 'embedder';
  $('models').textContent = m.reader === m.answerer ? `${m.reader} (reader and answerer), ${m.embedder} (${embedderRole})` : `${m.reader} (reader), ${m.answerer} (answerer), ${m.embedder} (${embedderRole})`;
  $('model-label').textContent = `Models ready in ${secs(performance.now() - t0)}${m.fromCache ? ' (from this browser\u2019s cache)' : ''}, ${Math.round(m.wasmMemoryBytes / 2 ** 20)} MB of wasm memory.`;
  $('model-progress').value = 1;
  $('model-status').classList.add('done');
  for (const b2 of document.querySelectorAll('#ask-form button, #export, #files, #import')) b2.disabled = false;
  // Clues and routing run with the CPU backend or a hosted answerer for now: on WebGPU
  // the pickers stay at their defaults and say why.
  const pickersOff = b.name === 'webgpu' && !dm.remote?.roles.answerer;
  for (const id of ['route', 'clues']) {
    $(id).disabled = pickersOff;
    $(id).title = pickersOff ? 'clues and routing run with the CPU backend' : '';
  }
  await refreshDocuments();
  // Ready once the stored library is listed (tests read the list right after this).
  document.body.dataset.ready = 'true';
}

async function start() {
  wire();
  for (const b of document.querySelectorAll('#ask-form button, #export, #files, #import')) b.disabled = true;
  if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
  const stored = storedHosted();
  fillHostedForm(stored);
  const { on, ...applied } = stored ?? {};
  try {
    await openDocMem(on ? applied : null);
  } catch (e) {
    showError(e);
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
