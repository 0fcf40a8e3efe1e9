//! The kernel registry: every WGSL kernel of the backend as one entry, saying how its
//! source is put together (WGSL has no includes, so shared pieces are joined in order),
//! what the device must offer for it, and which of [`super::checks`] holds it to the CPU
//! reference.
//!
//! Why a registry: a kernel is one WGSL file under `wgsl/` and one line here (and the
//! method of [`super::Kernels`] that binds its buffers); nothing else lists it. Pipelines
//! are compiled when first dispatched ([`super::Kernels`]), so a device pays only for the
//! kernels its models use (an embedder alone compiles no decoder kernels; the f32 path
//! compiles no f16 ones); a browser's compile of all two dozen took a noticeable part of
//! a page's start. And since every entry names its check, a test can hold the two
//! together: after the checks have run, every kernel the device can run has been compiled,
//! so none goes unchecked (`gpu::tests`).

/// Workgroup reductions, prepended to the kernels that sum or take maxima.
const REDUCE: &str = concat!("const WG: u32 = 64u;\nvar<workgroup> partial: array<f32, 64>;\n", include_str!("wgsl/reduce.wgsl"));
/// Rounding and packing to f16 with integer operations (`f16.wgsl` says why).
const F16_WGSL: &str = include_str!("wgsl/f16.wgsl");
/// The attention kernels' parameters and buffers.
const ATTENTION_IO: &str = include_str!("wgsl/attention_io.wgsl");
/// Q4_K's block layout, shared by its f32 and f16 kernels.
const Q4_K: &str = concat!("const K_WORDS: u32 = 36u;\nconst K_HIGH_BITS: bool = false;\n", include_str!("wgsl/q4_k.wgsl"));
/// Q5_K's: Q4_K's with a fifth bit per value, read by Q4_K's kernels.
const Q5_K: &str = concat!("const K_WORDS: u32 = 44u;\nconst K_HIGH_BITS: bool = true;\n", include_str!("wgsl/q4_k.wgsl"));
/// Q6_K's block layout, shared by its f32 and f16 kernels.
const Q6_K: &str = include_str!("wgsl/q6_k.wgsl");
/// The 32-value 4-bit blocks' layout (Q4_0, Q4_1), after the format's offset.
const Q4: &str = include_str!("wgsl/q4.wgsl");
/// The 32-value 5-bit blocks' layout (Q5_0, Q5_1), after the format's offset.
const Q5: &str = include_str!("wgsl/q5.wgsl");
/// The matrix × vector kernel of those four formats, after a layout.
const MATVEC_Q4_Q5: &str = include_str!("wgsl/matvec_q4_q5.wgsl");
/// Their tiled product's piece, after a layout.
const MATMUL_Q4_Q5: &str = include_str!("wgsl/matmul_q4_q5.wgsl");
/// Q4_0's offset: value = d·(q − 8).
const Q4_0_BIAS: &str = "const Q_BIAS: i32 = 8;";
/// Q5_0's offset: value = d·(q − 16).
const Q5_0_BIAS: &str = "const Q_BIAS: i32 = 16;";
/// Q4_1's and Q5_1's: none (value = d·q + m).
const NO_BIAS: &str = "const Q_BIAS: i32 = 0;";
/// The matrix × vector kernel of 16-bit float weights, after a format's `weight_pair`.
const MATVEC_HALF: &str = include_str!("wgsl/matvec_half.wgsl");
/// Their tiled product's piece, likewise.
const MATMUL_HALF: &str = include_str!("wgsl/matmul_half.wgsl");
/// f16 weights: two values a word.
const F16_PAIR: &str = "fn weight_pair(word: u32) -> vec2<f32> { return unpack2x16float(word); }";
/// bf16 weights: two values a word, each the high half of an f32.
const BF16_PAIR: &str =
    "fn weight_pair(word: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xFFFF0000u)); }";
/// One block of activations quantized to 8 bits or scaled to f16 (after [`F16_WGSL`]).
const BLOCKS: &str = include_str!("wgsl/blocks.wgsl");
/// Writing those copies beside a fused kernel's output (after [`BLOCKS`]).
const COPIES: &str = include_str!("wgsl/copies.wgsl");
/// The tiled product's tiles and sums on the f32 path, before a format's tiled piece.
const MATMUL_F32: &str = include_str!("wgsl/matmul_f32.wgsl");
/// The same on the f16 path (after the f16 path's activations, `matvec_f16.wgsl`).
const MATMUL_F16: &str = include_str!("wgsl/matmul_f16.wgsl");
/// The element-wise kernel, after an operation's `op`.
const ELEMENTWISE: &str = include_str!("wgsl/elementwise.wgsl");

