// Helpers shared by the Node checks of the wasm package.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

// Every file under `dir`, keyed by its path relative to `dir` ('/'-separated), as bytes:
// a model directory for `new Embedder(files, …)`, or a stored library for `Library.open`.
function readTree(dir) {
  const files = {};
  const walk = (sub) => {
    for (const entry of fs.readdirSync(path.join(dir, sub), { withFileTypes: true })) {
      const name = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(name);
      else files[name] = new Uint8Array(fs.readFileSync(path.join(dir, name)));
    }
  };
  walk('');
  return files;
}

module.exports = { readTree };
