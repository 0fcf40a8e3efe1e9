// The files a browser (or a bundler building for one) can reach from the package's browser
// entry, and the proof that none of them is Node code. From the entry that package.json's
// exports give the `browser` condition, it follows every static import and re-export,
// every `import('…')` of a literal path, and every `new URL('….js' or '….mjs',
// import.meta.url)` (the worker, the thread helper, the wasm glue, PDF.js), as a bundler
// does. Any specifier that names a Node builtin (`node:…`, `fs`, `worker_threads`, …) fails
// it, and so does the text `node:` anywhere in a file of ours (comments included: a
// bundler may not read them, but a reader of the browser code should never find Node in
// it). PDF.js (vendor/) is checked by its imports only: its own Node branches are behind
// process.getBuiltinModule, which no bundler follows.
//
//   node tests/package/browser-graph.mjs PACKAGE_DIR   (prints the files reached)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILTINS = new Set(builtinModules.flatMap((m) => [m, m.split('/')[0]]));

/** The specifiers a module names, by kind. */
function specifiers(text) {
  const found = [];
  const add = (kind, re) => {
    for (const m of text.matchAll(re)) found.push({ kind, spec: m[1] });
  };
  add('import', /(?:^|[;\s}])(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g);
  add('import', /(?:^|[;\s])import\s*['"]([^'"]+)['"]/g);
  add('dynamic import', /\bimport\s*\(\s*(?:\/\*(?:[^*]|\*(?!\/))*\*\/\s*)*['"]([^'"]+)['"]\s*\)/g);
  add('new URL', /\bnew URL\(\s*['"]([^'"]+\.m?js)['"]\s*,\s*import\.meta\.url\s*\)/g);
  return found;
}

/** Every file reachable from the browser entry of the package in `dir`: [relative path]. Throws naming what is Node code. */
export function browserGraph(dir) {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const entry = pkg.exports?.['.']?.browser;
  assert.ok(typeof entry === 'string', 'package.json exports "." has a browser condition');
  const seen = new Set();
  const todo = [path.resolve(dir, entry)];
  while (todo.length) {
    const file = todo.pop();
    const rel = path.relative(dir, file);
    if (seen.has(rel)) continue;
    seen.add(rel);
    assert.ok(fs.existsSync(file), `${rel} is named but not in the package`);
    const text = fs.readFileSync(file, 'utf8');
    const ours = !rel.startsWith(`vendor${path.sep}`);
    if (ours) {
      const at = text.indexOf('node:');
      assert.ok(at < 0, `${rel}, reachable from the browser entry, names node: (${JSON.stringify(text.slice(Math.max(0, at - 40), at + 30))})`);
    }
    for (const { kind, spec } of specifiers(text)) {
      const bare = !spec.startsWith('.') && !spec.startsWith('/');
      assert.ok(!spec.startsWith('node:') && !(bare && BUILTINS.has(spec.split('/')[0])), `${rel} names the Node builtin '${spec}' (${kind})`);
      // (PDF.js writes import statements into strings, for its CDN wrapper: text, not imports.)
      if (!ours && (bare || spec.includes('${'))) continue;
      assert.ok(!bare, `${rel} names the package '${spec}' (${kind}); the browser entry is self-contained`);
      todo.push(path.resolve(path.dirname(file), spec));
    }
  }
  return [...seen].sort();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error('usage: node tests/package/browser-graph.mjs PACKAGE_DIR (an unpacked tarball: js/ lacks vendor/)');
    process.exit(2);
  }
  const dir = path.resolve(process.argv[2]);
  const files = browserGraph(dir);
  console.log(`browser entry: ${files.length} files reachable, none names a Node builtin:\n  ${files.join('\n  ')}`);
}
