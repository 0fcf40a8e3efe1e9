//! The WGSL kernels' dispatches: each method checks its buffers' shapes and records one
//! kernel of the registry ([`super::registry`]), compiled the first time it is needed.
//!
//! A call records a dispatch into the caller's command encoder; nothing runs until the
//! caller submits, so a whole forward pass can go in one command buffer. Parameters travel
//! in a small uniform buffer per call, taken from the device's pool (the token loop creates
//! no buffers).

use super::buffers::{block_layout, GpuMatrix, GpuVector};
use super::device::Gpu;
use super::pool::Use;
use super::recorder::Recorder;
use super::registry::{products, Assembly, Kernel, KernelEntry, Path, KERNELS};
use crate::gguf::GgmlType;
use crate::lm::DeviceDraw;
use crate::Error;
use std::sync::OnceLock;

/// Threads per workgroup in every kernel (the WGSL files say the same).
const WORKGROUP: u32 = 64;
/// The most workgroups along one dispatch dimension WebGPU guarantees.
const MAX_GROUPS: u32 = 65_535;

/// The kernels of one device, each compiled when first dispatched (see [`super::registry`]).
#[derive(Debug)]
pub struct Kernels {
    /// One slot per [`KERNELS`] entry.
    compiled: Vec<OnceLock<Pipeline>>,
    /// Whether the f16 path is on ([`Gpu::has_f16`]): the K-quants' kernels read
    /// activations packed as f16.
    f16: bool,
    /// Whether the kernels take a GPU's shapes ([`Gpu::runs_gpu_kernels`]: split attention,
    /// many threads on a matrix row), not the ones for software adapters.
    gpu_shapes: bool,
    /// Two small buffers bound where a kernel's copy outputs go unused ([`Copies::NONE`]),
    /// made on first use.
    unused: OnceLock<[wgpu::Buffer; 2]>,
}

/// Which copies of its output a fused kernel writes beside the f32 values (the forms the
/// next matrix products read, [`Input`]): `copies.wgsl`'s COPY_Q8 and COPY_F16 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copies {
    /// The 8-bit copy ([`Input::Q8`]).
    pub q8: bool,
    /// The scaled f16 copy ([`Input::F16`]).
    pub f16: bool,
}

impl Copies {
    /// No copies.
    pub const NONE: Copies = Copies { q8: false, f16: false };

    /// The bits the WGSL takes.
    fn bits(self) -> u32 {
        u32::from(self.q8) | (u32::from(self.f16) << 1)
    }

    /// Whether any copy is written.
    pub fn any(self) -> bool {
        self.q8 || self.f16
    }
}

/// Where a matrix product's sums go ([`Kernels::matvec_to`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `y = W·x`.
    Store,
    /// `y += W·x` (a residual stream).
    Add,
    /// The matrix is a gate projection stacked on its up projection (`rows / 2` each): `y =
    /// silu(gate · x) · (up · x)`, `rows / 2` values per token (SwiGLU).
    Glu,
}

/// Where in `y` a matrix product writes: each token's row of `y` is `width` values, this
/// product's outputs start at column `offset` (products that read one input can write side
/// by side: a layer's queries, keys and values), and the [`Epilogue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Values per token in `y`.
    pub width: usize,
    /// This product's first column.
    pub offset: usize,
    /// What is done with the sums.
    pub epilogue: Epilogue,
}

/// The longest sequence [`Kernels::encoder_attention`] takes (its scores are held in
/// workgroup memory; `encoder_attention.wgsl`'s MAX_TOKENS).
pub const ENCODER_MAX_TOKENS: usize = 1024;

/// What [`Kernels::sample`] writes when the draw needs the whole row on the CPU (top-k above
/// the GPU's head of 256, or a nucleus its 256 most likely tokens do not fill).
pub const SAMPLE_FALLBACK: u32 = 0xffff_fffe;

/// Whether the matrix × vector kernel for `ty` reads activations quantized to 8 bits
/// ([`Kernels::quantize_q8`]), as the CPU backend's kernel for it does.
pub fn reads_q8(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0)
}

/// Floats that `n` activations take quantized: their q values, then a (d, s) pair per
/// block of 32.
pub fn q8_len(n: usize) -> usize {
    n + n / 16
}

/// Words that `n` activations take on the f16 path ([`Kernels::activations_f16`]): packed
/// f16 pairs, then a scale per block of 32.
pub fn f16_len(n: usize) -> usize {
    n / 2 + n / 32
}

/// How a matrix kernel reads its activations ([`Kernels::input`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// As f32.
    F32,
    /// Quantized to 8 bits ([`Kernels::quantize_q8`], [`q8_len`] floats): the 32-value
    /// block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), as the CPU backend's kernels read them.
    Q8,
    /// Scaled into [-1, 1] per block of 32 and packed as f16 ([`Kernels::activations_f16`],
    /// [`f16_len`] words): the K-quants on the f16 path, which multiply in f16.
    F16,
}

/// Activations (`f32`, `tokens × n` values) and room for the copies matrix kernels may read
/// instead ([`Input`]): `q8` of [`q8_len`]`(tokens × n)` floats, `f16` of [`f16_len`] words.
/// [`Kernels::prepare`] fills the copies the matrices about to read it need;
/// [`Kernels::product`] hands each matrix its form.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The activations.
    pub f32: &'a GpuVector,
    /// Their 8-bit copy.
    pub q8: &'a GpuVector,
    /// Their f16 copy.
    pub f16: &'a GpuVector,
}

/// The shape of one attention call: `tokens` new query rows (positions `n_past..`) of
/// `heads` heads, over a cache of `kv_heads` heads of `head_dim` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Values per head.
    pub head_dim: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (a divisor of `heads`).
    pub kv_heads: usize,
    /// New query rows.
    pub tokens: usize,
    /// Positions already in the cache before them.
    pub n_past: usize,
    /// The query and output rows' first row in their buffers (sequences of a batch sit one
    /// after another there, each attending to its own cache).
    pub first_row: usize,
    /// Positions a token sees, its own included (a sliding-window layer), or 0: all.
    pub window: usize,
}

/// Which attention kernel runs a call ([`Kernels::attention`] picks; the checks run each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttentionKernel {
    /// `attention.wgsl`: a workgroup of 64 per (head, token); software adapters.
    Narrow,
    /// `attention_split.wgsl` then `attention_combine.wgsl`: split over chunks of
    /// [`SPLIT_CHUNK`] cache positions (flash-decoding); GPUs. For every call, a prompt's
    /// as well as a decoded token's: a token's result must not depend on how many rows its
    /// call holds (a prompt run in pieces, a reused prefix, drafts), and this kernel rounds
    /// otherwise than the other.
    Split,
}

/// Cache positions one workgroup of split attention takes (its 64 threads, one each).
const SPLIT_CHUNK: usize = 64;
/// Floats of partial sums split attention keeps at once (32 MiB): a long prompt's rows go
/// through in groups that fit.
const SPLIT_SCRATCH: usize = 8 << 20;

/// Rows of `a` that split attention takes per pair of dispatches (at least one).
fn split_rows(a: AttentionShape) -> usize {
    let per_row = a.heads * (a.n_past + a.tokens).div_ceil(SPLIT_CHUNK) * (a.head_dim + 2);
    (SPLIT_SCRATCH / per_row.max(1)).clamp(1, a.tokens.max(1))
}

/// Scratch floats attention needs for `a` ([`Kernels::attention`]'s `scores`): every score
/// (the software adapters' kernel), or a group of rows' partial sums (split attention),
/// whichever is more.
pub fn attention_scratch(a: AttentionShape) -> usize {
    let ctx = a.n_past + a.tokens;
    (a.tokens * a.heads * ctx).max(split_rows(a) * a.heads * ctx.div_ceil(SPLIT_CHUNK) * (a.head_dim + 2))
}

