//! The BERT-family encoder on the runtime's CPU kernels: embeddings, post-norm
//! self-attention blocks, pooling.
//!
//! Sequences are **packed**, never padded: the tokens of every text of a batch are laid
//! end to end, every linear layer runs once over all of them (one matmul per layer and
//! weight, whatever the lengths), and attention runs per (sequence, head) over that
//! sequence's own tokens. So no padding is computed at all, and no mask is needed: a text
//! attends to itself alone, which is what Hugging Face's padded, masked computation
//! amounts to.
//!
//! The arithmetic follows Hugging Face's `BertModel` step by step (word + position +
//! token-type embeddings, LayerNorm; per layer `LN(x + Wo·attn(x))`, then
//! `LN(x + W2·gelu(W1·x))`), so vectors match sentence-transformers' to float rounding.
//! Linear weights are held in the chosen [`Precision`] (f32, f16 or Q8_0 panels) and
//! multiplied with f32 activations by the float GEMM ([`crate::cpu::gemm`]); the word
//! embeddings are a [`QMatrix`] in the same precision, read a row per token.

// Unsafe code: the (sequence, head) attention tasks and the row-chunk tasks write disjoint
// parts of shared buffers through a raw pointer (`SharedMut`).
#![allow(unsafe_code)]

use super::config::{BertShape, Pooling};
use crate::arch::bert::{run_layers, EncAct, EncoderOps};
use crate::cpu::encoder_ops::{attend, layer_norm};
use crate::cpu::gemm::{gemm, Epilogue, PanelMatrix, PanelType};
use crate::cpu::matmul::QMatrix;
use crate::cpu::threads::Threads;
use crate::cpu::SharedMut;
use crate::gguf::GgmlType;
use crate::Error;

std::thread_local! {
    /// A thread's attention scratch and output rows, reused across (text, head) tasks.
    static ATTENTION_SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// How the encoder's weights are held and multiplied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// 32-bit floats, as checkpoints ship: the reference.
    F32,
    /// IEEE half precision (half the memory; expanded to f32 per panel as it is used).
    F16,
    /// llama.cpp's Q8_0 quantization (one scale per 32 weights of a row): a quarter of
    /// the memory, expanded to f32 per panel as it is used.
    Q8_0,
    /// bfloat16 weights (half the memory); where the CPU has AVX-512 BF16 the activations
    /// are rounded to bf16 too and pairs are multiplied at twice the f32 rate, elsewhere
    /// the panels expand to f32.
    Bf16,
}

impl Precision {
    /// Every precision offered.
    pub const ALL: [Precision; 4] = [Precision::F32, Precision::F16, Precision::Q8_0, Precision::Bf16];
    /// Their names, for messages: "f32, f16, q8_0, bf16".
    pub const NAMES: &'static str = "f32, f16, q8_0, bf16";

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Q8_0 => "q8_0",
            Precision::Bf16 => "bf16",
        }
    }

    /// Parse [`Precision::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Precision::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A linear layer `y = W·x + b` with `W` as `[out, in]`, in panels for the float GEMM.
struct Linear {
    weights: PanelMatrix,
    bias: Vec<f32>,
}

impl Linear {
    fn new(w: &[f32], bias: Vec<f32>, rows: usize, cols: usize, precision: Precision) -> Self {
        let ty = match precision {
            Precision::F32 => PanelType::F32,
            Precision::F16 => PanelType::F16,
            Precision::Q8_0 if cols.is_multiple_of(32) => PanelType::Q8_0,
            // A width Q8_0 blocks cannot tile is kept in f16.
            Precision::Q8_0 => PanelType::F16,
            Precision::Bf16 => PanelType::Bf16,
        };
        Linear { weights: PanelMatrix::from_rows(w, rows, cols, ty), bias }
    }

    fn bytes(&self) -> usize {
        self.weights.bytes() + self.bias.len() * 4
    }

    /// `out = f(W·x + b)` for each of `x`'s rows.
    fn forward(&self, threads: &Threads, x: &[f32], epilogue: Epilogue, out: &mut Vec<f32>) {
        let tokens = x.len() / self.weights.cols;
        // Not cleared first: `gemm` writes every output, so only new length is zeroed.
        out.resize(tokens * self.weights.rows, 0.0);
        gemm(threads, x, &self.weights, Some(&self.bias), epilogue, out);
    }
}

/// LayerNorm weights.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// One layer's weights, whatever holds them (`L` a linear layer, `N` a LayerNorm): the CPU
/// encoder's panels or the GPU encoder's buffers.
pub(crate) struct LayerOf<L, N> {
    /// Query, key and value projections stacked (`[3·hidden, hidden]`): one matmul.
    pub qkv: L,
    pub attn_out: L,
    pub attn_norm: N,
    pub up: L,
    pub down: L,
    pub out_norm: N,
}

