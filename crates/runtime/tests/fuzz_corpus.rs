//! Runs every file of the runtime's fuzz corpora (`fuzz/corpus/<target>/`) through its
//! harness, measured as the fuzz targets measure it: a case over 1 s or a 256 MiB
//! allocation peak is a failure naming the file, its time and its peak. Also checks that
//! the seeds the corpora grew from load and run, so the harnesses reach past the loaders.

mod common;

use common::manifest_dir;
use docmem_core::fuzz_harness::meter::{one_at_a_time, replay};
use docmem_runtime::embed::{EmbedderOptions, Precision, SentenceEmbedder};
use docmem_runtime::fuzz_harness::{hf_files, hf_input, safetensors_header, seeds};
use docmem_runtime::gguf::testing::{tiny_lm, TinyTokenizer};
use docmem_runtime::lm::{Lm, LoadOptions, PrefillOptions, Prompt};
use docmem_runtime::source::MemorySource;

docmem_core::counting_allocator!();

fn run(target: &str, harness: fn(&[u8])) {
    replay(&manifest_dir().join("../../fuzz/corpus"), target, harness, 3);
}

#[test]
fn gguf_corpus() {
    let _serial = one_at_a_time();
    run("gguf", docmem_runtime::gguf::testing::fuzz_read);
}

#[test]
fn gguf_load_corpus() {
    let _serial = one_at_a_time();
    run("gguf_load", docmem_runtime::fuzz_harness::gguf_load);
}

#[test]
fn chat_template_corpus() {
    let _serial = one_at_a_time();
    run("chat_template", docmem_runtime::fuzz_harness::chat_template);
}

#[test]
fn hf_checkpoint_corpus() {
    let _serial = one_at_a_time();
    run("hf_checkpoint", docmem_runtime::fuzz_harness::hf_checkpoint);
}

#[cfg(feature = "pdf")]
#[test]
fn pdf_corpus() {
    let _serial = one_at_a_time();
    run("pdf", docmem_runtime::fuzz_harness::pdf);
}

fn opts() -> LoadOptions {
    LoadOptions { threads: 1, context: 256, ..LoadOptions::default() }
}

/// The GGUF seeds are whole models: each loads from memory, renders a chat in its
/// template, and generates.
#[test]
fn the_tiny_gguf_seeds_load_and_generate() {
    let _serial = one_at_a_time();
    for (arch, tok, template) in [
        ("llama", TinyTokenizer::Gpt2, None),
        ("qwen2", TinyTokenizer::Spm, Some(seeds::SMOLLM_TEMPLATE)),
        ("llama", TinyTokenizer::Spm, Some(seeds::SMOLLM_TEMPLATE)),
    ] {
        let lm = Lm::load_from(&MemorySource::new(tiny_lm(arch, tok, template)), &opts()).unwrap_or_else(|e| panic!("{arch} {tok:?}: {e}"));
        let messages = [docmem_runtime::chat::ChatMessage::new("user", "hello world")];
        let text = lm.render_chat(&messages).unwrap();
        assert!(text.contains("<|im_start|>user\nhello world<|im_end|>"), "{text}");
        let params = docmem_runtime::lm::SamplingParams { max_tokens: 4, ..Default::default() };
        let g = docmem_runtime::block_on(lm.generate(Prompt::Chat(&messages), &params, |_| std::ops::ControlFlow::Continue(()))).unwrap();
        assert!(g.prompt_tokens > 5, "{arch} {tok:?}: {g:?}");
    }
}

