//! Writes seed files for the runtime's fuzz targets: `fuzz/corpus/gguf/` (headers),
//! `fuzz/corpus/gguf_load/` (whole tiny models with their tokenizers and chat templates,
//! well-formed and hostile templates) and `fuzz/corpus/hf_checkpoint/` (tiny Hugging Face
//! checkpoints, decoder and BERT embedder, in the harness's input format).
//!
//! `cargo run -p docmem-runtime --example make_gguf_seeds`

use std::collections::BTreeMap;

use docmem_runtime::fuzz_harness::{hf_input, safetensors_header, seeds};
use docmem_runtime::gguf::testing::{sample, tiny_lm, Builder, TinyLm, TinyTokenizer};

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let dir = root.join("gguf");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("seed-sample"), sample())?;
    std::fs::write(dir.join("seed-empty-v2"), Builder::default().build(2))?;
    std::fs::write(
        dir.join("seed-kquants"),
        Builder::default().kv_u32("general.alignment", 64).tensor("q5k", &[256, 2], 13, 352).tensor("q6k", &[256], 14, 210).build(3),
    )?;
    std::fs::write(dir.join("seed-unsupported"), Builder::default().tensor("iq", &[256], 19, 256).build(3))?;

    // Whole models: each tokenizer and architecture, ChatML and a SmolLM2-style template,
    // and templates that loop, recurse, raise, do not parse, or build huge strings.
    let dir = root.join("gguf_load");
    std::fs::create_dir_all(&dir)?;
    let smollm = Some(seeds::SMOLLM_TEMPLATE);
    std::fs::write(dir.join("seed-llama-gpt2-chatml"), tiny_lm("llama", TinyTokenizer::Gpt2, None))?;
    std::fs::write(dir.join("seed-qwen2-spm-smollm"), tiny_lm("qwen2", TinyTokenizer::Spm, smollm))?;
    std::fs::write(dir.join("seed-llama-spm-smollm"), tiny_lm("llama", TinyTokenizer::Spm, smollm))?;
    // A SentencePiece piece of 256 kB: building the merges was quadratic in its length
    // (3 s for this one; linear now).
    let long = TinyLm { tokenizer: TinyTokenizer::Spm, long_token: 256 << 10, ..TinyLm::default() };
    std::fs::write(dir.join("seed-spm-long-token"), long.build())?;
    let hostile = [
        ("loop", "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}"),
        ("recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
        ("raise", "{{ raise_exception('the template refuses') }}"),
        ("broken", "{% for message in messages %}{{ message['content'] "),
        ("repeat", "{{ bos_token * 1000 }}{% for m in messages %}{{ m.content * 3 }}{% endfor %}"),
        (
            "doubling",
            "{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s|length }}{% endif %}{% endmacro %}{{ d('ab', 8) }}",
        ),
        ("methods", "{% for m in messages %}{{ m.content.strip().upper().split(' ')|join('|') }}{{ m.role.startswith('u') }}{% endfor %}"),
        ("no-generation-prompt", "{% for m in messages %}{{ m.content }}{% endfor %}"),
    ];
    for (name, template) in hostile {
        std::fs::write(dir.join(format!("seed-template-{name}")), tiny_lm("llama", TinyTokenizer::Gpt2, Some(template)))?;
    }

    // Hugging Face checkpoints in the hf_checkpoint harness's format, with header-only
    // safetensors (the harness fills in the data), and one with its data.
    let dir = root.join("hf_checkpoint");
    std::fs::create_dir_all(&dir)?;
    let header_only = |mut files: BTreeMap<String, Vec<u8>>| {
        if let Some(st) = files.get_mut("model.safetensors") {
            *st = safetensors_header(st);
        }
        hf_input(&files)
    };
    let llama = seeds::tiny_hf_lm("llama", TinyTokenizer::Gpt2, None)?;
    std::fs::write(dir.join("seed-llama-gpt2"), header_only(llama.clone()))?;
    std::fs::write(dir.join("seed-llama-gpt2-with-data"), hf_input(&llama))?;
    std::fs::write(dir.join("seed-qwen2-spm-smollm"), header_only(seeds::tiny_hf_lm("qwen2", TinyTokenizer::Spm, smollm)?))?;
    std::fs::write(dir.join("seed-bert"), header_only(seeds::tiny_bert()))?;
    let mut listed = llama;
    let list = serde_json::json!({"chat_template": [{"name": "tool_use", "template": "{{ 1 }}"}, {"name": "default", "template": "{% for m in messages %}{{ m.content }}{% endfor %}"}]});
    listed.insert("tokenizer_config.json".into(), serde_json::to_vec(&list)?);
    std::fs::write(dir.join("seed-llama-template-list"), header_only(listed))?;
    println!("seeds written under {}", root.display());
    Ok(())
}