type Layer = LayerOf<Linear, Norm>;

/// An encoder's weights as [`read_weights`] reads them.
pub(crate) struct WeightsOf<L, N> {
    pub layers: Vec<LayerOf<L, N>>,
    /// Word embeddings (`vocab × hidden`), f32.
    pub word: Vec<f32>,
    /// Position embeddings plus the token-type-0 embedding, pre-added (`positions × hidden`).
    pub position: Vec<f32>,
    pub embed_norm: N,
}

/// Read an encoder's weights through `read` by Hugging Face's `BertModel` names (kept here
/// alone), each linear layer's weights (`[rows, cols]`, several stacked) and bias handed to
/// `linear(w, b, rows, cols)` and each LayerNorm's to `norm(gamma, beta)`, so each engine
/// holds them its own way.
pub(crate) fn read_weights<L, N>(
    shape: &BertShape,
    read: &TensorReader<'_>,
    mut linear: impl FnMut(Vec<f32>, Vec<f32>, usize, usize) -> Result<L, Error>,
    mut norm: impl FnMut(Vec<f32>, Vec<f32>) -> Result<N, Error>,
) -> Result<WeightsOf<L, N>, Error> {
    let h = shape.hidden;
    let mut read_norm = |name: &str| norm(read(&format!("{name}.weight"), &[h])?, read(&format!("{name}.bias"), &[h])?);
    let mut read_linear = |names: &[String], rows: usize, cols: usize| -> Result<L, Error> {
        let (mut w, mut b) = (Vec::with_capacity(rows * cols * names.len()), Vec::new());
        for n in names {
            w.extend(read(&format!("{n}.weight"), &[rows, cols])?);
            b.extend(read(&format!("{n}.bias"), &[rows])?);
        }
        linear(w, b, rows * names.len(), cols)
    };
    let mut layers = Vec::with_capacity(shape.layers);
    for l in 0..shape.layers {
        let n = |s: &str| format!("encoder.layer.{l}.{s}");
        let (i, qkv) = (shape.intermediate, ["query", "key", "value"].map(|p| n(&format!("attention.self.{p}"))));
        layers.push(LayerOf {
            qkv: read_linear(&qkv, h, h)?,
            attn_out: read_linear(&[n("attention.output.dense")], h, h)?,
            attn_norm: read_norm(&n("attention.output.LayerNorm"))?,
            up: read_linear(&[n("intermediate.dense")], i, h)?,
            down: read_linear(&[n("output.dense")], h, i)?,
            out_norm: read_norm(&n("output.LayerNorm"))?,
        });
    }
    let word = read("embeddings.word_embeddings.weight", &[shape.vocab, h])?;
    let mut position = read("embeddings.position_embeddings.weight", &[shape.max_positions, h])?;
    let types = read("embeddings.token_type_embeddings.weight", &[shape.type_vocab, h])?;
    // Every token is of type 0 (single-segment inputs): its embedding is a constant.
    for row in position.chunks_exact_mut(h) {
        row.iter_mut().zip(&types[..h]).for_each(|(p, t)| *p += t);
    }
    Ok(WeightsOf { layers, word, position, embed_norm: read_norm("embeddings.LayerNorm")? })
}

/// The first layer's input for `seqs` packed end to end (each sequence from its start in
/// `starts`): word row + position row per token. Ids and lengths are the caller's to check.
pub(crate) fn token_inputs(word: &QMatrix, position: &[f32], shape: &BertShape, seqs: &[Vec<u32>], starts: &[usize]) -> Vec<f32> {
    let h = shape.hidden;
    let total: usize = seqs.iter().map(Vec::len).sum();
    let mut x = vec![0f32; total * h];
    let mut row = Vec::with_capacity(h);
    for (seq, &start) in seqs.iter().zip(starts) {
        for (p, &id) in seq.iter().enumerate() {
            word.row_f32(id as usize, &mut row);
            let pos = &position[(p + shape.position_offset) * h..][..h];
            for ((o, w), q) in x[(start + p) * h..][..h].iter_mut().zip(&row).zip(pos) {
                *o = w + q;
            }
        }
    }
    x
}

/// Reads one tensor by its Hugging Face name (without any `bert.`/`roberta.` prefix) as
/// f32, checked against the shape expected (outermost first).
pub type TensorReader<'a> = dyn Fn(&str, &[usize]) -> Result<Vec<f32>, Error> + 'a;

/// A BERT-family encoder held in memory.
pub struct Encoder {
    shape: BertShape,
    precision: Precision,
    /// Word embeddings (`vocab × hidden`), in the precision's block type.
    word: QMatrix,
    /// Position embeddings plus the token-type-0 embedding, pre-added (`positions × hidden`).
    position: Vec<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
}

