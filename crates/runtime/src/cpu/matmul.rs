//! Quantized matrices and the matrix × activations product, split over threads by rows.
//!
//! Weights stay in their GGUF block format (never dequantized to f32); each output is a
//! [`dot_row`] of one weight row with one quantized activation row. A job's rows are cut
//! into tasks of a few dozen rows; every task runs all tokens of a batch over its rows, so
//! a weight row is read from memory once per batch, not once per token (prefill is then
//! compute-bound, as it should be).

// Unsafe code: the tasks of a product write disjoint elements of the outputs through shared
// raw pointers (`OutPtr`).
#![allow(unsafe_code)]

use super::act::{ActFormat, QuantizedRow};
use super::dot::{act_format, dot_4rows, dot_4tokens, dot_8tokens, dot_row, Batch};
use super::threads::Threads;
use super::x8;
use crate::gguf::GgmlType;

/// A weight matrix in a GGUF block format: `rows` rows of `cols` elements.
#[derive(Clone, Debug)]
pub struct QMatrix {
    /// Block format.
    pub ty: GgmlType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    /// Raw blocks: row-major, or re-laid eight rows at a time when `interleaved`.
    data: Vec<u8>,
    row_bytes: usize,
    /// Whether `data` is re-laid eight rows at a time ([`x8`]).
    interleaved: bool,
}

impl QMatrix {
    /// Wrap raw blocks; `None` when the sizes disagree.
    pub fn new(ty: GgmlType, rows: usize, cols: usize, data: Vec<u8>) -> Option<Self> {
        let per = ty.block_elements() as usize;
        if !cols.is_multiple_of(per) {
            return None;
        }
        let row_bytes = cols / per * ty.block_bytes() as usize;
        (data.len() == row_bytes * rows).then_some(QMatrix { ty, rows, cols, data, row_bytes, interleaved: false })
    }

    /// A matrix already re-laid eight rows at a time ([`x8::interleave_into`]); `None`
    /// when the sizes disagree or this CPU's kernels do not read that layout.
    pub fn relaid(ty: GgmlType, rows: usize, cols: usize, data: Vec<u8>) -> Option<Self> {
        let ok = x8::relays(ty, rows) && cols.is_multiple_of(256) && data.len() == x8::relaid_bytes(ty, rows, cols / 256);
        let row_bytes = cols / 256 * ty.block_bytes() as usize;
        ok.then_some(QMatrix { ty, rows, cols, data, row_bytes, interleaved: true })
    }

    /// The matrix in the layout this CPU's kernels read fastest: K-quant matrices whose
    /// row count is a multiple of eight are re-laid eight rows at a time ([`x8`]) where
    /// the AVX2 kernels run. Results are bit-identical either way.
    pub fn for_matmul(mut self) -> Self {
        if !self.interleaved && x8::relays(self.ty, self.rows) {
            let mut out = vec![0u8; x8::relaid_bytes(self.ty, self.rows, self.cols / 256)];
            x8::interleave_into(self.ty, &self.data, self.cols / 256, &mut out);
            self.data = out;
            self.interleaved = true;
        }
        self
    }

    /// The whole matrix in GGUF's layout (copied out of a re-laid matrix).
    pub fn gguf_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        if !self.interleaved {
            return (&self.data[..]).into();
        }
        let mut out = Vec::with_capacity(self.row_bytes * self.rows);
        let mut row = Vec::new();
        for r in 0..self.rows {
            x8::row(self.ty, &self.data, self.cols / 256, r, &mut row);
            out.extend_from_slice(&row);
        }
        out.into()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// One row's blocks, in GGUF's layout (copied out of a re-laid matrix).
    pub fn row(&self, r: usize) -> std::borrow::Cow<'_, [u8]> {
        if self.interleaved {
            let mut out = Vec::with_capacity(self.row_bytes);
            x8::row(self.ty, &self.data, self.cols / 256, r, &mut out);
            return out.into();
        }
        self.row_plain(r).into()
    }

    /// One row's blocks of a matrix that is not re-laid.
    #[inline]
    fn row_plain(&self, r: usize) -> &[u8] {
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// The whole matrix in f32, row-major (for tests and tools; the kernels never do this).
    pub fn to_f32(&self) -> Vec<f32> {
        let (mut out, mut row) = (Vec::with_capacity(self.rows * self.cols), Vec::new());
        for r in 0..self.rows {
            self.row_f32(r, &mut row);
            out.extend_from_slice(&row);
        }
        out
    }

    /// One row in f32 (embedding lookup).
    pub fn row_f32(&self, r: usize, out: &mut Vec<f32>) {
        out.clear();
        // The row is whole blocks by construction, so this cannot fail.
        let _ = crate::quant::dequantize(self.ty, &self.row(r), out);
    }
}

