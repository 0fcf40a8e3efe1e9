//! A dense f32 matrix product for float weights (F32, or F16 expanded on the fly): the
//! encoder's linear layers, where every token of a packed batch meets every weight row.
//!
//! Why our own and not a GEMM crate: the weights are re-laid once, at load, into panels
//! of [`NR`] output rows stored k-major (`panel[k][0..NR]`), so the inner loop is one
//! contiguous vector load of weights and [`MR`] broadcasts of activations feeding
//! `MR × NR` independent accumulators, the shape of every fast GEMM micro-kernel. The
//! full tile runs an explicit AVX2 + FMA kernel where the CPU has it (chosen at run time,
//! as the quantized kernels are: about 80% of the FMA units' peak); elsewhere, and for
//! partial tiles, plain Rust over fixed-size arrays that LLVM vectorizes for the target
//! (`simd128` in wasm). A crate such as `gemm` or `matrixmultiply` would bring its own
//! threads and dispatch, and no F16 or Q8_0 panels; this is a few hundred lines on the
//! runtime's own thread pool.
//!
//! Q8_0 panels hold llama.cpp's Q8_0 quantization (one scale per 32 weights of a row) as
//! int8 values and f32 scales, expanded to f32 per panel like F16: a quarter of the
//! memory, with f32 activations (int8 activations, as the LM kernels use them, cost too
//! much accuracy on small encoders: cosine 0.9976 against sentence-transformers).
//!
//! Work is cut into tasks of (a block of tokens) × (a group of panels): the token block's
//! activations stay in L2 while the panels pass over them, and an F16 panel is expanded
//! once per token block into the task's scratch.

// Unsafe code: the AVX2 + FMA, AVX-512 BF16 and wasm `simd128` micro-kernels (raw-pointer
// vector loads, the x86 ones chosen by run-time feature detection), and the tasks' writes
// to disjoint rectangles of the output through a shared raw pointer.
#![allow(unsafe_code)]

use super::encoder_ops::gelu;
use super::threads::Threads;
use super::{bf16, madd, SharedMut};

/// Output rows per panel (vector lanes of the accumulators).
#[cfg(not(target_arch = "wasm32"))]
pub const NR: usize = 16;
/// Output rows per panel: two `simd128` vectors, so the accumulators stay in the
/// sixteen registers wasm engines map to.
#[cfg(target_arch = "wasm32")]
pub const NR: usize = 8;

/// Tokens per micro-kernel call.
#[cfg(not(target_arch = "wasm32"))]
const MR: usize = 6;
/// Tokens per micro-kernel call.
#[cfg(target_arch = "wasm32")]
const MR: usize = 4;

/// Tokens per task: their activations (`TOKEN_BLOCK × cols` f32) stay in L2.
const TOKEN_BLOCK: usize = 96;

/// Weights as panels of [`NR`] rows, k-major, in f32 or IEEE half precision.
#[derive(Clone, Debug)]
pub struct PanelMatrix {
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    data: PanelData,
}

#[derive(Clone, Debug)]
enum PanelData {
    F32(Vec<f32>),
    F16(Vec<u16>),
    /// Weights as int8 (panel layout) and one scale per 32 k-values of each row
    /// (`[panel][k / 32][lane]`).
    Q8 {
        q: Vec<i8>,
        d: Vec<f32>,
    },
    /// bfloat16 in k-pairs (`[panel][k / 2][lane][k % 2]`, see [`super::bf16`]).
    Bf16(Vec<u16>),
}

/// The element type panels are stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanelType {
    /// 32-bit floats.
    F32,
    /// Half precision, expanded to f32 per panel as it is used.
    F16,
    /// Q8_0 (int8 with a scale per 32 weights of a row), expanded likewise. `cols` must
    /// be a multiple of 32.
    Q8_0,
    /// bfloat16, multiplied with activations rounded to bf16 where the CPU has AVX-512
    /// BF16 (twice the f32 FMA rate), else expanded to f32 per panel.
    Bf16,
}

