// The package README's browser examples, type-checked against the package's types
// (tests/package/package.test.mjs runs tsc --noEmit on this folder).
import { DocMem, DocMemError, type Answer, type LoadProgress } from 'docmem';

export async function quickStart(file: File, out: HTMLElement): Promise<string[]> {
  const dm = await DocMem.open('my-library', { models: '/models/models.json' });
  await dm.addDocument(file);
  const { answer, citations } = await dm.ask('Who set up the first press in England?', { onToken: (t) => out.append(t) });
  console.log(answer);
  return citations.map((c) => `${c.document.title}${c.page ? `, p. ${c.page}` : ''}`);
}

export async function withProgressAndCancel(text: string, signal: AbortSignal): Promise<Answer | null> {
  const dm = await DocMem.open('notes', {
    models: '/models/models.json',
    backend: 'auto',
    onProgress: (p: LoadProgress) => console.log(p.stage, p.fraction),
  });
  try {
    const added = await dm.addDocument(text, { title: 'Notes', method: 'sentence', signal });
    void dm.writeMemory(added.id, { onProgress: (m) => console.log(m.window, m.windows, m.secondsLeft) });
    const a = await dm.ask('What do the notes say?', { signal, onProgress: (p) => console.log(p) });
    return a.notInDocuments ? null : a;
  } catch (e) {
    if (e instanceof DocMemError && e.code === 'ABORTED') return null;
    throw e;
  } finally {
    console.log(dm.backend.label, dm.backend.threads, dm.backend.threadsNote, dm.persistence?.granted);
    dm.close();
  }
}
