//! The embedder's encoder on the GPU against the CPU encoder (f32, the reference that
//! matches sentence-transformers, `tests/embed_parity.rs`) on all-MiniLM-L6-v2, natively
//! on whatever adapter wgpu finds (Vulkan on llvmpipe here), and on the same device as a
//! decoder.
//!
//! Stated tolerance: cosine ≥ 0.99999 between the GPU's and the CPU's unit vectors, every
//! component within 1e-4 (both hold the same f32 weights and sum f32 products, in other
//! orders; the GPU's `exp` is not the CPU's).

#![cfg(feature = "gpu")]

mod common;

use common::{model, model_dir};
use docmem_runtime::embed::{EmbedRole, EmbedderOptions, Precision, SentenceEmbedder};
use docmem_runtime::gpu::{Gpu, GpuOptions, GpuTransformer};
use docmem_runtime::lm::{Lm, LoadOptions};

fn gpu() -> Gpu {
    Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() })
        .unwrap_or_else(|e| panic!("{e}: the GPU tests need a Vulkan driver (scripts/setup.sh installs mesa-vulkan-drivers)"))
}

fn compare(cpu: &[Vec<f32>], gpu: &[Vec<f32>], what: &str) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: vectors");
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        assert_eq!(c.len(), g.len(), "{what}, text {i}: width");
        let cos: f32 = c.iter().zip(g).map(|(a, b)| a * b).sum();
        let (j, d) = c.iter().zip(g).map(|(a, b)| (a - b).abs()).enumerate().fold((0, 0f32), |m, (j, d)| if d > m.1 { (j, d) } else { m });
        eprintln!("{what}, text {i}: cosine {cos:.7}, largest difference {d:.2e} (component {j})");
        assert!(cos >= 0.99999, "{what}, text {i}: cosine {cos}");
        assert!(d <= 1e-4, "{what}, text {i}: component {j} is {} on the GPU and {} on the CPU", g[j], c[j]);
    }
}

#[test]
fn minilm_on_the_gpu_embeds_as_the_cpu_encoder_does() {
    let dir = model_dir("all-MiniLM-L6-v2");
    let cpu = SentenceEmbedder::load(&dir, EmbedderOptions { precision: Precision::F32, threads: 2 }).unwrap();
    let on_gpu = SentenceEmbedder::load_onto_gpu(&dir, gpu()).unwrap();
    assert!(on_gpu.on_gpu() && !cpu.on_gpu());
    assert_eq!(on_gpu.dim(), cpu.dim());
    let long = "William Caxton set up a printing press at Westminster in 1476. ".repeat(12);
    let texts = [
        "Who brought printing to England?",
        "The Quillfeather press was built in Mainz in 1452 and printed indulgences before books.",
        "a",
        long.as_str(),
    ];
    // Packed in one batch (every text attends to itself alone), and one at a time.
    let want = cpu.embed(&texts, EmbedRole::Passage).unwrap();
    let got = on_gpu.embed(&texts, EmbedRole::Passage).unwrap();
    compare(&want.vectors, &got.vectors, "packed");
    for (i, text) in texts.iter().enumerate() {
        let alone = docmem_runtime::block_on(on_gpu.embed_async(&[text], EmbedRole::Query)).unwrap();
        let reference = cpu.embed(&[text], EmbedRole::Query).unwrap();
        compare(&reference.vectors, &alone.vectors, &format!("alone {i}"));
    }
    // An empty list, and an empty text (only the special tokens).
    assert!(on_gpu.embed(&[], EmbedRole::Query).unwrap().vectors.is_empty());
    compare(&cpu.embed(&[""], EmbedRole::Query).unwrap().vectors, &on_gpu.embed(&[""], EmbedRole::Query).unwrap().vectors, "empty");
}

#[test]
fn the_embedder_and_the_decoder_share_one_device() {
    let gpu = gpu();
    let lm = Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap();
    let lm = lm.map_backend(|cpu| GpuTransformer::from_cpu(gpu.clone(), cpu)).unwrap();
    let embedder = SentenceEmbedder::load_onto_gpu(&model_dir("all-MiniLM-L6-v2"), lm.backend.gpu().clone()).unwrap();
    let before = gpu.buffers_created();
    let v = embedder.embed(&["printing in England"], EmbedRole::Query).unwrap();
    assert_eq!(v.vectors[0].len(), 384);
    // The embedder's scratch came from the same pool the decoder's device counts.
    assert!(lm.backend.gpu().buffers_created() > before, "the embedder's buffers are the shared device's");
    let ids = lm.tokenizer.encode("The printing press").unwrap();
    let next = pollster::block_on(lm.greedy(&ids, 1)).unwrap();
    assert_eq!(next.len(), 1);
}

/// A library built and searched with the embedder on the GPU, through the path a browser
/// must take (its vectors awaited ahead of each step: the semantic chunker's sentences, the
/// document's layers, the question), holds the chunks the CPU embedder's library holds and
/// finds the same passages in the same order.
#[test]
fn a_library_built_and_searched_on_the_gpu_embedder_matches_the_cpu_ones() {
    use docmem_core::chunk::{ChunkOptions, ChunkerKind};
    use docmem_core::library::{Library, LibrarySettings, MemStore};
    use docmem_core::Document;
    use docmem_core::Embedder as CoreEmbedder;
    use docmem_runtime::pipeline::ingest::MemoryMethod;
    use docmem_runtime::pipeline::qa::AskParams;
    use docmem_runtime::session::{AddOptions, Session};

    let dir = model_dir("all-MiniLM-L6-v2");
    let text = "Johannes Gutenberg built a printing press with movable metal type in Mainz around 1440. \
                His press could print thousands of pages a day. William Caxton brought printing to England in 1476 \
                and printed Chaucer's Canterbury Tales. Venice became the centre of printing in Italy; Aldus Manutius \
                printed small, cheap books there. Paper mills spread across Europe to feed the presses.";
    let doc = Document::new("printing.txt", text);
    let mut found = Vec::new();
    for embedder in [
        SentenceEmbedder::load(&dir, EmbedderOptions { precision: Precision::F32, threads: 2 }).unwrap(),
        SentenceEmbedder::load_onto_gpu(&dir, gpu()).unwrap(),
    ] {
        let on_gpu = embedder.on_gpu();
        assert_eq!(CoreEmbedder::needs_await(&embedder), on_gpu, "only the GPU encoder is awaited");
        let settings = LibrarySettings::new(CoreEmbedder::name(&embedder), embedder.dim());
        let session = Session::new(Library::open(MemStore::default(), &settings).unwrap());
        let embedder = std::cell::RefCell::new(embedder);
        let mut method = MemoryMethod::Chunker { kind: ChunkerKind::Semantic, options: ChunkOptions { size: None, overlap: None } };
        let ingested = docmem_runtime::block_on(session.add(&doc, &mut method, &embedder, &AddOptions::default(), &mut |_| true)).unwrap();
        assert!(ingested.added);
        let spans: Vec<_> = ingested.memory.scenarios.iter().map(|s| s.span).collect();
        let question = "Who brought printing to England?";
        let prompt = docmem_runtime::block_on(session.prepare(question, &AskParams { k: 3, ..AskParams::default() }, &embedder)).unwrap();
        let order: Vec<_> = prompt.sources.iter().map(|s| s.text.clone()).collect();
        eprintln!("on the GPU: {on_gpu}; {} chunks; first passage {:?}", spans.len(), order.first());
        assert!(order.first().is_some_and(|t| t.contains("Caxton")), "{order:?}");
        found.push((spans, order));
    }
    assert_eq!(found[0], found[1], "the same chunks and the same passages, in order");
}