impl PanelMatrix {
    /// Re-lay a row-major `rows × cols` matrix (PyTorch's `[out, in]`) into panels; the
    /// last panel is padded with zero rows.
    pub fn from_rows(w: &[f32], rows: usize, cols: usize, ty: PanelType) -> Self {
        assert_eq!(w.len(), rows * cols, "matrix size");
        let panels = rows.div_ceil(NR);
        let mut f = vec![0f32; panels * NR * cols];
        for r in 0..rows {
            let (p, lane) = (r / NR, r % NR);
            let base = p * NR * cols;
            for (k, &v) in w[r * cols..(r + 1) * cols].iter().enumerate() {
                f[base + k * NR + lane] = v;
            }
        }
        let data = match ty {
            PanelType::F32 => PanelData::F32(f),
            PanelType::F16 => PanelData::F16(f.iter().map(|&x| crate::quant::f32_to_f16(x)).collect()),
            PanelType::Q8_0 => {
                assert!(cols.is_multiple_of(32), "Q8_0 panels need whole blocks of 32");
                let (mut q, mut d) = (vec![0i8; f.len()], vec![0f32; f.len() / 32]);
                for p in 0..panels {
                    for b in 0..cols / 32 {
                        for lane in 0..NR {
                            let at = |k: usize| p * NR * cols + (b * 32 + k) * NR + lane;
                            // As llama.cpp's quantize_row_q8_0: scale = max|w| / 127, kept
                            // in half precision.
                            let amax = (0..32).map(|k| f[at(k)].abs()).fold(0f32, f32::max);
                            let scale = crate::quant::f16_round(amax / 127.0);
                            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                            for k in 0..32 {
                                q[at(k)] = (f[at(k)] * inv).round() as i8;
                            }
                            d[(p * (cols / 32) + b) * NR + lane] = scale;
                        }
                    }
                }
                PanelData::Q8 { q, d }
            }
            PanelType::Bf16 => PanelData::Bf16(super::bf16::pairs_from_panels(&f, cols)),
        };
        PanelMatrix { rows, cols, data }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match &self.data {
            PanelData::F32(v) => v.len() * 4,
            PanelData::F16(v) => v.len() * 2,
            PanelData::Q8 { q, d } => q.len() + d.len() * 4,
            PanelData::Bf16(v) => v.len() * 2,
        }
    }

    fn panels(&self) -> usize {
        self.rows.div_ceil(NR)
    }
}

/// What is applied to each output after the bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// Nothing: `W·x + b`.
    None,
    /// GELU (erf form): `gelu(W·x + b)`, applied by each task to its own rectangle of the
    /// output while it is still in cache, instead of in a second pass over the whole
    /// (tokens × intermediate) buffer.
    Gelu,
}

