//! The WebGPU backend (issue #6): `wgpu` over our own WGSL kernels, natively (Vulkan,
//! Metal, D3D12) and in the browser.
//!
//! Why our own kernels: no crate runs GGUF's quantized blocks on WebGPU, and the decoder's
//! cost is the quantized matrix × vector product, so the kernels read the blocks as the
//! file stores them (packed in `u32` words, dequantized in the shader) instead of
//! expanding the weights to f32 (four to eight times the memory and bandwidth).
//!
//! What is here so far: the device ([`Gpu`]: adapter, limits requested rather than
//! assumed, one error type), weight and activation buffers ([`GpuMatrix`], [`GpuVector`]:
//! uploads in writes of at most 64 MiB, read-back), and the first kernels ([`Kernels`]):
//! matrix × vector for f32, Q4_1 and Q8_0 (SmolLM2's types), RMSNorm, RoPE from an angle
//! table, SwiGLU, residual add, softmax, the f16-rounded K/V cache write and causal
//! grouped-query attention over it, each in its own WGSL file under `wgsl/` and
//! tested against the CPU reference (`tests.rs`, on Vulkan/llvmpipe in `npm test`); and
//! [`GpuTransformer`], the decoder as a [`crate::lm::Backend`] (one command buffer per
//! forward pass), checked against the CPU backend on SmolLM2 (`tests/gpu_parity.rs`). A
//! buffer pool, sampling on the GPU and the K-quant kernels come next; the CPU backend
//! stays the reference throughout.
//!
//! Only the f32 path is used: it needs no `shader-f16`, which SwiftShader and many Linux
//! and Windows adapters lack ([`Gpu::has_f16`] says whether an f16 path could run).

mod buffers;
pub mod checks;
mod device;
mod kernels;
mod model;
mod pool;
#[cfg(test)]
mod tests;

pub use buffers::{GpuMatrix, GpuVector, MAX_WRITE_BYTES};
pub use device::{Gpu, GpuError, GpuOptions};
pub use kernels::{q8_len, reads_q8, AttentionShape, Kernels};
pub use model::{GpuKvCache, GpuTransformer};
