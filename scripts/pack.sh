#!/usr/bin/env bash
# `npm run pack`: the npm package as a tarball, holding what an app needs and nothing else:
# the browser entry and its worker scripts (js/*.js), the Node entry and its own
# (js/node/*.js), the TypeScript types, the model manifest's
# schema and writer (bin/docmem-manifest.js), the three wasm builds with their
# wasm-bindgen glue in wasm/{plain,threads,relaxed}/, PDF.js's browser build with its CMaps
# and standard fonts in vendor/pdfjs/ (Node uses the pdfjs-dist dependency instead), the
# README, the API reference and the licences. The files are staged in OUT_DIR/package
# (js/wasm/* are links into the build cache), then `npm pack` writes the tarball and its
# report (pack.json) into OUT_DIR.
#
#   bash scripts/pack.sh [OUT_DIR]      (default $DOCMEM_CACHE/npm; prints the tarball's path last)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
set -euo pipefail
cd "$DOCMEM_ROOT"
out="${1:-$DOCMEM_CACHE/npm}"
stage="$out/package"
for build in wasm-pkg-web wasm-pkg-web-threads wasm-pkg-web-threads-relaxed; do
  if [ ! -f "$DOCMEM_CACHE/$build/docmem_wasm_bg.wasm" ]; then
    echo "docmem: no $build in $DOCMEM_CACHE; run bash scripts/build-wasm.sh first" >&2
    exit 1
  fi
done
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/node" "$stage/vendor/pdfjs/build" "$out"
cp js/*.js js/*.d.ts js/models.schema.json js/package.json js/README.md "$stage/"
cp js/node/*.js "$stage/node/"
cp -r js/api "$stage/api"
cp js/bin/docmem-manifest.js "$stage/bin/"
cp LICENSE-MIT LICENSE-APACHE "$stage/"
declare -A builds=([plain]=wasm-pkg-web [threads]=wasm-pkg-web-threads [relaxed]=wasm-pkg-web-threads-relaxed)
for name in plain threads relaxed; do
  mkdir -p "$stage/wasm/$name"
  cp "$DOCMEM_CACHE/${builds[$name]}/docmem_wasm.js" "$DOCMEM_CACHE/${builds[$name]}/docmem_wasm_bg.wasm" "$stage/wasm/$name/"
done
pdfjs=node_modules/pdfjs-dist
cp "$pdfjs/build/pdf.min.mjs" "$pdfjs/build/pdf.worker.min.mjs" "$stage/vendor/pdfjs/build/"
cp -r "$pdfjs/cmaps" "$pdfjs/standard_fonts" "$stage/vendor/pdfjs/"
cp "$pdfjs/LICENSE" "$stage/vendor/pdfjs/"
(cd "$stage" && npm pack --pack-destination "$out" --json --loglevel=error) >"$out/pack.json"
node -e '
  const [r] = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const mb = (n) => (n / 1048576).toFixed(1) + " MB";
  console.error(`docmem: ${r.filename}: ${r.entryCount} files, ${mb(r.size)} packed, ${mb(r.unpackedSize)} unpacked`);
  console.log(require("path").join(process.argv[2], r.filename));
' "$out/pack.json" "$out"