/// `out[t · w.rows + r] = f(bias[r] + Σ_k x[t · w.cols + k] · W[r][k])` for every token `t`,
/// `f` the [`Epilogue`].
pub fn gemm(threads: &Threads, x: &[f32], w: &PanelMatrix, bias: Option<&[f32]>, epilogue: Epilogue, out: &mut [f32]) {
    let tokens = x.len() / w.cols.max(1);
    assert_eq!(x.len(), tokens * w.cols, "activation size");
    assert_eq!(out.len(), tokens * w.rows, "output size");
    if let Some(b) = bias {
        assert_eq!(b.len(), w.rows, "bias size");
    }
    if tokens == 0 || w.rows == 0 {
        return;
    }
    let token_blocks = tokens.div_ceil(TOKEN_BLOCK);
    // Enough panel groups that every thread has several tasks to balance.
    let want_groups = (threads.count() * 4).div_ceil(token_blocks).max(1);
    let per_group = w.panels().div_ceil(want_groups).max(1);
    let groups = w.panels().div_ceil(per_group);
    // With AVX-512 BF16 the activations are rounded to bf16 pairs once, for every task.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    let bf16_pairs = match &w.data {
        PanelData::Bf16(_) if bf16::has_avx512_bf16() => Some(bf16::activation_pairs(x, w.cols, bf16::MR_BF16)),
        _ => None,
    };
    // Each task writes a disjoint (token block × panel group) rectangle of `out`.
    let ptr = SharedMut(out.as_mut_ptr());
    // Writes `n` tokens' accumulators (`row(i)`, NR values each) from token `t` of panel `p`.
    let store = |n: usize, row: &dyn Fn(usize) -> [f32; NR], t: usize, p: usize| {
        let lanes = (w.rows - p * NR).min(NR);
        let bias = bias.map(|b| &b[p * NR..p * NR + lanes]);
        for i in 0..n {
            let row = row(i);
            // SAFETY: t + i < tokens and p · NR + lanes ≤ rows (checked sizes above); the
            // calling task owns these tokens of this panel, so no other task writes here.
            let dst = unsafe { core::slice::from_raw_parts_mut(ptr.get().add((t + i) * w.rows + p * NR), lanes) };
            match bias {
                Some(b) => dst.iter_mut().zip(&row).zip(b).for_each(|((d, &v), &b)| *d = v + b),
                None => dst.copy_from_slice(&row[..lanes]),
            }
        }
    };
    // Applies the epilogue to the task's rectangle: tokens t0..t1, panels p0..p1.
    let finish = |(t0, t1): (usize, usize), (p0, p1): (usize, usize)| {
        if epilogue == Epilogue::Gelu {
            let (c0, c1) = (p0 * NR, (p1 * NR).min(w.rows));
            for t in t0..t1 {
                // SAFETY: as in `store`: this task alone wrote these outputs, inside `out`.
                let row = unsafe { core::slice::from_raw_parts_mut(ptr.get().add(t * w.rows + c0), c1 - c0) };
                gelu(row);
            }
        }
    };
    threads.for_each(token_blocks * groups, |task| {
        let (tb, g) = (task / groups, task % groups);
        let (t0, t1) = (tb * TOKEN_BLOCK, ((tb + 1) * TOKEN_BLOCK).min(tokens));
        let (p0, p1) = (g * per_group, ((g + 1) * per_group).min(w.panels()));
        #[cfg(target_arch = "x86_64")]
        if let (Some(xb), PanelData::Bf16(v)) = (&bf16_pairs, &w.data) {
            let per = NR * bf16::padded_cols(w.cols);
            let kp = per / (2 * NR);
            let mut p = p0;
            while p < p1 {
                let mut t = t0;
                while t < t1 {
                    let n = (t1 - t).min(bf16::MR_BF16);
                    if p + 1 < p1 {
                        let mut acc = [[[0f32; NR]; 2]; bf16::MR_BF16];
                        // SAFETY: `bf16_pairs` exists only where `has_avx512_bf16()` found
                        // AVX-512 F and BF16. `t` is a multiple of MR_BF16 below `tokens`,
                        // and `activation_pairs` pads the rows to whole tiles, so
                        // `xb[t · kp..]` holds MR_BF16 · kp values; the two panels' slice is
                        // `2 · per` = 2 · kp · 2 · NR values (bounds-checked).
                        unsafe { bf16::kernel::<2>(&xb[t * kp..], kp, &v[p * per..(p + 2) * per], &mut acc) };
                        store(n, &|i| acc[i][0], t, p);
                        store(n, &|i| acc[i][1], t, p + 1);
                    } else {
                        let mut acc = [[[0f32; NR]; 1]; bf16::MR_BF16];
                        // SAFETY: as above, with one panel of `per` values.
                        unsafe { bf16::kernel::<1>(&xb[t * kp..], kp, &v[p * per..(p + 1) * per], &mut acc) };
                        store(n, &|i| acc[i][0], t, p);
                    }
                    t += n;
                }
                p += 2;
            }
            finish((t0, t1), (p0, p1));
            return;
        }
        let mut scratch = Vec::new();
        // Where the full tile fuses its multiply-adds and the partial one cannot (wasm with
        // relaxed SIMD, `fma::madd4`), the task's last rows, if fewer than MR, run as a full
        // tile padded with zero rows: every token is then summed by the same kernel, so a
        // text embeds the same bits whatever else is in its batch.
        let tail = (t1 - t0) % MR;
        let padded_tail = (cfg!(all(target_arch = "wasm32", feature = "relaxed-simd")) && tail != 0).then(|| {
            let mut rows = vec![0f32; MR * w.cols];
            rows[..tail * w.cols].copy_from_slice(&x[(t1 - tail) * w.cols..t1 * w.cols]);
            rows
        });
        for p in p0..p1 {
            let panel: &[f32] = match &w.data {
                // Copied like the others: reading the panel from a fresh buffer in L2
                // measured 1.5x faster at batch 32 than from the large weight array.
                PanelData::F32(v) => {
                    scratch.clear();
                    scratch.extend_from_slice(&v[p * NR * w.cols..(p + 1) * NR * w.cols]);
                    &scratch
                }
                PanelData::F16(v) => {
                    expand_f16(&v[p * NR * w.cols..(p + 1) * NR * w.cols], &mut scratch);
                    &scratch
                }
                PanelData::Q8 { q, d } => {
                    let per = NR * w.cols;
                    expand_q8(&q[p * per..(p + 1) * per], &d[p * per / 32..(p + 1) * per / 32], &mut scratch);
                    &scratch
                }
                PanelData::Bf16(v) => {
                    let per = NR * bf16::padded_cols(w.cols);
                    bf16::expand_panel(&v[p * per..(p + 1) * per], w.cols, &mut scratch);
                    &scratch
                }
            };
            let mut t = t0;
            while t < t1 {
                let n = (t1 - t).min(MR);
                let mut acc = [[0f32; NR]; MR];
                match &padded_tail {
                    Some(rows) if n < MR => kernel(rows, w.cols, MR, panel, &mut acc),
                    _ => kernel(&x[t * w.cols..(t + n) * w.cols], w.cols, n, panel, &mut acc),
                }
                store(n, &|i| acc[i], t, p);
                t += n;
            }
        }
        finish((t0, t1), (p0, p1));
    });
}

