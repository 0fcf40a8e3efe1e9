//! The embedder's BERT-family encoder on the GPU, on the device the decoder uses (a
//! [`Gpu`] clone is the same device), so a page that reads and answers on the GPU embeds
//! there too instead of holding a second runtime's weights on the CPU.
//!
//! The arithmetic is the CPU encoder's ([`crate::embed::encoder`]) step by step: word +
//! position (+ token type 0) embeddings, LayerNorm; per layer `LN(x + Wo·attn(x) + bo)`,
//! then `LN(x + W2·gelu(W1·x + b1) + b2)`; the pooling and the L2 normalisation stay on
//! the CPU (a read-back of `tokens × hidden` floats). Sequences are packed end to end as
//! on the CPU, so the linear layers run once over every token of a batch and attention
//! runs per sequence (`encoder_attention.wgsl`): no padding, no mask. The weights are f32
//! (`matvec_f32.wgsl`, tiled over tokens), as checkpoints ship them; the word table stays
//! in host memory, f32 like the rest (a row per token is read, so uploading 30,522 rows
//! would only spend GPU memory).
//!
//! One forward pass is one command buffer (about 13 dispatches per layer and one per
//! sequence and layer for attention) and one read-back.

use super::buffers::{GpuMatrix, GpuVector};
use super::device::{Gpu, GpuError};
use super::kernels::{Kernels, ENCODER_MAX_TOKENS};
use crate::cpu::matmul::QMatrix;
use crate::embed::config::{BertShape, Pooling};
use crate::embed::encoder::{pool, table, Precision, TensorReader};
use crate::embed::error::EmbedderError;
use crate::gguf::GgmlType;

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

struct GpuEncoderLayer {
    /// Query, key and value stacked (`[3·hidden, hidden]`): one product.
    qkv: GpuLinear,
    attn_out: GpuLinear,
    attn_norm: GpuNorm,
    up: GpuLinear,
    down: GpuLinear,
    out_norm: GpuNorm,
}