impl Encoder {
    /// Load the weights through `read`.
    pub fn load(shape: BertShape, read: &TensorReader<'_>, precision: Precision) -> Result<Self, Error> {
        let w = read_weights(
            &shape,
            read,
            |w, bias, rows, cols| Ok(Linear::new(&w, bias, rows, cols, precision)),
            |gamma, beta| Ok(Norm { gamma, beta }),
        )?;
        let word = table(&w.word, shape.vocab, shape.hidden, precision);
        Ok(Encoder { embed_norm: w.embed_norm, word, position: w.position, layers: w.layers, shape, precision })
    }

    /// The shape read from the configuration.
    pub fn shape(&self) -> &BertShape {
        &self.shape
    }

    /// The precision the weights are held in.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Bytes of weights held.
    pub fn bytes(&self) -> usize {
        let layers: usize =
            self.layers.iter().map(|l| l.qkv.bytes() + l.attn_out.bytes() + l.up.bytes() + l.down.bytes() + 16 * self.shape.hidden).sum();
        self.word.bytes() + self.position.len() * 4 + layers
    }

    /// Pooled (not yet normalised) vectors of `seqs`, each a list of token ids no longer
    /// than the position table allows and with ids below the vocabulary size (the caller
    /// truncates and checks; see [`super::SentenceEmbedder`]).
    pub fn forward(&self, threads: &Threads, seqs: &[Vec<u32>], pooling: Pooling) -> Vec<Vec<f32>> {
        let h = self.shape.hidden;
        let total: usize = seqs.iter().map(Vec::len).sum();
        let starts: Vec<usize> = seqs.iter().scan(0, |s, q| Some(std::mem::replace(s, *s + q.len()))).collect();
        let x = token_inputs(&self.word, &self.position, &self.shape, seqs, &starts);
        // The linear layers size their outputs; attention writes into a zeroed context.
        let mut bufs: [Vec<f32>; 5] = Default::default();
        bufs[EncAct::Hidden.index()] = x;
        bufs[EncAct::Context.index()] = vec![0f32; total * h];
        let mut pass = CpuEncoderPass { encoder: self, threads, seqs, starts: &starts, bufs };
        let Ok(()) = run_layers(&mut pass, &self.embed_norm, &self.layers);
        let x = &pass.bufs[EncAct::Hidden.index()];
        seqs.iter()
            .zip(&starts)
            .map(|(seq, &start)| {
                let rows = &x[start * h..(start + seq.len()) * h];
                pool(rows, h, pooling)
            })
            .collect()
    }

    fn eps(&self) -> f32 {
        self.shape.layer_norm_eps as f32
    }
}

/// The embedding table in the precision's block type (Q8_0 where the width allows).
pub(crate) fn table(w: &[f32], rows: usize, cols: usize, precision: Precision) -> QMatrix {
    let (ty, bytes) = match precision {
        Precision::Q8_0 if cols.is_multiple_of(32) => {
            let mut b = Vec::new();
            crate::quant::quantize_q8_0(w, &mut b);
            (GgmlType::Q8_0, b)
        }
        Precision::Q8_0 | Precision::F16 => (GgmlType::F16, w.iter().flat_map(|&v| crate::quant::f32_to_f16(v).to_le_bytes()).collect()),
        Precision::F32 => (GgmlType::F32, w.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Precision::Bf16 => (GgmlType::BF16, w.iter().flat_map(|&v| crate::cpu::bf16::to_bf16(v).to_le_bytes()).collect()),
    };
    // Sizes agree by construction (rows × cols values in whole blocks).
    QMatrix::new(ty, rows, cols, bytes).unwrap_or_else(|| unreachable!("embedding table of {rows}×{cols} in {ty:?}"))
}

/// Pool one sequence's token vectors (`tokens × h`).
pub(crate) fn pool(rows: &[f32], h: usize, pooling: Pooling) -> Vec<f32> {
    let n = rows.len() / h;
    if n == 0 {
        return vec![0.0; h];
    }
    match pooling {
        Pooling::Cls => rows[..h].to_vec(),
        Pooling::Last => rows[(n - 1) * h..].to_vec(),
        Pooling::Mean | Pooling::MeanSqrtLen => {
            let mut sum = vec![0f32; h];
            for r in rows.chunks_exact(h) {
                sum.iter_mut().zip(r).for_each(|(s, v)| *s += v);
            }
            let div = if pooling == Pooling::Mean { n as f32 } else { (n as f32).sqrt() };
            sum.iter_mut().for_each(|s| *s /= div);
            sum
        }
        Pooling::Max => {
            let mut m = vec![f32::NEG_INFINITY; h];
            for r in rows.chunks_exact(h) {
                m.iter_mut().zip(r).for_each(|(s, v)| *s = s.max(*v));
            }
            m
        }
    }
}

/// One forward pass on the CPU: the encoder schedule's operations ([`EncoderOps`]) on
/// buffers indexed by [`EncAct`].
struct CpuEncoderPass<'p> {
    encoder: &'p Encoder,
    threads: &'p Threads,
    seqs: &'p [Vec<u32>],
    /// Each sequence's first row.
    starts: &'p [usize],
    bufs: [Vec<f32>; 5],
}

