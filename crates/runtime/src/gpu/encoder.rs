//! The embedder's BERT-family encoder on the GPU, on the device the decoder uses (a
//! [`Gpu`] clone is the same device), so a page that reads and answers on the GPU embeds
//! there too instead of holding a second runtime's weights on the CPU.
//!
//! The layers are the shared encoder schedule (`arch::bert`), here over kernels
//! (`GpuEncoderPass`) as the CPU encoder runs it over its GEMM; the embeddings are looked
//! up on the CPU, and the pooling and the L2 normalisation stay there (a read-back of
//! `tokens × hidden` floats). Sequences are packed end to end as on the CPU, so the linear layers run once over every token of a batch and attention
//! runs per sequence (`encoder_attention.wgsl`): no padding, no mask. The weights are f32
//! (a batch's tokens through the tiled product, `matmul.wgsl`), as checkpoints ship them; the word table stays
//! in host memory, f32 like the rest (a row per token is read, so uploading 30,522 rows
//! would only spend GPU memory).
//!
//! One forward pass is one command buffer (about 13 dispatches per layer and one per
//! sequence and layer for attention) and one read-back.

use super::buffers::{GpuMatrix, GpuVector};
use super::device::Gpu;
use super::kernels::{Kernels, ENCODER_MAX_TOKENS};
use super::recorder::Recorder;
use crate::arch::bert::{run_layers, EncAct, EncoderOps};
use crate::cpu::matmul::QMatrix;
use crate::embed::config::{BertShape, Pooling};
use crate::embed::encoder::{pool, read_weights, table, token_inputs, LayerOf, Precision, TensorReader};
use crate::gguf::GgmlType;
use crate::Error;

/// A linear layer's weights (`[out, in]`) and bias on the GPU.
struct GpuLinear {
    weights: GpuMatrix,
    bias: GpuVector,
}

/// LayerNorm's scale and shift on the GPU.
struct GpuNorm {
    gamma: GpuVector,
    beta: GpuVector,
}

type GpuEncoderLayer = LayerOf<GpuLinear, GpuNorm>;

/// A BERT-family encoder whose layers run on the GPU.
pub struct GpuEncoder {
    gpu: Gpu,
    kernels: std::sync::Arc<Kernels>,
    shape: BertShape,
    /// Word embeddings in host memory (f32), a row read per token.
    word: QMatrix,
    /// Position embeddings plus the token-type-0 embedding (`positions × hidden`).
    position: Vec<f32>,
    embed_norm: GpuNorm,
    layers: Vec<GpuEncoderLayer>,
    /// Bytes of weights uploaded.
    gpu_bytes: usize,
}

impl std::fmt::Debug for GpuEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEncoder").field("gpu", &self.gpu).field("layers", &self.layers.len()).finish_non_exhaustive()
    }
}

fn gpu_error(e: Error) -> Error {
    Error::EmbedderGpu { message: e.to_string() }
}

impl GpuEncoder {
    /// Read the weights through `read` (as [`crate::embed::Encoder::load`] does) onto `gpu`.
    pub fn load(gpu: Gpu, shape: BertShape, read: &TensorReader<'_>) -> Result<Self, Error> {
        let h = shape.hidden;
        if shape.heads == 0 || !h.is_multiple_of(shape.heads) {
            return Err(Error::BadConfig {
                file: "config.json".into(),
                reason: format!("hidden width {h} is not a multiple of {} heads", shape.heads),
            });
        }
        // Counted as the weights are uploaded (two closures add to it).
        let bytes = std::cell::Cell::new(0);
        let vector = |values: &[f32]| {
            bytes.set(bytes.get() + values.len() * 4);
            GpuVector::from_slice(&gpu, values)
        };
        let w = read_weights(
            &shape,
            read,
            |w, bias, rows, cols| {
                let data: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
                bytes.set(bytes.get() + data.len());
                let weights = GpuMatrix::upload(&gpu, GgmlType::F32, rows, cols, &data).map_err(gpu_error)?;
                Ok(GpuLinear { weights, bias: vector(&bias) })
            },
            |gamma, beta| Ok(GpuNorm { gamma: vector(&gamma), beta: vector(&beta) }),
        )?;
        let word = table(&w.word, shape.vocab, h, Precision::F32);
        let (position, embed_norm, layers) = (w.position, w.embed_norm, w.layers);
        gpu.check().map_err(gpu_error)?;
        let kernels = gpu.kernels();
        Ok(GpuEncoder { gpu, kernels, shape, word, position, embed_norm, layers, gpu_bytes: bytes.get() })
    }

    /// The device it runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The shape read from the configuration.
    pub fn shape(&self) -> &BertShape {
        &self.shape
    }

    /// Bytes of weights on the GPU.
    pub fn gpu_bytes(&self) -> usize {
        self.gpu_bytes
    }

