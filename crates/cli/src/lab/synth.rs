//! `docmem synth-gguf`: a synthetic model written as a GGUF file, so a peer (llama.cpp's
//! `llama-bench`) is timed on the very bytes `docmem bench lm --synthetic` runs, and so a
//! benchmark machine that cannot receive a 1 GB model file can still be given its shapes.

use std::path::PathBuf;

use clap::Args;
use docmem_runtime::synthetic::{self, DecoderSpec, Quant, DECODERS, EMBEDDERS};

use crate::CliError;

/// `docmem synth-gguf` arguments.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// MODEL:QUANT (qwen2-1.5b:q4_k_m, llama-135m:q4_1, …), or an embedder's name
    /// (minilm), written in llama.cpp's bert layout
    #[arg(required_unless_present = "list")]
    spec: Option<String>,
    /// The GGUF file to write
    #[arg(required_unless_present = "list")]
    out: Option<PathBuf>,
    /// Seed of the weights (the same seed gives the same bytes)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// List the models and quantizations instead
    #[arg(long)]
    list: bool,
}

pub fn run(a: &SynthArgs) -> Result<(), CliError> {
    if a.list {
        let quants: Vec<&str> = Quant::ALL.iter().map(|q| q.name()).collect();
        println!("decoders (MODEL:QUANT, QUANT one of {}):", quants.join(", "));
        for d in &DECODERS {
            println!("  {:<12} {} ({} layers, width {}, vocabulary {})", d.name, d.model, d.layers, d.embd, d.vocab);
        }
        println!("embedders:");
        for e in &EMBEDDERS {
            println!("  {:<12} {} ({} layers, width {})", e.name, e.model, e.layers, e.hidden);
        }
        return Ok(());
    }
    let (Some(spec), Some(out)) = (&a.spec, &a.out) else {
        return Err(CliError::BadArgument { message: "give MODEL:QUANT and the file to write (or --list)".into() });
    };
    let bytes = if spec.contains(':') {
        let spec: DecoderSpec = spec.parse().map_err(|e| CliError::BadArgument { message: format!("{e}") })?;
        synthetic::decoder_gguf(spec.shape, spec.quant, a.seed)
    } else {
        let shape = synthetic::embedder_shape(spec).map_err(|e| CliError::BadArgument { message: format!("{e}") })?;
        synthetic::embedder_gguf(shape, a.seed)
    };
    std::fs::write(out, &bytes).map_err(CliError::Output)?;
    eprintln!("wrote {} ({:.1} MB)", out.display(), bytes.len() as f64 / 1e6);
    Ok(())
}
