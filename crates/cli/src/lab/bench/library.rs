//! `docmem bench library`: what a library costs as it grows, the way `docmem ingest`
//! and `docmem search` meet it. Documents are added one at a time into a library
//! directory (sentence chunks, the hashing embedder, so that what is timed is the
//! library's own work and not a model's; merges run on a thread, as in `docmem ingest`),
//! and for each thousand added it reports the seconds and the bytes written per document; then the time to open the library and
//! answer one search (what a `docmem search` process pays), search latency inside an open
//! library, resident memory and the folder's size.
//!
//! Documents are made up (seeded words of a Zipf vocabulary, about 5.7 KB each) or, with
//! `--hotpot`, ten paragraphs drawn at random from HotpotQA's contexts, so that every
//! document is real text and no two are the same.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use docmem_core::chunk::ChunkerKind;
use docmem_core::library::{Library, LibrarySettings, Store};
use docmem_core::retrieve::SearchParams;
use docmem_core::Document;
use docmem_runtime::pipeline::ingest::MemoryMethod;
use docmem_runtime::pipeline::store::DirStore;
use docmem_runtime::session::{AddOptions, Session};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::stats::Latency;
use crate::CliError;

#[derive(Args)]
pub struct LibraryBenchArgs {
    /// Documents to add.
    #[arg(long, default_value_t = 10_000)]
    pub docs: usize,
    /// Report every this many documents.
    #[arg(long, default_value_t = 1_000)]
    pub every: usize,
    /// Searches timed inside the open library (sentences of the documents as queries).
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// HotpotQA distractor-format JSON to draw paragraphs from (e.g.
    /// shared/eval/hotpotqa-dev-distractor-sample.json); made-up text when absent.
    #[arg(long)]
    pub hotpot: Option<PathBuf>,
    /// The library directory (kept); a temporary one, removed after, when absent. It must
    /// not hold a library yet.
    #[arg(long)]
    pub library: Option<PathBuf>,
    /// RNG seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A store that counts the bytes written through it.
struct Counting<S> {
    inner: S,
    written: u64,
}

impl<S: Store> Store for Counting<S> {
    fn read(&mut self, key: &str) -> Result<Option<Vec<u8>>, docmem_core::Error> {
        self.inner.read(key)
    }
    fn write(&mut self, key: &str, bytes: &[u8]) -> Result<(), docmem_core::Error> {
        self.written += bytes.len() as u64;
        self.inner.write(key, bytes)
    }
    fn remove(&mut self, key: &str) -> Result<(), docmem_core::Error> {
        self.inner.remove(key)
    }
    fn keys(&mut self) -> Result<Vec<String>, docmem_core::Error> {
        self.inner.keys()
    }
    fn sole_writer(&self) -> bool {
        self.inner.sole_writer()
    }
}

#[derive(Serialize)]
struct Step {
    /// Documents in the library after this step.
    documents: usize,
    /// Mean seconds to add one document in this step.
    seconds_per_doc: f64,
    /// Mean bytes written per document added in this step (compaction included).
    bytes_written_per_doc: f64,
    /// Parts in the index after this step.
    parts: usize,
}

#[derive(Serialize)]
struct Report {
    documents: usize,
    source: String,
    steps: Vec<Step>,
    /// The last step's seconds per document over the first's.
    growth: f64,
    /// Bytes written over the whole run over the folder's size at the end.
    write_amplification: f64,
    folder_bytes: u64,
    /// Waiting, after the last add, for the merge under way to finish.
    final_merge_wait_s: f64,
    /// Open the library and answer one search, as a `docmem search` process does.
    open_and_search_s: f64,
    search: Latency,
    resident_mib: f64,
}

/// Text sources: made-up sentences or HotpotQA paragraphs.
enum Source {
    Words(Vec<String>),
    Paragraphs(Vec<String>),
}

impl Source {
    fn open(hotpot: Option<&Path>) -> Result<Self, CliError> {
        let Some(path) = hotpot else {
            // 20,000 made-up words; drawn with Zipf-like weights below.
            let mut rng = rand::rngs::StdRng::seed_from_u64(1);
            let letters = b"etaoinshrdlucmfwypvbgkjqxz";
            let words = (0..20_000)
                .map(|_| {
                    let n = rng.gen_range(2..10);
                    (0..n).map(|_| letters[rng.gen_range(0..letters.len()).min(rng.gen_range(0..letters.len()))] as char).collect()
                })
                .collect();
            return Ok(Source::Words(words));
        };
        let bytes = std::fs::read(path).map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
        let rows: Vec<serde_json::Value> =
            serde_json::from_slice(&bytes).map_err(|e| CliError::BadArgument { message: format!("--hotpot {}: {e}", path.display()) })?;
        let mut paragraphs: Vec<String> = rows
            .iter()
            .filter_map(|r| r["context"].as_array())
            .flatten()
            .filter_map(|p| p[1].as_array())
            .map(|sentences| sentences.iter().filter_map(|s| s.as_str()).collect::<String>())
            .filter(|p| !p.trim().is_empty())
            .collect();
        paragraphs.sort();
        paragraphs.dedup();
        if paragraphs.len() < 10 {
            return Err(CliError::BadArgument { message: format!("--hotpot {}: fewer than 10 paragraphs", path.display()) });
        }
        Ok(Source::Paragraphs(paragraphs))
    }