/// Half floats to f32 (F16C eight at a time where the CPU has it).
fn expand_f16(src: &[u16], out: &mut Vec<f32>) {
    out.clear();
    out.reserve(src.len());
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        // SAFETY: `has_fma` found AVX2, FMA and F16C, the features `expand_f16_f16c`
        // enables.
        return unsafe { expand_f16_f16c(src, out) };
    }
    out.extend(src.iter().map(|&h| crate::quant::f16_to_f32(h)));
}

/// Q8_0 panel values to f32: each run of 32 k-values × NR lanes shares NR scales.
fn expand_q8(q: &[i8], d: &[f32], out: &mut Vec<f32>) {
    out.clear();
    out.resize(q.len(), 0.0);
    for ((o, q), d) in out.chunks_exact_mut(32 * NR).zip(q.chunks_exact(32 * NR)).zip(d.chunks_exact(NR)) {
        for (o, q) in o.chunks_exact_mut(NR).zip(q.chunks_exact(NR)) {
            for j in 0..NR {
                o[j] = f32::from(q[j]) * d[j];
            }
        }
    }
}

/// # Safety
/// The CPU must have AVX2, FMA and F16C (`has_fma`); the loads and stores stay inside `src`
/// and a local array.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn expand_f16_f16c(src: &[u16], out: &mut Vec<f32>) {
    use std::arch::x86_64::*;
    let mut chunks = src.chunks_exact(8);
    for c in &mut chunks {
        let mut v = [0f32; 8];
        // SAFETY: F16C and AVX are enabled here; `c` holds eight u16 and `v` eight f32
        // (unaligned load and store).
        unsafe {
            let h = _mm_loadu_si128(c.as_ptr().cast());
            _mm256_storeu_ps(v.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
        out.extend_from_slice(&v);
    }
    out.extend(chunks.remainder().iter().map(|&h| crate::quant::f16_to_f32(h)));
}

/// `acc[i][j] = Σ_k x[i][k] · panel[k][j]` for the first `n` (≤ MR) rows of `x`.
#[inline]
fn kernel(x: &[f32], cols: usize, n: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    #[cfg(target_arch = "x86_64")]
    if super::has_fma() {
        if n == MR {
            // SAFETY: `has_fma` found AVX2 and FMA. The sizes: `gemm` passes `x` as the
            // `n · cols` values of its tokens (n == MR here) and a panel of `cols · NR`
            // values. They are not checked here (`kernel` is private; debug-asserted in
            // the kernel).
            return unsafe { kernel_6x16_avx2(x, cols, panel, acc) };
        }
        // SAFETY: `has_fma` found AVX2 and FMA; `kernel_fma` is safe code otherwise.
        return unsafe { kernel_fma(x, cols, n, panel, acc) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if n == MR {
        // SAFETY: as for `kernel_6x16_avx2` above: `gemm` passes MR rows of `cols` values
        // and a panel of `cols · NR` values.
        return unsafe { kernel_simd128(x, cols, panel, acc) };
    }
    kernel_body::<false>(x, cols, n, panel, acc)
}

/// The full tile in wasm: MR tokens × 8 rows in 2·MR `simd128` accumulators. Written out
/// because the vectorized generic loop loaded each activation as a scalar and splatted it
/// in a second instruction; `v128_load32_splat` does both, and the loop keeps the
/// accumulators in registers (wasm has no FMA without relaxed SIMD: a multiply and an add;
/// `fma::madd4` fuses them in the relaxed-SIMD build).
///
/// # Safety
/// `x` must hold at least `MR · cols` values and `panel` at least `cols · NR` (read
/// unchecked). The build has `simd128` (the function exists only then), so no run-time
/// check is needed.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
unsafe fn kernel_simd128(x: &[f32], cols: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    use super::fma::madd4;
    use core::arch::wasm32::*;
    debug_assert!(x.len() >= MR * cols && panel.len() >= cols * NR);
    let (xp, wp) = (x.as_ptr(), panel.as_ptr());
    let mut c = [[f32x4_splat(0.0); 2]; MR];
    for k in 0..cols {
        // SAFETY: k < cols, rows i < MR and lanes < NR are inside the slices (checked by
        // the caller's sizes).
        unsafe {
            let w0 = v128_load(wp.add(k * NR) as *const v128);
            let w1 = v128_load(wp.add(k * NR + 4) as *const v128);
            for (i, ci) in c.iter_mut().enumerate() {
                let xi = v128_load32_splat(xp.add(i * cols + k) as *const u32);
                ci[0] = madd4(xi, w0, ci[0]);
                ci[1] = madd4(xi, w1, ci[1]);
            }
        }
    }
    for (out, ci) in acc.iter_mut().zip(&c) {
        // SAFETY: each row of `acc` holds NR = 8 floats.
        unsafe {
            v128_store(out.as_mut_ptr() as *mut v128, ci[0]);
            v128_store(out.as_mut_ptr().add(4) as *mut v128, ci[1]);
        }
    }
}

/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). The body is the safe portable code, compiled
/// with those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_fma(x: &[f32], cols: usize, n: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    kernel_body::<true>(x, cols, n, panel, acc)
}

/// The full tile with AVX2 + FMA: twelve 8-lane accumulators (6 tokens × 16 rows), per k
/// two weight loads and six broadcasts feeding twelve FMAs, so the FMA units, not the
/// loads, set the pace (the register-blocking of BLIS's Haswell kernel). Zen 4 and Intel
/// cores with AVX-512 reach the same peak this way, 512-bit FMAs being two 256-bit ones
/// there or clocked down.
///
/// # Safety
/// The CPU must have AVX2 and FMA (`has_fma`). `x` must hold at least `MR · cols` values
/// and `panel` at least `cols · NR` (read unchecked; debug-asserted).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_6x16_avx2(x: &[f32], cols: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    use std::arch::x86_64::*;
    debug_assert!(x.len() >= MR * cols && panel.len() >= cols * NR);
    let (xp, wp) = (x.as_ptr(), panel.as_ptr());
    let mut c = [[_mm256_setzero_ps(); 2]; MR];
    for k in 0..cols {
        // SAFETY: k < cols, rows i < MR and lanes < NR are inside the slices (checked by
        // the caller's sizes).
        unsafe {
            let w0 = _mm256_loadu_ps(wp.add(k * NR));
            let w1 = _mm256_loadu_ps(wp.add(k * NR + 8));
            for (i, ci) in c.iter_mut().enumerate() {
                let xi = _mm256_broadcast_ss(&*xp.add(i * cols + k));
                ci[0] = _mm256_fmadd_ps(xi, w0, ci[0]);
                ci[1] = _mm256_fmadd_ps(xi, w1, ci[1]);
            }
        }
    }
    for (out, ci) in acc.iter_mut().zip(&c) {
        // SAFETY: each row of `acc` holds NR = 16 floats.
        unsafe {
            _mm256_storeu_ps(out.as_mut_ptr(), ci[0]);
            _mm256_storeu_ps(out.as_mut_ptr().add(8), ci[1]);
        }
    }
}

