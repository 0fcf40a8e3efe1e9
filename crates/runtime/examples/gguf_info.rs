//! Print a GGUF file's architecture, key hyper-parameters, tensor types and identity (what
//! a probe fitted on it names it by: `docmem_runtime::model::ModelIdentity`).
//!
//! `cargo run -p docmem-runtime --example gguf_info -- MODEL.gguf`

use std::collections::BTreeMap;
use std::path::PathBuf;

use docmem_runtime::gguf::{GgufFile, MetaValue};
use docmem_runtime::source::FileSource;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = PathBuf::from(std::env::args().nth(1).ok_or("usage: gguf_info MODEL.gguf")?);
    let src = FileSource::open(&path)?;
    let t = std::time::Instant::now();
    let f = GgufFile::read(&src)?;
    println!("{}: GGUF v{}, header read in {:.1} ms", path.display(), f.version, t.elapsed().as_secs_f64() * 1e3);
    for (k, v) in &f.metadata {
        let shown = match v {
            MetaValue::Array(a) => format!("[{} items]", a.len()),
            MetaValue::String(s) if s.len() > 80 => {
                format!("{:?}… ({} bytes)", &s[..s.char_indices().nth(60).map_or(s.len(), |(i, _)| i)], s.len())
            }
            other => format!("{other:?}"),
        };
        println!("  {k} = {shown}");
    }
    let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in &f.tensors {
        let e = by_type.entry(t.ggml_type.to_string()).or_default();
        e.0 += 1;
        e.1 += t.size;
    }
    println!("  {} tensors, data at byte {}:", f.tensors.len(), f.data_offset);
    for (ty, (n, bytes)) in by_type {
        println!("    {ty:<5} {n:>4} tensors {:>8.1} MB", bytes as f64 / 1e6);
    }
    println!("  identity {}", docmem_runtime::model::ModelIdentity::of_gguf(&f, &src)?.to_hex());
    Ok(())
}