    fn name(&self) -> &'static str {
        match self {
            Source::Words(_) => "made-up text",
            Source::Paragraphs(_) => "HotpotQA paragraphs",
        }
    }

    /// Document `i`: about 5.7 KB.
    fn document(&self, i: usize, rng: &mut rand::rngs::StdRng) -> Document {
        let text = match self {
            Source::Words(words) => {
                let mut text = String::with_capacity(6000);
                while text.len() < 5_700 {
                    let n = rng.gen_range(8..25);
                    for w in 0..n {
                        // Zipf-like: the square of a uniform draw favours early words.
                        let u: f64 = rng.gen();
                        let word = &words[((u * u * u) * words.len() as f64) as usize % words.len()];
                        if w == 0 {
                            let mut c = word.chars();
                            text.extend(c.next().map(|f| f.to_ascii_uppercase()));
                            text.push_str(c.as_str());
                        } else {
                            text.push(' ');
                            text.push_str(word);
                        }
                    }
                    text.push_str(". ");
                }
                text
            }
            Source::Paragraphs(ps) => (0..10).map(|_| ps[rng.gen_range(0..ps.len())].as_str()).collect::<Vec<_>>().join("\n\n"),
        };
        Document::new(format!("doc-{i:05}.txt"), text)
    }
}

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.map_or(0.0, |kb| kb / 1024.0)
}

fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => folder_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

pub fn run(a: &LibraryBenchArgs) -> Result<(), CliError> {
    let source = Source::open(a.hotpot.as_deref())?;
    let (dir, temporary) = match &a.library {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("docmem-bench-library-{}", std::process::id())), true),
    };
    if dir.join("manifest.json").exists() {
        return Err(CliError::BadArgument { message: format!("--library: {} already holds a library", dir.display()) });
    }
    let result = measure(a, &source, &dir);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| CliError::Output(e.into()))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "{} documents of {}, sentence chunks, hashing embedder", report.documents, report.source)?;
    writeln!(out, "| documents | s per document | bytes written per document | parts |")?;
    writeln!(out, "| ---: | ---: | ---: | ---: |")?;
    for s in &report.steps {
        writeln!(out, "| {} | {:.4} | {:.0} | {} |", s.documents, s.seconds_per_doc, s.bytes_written_per_doc, s.parts)?;
    }
    writeln!(
        out,
        "last step over first: {:.2}×; bytes written / folder size: {:.2}; last merge waited for {:.1} s",
        report.growth, report.write_amplification, report.final_merge_wait_s
    )?;
    writeln!(
        out,
        "folder {:.1} MB; open + one search {:.3} s; search in an open library p50 {:.1} ms, p99 {:.1} ms; resident {:.0} MiB",
        report.folder_bytes as f64 / 1e6,
        report.open_and_search_s,
        report.search.p50_ms,
        report.search.p99_ms,
        report.resident_mib
    )?;
    Ok(())
}

