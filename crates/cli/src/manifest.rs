//! `docmem models manifest DIR`: the model manifest an app hosts beside its model files.
//!
//! The npm package opens its models from a manifest (`js/models.schema.json`): each role's
//! files with their URL, size and sha256, which the browser checks as it downloads. The
//! package writes the same manifest in Node (`js/manifest.js`, `npx docmem-manifest`); this
//! is that writer for people who have the CLI and not Node. The folder's layout is the
//! one `docmem models fetch` leaves: one sentence-transformers folder (config.json,
//! tokenizer.json, model.safetensors) and one or more GGUF files; every GGUF is a choice,
//! and `--reader` (else the first by name) reads and answers.

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::CliError;

#[derive(Args, Debug)]
pub struct ManifestArgs {
    /// The folder of models (one embedder folder and .gguf files).
    dir: PathBuf,
    /// Where the folder will be served, e.g. https://cdn.example.com/models/ [default:
    /// URLs relative to the manifest, which is then served from the folder itself].
    #[arg(long)]
    base_url: Option<String>,
    /// The GGUF file that reads and answers [default: the first by name].
    #[arg(long)]
    reader: Option<String>,
}

#[derive(Serialize, Clone)]
struct FileEntry {
    path: String,
    url: String,
    size: u64,
    sha256: String,
}

#[derive(Serialize, Clone)]
struct Spec {
    name: String,
    files: Vec<FileEntry>,
}

#[derive(Serialize)]
struct Choice {
    id: String,
    name: String,
    label: String,
    note: String,
    size: u64,
    default: bool,
    files: Vec<FileEntry>,
}

#[derive(Serialize)]
struct Manifest {
    embedder: Spec,
    reader: Spec,
    answerer: Spec,
    choices: Vec<Choice>,
}

/// Print the manifest of `a.dir` to stdout.
pub fn run(a: &ManifestArgs) -> Result<(), CliError> {
    let manifest = make(&a.dir, a.base_url.as_deref().unwrap_or(""), a.reader.as_deref())?;
    println!("{}", serde_json::to_string_pretty(&manifest).expect("a manifest serializes"));
    Ok(())
}

fn bad(message: String) -> CliError {
    CliError::BadArgument { message }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<std::fs::DirEntry>, CliError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .and_then(|d| d.collect::<Result<Vec<_>, _>>())
        .map_err(|source| CliError::Read { path: dir.to_owned(), source })?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

fn visible(e: &std::fs::DirEntry) -> bool {
    !e.file_name().to_string_lossy().starts_with('.')
}

/// `rel`'s URL: each segment percent-encoded as `encodeURIComponent` does, under `base`.
fn url_of(rel: &str, base: &str) -> String {
    let encoded: Vec<String> = rel
        .split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect()
        })
        .collect();
    let encoded = encoded.join("/");
    match base {
        "" => encoded,
        b if b.ends_with('/') => format!("{b}{encoded}"),
        b => format!("{b}/{encoded}"),
    }
}

