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

/// Runs the test `name` of this test binary again once per x86 kernel path from `lowest`
/// to below the best this CPU takes, each in a process of its own with `DOCMEM_CPU` capping the path
/// (`docmem_runtime::cpu::isa`: the cap is read once per process), and fails naming the
/// path where it fails. Called from a test of its own; in the runs it starts (the cap set)
/// it does nothing. `name` itself should check that the path asked for is the one in use
/// ([`assert_cpu_path`]).
#[allow(dead_code)] // not every test file needs it
pub fn on_every_lower_cpu_path(name: &str, lowest: docmem_runtime::cpu::isa::Isa) {
    use docmem_runtime::cpu::isa::{self, Isa};
    if std::env::var_os(isa::CAP_VAR).is_some() {
        return;
    }
    for path in Isa::ALL.into_iter().filter(|&p| p >= lowest && p < isa::in_use()) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(isa::CAP_VAR, path.name())
            .output()
            .unwrap();
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && log.contains("1 passed"), "{name} on the {} path:\n{log}", path.name());
        eprintln!("{name}: holds on the {} path", path.name());
    }
}

/// In a run with `DOCMEM_CPU` set, that the path it names is the path the kernels take.
#[allow(dead_code)] // not every test file needs it
pub fn assert_cpu_path() {
    use docmem_runtime::cpu::isa;
    if let Ok(asked) = std::env::var(isa::CAP_VAR) {
        assert_eq!(isa::in_use().name(), asked, "the path asked for runs");
    }
}