/// The Hugging Face seeds load from memory (`Lm::load_hf_files`, `SentenceEmbedder::from_files`)
/// through the fuzz input format, and the decoder's tokens match the GGUF it came from.
#[test]
fn the_tiny_hf_seeds_load_from_memory() {
    let _serial = one_at_a_time();
    let gguf = Lm::load_from(&MemorySource::new(tiny_lm("llama", TinyTokenizer::Gpt2, None)), &opts()).unwrap();
    let files = seeds::tiny_hf_lm("llama", TinyTokenizer::Gpt2, None).unwrap();
    assert_eq!(hf_files(&hf_input(&files)), files, "the fuzz input format keeps every file");
    let hf = Lm::load_hf_files(files, &opts()).unwrap();
    assert_eq!(hf.config(), gguf.config());
    let messages = [docmem_runtime::chat::ChatMessage::new("user", "hello world")];
    assert_eq!(hf.prompt_tokens(Prompt::Chat(&messages)).unwrap(), gguf.prompt_tokens(Prompt::Chat(&messages)).unwrap());
    let missing = Lm::load_hf_files(Default::default(), &opts()).unwrap_err();
    assert!(missing.to_string().contains("model.safetensors is missing"), "{missing}");

    // A header-only safetensors file gets the data its header declares.
    let mut header_only = seeds::tiny_hf_lm("qwen2", TinyTokenizer::Spm, None).unwrap();
    let full_len = header_only["model.safetensors"].len();
    let st = header_only.get_mut("model.safetensors").unwrap();
    *st = safetensors_header(st);
    assert!(st.len() < full_len);
    let filled = hf_files(&hf_input(&header_only));
    assert_eq!(filled["model.safetensors"].len(), full_len);
    assert!(Lm::load_hf_files(filled, &opts()).is_ok());

    let bert = seeds::tiny_bert();
    assert_eq!(hf_files(&hf_input(&bert)), bert);
    let e = SentenceEmbedder::from_files(bert, "tiny", EmbedderOptions { precision: Precision::F32, threads: 1 }).unwrap();
    let out = e.embed(&["hello world", "文档"], docmem_core::EmbedRole::Passage).unwrap();
    assert_eq!((out.vectors.len(), out.vectors[0].len()), (2, 32));
    assert!(out.vectors.iter().all(|v| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4));
}

/// Fuzz finding (gguf_load): RMSNorm weights near zero (here 1e-39) make
/// activations so small that the int8 activation quantizer's inverse scale `127 / amax`
/// is infinite; every element rounds to `i32::MAX` and the block's sum overflows, a panic
/// in builds with overflow checks (tests, fuzzing). `cpu/act.rs::quantize_q8` now clamps
/// each rounded value to ±127 (bit-identical whenever the scale is finite).
#[test]
fn a_model_whose_activations_underflow_runs_without_overflowing() {
    let _serial = one_at_a_time();
    use docmem_runtime::gguf::testing::TinyLm;
    let lm = Lm::load_from(&MemorySource::new(TinyLm { norm: 1e-39, ..TinyLm::default() }.build()), &opts()).unwrap();
    let ids = lm.tokenizer.encode("hello world").unwrap();
    let prefix = docmem_runtime::block_on(lm.prefill(ids, PrefillOptions::default())).map(|p| p.prefix).unwrap();
    assert_eq!(prefix.last_logits().len(), lm.config().vocab);
}

/// Regression (fuzzing gguf_load): the layer count comes from the file, and
/// loading reserved room for that many layers before looking for their tensors: a GGUF
/// whose `block_count` said 16 million reserved 8 GB. The same held for a checkpoint's
/// `num_hidden_layers`, and a sentence embedder's widths (a `hidden_size` of 16777214 asked
/// for petabytes and aborted). Each is now an error, with a small allocation peak.
#[test]
fn a_model_claiming_millions_of_layers_or_huge_widths_is_refused_without_reserving_memory() {
    let _serial = one_at_a_time();
    use docmem_core::fuzz_harness::meter::measure;
    use docmem_runtime::gguf::testing::TinyLm;
    let edit_config = |mut files: std::collections::BTreeMap<String, Vec<u8>>, key: &str, value: u64| {
        let mut config: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
        config[key] = value.into();
        files.insert("config.json".into(), serde_json::to_vec(&config).unwrap());
        files
    };
    let gguf = TinyLm { block_count: 16_000_000, ..TinyLm::default() }.build();
    let hf = edit_config(seeds::tiny_hf_lm("llama", TinyTokenizer::Gpt2, None).unwrap(), "num_hidden_layers", 16_000_000);
    let bert_layers = edit_config(seeds::tiny_bert(), "num_hidden_layers", 16_000_000);
    let bert_wide = edit_config(seeds::tiny_bert(), "hidden_size", 16_777_214);
    let (cost, outcome) = measure(|| {
        assert!(Lm::load_from(&MemorySource::new(gguf), &opts()).is_err());
        assert!(Lm::load_hf_files(hf, &opts()).is_err());
        let options = EmbedderOptions { precision: Precision::F32, threads: 1 };
        for files in [bert_layers, bert_wide] {
            let err = SentenceEmbedder::from_files(files, "tiny", options).unwrap_err();
            assert!(err.to_string().contains("more than the"), "{err}");
        }
    });
    outcome.unwrap();
    assert!(cost.peak_bytes < 16 << 20, "{cost:?}");
}