/// How a kernel's WGSL is put together.
#[derive(Clone, Copy, Debug)]
pub(super) enum Assembly {
    /// These pieces, joined in order.
    Pieces(&'static [&'static str]),
    /// The matrix × vector kernel around a block format's pieces (which define its
    /// `block_dot`), on the f16 path (`f16`) reading activations packed as f16.
    Matvec { format: &'static [&'static str], f16: bool },
    /// The tiled matrix product (prompts) around a block format's pieces (its block file,
    /// the path's tiles, and its tiled piece: `stage_weights`, `sub_dots`), on the f16 path
    /// as above.
    Matmul { format: &'static [&'static str], f16: bool },
    /// The matrix × vector kernel over two matrices of two formats lying one after the other
    /// in one buffer (`first`'s rows, then `second`'s), each format's `block_dot` renamed
    /// and one that picks by row put in front (`pair_format` in kernels.rs; the row's
    /// format is product_io.wgsl's `row_start`).
    MatvecPair { first: &'static [&'static str], second: &'static [&'static str], f16: bool },
}

/// Which devices run a kernel: the K-quants have two paths ([`super::Input`]), and a
/// device takes one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// Every device.
    Both,
    /// Devices with `shader-f16` enabled ([`super::Gpu::has_f16`]), which need it.
    F16,
    /// Devices without it (or told to avoid it).
    F32,
}

/// One kernel.
#[derive(Clone, Copy, Debug)]
pub(super) struct KernelEntry {
    /// Its name: the pipeline's label, and the profiler's.
    pub name: &'static str,
    /// Its source.
    pub assembly: Assembly,
    /// Which devices run it.
    pub path: Path,
    /// The check of [`super::checks::CHECKS`] that compares it with the CPU reference
    /// ([`super::checks::kernels_held_by`]).
    pub check: &'static str,
}

macro_rules! registry {
    ($($kernel:ident: $name:literal, $assembly:expr, $path:ident, checked by $check:literal;)*) => {
        /// A kernel of the registry (its place in [`KERNELS`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(super) enum Kernel {
            $(
                #[doc = concat!("`", $name, "`")]
                $kernel,
            )*
        }

        /// Every kernel, in the order of [`Kernel`].
        pub(super) const KERNELS: &[KernelEntry] = &[
            $(KernelEntry { name: $name, assembly: $assembly, path: Path::$path, check: $check },)*
        ];
    };
}