/// The most tokens a workgroup of the matrix × vector kernel takes; more tokens than
/// this go to the tiled kernel where the format has one.
const MATVEC_TILE: u32 = 8;
/// Sub-block dot products the matrix × vector kernel holds at once (`SUMS` in matvec.wgsl).
const MATVEC_SUMS: u32 = 3072;
/// Rows and tokens per workgroup of the tiled kernel (`BM`, `BN` in matmul.wgsl).
const MATMUL_TILE: (u32, u32) = (64, 32);

/// Which kernel shape runs a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProductShape {
    /// The tiled kernel (matmul.wgsl): 64 rows × 32 tokens a workgroup, or, for a gated
    /// product, 32 gate rows beside their up rows.
    Tiled,
    /// The matrix × vector kernel in a GPU's shape (matvec.wgsl): a row a workgroup.
    RowPerGroup,
    /// The matrix × vector kernel on software adapters (matvec_rows.wgsl): a row an
    /// invocation, 64 a workgroup.
    RowPerInvocation,
}

/// How a product of a matrix with rows of `cols` values and `tokens` rows of activations
/// is cut into workgroups.
struct ProductPlan {
    /// 32-value sub-blocks per row.
    blocks: u32,
    /// Tokens.
    tokens: u32,
    /// Tokens per workgroup.
    tile: u32,
    /// Workgroups along z.
    token_groups: u32,
    /// The kernel's shape.
    shape: ProductShape,
}

impl ProductPlan {
    fn new(cols: usize, tokens: usize, shape: ProductShape) -> Result<ProductPlan, Error> {
        if !cols.is_multiple_of(32) {
            return Err(Error::GpuShape { what: "matrix columns (a multiple of 32)", expected: cols.next_multiple_of(32), got: cols });
        }
        let blocks = u32_of(cols / 32, "matrix blocks")?;
        let tile = match shape {
            ProductShape::Tiled => MATMUL_TILE.1,
            // It holds a tile's dot products in workgroup memory.
            ProductShape::RowPerGroup => MATVEC_TILE.min(MATVEC_SUMS / blocks.max(1)),
            ProductShape::RowPerInvocation => MATVEC_TILE,
        };
        if tile == 0 {
            return Err(Error::GpuShape { what: "matrix columns", expected: 32 * MATVEC_SUMS as usize, got: cols });
        }
        let tokens = u32_of(tokens, "matvec tokens")?;
        let token_groups = tokens.div_ceil(tile);
        if token_groups > MAX_GROUPS {
            return Err(Error::GpuShape { what: "matvec token tiles", expected: MAX_GROUPS as usize, got: token_groups as usize });
        }
        Ok(ProductPlan { blocks, tokens, tile, token_groups, shape })
    }

    /// Workgroups along the rows for `rows` output rows (gate rows, for a gated product).
    fn row_groups(&self, rows: u32, gated: bool) -> u32 {
        let per_group = match (self.shape, gated) {
            (ProductShape::Tiled, false) => MATMUL_TILE.0,
            (ProductShape::Tiled, true) => MATMUL_TILE.0 / 2,
            (ProductShape::RowPerGroup, _) => 1,
            (ProductShape::RowPerInvocation, _) => WORKGROUP,
        };
        rows.div_ceil(per_group)
    }
}

/// A compiled kernel and its name (for the profiler's figures).
#[derive(Debug)]
struct Pipeline {
    name: &'static str,
    inner: wgpu::ComputePipeline,
}

/// A pipeline from WGSL pieces joined in order (WGSL has no includes).
fn pipeline(gpu: &Gpu, name: &'static str, pieces: &[&str]) -> Pipeline {
    let source = pieces.join("\n");
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(source.into()) });
    let inner = gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(name),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    Pipeline { name, inner }
}

/// A matrix kernel for one block format: the matrix × vector kernel (`format`'s pieces
/// define its `block_dot`), in the device's shape, or the tiled one (`tiled`: they define its tiled piece); on the
/// f16 path (`f16`) with `enable f16;` and `matvec_f16.wgsl` before the format.
fn product_pipeline(gpu: &Gpu, name: &'static str, format: &str, f16: bool, tiled: bool) -> Pipeline {
    let (enable_f16, input) = if f16 { ("enable f16;", products::F16_INPUT) } else { ("", "alias XWord = f32;") };
    if tiled {
        pipeline(gpu, name, &[enable_f16, input, products::IO, format, products::MATMUL])
    } else {
        // The shape of the matrix × vector kernel: a GPU's, or one row an invocation on a
        // software adapter (ProductPlan::row_groups counts workgroups to match).
        let shape = if gpu.runs_gpu_kernels() { products::MATVEC } else { products::MATVEC_ROWS };
        pipeline(gpu, name, &[enable_f16, input, products::IO, format, shape])
    }
}

/// Two formats' pieces as one format for the pair kernel: each `block_dot` renamed, and a
/// `block_dot` that calls the one of the row's matrix (`second_format`, set by
/// product_io.wgsl).
fn pair_format(first: &[&str], second: &[&str]) -> String {
    let rename = |pieces: &[&str], to: &str| pieces.join("\n").replace("fn block_dot(", &format!("fn {to}("));
    let second = rename(second, "block_dot_second");
    let pick = "fn block_dot(block: u32, xo: u32) -> f32 {\n    if (second_format) {\n        return block_dot_second(block, xo);\n    }\n    return block_dot_first(block, xo);\n}";
    [rename(first, "block_dot_first"), second, pick.to_owned()].join("\n")
}

/// Compile a registry entry for `gpu`.
fn compile(gpu: &Gpu, entry: &KernelEntry) -> Pipeline {
    match entry.assembly {
        Assembly::Pieces(pieces) => pipeline(gpu, entry.name, pieces),
        Assembly::Matvec { format, f16 } => product_pipeline(gpu, entry.name, &format.join("\n"), f16, false),
        Assembly::Matmul { format, f16 } => product_pipeline(gpu, entry.name, &format.join("\n"), f16, true),
        Assembly::MatvecPair { first, second, f16 } => product_pipeline(gpu, entry.name, &pair_format(first, second), f16, false),
    }
}

/// A grid of `n` workgroups as `(x, y)` with `x · y ≥ n` and `x` at most 65,535 (the
/// kernels number them `x + y · 65535`).
fn groups_2d(n: u32) -> (u32, u32) {
    let x = n.clamp(1, MAX_GROUPS);
    (x, n.div_ceil(x).max(1))
}

/// Fail unless `len` is `expected`.
fn shape(what: &'static str, len: usize, expected: usize) -> Result<(), Error> {
    if len == expected {
        Ok(())
    } else {
        Err(Error::GpuShape { what, expected, got: len })
    }
}

fn u32_of(n: usize, what: &'static str) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::GpuShape { what, expected: u32::MAX as usize, got: n })
}

impl Kernels {
    /// The kernels for `gpu`, none compiled yet.
    pub fn new(gpu: &Gpu) -> Kernels {
        Kernels {
            compiled: KERNELS.iter().map(|_| OnceLock::new()).collect(),
            f16: gpu.has_f16(),
            gpu_shapes: gpu.runs_gpu_kernels(),
            unused: OnceLock::new(),
        }
    }

    /// The two buffers bound in place of copies not written.
    fn unused_copies(&self, gpu: &Gpu) -> &[wgpu::Buffer; 2] {
        self.unused.get_or_init(|| {
            let buffer = || GpuVector::zeros(gpu, 4).buffer;
            [buffer(), buffer()]
        })
    }

