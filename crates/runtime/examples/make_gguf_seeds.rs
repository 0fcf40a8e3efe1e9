//! Writes seed files for the `gguf` fuzz target into `fuzz/corpus/gguf/`.
//!
//! `cargo run -p docmem-runtime --example make_gguf_seeds`

use docmem_runtime::gguf::testing::{sample, Builder};

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/gguf");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("seed-sample"), sample())?;
    std::fs::write(dir.join("seed-empty-v2"), Builder::default().build(2))?;
    std::fs::write(
        dir.join("seed-kquants"),
        Builder::default().kv_u32("general.alignment", 64).tensor("q5k", &[256, 2], 13, 352).tensor("q6k", &[256], 14, 210).build(3),
    )?;
    std::fs::write(dir.join("seed-unsupported"), Builder::default().tensor("iq", &[256], 19, 256).build(3))?;
    println!("seeds written under {}", dir.display());
    Ok(())
}
