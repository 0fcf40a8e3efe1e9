// The consumer apps' page (tests/package/package.test.mjs copies it into each app): the
// package's quick start, run with the options the app's bundler needs, then a PDF added
// (/cjk-cid.pdf, which the test serves beside the page: Japanese text in a font whose
// CMap PDF.js must fetch, so PDF.js and its CMaps reached the app), and what it did
// shown in #backend, #answer, #citation and #pdf for the test to read; body[data-done]
// says when it ended ('true', or 'error').
export async function run(DocMem, options = {}) {
  const show = (id, text) => (document.getElementById(id).textContent = text);
  try {
    const dm = await DocMem.open(`app-${Date.now()}`, { models: '/models/models.json', backend: 'cpu', ...options });
    show('backend', `${dm.backend.label}; threads ${dm.backend.threads}${dm.backend.threadsNote ? `: ${dm.backend.threadsNote}` : ''}`);
    await dm.addDocument('William Caxton set up the first printing press in England, at Westminster, in 1476.', { title: 'Printing in England', method: 'sentence' });
    const a = await dm.ask('Who set up the first printing press in England?', { maxTokens: 32 });
    show('answer', a.answer);
    show('citation', a.citations.map((c) => `${c.document.title}: ${c.text}`).join(' | '));
    const pdf = new File([await (await fetch('/cjk-cid.pdf')).arrayBuffer()], 'cjk-cid.pdf');
    const added = await dm.addDocument(pdf, { method: 'sentence' });
    show('pdf', (await dm.memory(added.id)).text);
    document.body.dataset.done = 'true';
  } catch (e) {
    show('answer', `failed: ${e.code ?? ''} ${e.message}`);
    document.body.dataset.done = 'error';
  }
}
