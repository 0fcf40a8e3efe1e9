'use client';
// docmem runs in the browser only: the package and the page's script (page-script.js, which
// the test copies in) are imported in an effect, after hydration, so the static prerender
// never runs them.
import { useEffect } from 'react';

export default function Docmem() {
  useEffect(() => {
    Promise.all([import('docmem'), import('./page-script.js')]).then(([{ DocMem }, { run }]) => run(DocMem));
  }, []);
  return (
    <>
      <p id="backend">loading…</p>
      <p id="answer"></p>
      <p id="citation"></p>
      <p id="pdf"></p>
    </>
  );
}