impl CpuEncoderPass<'_> {
    fn take(&mut self, act: EncAct) -> Vec<f32> {
        std::mem::take(&mut self.bufs[act.index()])
    }
}

impl EncoderOps for CpuEncoderPass<'_> {
    type Linear = Linear;
    type Norm = Norm;
    type Error = std::convert::Infallible;

    fn norm(&mut self, x: EncAct, norm: &Norm) -> Result<(), Self::Error> {
        let eps = self.encoder.eps();
        par_rows(self.threads, &mut self.bufs[x.index()], norm.gamma.len(), |_, rows| layer_norm(rows, &norm.gamma, &norm.beta, eps));
        Ok(())
    }

    fn linear(&mut self, x: EncAct, w: &Linear, out: EncAct, gelu: bool) -> Result<(), Self::Error> {
        let mut o = self.take(out);
        w.forward(self.threads, &self.bufs[x.index()], if gelu { Epilogue::Gelu } else { Epilogue::None }, &mut o);
        self.bufs[out.index()] = o;
        Ok(())
    }

    fn attend(&mut self) -> Result<(), Self::Error> {
        let shape = &self.encoder.shape;
        let (h, heads) = (shape.hidden, shape.heads);
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let (seqs, starts) = (self.seqs, self.starts);
        let mut ctx = self.take(EncAct::Context);
        let ctx_ptr = SharedMut(ctx.as_mut_ptr());
        let qkv = &self.bufs[EncAct::Qkv.index()];
        self.threads.for_each(seqs.len() * heads, |task| {
            let (s, head) = (task / heads, task % heads);
            let (start, len) = (starts[s], seqs[s].len());
            if len == 0 {
                return;
            }
            let base = start * 3 * h + head * d;
            let (q, k, v) = (&qkv[base..], &qkv[base + h..], &qkv[base + 2 * h..]);
            // Each worker thread keeps its attention buffers from task to task (they
            // were allocated and zeroed per task: 2–3% of the time in `memset`).
            ATTENTION_SCRATCH.with_borrow_mut(|(scratch, out)| {
                out.resize(len * d, 0.0);
                attend(q, k, v, 3 * h, (len, d), scale, &mut out[..len * d], d, scratch);
                for (i, o) in out[..len * d].chunks_exact(d).enumerate() {
                    // SAFETY: this task alone writes row start+i, columns
                    // head·d..(head+1)·d of `ctx` (one sequence, one head): inside it, as
                    // start + i < total, `ctx` holds total × h values and
                    // heads · d ≤ h; `o` holds d values and does not overlap `ctx`.
                    unsafe { std::ptr::copy_nonoverlapping(o.as_ptr(), ctx_ptr.get().add((start + i) * h + head * d), d) };
                }
            });
        });
        self.bufs[EncAct::Context.index()] = ctx;
        Ok(())
    }

    fn add_norm(&mut self, to: EncAct, residual: EncAct, norm: &Norm) -> Result<(), Self::Error> {
        let mut y = self.take(to);
        add_norm(self.threads, &mut y, &self.bufs[residual.index()], norm, self.encoder.eps());
        self.bufs[to.index()] = y;
        Ok(())
    }
}

/// `y = LN(y + residual)`, row by row over the threads.
fn add_norm(threads: &Threads, y: &mut [f32], residual: &[f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    par_rows(threads, y, h, |first, rows| {
        rows.iter_mut().zip(&residual[first * h..]).for_each(|(a, b)| *a += b);
        layer_norm(rows, &norm.gamma, &norm.beta, eps);
    });
}

/// Run `f(first row, rows)` over disjoint runs of whole `width`-wide rows of `data`,
/// spread over the threads.
fn par_rows(threads: &Threads, data: &mut [f32], width: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    let rows = data.len() / width.max(1);
    let chunks = (threads.count() * 4).min(rows).max(1);
    let per = rows.div_ceil(chunks);
    let ptr = SharedMut(data.as_mut_ptr());
    threads.for_each(rows.div_ceil(per.max(1)), |c| {
        let (r0, r1) = (c * per, ((c + 1) * per).min(rows));
        // SAFETY: chunk c alone covers rows r0..r1 (r1 ≤ rows = data.len() / width), so the
        // slice is inside `data` and no other task touches it.
        let part = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(r0 * width), (r1 - r0) * width) };
        f(r0, part);
    });
}
