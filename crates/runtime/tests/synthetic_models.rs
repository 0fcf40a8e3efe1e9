//! Synthetic models are GGUF files like any other: the real file's layout, loaded through
//! the same loader onto the same backends, and the bytes written to disk load back.

mod common;

use common::model;
use docmem_runtime::gguf::GgufFile;
use docmem_runtime::lm::Logits;
use docmem_runtime::lm::{Backend, Lm, LoadOptions};
use docmem_runtime::source::{FileSource, MemorySource};
use docmem_runtime::synthetic::{decoder_gguf, decoder_tensors, embedder_gguf, embedder_shape, DecoderSpec};

/// The synthetic SmolLM2 has the real SmolLM2 file's tensors: every name, shape and type
/// (Q4_1 layers; the tied embedding table Q8_0, as llama.cpp stores a head whose 576-wide
/// rows are no whole K-quant blocks).
#[test]
fn the_synthetic_smollm2_has_the_real_files_tensors() {
    let real = FileSource::open(&model("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    let real = GgufFile::read(&real).unwrap();
    let spec: DecoderSpec = "llama-135m:q4_1".parse().unwrap();
    let mut plan: Vec<(String, Vec<u64>, String)> =
        decoder_tensors(spec.shape, spec.quant).into_iter().map(|t| (t.name, t.dims, t.ty.name().to_owned())).collect();
    let mut file: Vec<(String, Vec<u64>, String)> =
        real.tensors.iter().map(|t| (t.name.clone(), t.dims.clone(), t.ggml_type.name().to_owned())).collect();
    plan.sort();
    file.sort();
    assert_eq!(plan, file);
}

fn logits_of(lm: &Lm<impl Backend>, prompt: &[u32]) -> Vec<f32> {
    let b = &lm.backend;
    let mut cache = b.new_cache();
    docmem_runtime::block_on(b.forward(&mut cache, prompt, Logits::Last)).unwrap()
}

#[test]
fn a_synthetic_model_loads_from_memory_and_from_its_written_file_alike() {
    let spec: DecoderSpec = "qwen2-tiny:q4_k_m".parse().unwrap();
    let bytes = decoder_gguf(spec.shape, spec.quant, 5);
    let path = std::env::temp_dir().join(format!("docmem-synthetic-test-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let opts = LoadOptions { threads: 1, context: 64, ..Default::default() };
    let from_memory = Lm::load_from(&MemorySource::new(bytes), &opts).unwrap();
    let from_file = Lm::load(&path, &opts);
    std::fs::remove_file(&path).unwrap();
    let from_file = from_file.unwrap();
    let prompt = [3, 200, 17, 256, 99];
    let want = logits_of(&from_memory, &prompt);
    assert_eq!(want, logits_of(&from_file, &prompt));
    assert_eq!(want.len(), spec.shape.vocab as usize);
    assert!(want.iter().all(|v| v.is_finite()));
    // A spread a model decides with: not all equal, not exploding.
    let (lo, hi) = want.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    assert!(hi - lo > 0.01 && hi - lo < 1000.0, "logits span {lo}..{hi}");
    // Any text tokenizes (the vocabulary holds every byte), and the chat template renders.
    let tokens = from_memory.prompt_tokens(docmem_runtime::lm::Prompt::Text("Hello, wörld")).unwrap();
    assert!(!tokens.is_empty());
}

#[test]
fn a_synthetic_embedder_embeds_like_a_loaded_one() {
    use docmem_runtime::embed::{EmbedRole, EmbedderOptions, Precision, SentenceEmbedder};
    let shape = embedder_shape("minilm").unwrap();
    let gguf = embedder_gguf(shape, 1);
    let e = SentenceEmbedder::from_gguf(
        &MemorySource::new(gguf),
        "synthetic".into(),
        EmbedderOptions { precision: Precision::F32, threads: 1 },
    )
    .unwrap();
    assert_eq!(e.dim(), 384);
    let text = docmem_runtime::synthetic::BENCH_WORDS.join(" ");
    let (ids, _) = e.tokenize(&[&text], EmbedRole::Passage).unwrap();
    // Every bench word is one token, between [CLS] and [SEP].
    assert_eq!(ids[0].len(), docmem_runtime::synthetic::BENCH_WORDS.len() + 2);
    let v = e.embed(&[&text, "the river"], EmbedRole::Passage).unwrap().vectors;
    assert!(v.iter().all(|row| (row.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4), "unit vectors");
}

/// On the GPU (llvmpipe here): a synthetic Q4_K_M model runs the K-quant kernels a real
/// one runs, and loads from memory and from a file alike.
#[cfg(feature = "gpu")]
#[test]
fn a_synthetic_model_runs_the_real_kernels_on_the_gpu() {
    use docmem_runtime::gpu::{Gpu, GpuOptions};
    let spec: DecoderSpec = "qwen2-tiny:q4_k_m".parse().unwrap();
    let bytes = decoder_gguf(spec.shape, spec.quant, 5);
    let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, profile: true, ..GpuOptions::default() }).unwrap();
    let opts = LoadOptions { threads: 1, context: 64, ..Default::default() };
    let path = std::env::temp_dir().join(format!("docmem-synthetic-gpu-test-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let from_file = Lm::load_onto_gpu(&FileSource::open(&path).unwrap(), &opts, gpu.clone());
    std::fs::remove_file(&path).unwrap();
    let from_file = from_file.unwrap();
    let from_memory = Lm::load_onto_gpu(&MemorySource::new(bytes.clone()), &opts, gpu.clone()).unwrap();
    let prompt = [3, 200, 17, 256, 99];
    gpu.reset_kernel_times();
    let want = logits_of(&from_memory, &prompt);
    let kernels: Vec<String> = gpu.kernel_times().unwrap().0.into_iter().map(|k| k.kernel).collect();
    let suffix = if gpu.has_f16() { "_f16" } else { "" };
    for k in [format!("matvec_q4_k{suffix}"), format!("matvec_q6_k{suffix}"), "rms_norm".into()] {
        assert!(kernels.contains(&k), "{k} not among {kernels:?}");
    }
    // `attention` on a software adapter, `attention_split` and `attention_combine` on a GPU.
    assert!(kernels.iter().any(|k| k.starts_with("attention")), "{kernels:?}");
    assert_eq!(want, logits_of(&from_file, &prompt));
    // And it agrees with the CPU backend on the same bytes.
    let cpu = Lm::load_from(&MemorySource::new(bytes), &opts).unwrap();
    let reference = logits_of(&cpu, &prompt);
    let dot: f32 = want.iter().zip(&reference).map(|(a, b)| a * b).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(dot / (norm(&want) * norm(&reference)) > 0.999);
}

/// Sequences batched through one GPU pass (batched paths, drafts) give each sequence the
/// logits it gets alone: caches of different lengths, several new rows in one of them, so
/// every sequence's rows, positions and cache writes sit at their own offsets.
#[cfg(feature = "gpu")]
#[test]
fn sequences_batched_on_the_gpu_get_the_logits_each_gets_alone() {
    use docmem_runtime::gpu::{Gpu, GpuOptions};
    let spec: DecoderSpec = "qwen2-tiny:q4_k_m".parse().unwrap();
    let bytes = decoder_gguf(spec.shape, spec.quant, 9);
    let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() }).unwrap();
    let opts = LoadOptions { threads: 1, context: 64, ..Default::default() };
    let lm = Lm::load_onto_gpu(&MemorySource::new(bytes), &opts, gpu).unwrap();
    let b = &lm.backend;
    let histories: [&[u32]; 3] = [&[5, 6, 7, 8, 9], &[300, 2, 41, 17, 8, 8, 250, 3, 1], &[77]];
    let news: [&[u32]; 3] = [&[10, 11, 12], &[9], &[100, 101]];
    let run = |h: &[u32]| {
        let mut c = b.new_cache();
        docmem_runtime::block_on(b.forward(&mut c, h, Logits::Last)).unwrap();
        c
    };
    // Alone: each history, then its new rows (every row's logits).
    let mut want = Vec::new();
    for (h, n) in histories.iter().zip(&news) {
        let mut c = run(h);
        want.extend(docmem_runtime::block_on(b.forward(&mut c, n, Logits::All)).unwrap());
    }
    // Together.
    let mut caches: Vec<_> = histories.iter().map(|h| run(h)).collect();
    let mut seqs: Vec<(&mut _, &[u32])> = caches.iter_mut().zip(&news).map(|(c, n)| (c, *n)).collect();
    let got = docmem_runtime::block_on(b.forward_batch(&mut seqs)).unwrap();
    assert_eq!(got.len(), want.len());
    let vocab = spec.shape.vocab as usize;
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (row, (g, w)) in got.chunks(vocab).zip(want.chunks(vocab)).enumerate() {
        let worst = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-3 * scale, "row {row}: logits differ by {worst} (scale {scale})");
        assert_eq!(docmem_runtime::lm::argmax(g), docmem_runtime::lm::argmax(w), "row {row}");
    }
    // Each cache grew by its own rows.
    for (c, (h, n)) in caches.iter().zip(histories.iter().zip(&news)) {
        assert_eq!(b.cache_len(c), h.len() + n.len());
    }
}

/// The hidden state a probe reads, from the GPU backend: the last row's residual after the
/// layer asked for, as the CPU backend computes it on the same bytes; the logits that come
/// with it are the plain forward's.
#[cfg(feature = "gpu")]
#[test]
fn the_gpu_hands_back_the_hidden_state_the_cpu_computes() {
    use docmem_runtime::gpu::{Gpu, GpuOptions};
    let spec: DecoderSpec = "qwen2-tiny:q4_k_m".parse().unwrap();
    let bytes = decoder_gguf(spec.shape, spec.quant, 9);
    let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() }).unwrap();
    let opts = LoadOptions { threads: 1, context: 64, ..Default::default() };
    let on_gpu = Lm::load_onto_gpu(&MemorySource::new(bytes.clone()), &opts, gpu).unwrap();
    let cpu = Lm::load_from(&MemorySource::new(bytes), &opts).unwrap();
    let prompt = [3, 200, 17, 256, 99, 42];
    let cosine = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    };
    for layer in [0, spec.shape.layers as usize - 1] {
        let (mut gc, mut cc) = (on_gpu.backend.new_cache(), cpu.backend.new_cache());
        let (logits, state) = docmem_runtime::block_on(on_gpu.backend.forward_state(&mut gc, &prompt, layer)).unwrap();
        let (_, cpu_state) = docmem_runtime::block_on(cpu.backend.forward_state(&mut cc, &prompt, layer)).unwrap();
        let (state, cpu_state) = (state.expect("the GPU reads the state back"), cpu_state.unwrap());
        assert_eq!(state.len(), cpu_state.len());
        assert!(cosine(&state, &cpu_state) > 0.999, "layer {layer}: cosine {}", cosine(&state, &cpu_state));
        assert_eq!(logits, logits_of(&on_gpu, &prompt), "the logits are the plain forward's");
    }
}