fn measure(a: &LibraryBenchArgs, source: &Source, dir: &Path) -> Result<Report, CliError> {
    let mut embedder = std::cell::RefCell::new(docmem_runtime::fallback_embedder());
    let settings = LibrarySettings::new(embedder.borrow().name(), embedder.borrow().dim());
    let store = Counting { inner: DirStore::open(dir)?, written: 0 };
    let session = Session::new(Library::open(store, &settings)?);
    // As `docmem ingest` adds: merges on a thread of their own.
    session.library_mut()?.set_background_merges(true);
    let mut merges = crate::background_merge::BackgroundMerges::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let mut method = MemoryMethod::chunker(ChunkerKind::Sentence);
    let mut steps = Vec::new();
    let mut queries = Vec::new();
    let every = a.every.max(1);
    let (mut step_start, mut step_written) = (Instant::now(), 0u64);
    for i in 0..a.docs {
        let doc = source.document(i, &mut rng);
        if queries.len() < a.queries && i % (a.docs / a.queries.max(1)).max(1) == 0 {
            queries.extend(doc.text.split(". ").nth(2).map(str::to_owned));
        }
        docmem_runtime::block_on(session.add(&doc, &mut method, &embedder, &AddOptions::default(), &mut |_| true))?;
        let mut library = session.library_mut()?;
        merges.poll(&mut library)?;
        if (i + 1) % every == 0 || i + 1 == a.docs {
            let n = (i + 1 - steps.iter().map(|s: &Step| s.documents).max().unwrap_or(0)) as f64;
            let written = library.store_mut().written;
            steps.push(Step {
                documents: i + 1,
                seconds_per_doc: step_start.elapsed().as_secs_f64() / n,
                bytes_written_per_doc: (written - step_written) as f64 / n,
                parts: library.index().parts().len(),
            });
            if !a.json {
                let s = steps.last().map_or(0.0, |s| s.seconds_per_doc);
                eprintln!("docmem: {} documents, {s:.4} s per document", i + 1);
            }
            (step_start, step_written) = (Instant::now(), written);
        }
    }
    let waited = Instant::now();
    let mut library = session.into_library();
    merges.finish(&mut library)?;
    let final_merge_wait_s = waited.elapsed().as_secs_f64();
    let written = library.store_mut().written;
    drop(library);

    // What `docmem search` pays: open the folder, embed the question, search.
    let started = Instant::now();
    let library = Library::open(DirStore::open_shared(dir)?, &settings)?;
    let params = SearchParams::default();
    let first = queries.first().cloned().unwrap_or_default();
    library.search(&first, embedder.get_mut().as_mut(), &params)?;
    let open_and_search_s = started.elapsed().as_secs_f64();
    let mut seconds = Vec::with_capacity(queries.len());
    for q in &queries {
        let t = Instant::now();
        library.search(q, embedder.get_mut().as_mut(), &params)?;
        seconds.push(t.elapsed().as_secs_f64());
    }
    let folder = folder_bytes(dir);
    let growth = match (steps.first(), steps.last()) {
        (Some(f), Some(l)) if f.seconds_per_doc > 0.0 => l.seconds_per_doc / f.seconds_per_doc,
        _ => 0.0,
    };
    Ok(Report {
        documents: a.docs,
        source: source.name().into(),
        steps,
        growth,
        write_amplification: written as f64 / folder.max(1) as f64,
        folder_bytes: folder,
        final_merge_wait_s,
        open_and_search_s,
        search: Latency::of(&mut seconds),
        resident_mib: resident_mib(),
    })
}
