//! The CPU backend: quantized kernels and the threads they run on. Outside this crate
//! only the transformer, the thread pool and the kernel-path cap are public; the kernels
//! are the backend's own.
//!
//! - `act`: activations quantized to int8, as llama.cpp does before each matmul.
//! - `dot`: one weight row · one activation row, per GGML type (scalar reference);
//!   `isum`: their integer inner products, in wasm `simd128` where built with it.
//! - `avx2`: the same kernels with AVX2 + FMA (x86_64, chosen at run time);
//!   [`isa`]: which x86 path runs, and the `DOCMEM_CPU` cap that tests use to pick one.
//! - `matmul`: matrices in their block format and the threaded product.
//! - `gemm`: the float (F32/F16/Q8_0/BF16) product for encoders, on weights re-laid in
//!   panels; `bf16`: its bfloat16 panels and AVX-512 BF16 kernel.
//! - `encoder_ops`: LayerNorm, exact GELU and bidirectional attention (encoders).
//! - `fma`: the fused multiply-add llama.cpp's float order needs, inlined on wasm too, and
//!   wasm SIMD's four-lane multiply-add.
//! - `x8`: K-quant matrices re-laid eight rows at a time for the AVX2 kernels.
//! - `simd128`: whole-row Q4_K / Q6_K kernels for wasm, one, four or eight tokens a call.
//! - [`threads`]: the worker pool; `web_workers`: its threads in the wasm threads build.

pub(crate) mod act;
pub(crate) mod attention;
#[cfg(target_arch = "x86_64")]
mod avx2;
pub(crate) mod bf16;
pub(crate) mod dot;
pub(crate) mod encoder_ops;
mod fma;
pub(crate) mod gemm;
pub(crate) mod ggml_order;
pub mod isa;
mod isum;
pub(crate) mod mathfn;
pub(crate) mod matmul;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
pub mod threads;
pub mod transformer;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub mod web_workers;
pub(crate) mod x8;

/// The vector kernels against the portable ones on seeded inputs (`isum::check`, in wasm
/// `simd128::check` and `ggml_order::simd128::check`, and `mathfn::check_vector_forms`):
/// the number of cases, or an error naming the kernel and both values.
pub fn check_kernels() -> Result<usize, String> {
    let cases = isum::check()?;
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let cases = cases + simd128::check()? + ggml_order::simd128::check()?;
    let cases = cases + mathfn::check_vector_forms()?;
    Ok(cases)
}

/// Whether hardware FMA (with AVX2) is available; the fused-multiply-add loops are then
/// compiled for it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_fma() -> bool {
    avx2::available()
}

/// `a·b + c`, fused where the build has FMA (a software `fma` call would be slow; the
/// generic loops are compiled once with `FMA` for AVX2 machines and once without).
#[inline(always)]
pub(crate) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// A raw pointer to an output buffer shared by tasks that each write a disjoint part of
/// it (every user says which part a task owns).
#[derive(Clone, Copy)]
pub(crate) struct SharedMut(pub(crate) *mut f32);
// Unsafe code in this module is allowed item by item (here and on `f16_round_all`), not
// by a module-level `#![allow(unsafe_code)]`: that would extend to every `cpu` submodule.
// SAFETY: users give each task a disjoint range, and the buffer outlives the tasks (they
// run inside `Threads::for_each`, which returns when all are done).
#[allow(unsafe_code)]
unsafe impl Send for SharedMut {}
// SAFETY: as for `Send`: tasks sharing the pointer write disjoint ranges of a buffer that
// outlives them, so no two threads touch the same element.
#[allow(unsafe_code)]
unsafe impl Sync for SharedMut {}

impl SharedMut {
    /// The pointer (a method, so closures capture the whole `Send + Sync` wrapper).
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }
}

/// Round every value to half precision and back (F16C where present): the K/V cache and
/// the attention's queries are half precision in llama.cpp.
#[allow(unsafe_code)] // calls the F16C kernel after run-time feature detection
pub(crate) fn f16_round_all(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: `has_fma` checks AVX2, FMA and F16C.
        return unsafe { avx2::f16_round_all(v) };
    }
    v.iter_mut().for_each(|x| *x = crate::quant::f16_round(*x));
}
