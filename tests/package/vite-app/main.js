// A minimal app built with the installed package: open a library, add a short document,
// ask, show the cited answer and where the models ran.
import { DocMem } from 'docmem';

const show = (id, text) => (document.getElementById(id).textContent = text);
try {
  const dm = await DocMem.open(`vite-${Date.now()}`, { models: '/models/models.json', backend: 'cpu' });
  show('backend', `${dm.backend.label}; threads ${dm.backend.threads}${dm.backend.threadsNote ? `: ${dm.backend.threadsNote}` : ''}`);
  await dm.addDocument('William Caxton set up the first printing press in England, at Westminster, in 1476.', { title: 'Printing in England', method: 'sentence' });
  const a = await dm.ask('Who set up the first printing press in England?', { maxTokens: 32 });
  show('answer', a.answer);
  show('citation', a.citations.map((c) => `${c.document.title}: ${c.text}`).join(' | '));
  document.body.dataset.done = 'true';
} catch (e) {
  show('answer', `failed: ${e.code ?? ''} ${e.message}`);
  document.body.dataset.done = 'error';
}