    /// Pooled (not yet normalised) vectors of `seqs`, as [`crate::embed::Encoder::forward`]
    /// gives them: each a list of token ids within the vocabulary and the position table
    /// (the embedder truncates and checks).
    pub async fn forward(&self, seqs: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, Error> {
        let s = &self.shape;
        let h = s.hidden;
        let total: usize = seqs.iter().map(Vec::len).sum();
        if total == 0 {
            return Ok(seqs.iter().map(|_| vec![0.0; h]).collect());
        }
        let starts: Vec<usize> = seqs.iter().scan(0, |at, q| Some(std::mem::replace(at, *at + q.len()))).collect();
        for seq in seqs {
            if seq.len() > ENCODER_MAX_TOKENS || seq.len() + s.position_offset > s.max_positions {
                return Err(Error::EmbedderGpu {
                    message: format!("a text of {} tokens is longer than the encoder takes on the GPU", seq.len()),
                });
            }
            if let Some(&id) = seq.iter().find(|&&id| id as usize >= s.vocab) {
                return Err(Error::VocabularyMismatch { tokenizer: id as usize + 1, model: s.vocab });
            }
        }
        let x = token_inputs(&self.word, &self.position, s, seqs, &starts);
        let (gpu, k) = (&self.gpu, &self.kernels);
        let hidden = [k.scratch_from(gpu, &x), k.scratch(gpu, total * h)];
        let qkv = k.scratch(gpu, total * 3 * h);
        let ctx = k.scratch(gpu, total * h);
        let inner = k.scratch(gpu, total * s.intermediate);
        let recorded = k.run(gpu, |enc| {
            let bufs = [&hidden[0], &hidden[1], &qkv, &ctx, &inner];
            let mut pass = GpuEncoderPass { encoder: self, enc, bufs, total, seqs, starts: &starts };
            run_layers(&mut pass, &self.embed_norm, &self.layers)
        });
        let out = match recorded {
            Ok(()) => hidden[0].read(gpu).await,
            Err(e) => Err(e),
        };
        let [a, b] = hidden;
        for v in [a, b, qkv, ctx, inner] {
            k.recycle(gpu, v);
        }
        let out = out.map_err(gpu_error)?;
        Ok(seqs.iter().zip(&starts).map(|(seq, &start)| pool(&out[start * h..(start + seq.len()) * h], h, pooling)).collect())
    }
}

/// One forward pass being recorded: the encoder schedule's operations ([`EncoderOps`]) as
/// kernels on buffers indexed by [`EncAct`].
struct GpuEncoderPass<'p> {
    encoder: &'p GpuEncoder,
    enc: &'p mut Recorder,
    bufs: [&'p GpuVector; 5],
    /// Tokens of all the sequences.
    total: usize,
    seqs: &'p [Vec<u32>],
    /// Each sequence's first row.
    starts: &'p [usize],
}

impl EncoderOps for GpuEncoderPass<'_> {
    type Linear = GpuLinear;
    type Norm = GpuNorm;
    type Error = Error;

    fn norm(&mut self, x: EncAct, norm: &GpuNorm) -> Result<(), Error> {
        let e = self.encoder;
        e.kernels.layer_norm(&e.gpu, self.enc, self.bufs[x.index()], (&norm.gamma, &norm.beta), e.shape.layer_norm_eps as f32)
    }

    fn linear(&mut self, x: EncAct, w: &GpuLinear, out: EncAct, gelu: bool) -> Result<(), Error> {
        let (e, out) = (self.encoder, self.bufs[out.index()]);
        e.kernels.matvec(&e.gpu, self.enc, &w.weights, self.bufs[x.index()], self.total, out)?;
        if gelu {
            e.kernels.bias_gelu(&e.gpu, self.enc, out, &w.bias)
        } else {
            e.kernels.add(&e.gpu, self.enc, out, &w.bias)
        }
    }

    fn attend(&mut self) -> Result<(), Error> {
        let e = self.encoder;
        let (heads, head_dim) = (e.shape.heads, e.shape.hidden / e.shape.heads);
        let (qkv, ctx) = (self.bufs[EncAct::Qkv.index()], self.bufs[EncAct::Context.index()]);
        for (seq, &start) in self.seqs.iter().zip(self.starts) {
            e.kernels.encoder_attention(&e.gpu, self.enc, qkv, ctx, (start, seq.len()), (heads, head_dim))?;
        }
        Ok(())
    }

    fn add_norm(&mut self, to: EncAct, residual: EncAct, norm: &GpuNorm) -> Result<(), Error> {
        let e = self.encoder;
        let to = self.bufs[to.index()];
        e.kernels.add(&e.gpu, self.enc, to, self.bufs[residual.index()])?;
        e.kernels.layer_norm(&e.gpu, self.enc, to, (&norm.gamma, &norm.beta), e.shape.layer_norm_eps as f32)
    }
}
