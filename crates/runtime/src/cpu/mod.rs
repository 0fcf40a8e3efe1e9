//! The CPU backend: quantized kernels and the threads they run on.
//!
//! - [`act`]: activations quantized to int8, as llama.cpp does before each matmul.
//! - [`dot`]: one weight row · one activation row, per GGML type (scalar reference);
//!   `isum`: their integer inner products, in wasm `simd128` where built with it.
//! - `avx2`: the same kernels with AVX2 + FMA (x86_64, chosen at run time).
//! - [`matmul`]: matrices in their block format and the threaded product.
//! - `x8`: K-quant matrices re-laid eight rows at a time for the AVX2 kernels.
//! - [`threads`]: the worker pool.

pub mod act;
pub mod attention;
#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod dot;
pub mod ggml_order;
mod isum;
pub mod mathfn;
pub mod matmul;
pub mod threads;
pub mod transformer;
pub mod x8;

/// Whether hardware FMA (with AVX2) is available; the fused-multiply-add loops are then
/// compiled for it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_fma() -> bool {
    avx2::available()
}

/// Round every value to half precision and back (F16C where present): the K/V cache and
/// the attention's queries are half precision in llama.cpp.
pub(crate) fn f16_round_all(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: `has_fma` checks AVX2, FMA and F16C.
        return unsafe { avx2::f16_round_all(v) };
    }
    v.iter_mut().for_each(|x| *x = crate::quant::f16_round(*x));
}
