//! `docmem embed`: sentence vectors for the lines of stdin; and the embedder choice shared
//! by the commands that index and search.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use docmem_runtime::embed::{EmbedRole, EmbedderOptions, Precision, SentenceEmbedder};
use serde::Serialize;

use crate::CliError;

/// How an embedding model is loaded (shared by every command that loads one).
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Weight precision: f32, f16, q8_0 or bf16 (default: bf16, the fastest that meets
    /// the cosine ≥ 0.999 bar against sentence-transformers, at half the memory of f32)
    #[arg(long, value_parser = parse_precision, default_value = Precision::DEFAULT.name())]
    pub precision: Precision,
    /// Threads (0: one per core)
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::parse(s).ok_or_else(|| format!("'{s}' is not one of {}", Precision::NAMES))
}

impl LoadArgs {
    /// Load the model directory `dir`.
    pub fn load(&self, dir: &Path) -> Result<SentenceEmbedder, CliError> {
        SentenceEmbedder::load(dir, EmbedderOptions { precision: self.precision, threads: self.threads }).map_err(CliError::embedding_model)
    }
}

/// `docmem embed` arguments.
#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// A sentence-transformers model directory (config.json, model.safetensors,
    /// tokenizer.json; modules.json and 1_Pooling/ where present), or a .gguf file in
    /// llama.cpp's bert layout
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Embed the lines as queries (the model's query prefix), not passages
    #[arg(long)]
    pub query: bool,
    /// JSON output: {"model", "precision", "dim", "truncated", "vectors"}
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Output<'a> {
    model: &'a str,
    precision: &'a str,
    dim: usize,
    truncated: usize,
    vectors: &'a [Vec<f32>],
}

pub fn run(a: &EmbedArgs) -> Result<(), CliError> {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).map_err(|e| CliError::BadArgument { message: format!("stdin: {e}") })?;
    let texts: Vec<&str> = input.lines().collect();
    let e = a.load.load(&a.model)?;
    let role = if a.query { EmbedRole::Query } else { EmbedRole::Passage };
    let out = e.embed(&texts, role)?;
    let mut stdout = std::io::stdout().lock();
    if a.json {
        let o = Output { model: e.name(), precision: e.precision().name(), dim: e.dim(), truncated: out.truncated, vectors: &out.vectors };
        serde_json::to_writer(&mut stdout, &o).map_err(|e| CliError::Output(e.into()))?;
        writeln!(stdout)?;
    } else {
        for v in &out.vectors {
            let line: Vec<String> = v.iter().map(|x| format!("{x:.6}")).collect();
            writeln!(stdout, "{}", line.join(" "))?;
        }
    }
    if out.truncated > 0 {
        eprintln!("docmem: {} of {} lines were longer than the model's limit and were truncated", out.truncated, texts.len());
    }
    Ok(())
}

/// The embedder of the commands that index and search (`chunk --chunker semantic`,
/// `retrieve`).
#[derive(Args, Debug)]
pub struct EmbedderArgs {
    /// Sentence-embedding model directory, `hashing` for the model-free feature-hashing
    /// fallback, or `remote:NAME` for a hosted model through --remote. Default:
    /// all-MiniLM-L6-v2 from $DOCMEM_MODELS or ./models (where `docmem models fetch` puts
    /// it), else the hashing fallback
    #[arg(long)]
    pub embedder: Option<PathBuf>,
    /// The embedding model's weight precision: f32, f16, q8_0 or bf16
    #[arg(long, value_parser = parse_precision, default_value = Precision::DEFAULT.name())]
    pub embed_precision: Precision,
    /// Threads for the embedding model (0: one per core)
    #[arg(long, default_value_t = 0)]
    pub embed_threads: usize,
    /// The host of `remote:NAME` models (any role).
    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
}

/// The default model's directory name.
const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2";

impl EmbedderArgs {
    /// Open the chosen embedder.
    pub fn open(&self) -> Result<Box<dyn docmem_core::Embedder>, CliError> {
        if let Some(name) = self.embedder.as_deref().and_then(crate::remote::remote_name) {
            let transport = self.remote.transport("embedder", name, "document chunks and questions")?;
            let embedder = docmem_runtime::remote::RemoteEmbedder::connect(transport, name).map_err(CliError::embedding_model)?;
            return Ok(Box::new(embedder));
        }
        let dir = match &self.embedder {
            Some(p) if p.as_os_str() == "hashing" => return Ok(docmem_runtime::fallback_embedder()),
            Some(p) => p.clone(),
            None => match default_model_dir() {
                Some(d) => d,
                None => return Ok(docmem_runtime::fallback_embedder()),
            },
        };
        let load = LoadArgs { precision: self.embed_precision, threads: self.embed_threads };
        Ok(Box::new(load.load(&dir)?))
    }
}

/// all-MiniLM-L6-v2 where `scripts/fetch-models.sh` ($DOCMEM_MODELS) or `docmem models
/// fetch` (./models) put it.
fn default_model_dir() -> Option<PathBuf> {
    crate::models::model_dirs().into_iter().map(|p| p.join(DEFAULT_MODEL)).find(|d| d.join("model.safetensors").is_file())
}
