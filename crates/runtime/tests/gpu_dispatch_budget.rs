//! The GPU decoder's launch budget: a decode step of the synthetic Qwen2.5-1.5B (Q4_K_M's
//! formats: Q4_K, with Q6_K values and down projections in some layers) and of a llama
//! model (Q4_1, SmolLM2's format) records at most 10 dispatches a layer plus 10, in one
//! compute pass and one submission, on both of the K-quants' paths.
//!
//! Why count: a decode step on a GPU is latency-bound, and each dispatch is a launch and a
//! barrier. The count does not depend on the adapter, so llvmpipe counts what an H100 would
//! run. The fused steps' results are held to the unfused ones by the kernel checks
//! (`gpu::checks`, "fused") and to the CPU backend by the forward-pass parity tests; this
//! test only holds the number.

#![cfg(feature = "gpu")]

use docmem_runtime::gpu::{Gpu, GpuOptions, WorkCounts};
use docmem_runtime::lm::{Backend, Lm, LoadOptions, Logits};
use docmem_runtime::source::MemorySource;
use docmem_runtime::synthetic::{decoder_gguf, DecoderSpec};

/// The most dispatches a decode step may take: 10 a layer, and 10 for the head and the pick.
fn budget(layers: usize) -> usize {
    10 * layers + 10
}

/// `spec`'s synthetic model, and its layers.
fn synthetic(spec: &str) -> (MemorySource, usize) {
    let spec: DecoderSpec = spec.parse().unwrap();
    (MemorySource::new(decoder_gguf(spec.shape, spec.quant, 7)), spec.shape.layers as usize)
}

/// One greedy decode step after a short prompt on the model in `src`: the work each
/// recorded.
fn decode_step(src: &MemorySource, avoid_f16: bool) -> (WorkCounts, WorkCounts) {
    // The kernels a GPU picks (split attention for decoding is two dispatches where
    // llvmpipe's is one), so the count is a GPU's.
    let gpu = Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, avoid_f16, gpu_kernels: true, ..GpuOptions::default() })
        .unwrap_or_else(|e| panic!("{e}: the GPU tests need a Vulkan driver (scripts/setup.sh installs mesa-vulkan-drivers)"));
    let lm = Lm::load_onto_gpu(src, &LoadOptions { threads: 1, context: 64, ..Default::default() }, gpu.clone()).unwrap();
    let mut cache = lm.backend.new_cache();
    let before = gpu.work_counts();
    // One token: llvmpipe runs a 1.5B's prompt slowly, and the count hardly depends on the
    // prompt's length (a very long one splits attention's rows into more groups).
    docmem_runtime::block_on(lm.backend.forward(&mut cache, &[1], Logits::Last)).unwrap();
    let prompt = gpu.work_counts() - before;
    let before = gpu.work_counts();
    docmem_runtime::block_on(lm.backend.forward_argmax(&mut cache, &[2])).unwrap();
    (gpu.work_counts() - before, prompt)
}

#[test]
fn a_decode_step_of_the_synthetic_1_5b_takes_at_most_ten_dispatches_a_layer_in_one_pass() {
    let (src, layers) = synthetic("qwen2-1.5b:q4_k_m");
    for avoid_f16 in [false, true] {
        let (step, prompt) = decode_step(&src, avoid_f16);
        let path = if avoid_f16 { "f32" } else { "f16" };
        assert!(step.dispatches <= budget(layers), "{path} path: {} dispatches for {layers} layers", step.dispatches);
        assert_eq!(step.passes, 1, "{path} path: one compute pass a forward");
        assert_eq!(step.submissions, 1, "{path} path: the read-back's copy is recorded with the pass");
        // The prompt's forward recorded the same steps, less the pick.
        assert_eq!(prompt.dispatches, step.dispatches - 1, "{path} path: a prompt is the step's work less the pick");
        eprintln!("qwen2-1.5b:q4_k_m, {path} path: {} dispatches a decoded token ({layers} layers)", step.dispatches);
    }
}

#[test]
fn a_llama_decode_step_takes_at_most_ten_dispatches_a_layer_in_one_pass() {
    let (src, layers) = synthetic("llama-tiny:q4_1");
    let (step, _) = decode_step(&src, false);
    assert!(step.dispatches <= budget(layers), "{} dispatches for {layers} layers", step.dispatches);
    assert_eq!(step.passes, 1);
}
