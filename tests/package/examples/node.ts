// The package README's Node examples, type-checked against the package's types.
import { DocMem } from 'docmem';
import { makeManifest } from 'docmem/manifest';

export async function quickStart(): Promise<void> {
  const dm = await DocMem.open('notes', { models: 'https://your.host/models/models.json', storageDir: './library' });
  await dm.addDocument('Johannes Gutenberg printed the 42-line Bible in Mainz around 1455.', { title: 'Gutenberg' });
  console.log((await dm.ask('When was the Gutenberg Bible printed?')).answer);
  const bytes = await dm.exportLibrary();
  await dm.importLibrary(bytes);
  for (const d of await dm.documents()) console.log(d.title, d.chunks, (await dm.memory(d.id)).outline);
  dm.close();
}

export async function manifestFor(dir: string): Promise<string> {
  const m = await makeManifest(dir, { baseUrl: 'https://cdn.example.com/models/' });
  return JSON.stringify(m);
}
