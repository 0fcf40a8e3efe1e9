//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// A test model fetched by `scripts/fetch-models.sh` (which `npm test` runs first), from
/// `$DOCMEM_MODELS` or `~/.cache/docmem/models`.
#[allow(dead_code)] // not every test file needs it
pub fn model(name: &str) -> PathBuf {
    let dir = std::env::var_os("DOCMEM_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/docmem/models"));
    let path = dir.join(name);
    assert!(name.is_empty() || path.is_file(), "{} is missing: run `bash scripts/fetch-models.sh` (npm test does)", path.display());
    path
}

/// This package's directory: cargo's run-time value first, so a test binary reused from a
/// shared build cache by a checkout at another path still finds its files.
#[allow(dead_code)] // not every test file needs it
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}

/// A test model directory (see [`model`]).
#[allow(dead_code)] // not every test file needs it
pub fn model_dir(name: &str) -> PathBuf {
    let path = model("").join(name);
    assert!(path.is_dir(), "{} is missing: run `bash scripts/fetch-models.sh` (npm test does)", path.display());
    path
}
