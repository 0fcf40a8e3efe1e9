//! The WebGPU backend: `wgpu` over our own WGSL kernels, natively (Vulkan,
//! Metal, D3D12) and in the browser.
//!
//! Why our own kernels: no crate runs GGUF's quantized blocks on WebGPU, and the decoder's
//! cost is the quantized matrix × vector product, so the kernels read the blocks as the
//! file stores them (packed in `u32` words, dequantized in the shader) instead of
//! expanding the weights to f32 (four to eight times the memory and bandwidth).
//!
//! What is here: the device ([`Gpu`]: adapter, limits requested rather than assumed, one
//! error type, and counts of the work recorded, [`WorkCounts`]), weight and activation
//! buffers ([`GpuMatrix`], [`GpuVector`]: uploads in writes of at most 64 MiB, read-back;
//! a layer's projections that read one input stacked in one buffer), and the kernels
//! ([`Kernels`]): matrix × vector (tiled over tokens for prefill) for every block format the
//! CPU backend reads (f32, f16, bf16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), in
//! rows of whole 32-value blocks, with the sums stored, added to a residual stream, or, for a stacked gate and
//! up, turned into SwiGLU ([`Epilogue`]); activation quantization, RMSNorm (writing the
//! copies the next products read, [`Copies`]), RoPE from an angle table, the step after
//! the Q/K/V products (biases, RoPE and the K/V cache append in one dispatch,
//! `rope_append.wgsl`), SwiGLU, residual add, softmax, the f16-rounded K/V cache write,
//! causal grouped-query attention over it (writing the copies the output projection reads),
//! argmax, and sampling (repetition penalty, temperature, top-k, top-p; `wgsl/sample.wgsl`),
//! each in its own WGSL file under `wgsl/`, checked against the CPU reference (`checks`,
//! and the fused ones against the steps they replace, `checks_fused`; natively in `npm
//! test` on Vulkan/llvmpipe, in the browser, and on a user's adapter); the buffer pool
//! (`pool`) and the bind-group cache (`bind_groups`), so decoding creates neither per
//! token; and [`GpuTransformer`], the decoder as a [`crate::lm::Backend`] (one command
//! buffer and one compute pass per forward pass, weights loaded straight from the file; its
//! pass fuses the schedule's steps where a kernel can take the next one in, so a decode
//! step is at most 10 dispatches a layer, which `tests/gpu_dispatch_budget.rs` holds),
//! checked against the CPU backend on SmolLM2 (`tests/gpu_parity.rs`); and, for
//! benchmarks, GPU time per kernel from timestamp queries (`profile`,
//! [`GpuOptions::profile`]). A product of many tokens (a prompt) is a tiled matrix
//! multiplication (`matmul.wgsl`), of a few a matrix × vector kernel (`matvec.wgsl`, or
//! `matvec_rows.wgsl` on software adapters), all summing in one fixed order
//! (`product_io.wgsl`); the K/V cache holds packed f16 pairs. The
//! embedder's encoder runs here too ([`GpuEncoder`]: LayerNorm, bias + GELU and
//! bidirectional attention over packed sequences, `layer_norm.wgsl`, `bias_gelu.wgsl`,
//! `encoder_attention.wgsl`), on the same device as the decoder (a [`Gpu`] clone is that
//! device). A forward pass is recorded into one compute pass ([`Recorder`]); several
//! sequences can share a pass ([`GpuTransformer::forward_batch_async`]: batched paths,
//! drafts); f16 rounding is done with integer operations (`wgsl/f16.wgsl`), since a driver
//! may fold or round `pack2x16float` its own way. Attention has two kernels: split over
//! chunks of the cache for GPUs (`attention_split.wgsl` and `attention_combine.wgsl`,
//! flash-decoding), and `attention.wgsl` for software adapters, where the split one is
//! slower. Measured on an H100 by `scripts/device/gpu-run.sh`
//! (`docs/gpu-device-run.md`); the CPU backend stays the reference. Each kernel is one
//! entry of the registry (`registry`: its pieces of WGSL, what the device must offer, the
//! check that holds it), compiled when first dispatched.
//!
//! Two paths for the K-quants (Q4_K, Q6_K, the 1.5B models' formats): the f32 path needs
//! no `shader-f16`, which SwiftShader and many Linux and Windows adapters lack; where the
//! adapter offers it, the f16 path ([`Gpu::has_f16`], [`Input::F16`]) packs each matrix's
//! input as f16 scaled by a power of two per 32 values (`activations_f16.wgsl`: no
//! overflow whatever the activations' size, half the bytes) and multiplies four values at a
//! time in f16, adding in f32 (`matvec_q4_k_f16.wgsl` and the other K-quants'). The 32-value
//! block formats (Q4_0 to Q8_0) keep their exact 8-bit integer path on both, and f16 and
//! bf16 weights meet f32 activations. [`GpuOptions::avoid_f16`] forces the
//! f32 path (the tests check both).

mod bind_groups;
mod buffers;
pub mod checks;
mod checks_fused;
mod device;
mod encoder;
mod kernels;
mod model;
mod pool;
mod profile;
mod recorder;
mod registry;
#[cfg(test)]
mod tests;

pub use buffers::{GpuMatrix, GpuVector, MAX_WRITE_BYTES};
pub use device::{AdapterReport, Gpu, GpuOptions, WorkCounts};
pub use encoder::GpuEncoder;
pub use kernels::{
    f16_len, q8_len, reads_q8, AttentionShape, Copies, Epilogue, Input, Kernels, Operand, Placement, ENCODER_MAX_TOKENS, SAMPLE_FALLBACK,
};
pub use model::{GpuKvCache, GpuTransformer};
pub use profile::KernelTime;
pub use recorder::Recorder;