/// A batch of activation rows (`tokens × width`) with their quantized forms.
#[derive(Debug, Default)]
pub struct Activations {
    /// The f32 values, token-major.
    pub x: Vec<f32>,
    /// Width of each row.
    pub width: usize,
    /// Quantized rows (one per token), filled for the formats asked.
    pub q: Vec<QuantizedRow>,
    have: Option<ActFormat>,
}

impl Activations {
    /// Take `x` (tokens × width) as the next input.
    pub fn set(&mut self, x: &[f32], width: usize) {
        self.x.clear();
        self.x.extend_from_slice(x);
        self.width = width;
        self.have = None;
    }

    /// Number of rows.
    pub fn tokens(&self) -> usize {
        self.x.len().checked_div(self.width).unwrap_or(0)
    }

    /// Make sure the rows are quantized in `fmt`.
    pub fn prepare(&mut self, fmt: ActFormat) {
        if self.have == Some(fmt) || fmt == ActFormat::F32 {
            return;
        }
        let t = self.tokens();
        self.q.resize_with(t, QuantizedRow::default);
        for (row, q) in self.x.chunks_exact(self.width).zip(&mut self.q) {
            match fmt {
                ActFormat::Q8 => q.quantize_q8(row),
                ActFormat::Q8K => q.quantize_q8k(row),
                ActFormat::F32 => {}
            }
        }
        self.have = Some(fmt);
    }
}

/// Raw output pointer shared by tasks that write disjoint elements.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint indices (a task owns a row range of one job) and the
// pointer outlives them (the scope of `matmul_many`).
unsafe impl Send for OutPtr {}
// SAFETY: as for `Send`: the tasks sharing it write disjoint indices, never the same one.
unsafe impl Sync for OutPtr {}

/// For each `(w, out)`: `out[t · w.rows + r] = w.row(r) · x_t` for every token `t`. All
/// matrices share the input `acts` and have its width as `cols`. Sums follow llama.cpp's
/// order for a batch of this many tokens. (The model passes the batch class itself:
/// [`matmul_many_as`]; this is the tests' shorthand.)
#[cfg(test)]
pub fn matmul_many(threads: &Threads, acts: &mut Activations, jobs: &mut [(&QMatrix, &mut [f32])]) {
    let batch = Batch::of(acts.tokens());
    matmul_many_as(threads, acts, jobs, batch);
}

