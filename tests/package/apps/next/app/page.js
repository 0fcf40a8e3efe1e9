// A server component: the page's markup, with docmem run in the browser by ./docmem.js.
import Docmem from './docmem.js';

export default function Page() {
  return <Docmem />;
}