/// The micro-kernel: for each k, one panel row of NR weights against MR broadcast
/// activations. A full tile runs the fixed-size loop the vectorizer turns into registers;
/// a partial one (the last tokens) the same arithmetic on fewer rows.
#[inline(always)]
fn kernel_body<const FMA: bool>(x: &[f32], cols: usize, n: usize, panel: &[f32], acc: &mut [[f32; NR]; MR]) {
    let panel = &panel[..cols * NR];
    if n == MR {
        let rows: [&[f32]; MR] = core::array::from_fn(|i| &x[i * cols..(i + 1) * cols]);
        let mut a = [[0f32; NR]; MR];
        for (k, w) in panel.chunks_exact(NR).enumerate() {
            let w: &[f32; NR] = w.try_into().unwrap_or(&[0.0; NR]);
            for i in 0..MR {
                let xi = rows[i][k];
                for j in 0..NR {
                    a[i][j] = madd::<FMA>(xi, w[j], a[i][j]);
                }
            }
        }
        *acc = a;
        return;
    }
    for (i, acc_row) in acc.iter_mut().enumerate().take(n) {
        let row = &x[i * cols..(i + 1) * cols];
        let mut a = [0f32; NR];
        for (k, w) in panel.chunks_exact(NR).enumerate() {
            for j in 0..NR {
                a[j] = madd::<FMA>(row[k], w[j], a[j]);
            }
        }
        *acc_row = a;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn reference(x: &[f32], w: &[f32], bias: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let tokens = x.len() / cols;
        let mut out = vec![0f32; tokens * rows];
        for t in 0..tokens {
            for r in 0..rows {
                let dot: f64 = (0..cols).map(|k| f64::from(x[t * cols + k]) * f64::from(w[r * cols + k])).sum();
                out[t * rows + r] = dot as f32 + bias[r];
            }
        }
        out
    }

    #[test]
    fn matches_a_plain_product_for_every_shape_edge() {
        // Rows not a multiple of NR, tokens not a multiple of MR or of the token block.
        for (rows, cols, tokens, threads) in [(37, 64, 1, 1), (16, 32, 7, 2), (50, 96, 200, 2), (8, 32, 13, 3)] {
            let (w, x, bias) = (values(rows * cols, 1), values(tokens * cols, 2), values(rows, 3));
            let want = reference(&x, &w, &bias, rows, cols);
            for ty in [PanelType::F32, PanelType::F16, PanelType::Q8_0, PanelType::Bf16] {
                let m = PanelMatrix::from_rows(&w, rows, cols, ty);
                let mut out = vec![f32::NAN; tokens * rows];
                gemm(&Threads::new(threads), &x, &m, Some(&bias), Epilogue::None, &mut out);
                // F16 weights are off by up to 2^-11 relative, Q8_0 by half a step of 1/127
                // of their block's largest (|w| ≤ 1 here).
                let tol = match ty {
                    PanelType::F32 => 1e-5,
                    PanelType::F16 => 2e-3,
                    PanelType::Q8_0 => 5e-3,
                    // Weights and (with AVX-512 BF16) activations off by up to 2^-9 each.
                    PanelType::Bf16 => 5e-3,
                } * cols as f32;
                for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                    assert!((a - b).abs() <= tol, "{ty:?} {rows}x{cols}, {tokens} tokens, output {i}: {a} vs {b}");
                }
                // The GELU epilogue is GELU of the same outputs, every one of them.
                let mut fused = vec![f32::NAN; tokens * rows];
                gemm(&Threads::new(threads), &x, &m, Some(&bias), Epilogue::Gelu, &mut fused);
                for (i, (a, b)) in fused.iter().zip(&out).enumerate() {
                    assert_eq!(*a, crate::cpu::encoder_ops::gelu1(*b), "{ty:?} gelu epilogue, output {i}");
                }
            }
        }
    }

    #[test]
    fn no_tokens_is_no_work() {
        let m = PanelMatrix::from_rows(&[1.0; 4], 2, 2, PanelType::F32);
        gemm(&Threads::new(1), &[], &m, None, Epilogue::None, &mut []);
    }
}