/// `out[t · w.rows + r] = w.row(r) · x_t` for each `(w, out)` and every token `t`, all
/// matrices sharing the input `acts` (its width their `cols`), with the summation order
/// llama.cpp uses for batch class `batch`: [`Batch::Decode`]
/// keeps every row in the one-token order (rows of independent sequences decoded together).
pub fn matmul_many_as(threads: &Threads, acts: &mut Activations, jobs: &mut [(&QMatrix, &mut [f32])], batch: Batch) {
    let tokens = acts.tokens();
    for (w, out) in jobs.iter() {
        assert_eq!(w.cols, acts.width, "matrix width");
        assert_eq!(out.len(), tokens * w.rows, "output size");
    }
    // Every job takes the same activation format here (same model, same quant family); a
    // mixed set is run format by format.
    let formats: Vec<ActFormat> = jobs.iter().map(|(w, _)| act_format(w.ty)).collect();
    let mut order: Vec<ActFormat> = formats.clone();
    order.dedup();
    for fmt in order {
        acts.prepare(fmt);
        let acts = &*acts;
        let chunk = rows_per_task(jobs.iter().map(|(w, _)| w.rows).sum(), threads.count(), tokens);
        let mut tasks: Vec<(usize, usize, usize)> = Vec::new();
        for (j, (w, _)) in jobs.iter().enumerate() {
            if formats[j] != fmt {
                continue;
            }
            let mut r = 0;
            while r < w.rows {
                tasks.push((j, r, (r + chunk).min(w.rows)));
                r += chunk;
            }
        }
        let outs: Vec<(OutPtr, usize)> = jobs.iter_mut().map(|(w, out)| (OutPtr(out.as_mut_ptr()), w.rows)).collect();
        let mats: Vec<&QMatrix> = jobs.iter().map(|(w, _)| *w).collect();
        threads.for_each(tasks.len(), |k| {
            let (j, r0, r1) = tasks[k];
            let w = mats[j];
            let (ptr, rows) = outs[j];
            let q = |t: usize| acts.q.get(t).unwrap_or(&EMPTY);
            // SAFETY: every caller passes t < tokens and r0 ≤ r < r1 ≤ rows, inside `out`
            // (its size is asserted above), and rows r0..r1 of job j belong to this task
            // alone (`rows_per_task` cuts whole groups of eight, so the re-laid kernels'
            // eight-row writes stay inside r0..r1 too).
            let put = |t: usize, r: usize, v: f32| unsafe { *ptr.0.add(t * rows + r) = v };
            if w.interleaved {
                #[cfg(target_arch = "x86_64")]
                x8::matmul_rows(w.ty, &w.data, w.cols, &acts.q[..tokens], (r0, r1), (TOKEN_BLOCK, batch), put);
                return;
            }
            let mut r = r0;
            // One token: four rows at a time share the activation row.
            if tokens == 1 {
                while r + 4 <= r1 {
                    let rows = [w.row_plain(r), w.row_plain(r + 1), w.row_plain(r + 2), w.row_plain(r + 3)];
                    let Some(v) = dot_4rows(w.ty, rows, q(0)) else { break };
                    (0..4).for_each(|k| put(0, r + k, v[k]));
                    r += 4;
                }
            }
            // A batch: tokens in blocks whose activations stay in cache while the task's rows
            // pass over them; one weight row against eight tokens at a time where there is
            // such a kernel (wasm, whose kernels give every token the one-token sum), else
            // four. Blocks are whole eights, so tokens group as llama.cpp groups them (0..4,
            // 4..8, …, then the rest), and a block has no four-token tail on wasm.
            let first_row = r;
            for tb in (0..tokens).step_by(TOKEN_BLOCK) {
                let te = (tb + TOKEN_BLOCK).min(tokens);
                for r in first_row..r1 {
                    let row = w.row_plain(r);
                    let mut t = tb;
                    while t + 8 <= te {
                        let Some(v) = dot_8tokens(w.ty, row, core::array::from_fn(|k| q(t + k))) else { break };
                        (0..8).for_each(|k| put(t + k, r, v[k]));
                        t += 8;
                    }
                    while t + 4 <= te {
                        let Some(v) = dot_4tokens(w.ty, row, [q(t), q(t + 1), q(t + 2), q(t + 3)], batch) else { break };
                        (0..4).for_each(|k| put(t + k, r, v[k]));
                        t += 4;
                    }
                    for t in t..te {
                        let x = &acts.x[t * acts.width..(t + 1) * acts.width];
                        put(t, r, dot_row(w.ty, row, x, q(t), batch));
                    }
                }
            }
        });
    }
}

/// Tokens per block of a batched matmul (a multiple of eight: see the batch loop).
const TOKEN_BLOCK: usize = 16;

static EMPTY: QuantizedRow =
    QuantizedRow { len: 0, q8: Vec::new(), q8_d: Vec::new(), q8_s: Vec::new(), q8k: Vec::new(), q8k_d: Vec::new(), q8k_bsums: Vec::new() };

/// Rows per task: enough tasks to balance the threads, few enough to keep overhead low.
fn rows_per_task(total_rows: usize, threads: usize, tokens: usize) -> usize {
    if threads <= 1 {
        return total_rows.max(1);
    }
    let target_tasks = threads * if tokens > 1 { 8 } else { 4 };
    // Whole groups of eight rows, for re-laid matrices.
    (total_rows / target_tasks).clamp(8, 4096) / 8 * 8
}

/// One matrix: `out = W · x` for each token (the tests' shorthand).
#[cfg(test)]
pub fn matmul(threads: &Threads, acts: &mut Activations, w: &QMatrix, out: &mut [f32]) {
    matmul_many(threads, acts, &mut [(w, out)]);
}

/// One matrix, `out = W · x` for each token, in batch class `batch` (see
/// [`matmul_many_as`]).
pub fn matmul_as(threads: &Threads, acts: &mut Activations, w: &QMatrix, out: &mut [f32], batch: Batch) {
    matmul_many_as(threads, acts, &mut [(w, out)], batch);
}

#[cfg(test)]
mod tests {
    use super::super::dot::dot_row_scalar;
    use super::super::dot::tests::{activations, weight_row};
    use super::*;