    /// The copies of an activation that matrices of the types `readers` read on this
    /// device ([`Kernels::input`]).
    pub fn copies_for(&self, readers: &[GgmlType]) -> Copies {
        Copies { q8: readers.iter().any(|&t| self.input(t) == Input::Q8), f16: readers.iter().any(|&t| self.input(t) == Input::F16) }
    }

    /// The buffers bound for `copies` of `x`: its own where written, unused ones where not.
    fn copy_bindings<'a>(&'a self, gpu: &Gpu, x: &Operand<'a>, copies: Copies) -> [&'a wgpu::Buffer; 2] {
        let unused = self.unused_copies(gpu);
        [if copies.q8 { &x.q8.buffer } else { &unused[0] }, if copies.f16 { &x.f16.buffer } else { &unused[1] }]
    }

    /// Fail unless `x`'s copies have room for `copies` of its `n` values (blocks of 32).
    fn check_copies(x: &Operand, n: usize, copies: Copies, what: &'static str) -> Result<(), Error> {
        if !copies.any() {
            return Ok(());
        }
        if !n.is_multiple_of(32) {
            return Err(Error::GpuShape { what, expected: n.next_multiple_of(32), got: n });
        }
        if copies.q8 {
            shape("8-bit copy", x.q8.len, q8_len(n))?;
        }
        if copies.f16 {
            shape("f16 copy", x.f16.len, f16_len(n))?;
        }
        Ok(())
    }

    /// `kernel`'s pipeline, compiled on its first use; an error when the device lacks
    /// what it requires.
    fn get(&self, gpu: &Gpu, kernel: Kernel) -> Result<&Pipeline, Error> {
        let entry = kernel.entry();
        if entry.path == Path::F16 && !self.f16 {
            return Err(Error::MissingFeature { feature: "shader-f16" });
        }
        Ok(self.compiled[kernel as usize].get_or_init(|| compile(gpu, entry)))
    }

    /// Whether this device runs `entry`'s kernel (it is on the device's path).
    pub(super) fn runs(&self, entry: &KernelEntry) -> bool {
        match entry.path {
            Path::Both => true,
            Path::F16 => self.f16,
            Path::F32 => !self.f16,
        }
    }

    /// The kernels compiled so far, and those this device runs that are not.
    pub fn coverage(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        let (mut compiled, mut not) = (Vec::new(), Vec::new());
        for (entry, slot) in KERNELS.iter().zip(&self.compiled) {
            if slot.get().is_some() {
                compiled.push(entry.name);
            } else if self.runs(entry) {
                not.push(entry.name);
            }
        }
        (compiled, not)
    }

    /// Record one dispatch of `pipeline` with `buffers` at bindings 0.. and `words` as the
    /// uniform after them.
    fn dispatch(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        pipeline: &Pipeline,
        buffers: &[&wgpu::Buffer],
        words: &[u32],
        groups: (u32, u32, u32),
    ) {
        let uniform = enc.param_slot(gpu, words);
        let bind = gpu.bind_groups.get(&gpu.device, &pipeline.inner, buffers, uniform);
        let timestamp_writes = gpu.profiler.as_ref().and_then(|p| p.pass(pipeline.name));
        let pass = enc.pass(timestamp_writes);
        pass.set_pipeline(&pipeline.inner);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        gpu.counters.dispatch();
    }

    /// Quantize the activations `x` (a multiple of 32 values) into `q` ([`q8_len`] floats)
    /// for the kernels that [`reads_q8`].
    pub fn quantize_q8(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, q: &GpuVector) -> Result<(), Error> {
        shape("quantized activations", q.len, q8_len(x.len))?;
        if !x.len.is_multiple_of(32) {
            return Err(Error::GpuShape { what: "activations to quantize", expected: x.len.next_multiple_of(32), got: x.len });
        }
        let groups = u32_of(x.len / 32, "activation blocks")?.div_ceil(WORKGROUP);
        let (gx, gy) = groups_2d(groups);
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::QuantizeQ8)?,
            &[&x.buffer, &q.buffer],
            &[u32_of(x.len, "activations")?, 0, 0, 0],
            (gx, gy, 1),
        );
        Ok(())
    }

    /// Scale and pack the activations `x` (a multiple of 32 values) into `h` ([`f16_len`]
    /// words) for the kernels that read [`Input::F16`]; an error unless the f16 path is on.
    pub fn activations_f16(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, h: &GpuVector) -> Result<(), Error> {
        shape("f16 activations", h.len, f16_len(x.len))?;
        if !x.len.is_multiple_of(32) {
            return Err(Error::GpuShape { what: "activations to pack as f16", expected: x.len.next_multiple_of(32), got: x.len });
        }
        let groups = u32_of(x.len / 32, "activation blocks")?.div_ceil(WORKGROUP);
        let (gx, gy) = groups_2d(groups);
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::ActivationsF16)?,
            &[&x.buffer, &h.buffer],
            &[u32_of(x.len, "activations")?, 0, 0, 0],
            (gx, gy, 1),
        );
        Ok(())
    }

    /// Fill the copies of `x` that matrices of the types `readers` read (none for f32
    /// readers: a K-quant model on the f32 path quantizes nothing).
    pub fn prepare(&self, gpu: &Gpu, enc: &mut Recorder, x: Operand, readers: &[GgmlType]) -> Result<(), Error> {
        let needs = |input| readers.iter().any(|&ty| self.input(ty) == input);
        if needs(Input::Q8) {
            self.quantize_q8(gpu, enc, x.f32, x.q8)?;
        }
        if needs(Input::F16) {
            self.activations_f16(gpu, enc, x.f32, x.f16)?;
        }
        Ok(())
    }

    /// [`Kernels::matvec`] with `x` in the form `w`'s kernel reads (after
    /// [`Kernels::prepare`]).
    pub fn product(&self, gpu: &Gpu, enc: &mut Recorder, w: &GpuMatrix, x: Operand, tokens: usize, y: &GpuVector) -> Result<(), Error> {
        self.product_to(gpu, enc, w, x, tokens, y, Placement { width: w.rows, offset: 0, epilogue: Epilogue::Store })
    }

    /// Fail unless `x` holds `inputs` activations in the form the kernel for `ty` reads;
    /// where its per-block scales start (the kernels' `scales_at`, in `x`'s elements).
    fn check_input(&self, ty: GgmlType, x: &GpuVector, inputs: usize) -> Result<usize, Error> {
        let (x_len, scales_at) = match self.input(ty) {
            Input::F32 => (inputs, inputs),
            Input::Q8 => (q8_len(inputs), inputs),
            Input::F16 => (f16_len(inputs), inputs / 2),
        };
        shape("matvec input", x.len, x_len)?;
        Ok(scales_at)
    }

    /// The form of `x` that the kernel for `ty` reads ([`Kernels::input`]).
    fn form<'a>(&self, ty: GgmlType, x: Operand<'a>) -> &'a GpuVector {
        match self.input(ty) {
            Input::F32 => x.f32,
            Input::Q8 => x.q8,
            Input::F16 => x.f16,
        }
    }

    /// [`Kernels::product`] written where `at` says ([`Kernels::matvec_to`]).
    #[allow(clippy::too_many_arguments)] // one product and where it goes
    pub fn product_to(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        w: &GpuMatrix,
        x: Operand,
        tokens: usize,
        y: &GpuVector,
        at: Placement,
    ) -> Result<(), Error> {
        self.matvec_to(gpu, enc, w, self.form(w.ty, x), tokens, y, at)
    }

    /// How the matrix kernel for `ty` reads its activations on this device: [`Input::F16`]
    /// for the K-quants where the f16 path is on, [`Input::Q8`] where the type [`reads_q8`],
    /// [`Input::F32`] otherwise.
    pub fn input(&self, ty: GgmlType) -> Input {
        match ty {
            ty if reads_q8(ty) => Input::Q8,
            GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K if self.f16 => Input::F16,
            _ => Input::F32,
        }
    }

    /// `y[t] = w · x[t]` for each of `tokens` rows of `x` (`tokens × w.cols`); `y` holds
    /// `tokens × w.rows`. `x` is the rows as [`Kernels::input`] says for `w`'s type: f32,
    /// quantized ([`Kernels::quantize_q8`], [`q8_len`] floats) or packed as f16
    /// ([`Kernels::activations_f16`], [`f16_len`] words).
    pub fn matvec(&self, gpu: &Gpu, enc: &mut Recorder, w: &GpuMatrix, x: &GpuVector, tokens: usize, y: &GpuVector) -> Result<(), Error> {
        self.matvec_to(gpu, enc, w, x, tokens, y, Placement { width: w.rows, offset: 0, epilogue: Epilogue::Store })
    }

    /// [`Kernels::matvec`] written where `at` says: at a column offset of wider rows of `y`
    /// (`tokens × at.width`), stored, added to `y`, or, for a gate stacked on its up
    /// projection ([`GpuMatrix::joined`]), as SwiGLU of the two.
    #[allow(clippy::too_many_arguments)] // one product and where it goes
    pub fn matvec_to(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        w: &GpuMatrix,
        x: &GpuVector,
        tokens: usize,
        y: &GpuVector,
        at: Placement,
    ) -> Result<(), Error> {
        let scales_at = self.check_input(w.ty, x, tokens * w.cols)?;
        let (out_rows, mode) = match at.epilogue {
            Epilogue::Store => (w.rows, 0),
            Epilogue::Add => (w.rows, 1),
            Epilogue::Glu => {
                if !w.rows.is_multiple_of(2) || w.parts.len() != 1 {
                    return Err(Error::GpuShape {
                        what: "stacked gate and up rows (even, in one buffer)",
                        expected: w.rows + 1,
                        got: w.rows,
                    });
                }
                (w.rows / 2, 2)
            }
        };
        if at.offset + out_rows > at.width {
            return Err(Error::GpuShape { what: "matvec output columns", expected: at.offset + out_rows, got: at.width });
        }
        shape("matvec output", y.len, tokens * at.width)?;
        let layout = block_layout(w.ty);
        let tiled = self.takes_tiled(tokens).then(|| self.tiled_kernel(w.ty));
        let kernel = match (tiled, w.ty, self.f16) {
            (Some(kernel), _, _) => kernel,
            (None, GgmlType::F32, _) => Kernel::MatvecF32,
            (None, GgmlType::F16, _) => Kernel::MatvecF16Weights,
            (None, GgmlType::BF16, _) => Kernel::MatvecBF16Weights,
            (None, GgmlType::Q4_0, _) => Kernel::MatvecQ4_0,
            (None, GgmlType::Q4_1, _) => Kernel::MatvecQ4_1,
            (None, GgmlType::Q5_0, _) => Kernel::MatvecQ5_0,
            (None, GgmlType::Q5_1, _) => Kernel::MatvecQ5_1,
            (None, GgmlType::Q8_0, _) => Kernel::MatvecQ8_0,
            (None, GgmlType::Q4K, true) => Kernel::MatvecQ4KF16,
            (None, GgmlType::Q5K, true) => Kernel::MatvecQ5KF16,
            (None, GgmlType::Q6K, true) => Kernel::MatvecQ6KF16,
            (None, GgmlType::Q4K, false) => Kernel::MatvecQ4K,
            (None, GgmlType::Q5K, false) => Kernel::MatvecQ5K,
            (None, GgmlType::Q6K, false) => Kernel::MatvecQ6K,
        };
        let pipeline = self.get(gpu, kernel)?;
        let plan = ProductPlan::new(w.cols, tokens, if tiled.is_some() { ProductShape::Tiled } else { self.matvec_shape() })?;
        for part in &w.parts {
            // A stacked matrix starts on one of its own blocks (GpuMatrix::stack places it so),
            // and the kernels count 32-value sub-blocks.
            if !part.word_offset.is_multiple_of(layout.start_words()) {
                return Err(Error::GpuShape {
                    what: "matrix offset (whole blocks)",
                    expected: part.word_offset.next_multiple_of(layout.start_words()),
                    got: part.word_offset,
                });
            }
            let values_before = part.word_offset / layout.words * layout.values;
            let rows = u32_of(if at.epilogue == Epilogue::Glu { out_rows } else { part.rows }, "matrix rows")?;
            let (gx, gy) = groups_2d(plan.row_groups(rows, at.epilogue == Epilogue::Glu));
            let words = [
                rows,
                plan.blocks,
                u32_of(w.cols, "matrix columns")?,
                u32_of(at.width, "matvec output columns")?,
                u32_of(at.offset + part.first_row, "matrix rows")?,
                gx,
                u32_of(scales_at, "matvec input")?,
                plan.tokens,
                u32_of(values_before / 32, "matrix offset")?,
                mode,
                u32_of(out_rows, "matrix rows")?,
                u32::MAX,
                0,
                plan.tile,
                0,
                0,
            ];
            self.dispatch(gpu, enc, pipeline, &[&part.buffer, &x.buffer, &y.buffer], &words, (gx, gy, plan.token_groups));
        }
        Ok(())
    }

    /// Whether a product of `tokens` rows goes to the tiled kernel (where its format has
    /// one): past one tile of the matrix × vector kernel. On llvmpipe too it is the faster
    /// from there (a 64-token prompt of qwen2-0.5b Q4_K_M: 43 s against 63 s to the first
    /// token), and the choice never moves a result.
    fn takes_tiled(&self, tokens: usize) -> bool {
        tokens > MATVEC_TILE as usize
    }

    /// The matrix × vector kernel's shape on this device.
    fn matvec_shape(&self) -> ProductShape {
        if self.gpu_shapes {
            ProductShape::RowPerGroup
        } else {
            ProductShape::RowPerInvocation
        }
    }

    /// The tiled product's kernel for `ty` on this device's path.
    fn tiled_kernel(&self, ty: GgmlType) -> Kernel {
        match (ty, self.f16) {
            (GgmlType::F32, _) => Kernel::MatmulF32,
            (GgmlType::F16, _) => Kernel::MatmulF16Weights,
            (GgmlType::BF16, _) => Kernel::MatmulBF16Weights,
            (GgmlType::Q4_0, _) => Kernel::MatmulQ4_0,
            (GgmlType::Q4_1, _) => Kernel::MatmulQ4_1,
            (GgmlType::Q5_0, _) => Kernel::MatmulQ5_0,
            (GgmlType::Q5_1, _) => Kernel::MatmulQ5_1,
            (GgmlType::Q8_0, _) => Kernel::MatmulQ8_0,
            (GgmlType::Q4K, false) => Kernel::MatmulQ4K,
            (GgmlType::Q5K, false) => Kernel::MatmulQ5K,
            (GgmlType::Q6K, false) => Kernel::MatmulQ6K,
            (GgmlType::Q4K, true) => Kernel::MatmulQ4KF16,
            (GgmlType::Q5K, true) => Kernel::MatmulQ5KF16,
            (GgmlType::Q6K, true) => Kernel::MatmulQ6KF16,
        }
    }

    /// The pair kernel for matrices of `first` then `second`'s format, where there is one.
    fn pair_kernel(&self, first: GgmlType, second: GgmlType) -> Option<Kernel> {
        match (first, second, self.f16) {
            (GgmlType::Q4K, GgmlType::Q6K, false) => Some(Kernel::MatvecQ4KQ6K),
            (GgmlType::Q4K, GgmlType::Q6K, true) => Some(Kernel::MatvecQ4KQ6KF16),
            _ => None,
        }
    }

    /// Whether [`Kernels::product_pair`] takes `first` and `second`: formats it has a kernel
    /// for, one row width, and `second` right after `first` in one buffer
    /// ([`GpuMatrix::stack`]).
    pub fn pairs(&self, first: &GpuMatrix, second: &GpuMatrix) -> bool {
        let ([a], [b]) = (&first.parts[..], &second.parts[..]) else { return false };
        let next = (a.word_offset + first.words()).next_multiple_of(block_layout(second.ty).start_words());
        self.pair_kernel(first.ty, second.ty).is_some() && a.buffer == b.buffer && first.cols == second.cols && next == b.word_offset
    }

    /// `first` and `second` (two formats, [`Kernels::pairs`]) times `x` in one dispatch, their
    /// outputs side by side from column `offset` of `y`'s rows of `width` (stored).
    #[allow(clippy::too_many_arguments)] // two products and where they go
    pub fn product_pair(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        (first, second): (&GpuMatrix, &GpuMatrix),
        x: Operand,
        tokens: usize,
        y: &GpuVector,
        (width, offset): (usize, usize),
    ) -> Result<(), Error> {
        let kernel = self.pair_kernel(first.ty, second.ty).filter(|_| self.pairs(first, second));
        let Some(kernel) = kernel else {
            return Err(Error::GpuShape { what: "a pair of matrices (two formats, stacked one after the other)", expected: 1, got: 0 });
        };
        let input = self.form(first.ty, x);
        if self.takes_tiled(tokens) {
            // A prompt: each format through its tiled kernel (which takes one format).
            let at = |offset| Placement { width, offset, epilogue: Epilogue::Store };
            self.matvec_to(gpu, enc, first, input, tokens, y, at(offset))?;
            return self.matvec_to(gpu, enc, second, input, tokens, y, at(offset + first.rows));
        }
        let scales_at = self.check_input(first.ty, input, tokens * first.cols)?;
        let rows = first.rows + second.rows;
        if offset + rows > width {
            return Err(Error::GpuShape { what: "matvec output columns", expected: offset + rows, got: width });
        }
        shape("matvec output", y.len, tokens * width)?;
        let pipeline = self.get(gpu, kernel)?;
        // Both formats' kernels count 32-value sub-blocks, eight to a 256-value block.
        let sub_blocks = |m: &GpuMatrix| {
            let l = block_layout(m.ty);
            m.parts[0].word_offset / l.words * (l.values / 32)
        };
        let plan = ProductPlan::new(first.cols, tokens, self.matvec_shape())?;
        let (gx, gy) = groups_2d(plan.row_groups(u32_of(rows, "matrix rows")?, false));
        let words = [
            u32_of(rows, "matrix rows")?,
            plan.blocks,
            u32_of(first.cols, "matrix columns")?,
            u32_of(width, "matvec output columns")?,
            u32_of(offset, "matrix rows")?,
            gx,
            u32_of(scales_at, "matvec input")?,
            plan.tokens,
            u32_of(sub_blocks(first), "matrix offset")?,
            0,
            0,
            u32_of(first.rows, "matrix rows")?,
            u32_of(sub_blocks(second), "matrix offset")?,
            plan.tile,
            0,
            0,
        ];
        self.dispatch(gpu, enc, pipeline, &[&first.parts[0].buffer, &input.buffer, &y.buffer], &words, (gx, gy, plan.token_groups));
        Ok(())
    }

    /// `y = rms_norm(x) · weight` over rows of `weight.len` values.
    pub fn rms_norm(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, weight: &GpuVector, eps: f32, y: &GpuVector) -> Result<(), Error> {
        let unused = self.unused_copies(gpu);
        let none = (GpuVector { len: 0, buffer: unused[0].clone() }, GpuVector { len: 0, buffer: unused[1].clone() });
        self.rms_norm_with_copies(gpu, enc, (x, 0), weight, eps, Operand { f32: y, q8: &none.0, f16: &none.1 }, Copies::NONE)
    }

    /// [`Kernels::rms_norm`] of the rows of `x` from row `first` on (as many as `y.f32`
    /// holds) into `y.f32`, writing in the same dispatch the `copies` of the result that the
    /// next products read (the width a multiple of 32 if any).
    #[allow(clippy::too_many_arguments)] // a norm and its copies
    pub fn rms_norm_with_copies(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        (x, first): (&GpuVector, usize),
        weight: &GpuVector,
        eps: f32,
        y: Operand,
        copies: Copies,
    ) -> Result<(), Error> {
        let n = weight.len.max(1);
        shape("rms_norm output", y.f32.len, y.f32.len / n * n)?;
        if x.len < first * n + y.f32.len {
            return Err(Error::GpuShape { what: "rms_norm input", expected: first * n + y.f32.len, got: x.len });
        }
        if copies.any() && !n.is_multiple_of(32) {
            return Err(Error::GpuShape { what: "rms_norm width with copies", expected: n.next_multiple_of(32), got: n });
        }
        Self::check_copies(&y, y.f32.len, copies, "rms_norm output")?;
        let rows = u32_of(y.f32.len / n, "rms_norm rows")?;
        // Rows past the first dimension's limit go on in the second (`rms_norm.wgsl`).
        let grid = (rows.min(MAX_GROUPS), rows.div_ceil(MAX_GROUPS));
        if grid.1 > MAX_GROUPS {
            return Err(Error::GpuShape { what: "rms_norm rows", expected: MAX_GROUPS as usize * MAX_GROUPS as usize, got: rows as usize });
        }
        let words = [u32_of(n, "rms_norm width")?, rows, eps.to_bits(), copies.bits(), u32_of(first, "rms_norm first row")?, 0, 0, 0];
        let [q8, f16] = self.copy_bindings(gpu, &y, copies);
        let buffers = [&x.buffer, &weight.buffer, &y.f32.buffer, q8, f16];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::RmsNorm)?, &buffers, &words, (grid.0, grid.1.max(1), 1));
        Ok(())
    }

    /// What follows a layer's Q/K/V products, in one dispatch (`rope_append.wgsl`): each
    /// of the `tokens` rows of `qkv` from row `shape.first_row` on (q | k | v side by side)
    /// gets `bias` (q | k | v biases, if any), RoPE by `angles` (the batch's table, as
    /// [`Kernels::rope`] takes it) on its queries and keys, its queries written to `q_out`
    /// (`rows × heads × head_dim`) and its keys and values appended to `cache` (f16 pairs)
    /// at row `shape.n_past`.
    #[allow(clippy::too_many_arguments)] // the operands of one fused step
    pub fn rope_append(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        qkv: &GpuVector,
        bias: Option<&GpuVector>,
        angles: &GpuVector,
        q_out: &GpuVector,
        (k_cache, v_cache): (&GpuVector, &GpuVector),
        a: AttentionShape,
        (pairs, neox): (usize, bool),
    ) -> Result<(), Error> {
        let (qw, kvw) = (a.heads * a.head_dim, a.kv_heads * a.head_dim);
        let width = qw + 2 * kvw;
        let rows = a.first_row + a.tokens;
        if !a.head_dim.is_multiple_of(2) || 2 * pairs > a.head_dim {
            return Err(Error::GpuShape {
                what: "rope pairs (head_dim even, at least twice the pairs)",
                expected: a.head_dim / 2,
                got: pairs,
            });
        }
        if qkv.len < rows * width {
            return Err(Error::GpuShape { what: "q|k|v rows", expected: rows * width, got: qkv.len });
        }
        if q_out.len < rows * qw {
            return Err(Error::GpuShape { what: "query rows", expected: rows * qw, got: q_out.len });
        }
        if angles.len < rows * pairs * 2 {
            return Err(Error::GpuShape { what: "rope angles", expected: rows * pairs * 2, got: angles.len });
        }
        if let Some(b) = bias {
            shape("q|k|v biases", b.len, width)?;
        }
        let filled = (a.n_past + a.tokens) * kvw / 2;
        for (what, cache) in [("key cache (words of two f16)", k_cache), ("value cache (words of two f16)", v_cache)] {
            if cache.len < filled {
                return Err(Error::GpuShape { what, expected: filled, got: cache.len });
            }
        }
        let n = u32_of(a.tokens * width / 2, "q|k|v pairs")?;
        let (gx, gy) = groups_2d(n.div_ceil(WORKGROUP));
        let words = [
            u32_of(a.head_dim, "head_dim")?,
            u32_of(a.heads, "heads")?,
            u32_of(a.kv_heads, "kv heads")?,
            u32_of(pairs, "pairs")?,
            u32::from(neox),
            u32_of(a.tokens, "tokens")?,
            u32_of(a.n_past, "cache position")?,
            u32_of(a.first_row, "first row")?,
            u32::from(bias.is_some()),
            0,
            0,
            0,
        ];
        // Without biases the angle table is bound in their place (never read).
        let bias = bias.unwrap_or(angles);
        let buffers = [&qkv.buffer, &bias.buffer, &angles.buffer, &q_out.buffer, &k_cache.buffer, &v_cache.buffer];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::RopeAppend)?, &buffers, &words, (gx, gy, 1));
        Ok(())
    }

    /// Rotate `x` (`tokens × heads × head_dim`) in place by the angles `angles` holds for
    /// each token (`tokens × pairs` (cos, sin) pairs, flattened; see
    /// [`crate::cpu::attention::RopeFrequencies::angles`]).
    #[allow(clippy::too_many_arguments)] // the shape of one RoPE call
    pub fn rope(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        x: &GpuVector,
        angles: &GpuVector,
        (tokens, heads, head_dim, pairs): (usize, usize, usize, usize),
        neox: bool,
    ) -> Result<(), Error> {
        shape("rope input", x.len, tokens * heads * head_dim)?;
        shape("rope angles", angles.len, tokens * pairs * 2)?;
        if 2 * pairs > head_dim {
            return Err(Error::GpuShape { what: "rope pairs", expected: head_dim / 2, got: pairs });
        }
        let n = u32_of(tokens * heads * pairs, "rope pairs")?;
        let words = [
            u32_of(head_dim, "head_dim")?,
            u32_of(heads, "heads")?,
            u32_of(pairs, "pairs")?,
            u32::from(neox),
            u32_of(tokens, "tokens")?,
            0,
            0,
            0,
        ];
        let groups = n.div_ceil(WORKGROUP);
        if groups > MAX_GROUPS {
            return Err(Error::GpuShape { what: "rope pairs", expected: (MAX_GROUPS * WORKGROUP) as usize, got: n as usize });
        }
        self.dispatch(gpu, enc, self.get(gpu, Kernel::Rope)?, &[&x.buffer, &angles.buffer], &words, (groups.max(1), 1, 1));
        Ok(())
    }

    /// `gate = silu(gate) · up`, element by element.
    pub fn swiglu(&self, gpu: &Gpu, enc: &mut Recorder, gate: &GpuVector, up: &GpuVector) -> Result<(), Error> {
        shape("swiglu", up.len, gate.len)?;
        self.elementwise(gpu, enc, self.get(gpu, Kernel::Swiglu)?, gate, up, "swiglu")
    }

    /// `gate = gelu(gate) · up`, element by element, GELU looked up in `table`
    /// ([`crate::cpu::mathfn::gelu_tanh_table`], uploaded: 65,536 values).
    pub fn geglu(&self, gpu: &Gpu, enc: &mut Recorder, gate: &GpuVector, up: &GpuVector, table: &GpuVector) -> Result<(), Error> {
        shape("geglu", up.len, gate.len)?;
        shape("geglu table", table.len, 1 << 16)?;
        let n = u32_of(gate.len, "geglu")?;
        let (gx, gy) = groups_2d(n.div_ceil(WORKGROUP));
        let buffers = [&gate.buffer, &up.buffer, &table.buffer];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::Geglu)?, &buffers, &[n, 0, 0, 0], (gx, gy, 1));
        Ok(())
    }

    /// `a += b`, element by element; `b` may be shorter and repeat (a bias added to each of
    /// `a`'s rows), its length dividing `a`'s.
    pub fn add(&self, gpu: &Gpu, enc: &mut Recorder, a: &GpuVector, b: &GpuVector) -> Result<(), Error> {
        self.elementwise(gpu, enc, self.get(gpu, Kernel::Add)?, a, b, "add")
    }

    fn elementwise(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        pipeline: &Pipeline,
        a: &GpuVector,
        b: &GpuVector,
        what: &'static str,
    ) -> Result<(), Error> {
        if b.len == 0 || !a.len.is_multiple_of(b.len) {
            return Err(Error::GpuShape { what, expected: a.len, got: b.len });
        }
        let n = u32_of(a.len, what)?;
        let groups = n.div_ceil(WORKGROUP);
        let (gx, gy) = groups_2d(groups);
        self.dispatch(gpu, enc, pipeline, &[&a.buffer, &b.buffer], &[n, u32_of(b.len, what)?, 0, 0], (gx, gy, 1));
        Ok(())
    }

    /// Each row of `n` values of `x`, in place: `softmax(scale · row)`.
    pub fn softmax(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, n: usize, scale: f32) -> Result<(), Error> {
        let n = n.max(1);
        shape("softmax input", x.len, x.len / n * n)?;
        let rows = u32_of(x.len / n, "softmax rows")?;
        if rows > MAX_GROUPS {
            return Err(Error::GpuShape { what: "softmax rows", expected: MAX_GROUPS as usize, got: rows as usize });
        }
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::Softmax)?,
            &[&x.buffer],
            &[u32_of(n, "softmax width")?, rows, scale.to_bits(), 0],
            (rows, 1, 1),
        );
        Ok(())
    }

    /// For each row of `width` values of `x`, the index of its largest value (the first of
    /// equal ones), into `out` (one slot per row, holding the index's bits: read it back
    /// with `f32::to_bits`).
    pub fn argmax(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, width: usize, out: &GpuVector) -> Result<(), Error> {
        let width = width.max(1);
        let rows = x.len / width;
        shape("argmax input", x.len, rows * width)?;
        shape("argmax output", out.len, rows)?;
        let rows = u32_of(rows, "argmax rows")?;
        if rows > MAX_GROUPS {
            return Err(Error::GpuShape { what: "argmax rows", expected: MAX_GROUPS as usize, got: rows as usize });
        }
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::Argmax)?,
            &[&x.buffer, &out.buffer],
            &[u32_of(width, "argmax width")?, rows, 0, 0],
            (rows, 1, 1),
        );
        Ok(())
    }

    /// Draw a token from one row of logits `x` as the CPU sampler would (the draw's
    /// temperature, top-k and top-p with its uniform number; `sample.wgsl` says how; the
    /// penalty is [`Kernels::penalize`]'s), into `out` (one slot: the token id's bits, or
    /// [`SAMPLE_FALLBACK`]'s when the draw needs the whole row on the CPU). The temperature
    /// must be positive and finite.
    pub fn sample(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, draw: &DeviceDraw, out: &GpuVector) -> Result<(), Error> {
        shape("sample output", out.len, 1)?;
        if x.len == 0 {
            return Err(Error::GpuShape { what: "sampled row", expected: 1, got: 0 });
        }
        if !(draw.temperature > 0.0 && draw.temperature.is_finite()) {
            return Err(Error::BadGpuSetting { what: "sampling temperature", value: draw.temperature });
        }
        let top_k = u32::try_from(draw.top_k).unwrap_or(u32::MAX);
        let words = [
            u32_of(x.len, "sample width")?,
            top_k,
            0,
            0,
            draw.temperature.to_bits(),
            draw.top_p.to_bits(),
            (draw.uniform.clamp(0.0, 1.0) as f32).to_bits(),
            0,
        ];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::Sample)?, &[&x.buffer, &out.buffer], &words, (1, 1, 1));
        Ok(())
    }

    /// The repetition penalty on one row of logits `x`, in place: each token of `ids`
    /// (their bits in f32 slots, each once) divided (positive logits) or multiplied by
    /// `penalty`.
    pub fn penalize(&self, gpu: &Gpu, enc: &mut Recorder, x: &GpuVector, ids: &GpuVector, penalty: f32) -> Result<(), Error> {
        if ids.len == 0 {
            return Ok(());
        }
        let words = [u32_of(ids.len, "penalized tokens")?, u32_of(x.len, "penalized row")?, penalty.to_bits(), 0];
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::Penalize)?,
            &[&x.buffer, &ids.buffer],
            &words,
            (u32_of(ids.len.div_ceil(64), "penalized tokens")?, 1, 1),
        );
        Ok(())
    }

    /// Append `tokens` rows of `width` floats from `src` to `cache` at row `n_past`
    /// (rounded to f16 precision, as the cache is kept).
    #[allow(clippy::too_many_arguments)] // the shape of one cache write
    pub fn kv_store(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        src: &GpuVector,
        cache: &GpuVector,
        width: usize,
        tokens: usize,
        n_past: usize,
    ) -> Result<(), Error> {
        shape("cache rows", src.len, width * tokens)?;
        self.kv_store_rows(gpu, enc, (src, 0), cache, width, tokens, n_past)
    }

    /// [`Kernels::kv_store`] of `tokens` rows of `src` from row `first` on (a batch's rows
    /// hold several sequences, each with its own cache).
    #[allow(clippy::too_many_arguments)]
    pub fn kv_store_rows(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        (src, first): (&GpuVector, usize),
        cache: &GpuVector,
        width: usize,
        tokens: usize,
        n_past: usize,
    ) -> Result<(), Error> {
        if src.len < width * (first + tokens) {
            return Err(Error::GpuShape { what: "cache rows", expected: width * (first + tokens), got: src.len });
        }
        if !width.is_multiple_of(2) {
            return Err(Error::GpuShape { what: "cache row width (even: f16 pairs)", expected: width + 1, got: width });
        }
        // The cache holds f16 pairs, one u32 word per two values.
        if cache.len < (n_past + tokens) * width / 2 {
            return Err(Error::GpuShape { what: "cache (words of two f16)", expected: (n_past + tokens) * width / 2, got: cache.len });
        }
        let n = u32_of(width * tokens / 2, "cache rows")?;
        let groups = n.div_ceil(WORKGROUP);
        let (gx, gy) = groups_2d(groups);
        let words =
            [u32_of(width, "cache width")?, u32_of(tokens, "tokens")?, u32_of(n_past, "cache position")?, u32_of(first, "first row")?];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::KvStore)?, &[&src.buffer, &cache.buffer], &words, (gx, gy, 1));
        Ok(())
    }

    /// Causal attention of the query rows `q` (`tokens × heads × head_dim`) over the caches
    /// `k` and `v` (rows `0..n_past + tokens` filled), into `out` (the shape of `q`);
    /// `scores` is scratch of at least `tokens × heads × (n_past + tokens)` floats.
    #[allow(clippy::too_many_arguments)] // the operands of one attention call
    pub fn attention(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        q: &GpuVector,
        kv: (&GpuVector, &GpuVector),
        scores: &GpuVector,
        out: &GpuVector,
        a: AttentionShape,
    ) -> Result<(), Error> {
        self.attention_with_copies(gpu, enc, q, kv, scores, (out, None), a)
    }

    /// [`Kernels::attention`] into `out`, writing in the same dispatch, where `copies` names
    /// an operand, the copies of the output the output projection reads (`out` is that
    /// operand's `f32`; head_dim a multiple of 32).
    #[allow(clippy::too_many_arguments)] // the operands of one attention call
    pub fn attention_with_copies(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        q: &GpuVector,
        kv: (&GpuVector, &GpuVector),
        scores: &GpuVector,
        out: (&GpuVector, Option<(Operand, Copies)>),
        a: AttentionShape,
    ) -> Result<(), Error> {
        let kernel = if self.gpu_shapes { AttentionKernel::Split } else { AttentionKernel::Narrow };
        self.attention_as(kernel, gpu, enc, q, kv, scores, out, a)
    }

    /// [`Kernels::attention`] with the kernel named: `wide` (GPUs) or not (software
    /// adapters); the checks run both on every adapter.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_as(
        &self,
        kernel: AttentionKernel,
        gpu: &Gpu,
        enc: &mut Recorder,
        q: &GpuVector,
        (k, v): (&GpuVector, &GpuVector),
        scores: &GpuVector,
        (out, copies): (&GpuVector, Option<(Operand, Copies)>),
        a: AttentionShape,
    ) -> Result<(), Error> {
        let rows = (a.first_row + a.tokens) * a.heads * a.head_dim;
        if q.len < rows {
            return Err(Error::GpuShape { what: "attention queries", expected: rows, got: q.len });
        }
        shape("attention output", out.len, q.len)?;
        if a.kv_heads == 0 || !a.heads.is_multiple_of(a.kv_heads) {
            return Err(Error::GpuShape { what: "attention kv heads", expected: a.heads, got: a.kv_heads });
        }
        if !a.head_dim.is_multiple_of(2) {
            return Err(Error::GpuShape {
                what: "attention head_dim (even: the cache holds f16 pairs)",
                expected: a.head_dim + 1,
                got: a.head_dim,
            });
        }
        // A head's f16 pairs each take a thread of the 256 (attention.wgsl).
        if a.head_dim > 512 {
            return Err(Error::GpuShape { what: "attention head_dim (at most 512)", expected: 512, got: a.head_dim });
        }
        let filled = (a.n_past + a.tokens) * a.kv_heads * a.head_dim / 2;
        for (what, cache) in [("key cache (words of two f16)", k), ("value cache (words of two f16)", v)] {
            if cache.len < filled {
                return Err(Error::GpuShape { what, expected: filled, got: cache.len });
            }
        }
        let ctx = a.n_past + a.tokens;
        let scratch = if kernel == AttentionKernel::Split {
            split_rows(a) * a.heads * ctx.div_ceil(SPLIT_CHUNK) * (a.head_dim + 2)
        } else {
            a.tokens * a.heads * ctx
        };
        if scores.len < scratch {
            return Err(Error::GpuShape { what: "attention scores", expected: scratch, got: scores.len });
        }
        let chunks = ctx.div_ceil(SPLIT_CHUNK);
        let (heads, tokens) = (u32_of(a.heads, "heads")?, u32_of(a.tokens, "tokens")?);
        if heads > MAX_GROUPS || tokens > MAX_GROUPS {
            return Err(Error::GpuShape { what: "attention tokens", expected: MAX_GROUPS as usize, got: a.tokens.max(a.heads) });
        }
        let scale = 1.0 / (a.head_dim as f32).sqrt();
        let words = [
            u32_of(a.head_dim, "head_dim")?,
            heads,
            u32_of(a.kv_heads, "kv heads")?,
            tokens,
            u32_of(a.n_past, "cache position")?,
            u32_of(ctx, "context")?,
            scale.to_bits(),
            u32_of(a.first_row, "attention first row")?,
            copies.map_or(0, |(_, c)| c.bits()),
            u32_of(out.len, "attention output")?,
            u32_of(SPLIT_CHUNK, "attention chunk")?,
            u32_of(chunks, "attention chunks")?,
            u32_of(a.window, "attention window")?,
            0,
            0,
            0,
        ];
        let unused = self.unused_copies(gpu);
        let [q8, f16] = match &copies {
            Some((operand, c)) if c.any() => {
                if !std::ptr::eq(operand.f32, out) {
                    return Err(Error::GpuShape { what: "attention copies (of its own output)", expected: 0, got: 1 });
                }
                if !a.head_dim.is_multiple_of(32) {
                    return Err(Error::GpuShape {
                        what: "attention head_dim with copies",
                        expected: a.head_dim.next_multiple_of(32),
                        got: a.head_dim,
                    });
                }
                Self::check_copies(operand, out.len, *c, "attention output")?;
                self.copy_bindings(gpu, operand, *c)
            }
            _ => [&unused[0], &unused[1]],
        };
        let buffers = [&q.buffer, &k.buffer, &v.buffer, &scores.buffer, &out.buffer, q8, f16];
        match kernel {
            AttentionKernel::Narrow => self.dispatch(gpu, enc, self.get(gpu, Kernel::Attention)?, &buffers, &words, (heads, tokens, 1)),
            AttentionKernel::Split => {
                let chunks = u32_of(chunks, "attention chunks")?;
                if chunks > MAX_GROUPS {
                    return Err(Error::GpuShape { what: "attention chunks", expected: MAX_GROUPS as usize, got: chunks as usize });
                }
                // Rows in groups whose partial sums fit the scratch: each group is the call
                // for its rows alone (its first row and cache position moved on), which is
                // what a token's result depends on, whatever the grouping.
                let (split, combine) = (self.get(gpu, Kernel::AttentionSplit)?, self.get(gpu, Kernel::AttentionCombine)?);
                let rows = split_rows(a);
                for start in (0..a.tokens).step_by(rows) {
                    let n = rows.min(a.tokens - start) as u32;
                    let mut group = words;
                    group[3] = n;
                    group[4] = u32_of(a.n_past + start, "cache position")?;
                    group[7] = u32_of(a.first_row + start, "attention first row")?;
                    self.dispatch(gpu, enc, split, &buffers, &group, (heads, n, chunks));
                    self.dispatch(gpu, enc, combine, &buffers, &group, (heads, n, 1));
                }
            }
        }
        Ok(())
    }

    /// Each row of `gamma.len` values of `x`, in place: LayerNorm with `gamma` and `beta`
    /// (the BERT encoder's).
    pub fn layer_norm(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        x: &GpuVector,
        (gamma, beta): (&GpuVector, &GpuVector),
        eps: f32,
    ) -> Result<(), Error> {
        let n = gamma.len.max(1);
        shape("layer_norm beta", beta.len, gamma.len)?;
        shape("layer_norm input", x.len, x.len / n * n)?;
        let rows = u32_of(x.len / n, "layer_norm rows")?;
        if rows > MAX_GROUPS {
            return Err(Error::GpuShape { what: "layer_norm rows", expected: MAX_GROUPS as usize, got: rows as usize });
        }
        let words = [u32_of(n, "layer_norm width")?, rows, eps.to_bits(), 0];
        self.dispatch(gpu, enc, self.get(gpu, Kernel::LayerNorm)?, &[&x.buffer, &gamma.buffer, &beta.buffer], &words, (rows, 1, 1));
        Ok(())
    }

    /// `a = gelu(a + bias)`, the bias repeating over `a`'s rows (the encoder's feed-forward
    /// layer; GELU in its erf form).
    pub fn bias_gelu(&self, gpu: &Gpu, enc: &mut Recorder, a: &GpuVector, bias: &GpuVector) -> Result<(), Error> {
        self.elementwise(gpu, enc, self.get(gpu, Kernel::BiasGelu)?, a, bias, "bias_gelu")
    }

    /// Bidirectional attention of the sequence at tokens `first..first + tokens` of the
    /// packed rows: `qkv` holds each token's q | k | v (`3 · heads · head_dim` values),
    /// `ctx` gets each token's attended values (`heads · head_dim`), for those tokens only.
    pub fn encoder_attention(
        &self,
        gpu: &Gpu,
        enc: &mut Recorder,
        qkv: &GpuVector,
        ctx: &GpuVector,
        (first, tokens): (usize, usize),
        (heads, head_dim): (usize, usize),
    ) -> Result<(), Error> {
        let hidden = heads * head_dim;
        if tokens == 0 {
            return Ok(());
        }
        if tokens > ENCODER_MAX_TOKENS {
            return Err(Error::GpuShape { what: "encoder attention tokens", expected: ENCODER_MAX_TOKENS, got: tokens });
        }
        if qkv.len < (first + tokens) * 3 * hidden || !qkv.len.is_multiple_of(3 * hidden.max(1)) {
            return Err(Error::GpuShape { what: "encoder attention qkv", expected: (first + tokens) * 3 * hidden, got: qkv.len });
        }
        shape("encoder attention output", ctx.len, qkv.len / 3)?;
        let heads = u32_of(heads, "heads")?;
        if heads > MAX_GROUPS {
            return Err(Error::GpuShape { what: "encoder attention heads", expected: MAX_GROUPS as usize, got: heads as usize });
        }
        let scale = 1.0 / (head_dim as f32).sqrt();
        let words = [
            u32_of(first, "first token")?,
            u32_of(tokens, "tokens")?,
            u32_of(hidden, "hidden")?,
            u32_of(head_dim, "head_dim")?,
            heads,
            scale.to_bits(),
            0,
            0,
        ];
        self.dispatch(
            gpu,
            enc,
            self.get(gpu, Kernel::EncoderAttention)?,
            &[&qkv.buffer, &ctx.buffer],
            &words,
            (u32_of(tokens, "tokens")?, heads, 1),
        );
        Ok(())
    }

    /// Submit what `record` records, as one command buffer, and check the device.
    pub fn run(&self, gpu: &Gpu, record: impl FnOnce(&mut Recorder) -> Result<(), Error>) -> Result<(), Error> {
        // One recording at a time per device (a poisoned lock guards nothing: taken anyway).
        let _submission = gpu.submission.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _timing = gpu.profiler.as_ref().and_then(|p| p.recording());
        let mut enc = Recorder::new(gpu, "docmem");
        let recorded = record(&mut enc);
        if let (Ok(()), Some(p)) = (&recorded, &gpu.profiler) {
            p.resolve(enc.encoder());
        }
        if recorded.is_ok() {
            gpu.queue.submit([enc.finish(gpu)]);
            gpu.counters.submission();
        }
        if let Some(p) = &gpu.profiler {
            p.collect(&gpu.device, recorded.is_ok());
        }
        // Submitted, or dropped unsubmitted: either way nothing will read the parameter
        // blocks recorded, so they go back to the pool.
        gpu.pool.submitted();
        recorded?;
        gpu.check()
    }

    /// `len` floats of scratch from the pool (contents undefined: every kernel writes its
    /// output whole before anything reads it); give it back with [`Kernels::recycle`].
    pub fn scratch(&self, gpu: &Gpu, len: usize) -> GpuVector {
        GpuVector { len, buffer: gpu.pool.take(&gpu.device, Use::Storage, len * 4) }
    }

    /// [`Kernels::scratch`] holding `values`.
    pub fn scratch_from(&self, gpu: &Gpu, values: &[f32]) -> GpuVector {
        let v = self.scratch(gpu, values.len());
        v.write(gpu, values);
        v
    }

    /// Give scratch back once the work using it is submitted.
    pub fn recycle(&self, gpu: &Gpu, v: GpuVector) {
        gpu.pool.give(Use::Storage, v.buffer);
    }
}