registry! {
    MatvecF32: "matvec_f32", Assembly::Matvec { format: &[include_str!("wgsl/matvec_f32.wgsl")], f16: false }, Both, checked by "matvec";
    MatvecF16Weights: "matvec_f16_weights", Assembly::Matvec { format: &[F16_PAIR, MATVEC_HALF], f16: false }, Both, checked by "matvec";
    MatvecBF16Weights: "matvec_bf16_weights", Assembly::Matvec { format: &[BF16_PAIR, MATVEC_HALF], f16: false }, Both, checked by "matvec";
    MatvecQ4_0: "matvec_q4_0", Assembly::Matvec { format: &[Q4_0_BIAS, Q4, MATVEC_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatvecQ4_1: "matvec_q4_1", Assembly::Matvec { format: &[NO_BIAS, Q4, MATVEC_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatvecQ5_0: "matvec_q5_0", Assembly::Matvec { format: &[Q5_0_BIAS, Q5, MATVEC_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatvecQ5_1: "matvec_q5_1", Assembly::Matvec { format: &[NO_BIAS, Q5, MATVEC_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatvecQ8_0: "matvec_q8_0", Assembly::Matvec { format: &[include_str!("wgsl/matvec_q8_0.wgsl")], f16: false }, Both, checked by "matvec";
    MatvecQ4K: "matvec_q4_k", Assembly::Matvec { format: &[Q4_K, include_str!("wgsl/matvec_q4_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    MatvecQ5K: "matvec_q5_k", Assembly::Matvec { format: &[Q5_K, include_str!("wgsl/matvec_q4_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    MatvecQ6K: "matvec_q6_k", Assembly::Matvec { format: &[Q6_K, include_str!("wgsl/matvec_q6_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    ActivationsF16: "activations_f16", Assembly::Pieces(&[F16_WGSL, BLOCKS, include_str!("wgsl/activations_f16.wgsl")]), F16, checked by "matvec_k_quants";
    MatvecQ4KF16: "matvec_q4_k_f16", Assembly::Matvec { format: &[Q4_K, include_str!("wgsl/matvec_q4_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatvecQ5KF16: "matvec_q5_k_f16", Assembly::Matvec { format: &[Q5_K, include_str!("wgsl/matvec_q4_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatvecQ6KF16: "matvec_q6_k_f16", Assembly::Matvec { format: &[Q6_K, include_str!("wgsl/matvec_q6_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatvecQ4KQ6K: "matvec_q4_k_q6_k", Assembly::MatvecPair { first: &[Q4_K, include_str!("wgsl/matvec_q4_k.wgsl")], second: &[Q6_K, include_str!("wgsl/matvec_q6_k.wgsl")], f16: false }, F32, checked by "fused";
    MatmulF32: "matmul_f32", Assembly::Matmul { format: &[MATMUL_F32, include_str!("wgsl/matmul_f32_weights.wgsl")], f16: false }, Both, checked by "matvec";
    MatmulF16Weights: "matmul_f16_weights", Assembly::Matmul { format: &[F16_PAIR, MATMUL_F32, MATMUL_HALF], f16: false }, Both, checked by "matvec";
    MatmulBF16Weights: "matmul_bf16_weights", Assembly::Matmul { format: &[BF16_PAIR, MATMUL_F32, MATMUL_HALF], f16: false }, Both, checked by "matvec";
    MatmulQ4_0: "matmul_q4_0", Assembly::Matmul { format: &[Q4_0_BIAS, Q4, MATMUL_F32, MATMUL_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatmulQ4_1: "matmul_q4_1", Assembly::Matmul { format: &[NO_BIAS, Q4, MATMUL_F32, MATMUL_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatmulQ5_0: "matmul_q5_0", Assembly::Matmul { format: &[Q5_0_BIAS, Q5, MATMUL_F32, MATMUL_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatmulQ5_1: "matmul_q5_1", Assembly::Matmul { format: &[NO_BIAS, Q5, MATMUL_F32, MATMUL_Q4_Q5], f16: false }, Both, checked by "matvec";
    MatmulQ8_0: "matmul_q8_0", Assembly::Matmul { format: &[MATMUL_F32, include_str!("wgsl/matmul_q8_0.wgsl")], f16: false }, Both, checked by "matvec";
    MatmulQ4K: "matmul_q4_k", Assembly::Matmul { format: &[Q4_K, MATMUL_F32, include_str!("wgsl/matmul_q4_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    MatmulQ5K: "matmul_q5_k", Assembly::Matmul { format: &[Q5_K, MATMUL_F32, include_str!("wgsl/matmul_q4_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    MatmulQ6K: "matmul_q6_k", Assembly::Matmul { format: &[Q6_K, MATMUL_F32, include_str!("wgsl/matmul_q6_k.wgsl")], f16: false }, F32, checked by "matvec_k_quants";
    MatmulQ4KF16: "matmul_q4_k_f16", Assembly::Matmul { format: &[Q4_K, MATMUL_F16, include_str!("wgsl/matmul_q4_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatmulQ5KF16: "matmul_q5_k_f16", Assembly::Matmul { format: &[Q5_K, MATMUL_F16, include_str!("wgsl/matmul_q4_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatmulQ6KF16: "matmul_q6_k_f16", Assembly::Matmul { format: &[Q6_K, MATMUL_F16, include_str!("wgsl/matmul_q6_k_f16.wgsl")], f16: true }, F16, checked by "matvec_k_quants";
    MatvecQ4KQ6KF16: "matvec_q4_k_q6_k_f16", Assembly::MatvecPair { first: &[Q4_K, include_str!("wgsl/matvec_q4_k_f16.wgsl")], second: &[Q6_K, include_str!("wgsl/matvec_q6_k_f16.wgsl")], f16: true }, F16, checked by "fused";
    QuantizeQ8: "quantize_q8", Assembly::Pieces(&[F16_WGSL, BLOCKS, include_str!("wgsl/quantize_q8.wgsl")]), Both, checked by "quantize_q8";
    RmsNorm: "rms_norm", Assembly::Pieces(&[REDUCE, F16_WGSL, BLOCKS, COPIES, include_str!("wgsl/rms_norm.wgsl")]), Both, checked by "rms_norm";
    Rope: "rope", Assembly::Pieces(&[include_str!("wgsl/rope.wgsl")]), Both, checked by "rope";
    RopeAppend: "rope_append", Assembly::Pieces(&[F16_WGSL, include_str!("wgsl/rope_append.wgsl")]), Both, checked by "fused";
    Swiglu: "swiglu", Assembly::Pieces(&[include_str!("wgsl/swiglu.wgsl"), ELEMENTWISE]), Both, checked by "elementwise";
    Geglu: "geglu", Assembly::Pieces(&[F16_WGSL, include_str!("wgsl/geglu.wgsl")]), Both, checked by "elementwise";
    Add: "add", Assembly::Pieces(&[include_str!("wgsl/add.wgsl"), ELEMENTWISE]), Both, checked by "elementwise";
    Softmax: "softmax", Assembly::Pieces(&[REDUCE, include_str!("wgsl/softmax.wgsl")]), Both, checked by "elementwise";
    KvStore: "kv_store", Assembly::Pieces(&[F16_WGSL, include_str!("wgsl/kv_store.wgsl")]), Both, checked by "attention";
    Attention: "attention", Assembly::Pieces(&[REDUCE, F16_WGSL, BLOCKS, COPIES, ATTENTION_IO, include_str!("wgsl/attention.wgsl")]), Both, checked by "attention";
    AttentionSplit: "attention_split", Assembly::Pieces(&[REDUCE, F16_WGSL, BLOCKS, COPIES, ATTENTION_IO, include_str!("wgsl/attention_split.wgsl")]), Both, checked by "attention";
    AttentionCombine: "attention_combine", Assembly::Pieces(&[REDUCE, F16_WGSL, BLOCKS, COPIES, ATTENTION_IO, include_str!("wgsl/attention_combine.wgsl")]), Both, checked by "attention";
    Argmax: "argmax", Assembly::Pieces(&[include_str!("wgsl/argmax.wgsl")]), Both, checked by "argmax";
    Sample: "sample", Assembly::Pieces(&[include_str!("wgsl/sample.wgsl")]), Both, checked by "sample";
    Penalize: "penalize", Assembly::Pieces(&[include_str!("wgsl/penalize.wgsl")]), Both, checked by "sample";
    LayerNorm: "layer_norm", Assembly::Pieces(&[REDUCE, include_str!("wgsl/layer_norm.wgsl")]), Both, checked by "encoder";
    BiasGelu: "bias_gelu", Assembly::Pieces(&[include_str!("wgsl/bias_gelu.wgsl"), ELEMENTWISE]), Both, checked by "encoder";
    EncoderAttention: "encoder_attention", Assembly::Pieces(&[REDUCE, include_str!("wgsl/encoder_attention.wgsl")]), Both, checked by "encoder";
}

impl Kernel {
    /// Its entry.
    pub(super) fn entry(self) -> &'static KernelEntry {
        &KERNELS[self as usize]
    }
}

/// The source of the matrix kernels' pieces around a format.
pub(super) mod products {
    /// What both matrix kernels share: parameters, buffers, where a sum goes.
    pub const IO: &str = include_str!("wgsl/product_io.wgsl");
    /// The matrix × vector kernel (a few tokens), after a block format's `block_dot`.
    pub const MATVEC: &str = include_str!("wgsl/matvec.wgsl");
    /// Its shape for software adapters: one row an invocation.
    pub const MATVEC_ROWS: &str = include_str!("wgsl/matvec_rows.wgsl");
    /// The tiled matrix product (prompts), after a format's tiled piece.
    pub const MATMUL: &str = include_str!("wgsl/matmul.wgsl");
    /// The f16 path's activations and helpers, before a format's pieces.
    pub const F16_INPUT: &str = include_str!("wgsl/matvec_f16.wgsl");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::checks::CHECKS;

    #[test]
    fn every_kernel_names_a_check_that_exists() {
        for k in KERNELS {
            assert!(CHECKS.contains(&k.check), "{}: no check '{}' in gpu::checks::CHECKS", k.name, k.check);
        }
        let mut names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KERNELS.len(), "kernel names are unique");
        assert_eq!(Kernel::EncoderAttention.entry().name, "encoder_attention", "the enum and the table agree");
        assert_eq!(Kernel::MatvecF32.entry().name, "matvec_f32");
    }
}