    #[test]
    fn threaded_matmul_matches_row_by_row() {
        let (rows, cols, tokens) = (70, 512, 3);
        let ty = GgmlType::Q4K;
        let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(ty, cols, r as u64)).collect();
        let w = QMatrix::new(ty, rows, cols, data).unwrap();
        let x = activations(cols * tokens, 5);
        let mut acts = Activations::default();
        acts.set(&x, cols);
        let mut out = vec![0f32; rows * tokens];
        matmul(&Threads::new(2), &mut acts, &w, &mut out);
        for t in 0..tokens {
            let q = &acts.q[t];
            for r in 0..rows {
                let want = dot_row_scalar(ty, &w.row(r), &x[t * cols..(t + 1) * cols], q);
                assert!((out[t * rows + r] - want).abs() <= 1e-4 * want.abs().max(1.0));
            }
        }
    }

    #[test]
    fn relaid_matrices_give_the_same_bits() {
        let (rows, cols) = (72, 512);
        for ty in [GgmlType::Q4K, GgmlType::Q6K] {
            let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(ty, cols, 3 + r as u64)).collect();
            let plain = QMatrix::new(ty, rows, cols, data).unwrap();
            let relaid = plain.clone().for_matmul();
            assert_eq!(relaid.to_f32(), plain.to_f32());
            // One token, a small batch, a batch of whole fours and one with a remainder
            // past a token block.
            for tokens in [1, 2, 3, 8, 19] {
                let x = activations(cols * tokens, tokens as u64);
                let run = |w: &QMatrix| {
                    let mut acts = Activations::default();
                    acts.set(&x, cols);
                    let mut out = vec![0f32; rows * tokens];
                    matmul(&Threads::new(2), &mut acts, w, &mut out);
                    out
                };
                let (a, b) = (run(&plain), run(&relaid));
                for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                    assert_eq!(a.to_bits(), b.to_bits(), "{ty:?}, {tokens} tokens, output {i}: {a} vs {b}");
                }
            }
        }
    }

    /// Rows of a `Decode` batch are bit-identical to the same rows run one at a time, for
    /// every kernel family (plain and re-laid), batch sizes across the 4-token groups and
    /// the large-batch threshold.
    #[test]
    fn decode_batches_equal_one_token_matmuls_bit_for_bit() {
        let (rows, cols) = (72, 512);
        for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q4_1, GgmlType::Q8_0] {
            let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(ty, cols, 11 + r as u64)).collect();
            let plain = QMatrix::new(ty, rows, cols, data).unwrap();
            for w in [plain.clone(), plain.for_matmul()] {
                for tokens in [2, 3, 4, 5, 7, 9] {
                    let x = activations(cols * tokens, 40 + tokens as u64);
                    let mut acts = Activations::default();
                    acts.set(&x, cols);
                    let mut out = vec![0f32; rows * tokens];
                    matmul_as(&Threads::new(2), &mut acts, &w, &mut out, Batch::Decode);
                    for t in 0..tokens {
                        let mut one = Activations::default();
                        one.set(&x[t * cols..(t + 1) * cols], cols);
                        let mut want = vec![0f32; rows];
                        matmul(&Threads::new(2), &mut one, &w, &mut want);
                        for r in 0..rows {
                            let got = out[t * rows + r];
                            assert_eq!(
                                got.to_bits(),
                                want[r].to_bits(),
                                "{ty:?}, {tokens} tokens, token {t} row {r}: {got} vs {}",
                                want[r]
                            );
                        }
                    }
                }
            }
        }
    }

    /// Issue #20: `Activations` has public fields, so its quantized rows can be shorter
    /// than its width says (replaced after `prepare`). Every kernel family (plain and
    /// re-laid; one token, a small and a large batch) then panics on a length check
    /// instead of reading past the end of the short row.
    #[test]
    fn short_activation_rows_are_never_read_past_their_end() {
        let (rows, cols) = (8, 512);
        for ty in [GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q4_1, GgmlType::Q8_0] {
            let data: Vec<u8> = (0..rows).flat_map(|r| weight_row(ty, cols, 5 + r as u64)).collect();
            let plain = QMatrix::new(ty, rows, cols, data).unwrap();
            for w in [plain.clone(), plain.for_matmul()] {
                for tokens in [1, 5, 9] {
                    let mut acts = Activations::default();
                    acts.set(&activations(cols * tokens, 9), cols);
                    acts.prepare(act_format(ty));
                    acts.q[tokens - 1] = QuantizedRow::default();
                    let mut out = vec![0f32; rows * tokens];
                    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        matmul(&Threads::new(1), &mut acts, &w, &mut out);
                    }));
                    assert!(run.is_err(), "{ty:?}, {tokens} tokens: a short activation row was read");
                }
            }
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert!(QMatrix::new(GgmlType::Q4_0, 2, 33, vec![0; 36]).is_none());
        assert!(QMatrix::new(GgmlType::Q4_0, 2, 32, vec![0; 35]).is_none());
        assert!(QMatrix::new(GgmlType::Q4_0, 2, 32, vec![0; 36]).is_some());
    }
}