/// A BERT-family encoder whose layers run on the GPU.
pub struct GpuEncoder {
    gpu: Gpu,
    kernels: Kernels,
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

fn gpu_error(e: GpuError) -> EmbedderError {
    EmbedderError::Gpu { message: e.to_string() }
}

impl GpuEncoder {
    /// Read the weights through `read` (as [`crate::embed::Encoder::load`] does) onto `gpu`.
    pub fn load(gpu: Gpu, shape: BertShape, read: &TensorReader<'_>) -> Result<Self, EmbedderError> {
        let h = shape.hidden;
        if shape.heads == 0 || !h.is_multiple_of(shape.heads) {
            return Err(EmbedderError::BadConfig {
                file: "config.json".into(),
                reason: format!("hidden width {h} is not a multiple of {} heads", shape.heads),
            });
        }
        let mut bytes = 0;
        let vector = |values: &[f32], bytes: &mut usize| {
            *bytes += values.len() * 4;
            GpuVector::from_slice(&gpu, values)
        };
        let norm = |name: &str, bytes: &mut usize| -> Result<GpuNorm, EmbedderError> {
            let gamma = read(&format!("{name}.weight"), &[h])?;
            let beta = read(&format!("{name}.bias"), &[h])?;
            Ok(GpuNorm { gamma: vector(&gamma, bytes), beta: vector(&beta, bytes) })
        };
        let linear = |names: &[String], rows: usize, cols: usize, bytes: &mut usize| -> Result<GpuLinear, EmbedderError> {
            let (mut w, mut b) = (Vec::with_capacity(rows * cols * names.len()), Vec::new());
            for n in names {
                w.extend(read(&format!("{n}.weight"), &[rows, cols])?);
                b.extend(read(&format!("{n}.bias"), &[rows])?);
            }
            let data: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
            *bytes += data.len() + b.len() * 4;
            let weights = GpuMatrix::upload(&gpu, GgmlType::F32, rows * names.len(), cols, &data).map_err(gpu_error)?;
            Ok(GpuLinear { weights, bias: GpuVector::from_slice(&gpu, &b) })
        };
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let n = |s: &str| format!("encoder.layer.{l}.{s}");
            let (i, qkv) = (shape.intermediate, ["query", "key", "value"].map(|p| n(&format!("attention.self.{p}"))));
            layers.push(GpuEncoderLayer {
                qkv: linear(&qkv, h, h, &mut bytes)?,
                attn_out: linear(&[n("attention.output.dense")], h, h, &mut bytes)?,
                attn_norm: norm(&n("attention.output.LayerNorm"), &mut bytes)?,
                up: linear(&[n("intermediate.dense")], i, h, &mut bytes)?,
                down: linear(&[n("output.dense")], h, i, &mut bytes)?,
                out_norm: norm(&n("output.LayerNorm"), &mut bytes)?,
            });
        }
        let word = read("embeddings.word_embeddings.weight", &[shape.vocab, h])?;
        let word = table(&word, shape.vocab, h, Precision::F32);
        let mut position = read("embeddings.position_embeddings.weight", &[shape.max_positions, h])?;
        let types = read("embeddings.token_type_embeddings.weight", &[shape.type_vocab, h])?;
        for row in position.chunks_exact_mut(h) {
            row.iter_mut().zip(&types[..h]).for_each(|(p, t)| *p += t);
        }
        let embed_norm = norm("embeddings.LayerNorm", &mut bytes)?;
        gpu.check().map_err(gpu_error)?;
        let kernels = Kernels::new(&gpu);
        Ok(GpuEncoder { gpu, kernels, shape, word, position, embed_norm, layers, gpu_bytes: bytes })
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
    pub async fn forward(&self, seqs: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, EmbedderError> {
        let s = &self.shape;
        let h = s.hidden;
        let total: usize = seqs.iter().map(Vec::len).sum();
        if total == 0 {
            return Ok(seqs.iter().map(|_| vec![0.0; h]).collect());
        }
        let starts: Vec<usize> = seqs.iter().scan(0, |at, q| Some(std::mem::replace(at, *at + q.len()))).collect();
        let mut x = vec![0f32; total * h];
        let mut row = Vec::with_capacity(h);
        for (seq, &start) in seqs.iter().zip(&starts) {
            if seq.len() > ENCODER_MAX_TOKENS || seq.len() + s.position_offset > s.max_positions {
                return Err(EmbedderError::Gpu {
                    message: format!("a text of {} tokens is longer than the encoder takes on the GPU", seq.len()),
                });
            }
            for (p, &id) in seq.iter().enumerate() {
                if id as usize >= s.vocab {
                    return Err(EmbedderError::VocabularyMismatch { tokenizer: id as usize + 1, model: s.vocab });
                }
                self.word.row_f32(id as usize, &mut row);
                let pos = &self.position[(p + s.position_offset) * h..][..h];
                for ((o, w), q) in x[(start + p) * h..][..h].iter_mut().zip(&row).zip(pos) {
                    *o = w + q;
                }
            }
        }
        let (gpu, k) = (&self.gpu, &self.kernels);
        let eps = s.layer_norm_eps as f32;
        let (heads, head_dim) = (s.heads, h / s.heads);
        let hidden = [k.scratch_from(gpu, &x), k.scratch(gpu, total * h)];
        let qkv = k.scratch(gpu, total * 3 * h);
        let ctx = k.scratch(gpu, total * h);
        let inner = k.scratch(gpu, total * s.intermediate);
        let recorded = k.run(gpu, |enc| {
            k.layer_norm(gpu, enc, &hidden[0], (&self.embed_norm.gamma, &self.embed_norm.beta), eps)?;
            for layer in &self.layers {
                let [x, tmp] = &hidden;
                k.matvec(gpu, enc, &layer.qkv.weights, x, total, &qkv)?;
                k.add(gpu, enc, &qkv, &layer.qkv.bias)?;
                for (seq, &start) in seqs.iter().zip(&starts) {
                    k.encoder_attention(gpu, enc, &qkv, &ctx, (start, seq.len()), (heads, head_dim))?;
                }
                k.matvec(gpu, enc, &layer.attn_out.weights, &ctx, total, tmp)?;
                k.add(gpu, enc, tmp, &layer.attn_out.bias)?;
                k.add(gpu, enc, tmp, x)?;
                k.layer_norm(gpu, enc, tmp, (&layer.attn_norm.gamma, &layer.attn_norm.beta), eps)?;
                // tmp now holds the layer's middle state; x is free for the feed-forward's.
                k.matvec(gpu, enc, &layer.up.weights, tmp, total, &inner)?;
                k.bias_gelu(gpu, enc, &inner, &layer.up.bias)?;
                k.matvec(gpu, enc, &layer.down.weights, &inner, total, x)?;
                k.add(gpu, enc, x, &layer.down.bias)?;
                k.add(gpu, enc, x, tmp)?;
                k.layer_norm(gpu, enc, x, (&layer.out_norm.gamma, &layer.out_norm.beta), eps)?;
            }
            Ok(())
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
