#!/usr/bin/env bash
# Install what the build needs on a fresh machine: the pinned Rust toolchain with its
# targets and components (from rust-toolchain.toml). Idempotent; fast when done.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$DOCMEM_ROOT"

if ! command -v rustup >/dev/null 2>&1; then
  echo "docmem: rustup is required (https://rustup.rs); it was not found on PATH" >&2
  exit 1
fi
channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
targets=$(sed -n 's/^targets *= *\[\(.*\)\]/\1/p' rust-toolchain.toml | tr -d '" ' )
components=$(sed -n 's/^components *= *\[\(.*\)\]/\1/p' rust-toolchain.toml | tr -d '" ')
installed_targets=$(rustup target list --installed --toolchain "$channel" 2>/dev/null || true)
need=0
for t in ${targets//,/ }; do
  grep -qx "$t" <<<"$installed_targets" || need=1
done
for c in ${components//,/ }; do
  rustup component list --installed --toolchain "$channel" 2>/dev/null | grep -q "^$c" || need=1
done
if [ "$need" = 1 ] || ! rustup run "$channel" rustc --version >/dev/null 2>&1; then
  step "installing Rust $channel with targets $targets and components $components"
  rustup toolchain install "$channel" --profile minimal --component "$components" --target "$targets"
fi

# The pinned nightly that builds the wasm threads package, with std's source (build-std)
# and clippy (that build is linted like the others).
nightly_components=$(rustup component list --installed --toolchain "$DOCMEM_THREADS_TOOLCHAIN" 2>/dev/null || true)
if ! grep -q '^rust-src' <<<"$nightly_components" || ! grep -q '^clippy' <<<"$nightly_components"; then
  step "installing Rust $DOCMEM_THREADS_TOOLCHAIN with rust-src and clippy (the wasm threads build)"
  rustup toolchain install "$DOCMEM_THREADS_TOOLCHAIN" --profile minimal --component rust-src,clippy
fi

# wasm-bindgen-cli at exactly the version the wasm crate links (Cargo.toml pins it).
wbg=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' Cargo.toml)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$wbg" ]; then
  step "installing wasm-bindgen-cli $wbg (about 5 minutes, once)"
  cargo install wasm-bindgen-cli --version "$wbg"
fi

# The browser tests: Chromium from Debian (headless, WebGPU through SwiftShader) and
# playwright-core from npm at the version package-lock.json pins, into ./node_modules.
# The GPU kernels' tests run natively on Vulkan through llvmpipe (Debian's
# mesa-vulkan-drivers), so they need no GPU.
debs=""
[ -x /usr/bin/chromium ] || debs="$debs chromium"
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || debs="$debs mesa-vulkan-drivers libvulkan1"
if [ -n "$debs" ]; then
  step "installing Debian packages:$debs (once)"
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends $debs >/dev/null
fi
# The npm dev tools at the versions package-lock.json pins, into ./node_modules:
# playwright-core (the browser tests) and, for the edge worker, typescript, miniflare (the
# workerd runtime, ~37 MB to download) and the Workers types.
stale=$(node -e '
  const lock = require("./package-lock.json").packages;
  const wanted = Object.keys(require("./package.json").devDependencies);
  const stale = wanted.filter((name) => {
    try { return require(`./node_modules/${name}/package.json`).version !== lock[`node_modules/${name}`].version; }
    catch { return true; }
  });
  console.log(stale.join(" "));')
if [ -n "$stale" ]; then
  step "installing npm dev tools ($stale) with npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

# Node 22 beside the system's Node (which may be 20): the relaxed-SIMD wasm build is tested
# on it (scripts/wasm-test.sh), since Node 20's V8 has relaxed SIMD only behind a flag and
# computes its dot product wrongly on some x86 machines. From npm's `node` package, into
# the cache (not ./node_modules, whose .bin would shadow the system's node in npm scripts).
if [ "$("$DOCMEM_NODE22" --version 2>/dev/null)" != "v$DOCMEM_NODE22_VERSION" ]; then
  step "installing Node $DOCMEM_NODE22_VERSION for the relaxed-SIMD tests with npm (once)"
  mkdir -p "$DOCMEM_CACHE/node22"
  echo '{ "private": true }' >"$DOCMEM_CACHE/node22/package.json"
  npm install --prefix "$DOCMEM_CACHE/node22" --no-audit --no-fund --loglevel=error --no-save "node@$DOCMEM_NODE22_VERSION"
fi
