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
use crate::embed::encoder::{pool, read_weights, table, token_inputs, LayerOf, Precision, TensorReader};
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
    pub async fn forward(&self, seqs: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, EmbedderError> {
        let s = &self.shape;
        let h = s.hidden;
        let total: usize = seqs.iter().map(Vec::len).sum();
        if total == 0 {
            return Ok(seqs.iter().map(|_| vec![0.0; h]).collect());
        }
        let starts: Vec<usize> = seqs.iter().scan(0, |at, q| Some(std::mem::replace(at, *at + q.len()))).collect();
        for seq in seqs {
            if seq.len() > ENCODER_MAX_TOKENS || seq.len() + s.position_offset > s.max_positions {
                return Err(EmbedderError::Gpu {
                    message: format!("a text of {} tokens is longer than the encoder takes on the GPU", seq.len()),
                });
            }
            if let Some(&id) = seq.iter().find(|&&id| id as usize >= s.vocab) {
                return Err(EmbedderError::VocabularyMismatch { tokenizer: id as usize + 1, model: s.vocab });
            }
        }
        let x = token_inputs(&self.word, &self.position, s, seqs, &starts);
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