fn sha256_file(path: &Path) -> Result<(u64, String), CliError> {
    let read_err = |source| CliError::Read { path: path.to_owned(), source };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 22];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((size, hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}

fn entry(dir: &Path, rel: &str, name: &str, base: &str) -> Result<FileEntry, CliError> {
    let (size, sha256) = sha256_file(&dir.join(rel))?;
    Ok(FileEntry { path: name.to_owned(), url: url_of(rel, base), size, sha256 })
}

fn make(dir: &Path, base: &str, reader: Option<&str>) -> Result<Manifest, CliError> {
    if !dir.is_dir() {
        return Err(bad(format!("{}: not a folder", dir.display())));
    }
    let entries = read_dir_sorted(dir)?;
    let embedders: Vec<String> = entries
        .iter()
        .filter(|e| visible(e) && e.path().is_dir())
        .filter(|e| ["config.json", "tokenizer.json", "model.safetensors"].iter().all(|f| e.path().join(f).is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let embedder = match &embedders[..] {
        [one] => one.clone(),
        [] => {
            return Err(bad(format!(
                "{}: no embedder folder (one holding config.json, tokenizer.json and model.safetensors)",
                dir.display()
            )))
        }
        many => return Err(bad(format!("{}: more than one embedder folder ({}); keep one", dir.display(), many.join(", ")))),
    };
    let mut embedder_files = Vec::new();
    let mut pending = vec![embedder.clone()];
    while let Some(sub) = pending.pop() {
        for e in read_dir_sorted(&dir.join(&sub))?.iter().filter(|e| visible(e)) {
            let rel = format!("{sub}/{}", e.file_name().to_string_lossy());
            if e.path().is_dir() {
                pending.push(rel);
            } else if e.path().is_file() {
                let name = rel[embedder.len() + 1..].to_owned();
                embedder_files.push(entry(dir, &rel, &name, base)?);
            }
        }
    }
    embedder_files.sort_by(|a, b| a.path.cmp(&b.path));
    let ggufs: Vec<String> = entries
        .iter()
        .filter(|e| visible(e) && e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.to_ascii_lowercase().ends_with(".gguf"))
        .collect();
    let chosen = match reader {
        Some(r) if ggufs.iter().any(|g| g == r) => r.to_owned(),
        Some(r) => return Err(bad(format!("{}: no {r} (the GGUF files here: {})", dir.display(), ggufs.join(", ")))),
        None => ggufs.first().cloned().ok_or_else(|| bad(format!("{}: no language model (a .gguf file)", dir.display())))?,
    };
    let order = std::iter::once(chosen.clone()).chain(ggufs.into_iter().filter(|g| *g != chosen));
    let mut choices = Vec::new();
    for file in order {
        let files = vec![entry(dir, &file, &file, base)?];
        let label = file.strip_suffix(".gguf").unwrap_or(&file).to_owned();
        choices.push(Choice {
            id: file.clone(),
            name: file.clone(),
            label,
            note: String::new(),
            size: files[0].size,
            default: file == chosen,
            files,
        });
    }
    let lm = Spec { name: choices[0].name.clone(), files: choices[0].files.clone() };
    Ok(Manifest { embedder: Spec { name: embedder, files: embedder_files }, reader: lm.clone(), answerer: lm, choices })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temp dir, removed when dropped.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(name: &str) -> Scratch {
            let p = std::env::temp_dir().join(format!("docmem-manifest-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn folder(name: &str) -> Scratch {
        let d = Scratch::new(name);
        let e = d.path().join("mini lm");
        std::fs::create_dir_all(e.join("1_Pooling")).unwrap();
        for f in ["config.json", "tokenizer.json", "model.safetensors", "1_Pooling/config.json"] {
            std::fs::write(e.join(f), f).unwrap();
        }
        std::fs::write(e.join(".config.json.sha256-checked"), "stamp").unwrap();
        std::fs::write(d.path().join("b.gguf"), b"GGUF b").unwrap();
        std::fs::write(d.path().join("a.gguf"), b"GGUF a").unwrap();
        d
    }

    #[test]
    fn a_folder_gives_each_file_its_url_size_and_sha256() {
        let d = folder("urls");
        let m = make(d.path(), "https://cdn.example/models", Some("b.gguf")).unwrap();
        assert_eq!(m.embedder.name, "mini lm");
        let names: Vec<&str> = m.embedder.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"], "stamps are left out");
        assert_eq!(m.embedder.files[1].url, "https://cdn.example/models/mini%20lm/config.json");
        assert_eq!(m.embedder.files[1].size, 11);
        // sha256("config.json")
        assert_eq!(m.embedder.files[1].sha256, "587cb980af76fdc7e52369fd0b9d926dff266976b6f8ac631e358fecc49ff8cf");
        assert_eq!(m.reader.name, "b.gguf");
        assert_eq!(m.answerer.files[0].url, "https://cdn.example/models/b.gguf");
        let ids: Vec<&str> = m.choices.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["b.gguf", "a.gguf"], "the chosen reader first");
        assert!(m.choices[0].default && !m.choices[1].default);
    }

    #[test]
    fn without_a_reader_or_a_base_the_first_gguf_and_relative_urls() {
        let d = folder("first");
        let m = make(d.path(), "", None).unwrap();
        assert_eq!(m.reader.name, "a.gguf");
        assert_eq!(m.reader.files[0].url, "a.gguf");
    }

    #[test]
    fn a_folder_without_models_or_a_missing_reader_is_named_in_the_error() {
        let d = folder("errors");
        let e = make(d.path(), "", Some("c.gguf")).err().unwrap().to_string();
        assert!(e.contains("c.gguf") && e.contains("a.gguf, b.gguf"), "{e}");
        let empty = Scratch::new("empty");
        let e = make(empty.path(), "", None).err().unwrap().to_string();
        assert!(e.contains("no embedder folder"), "{e}");
    }
}
