//! A decoder's tensors, read one at a time from a GGUF file through a [`ByteSource`] and
//! kept in their block format.

use super::config::ModelConfig;
use super::tensors::{self, BlockTensor};
use crate::cpu::matmul::QMatrix;
use crate::cpu::x8;
use crate::gguf::{GgmlType, GgufFile, TensorInfo};
use crate::quant::dequantize;
use crate::source::ByteSource;
use crate::Error;

/// One transformer block.
#[derive(Debug)]
pub struct Block {
    /// RMSNorm weight before attention.
    pub attn_norm: Vec<f32>,
    /// Query projection.
    pub wq: QMatrix,
    /// Key projection.
    pub wk: QMatrix,
    /// Value projection.
    pub wv: QMatrix,
    /// Query/key/value biases (qwen2).
    pub bq: Option<Vec<f32>>,
    /// Key bias.
    pub bk: Option<Vec<f32>>,
    /// Value bias.
    pub bv: Option<Vec<f32>>,
    /// Per-head RMSNorm weights of the queries and of the keys (qwen3), `head_dim` each.
    pub q_norm: Option<Vec<f32>>,
    /// Key heads' RMSNorm weight.
    pub k_norm: Option<Vec<f32>>,
    /// Attention output projection.
    pub wo: QMatrix,
    /// RMSNorm weight before the feed-forward.
    pub ffn_norm: Vec<f32>,
    /// SwiGLU gate.
    pub w_gate: QMatrix,
    /// SwiGLU up.
    pub w_up: QMatrix,
    /// SwiGLU down.
    pub w_down: QMatrix,
    /// RMSNorm weights of attention's output and of the feed-forward's, before their
    /// residual adds (gemma).
    pub post_norms: [Option<Vec<f32>>; 2],
}

impl Block {
    /// This block's weights as the decoder schedule reads them.
    pub(crate) fn schedule_weights(&self) -> crate::arch::decoder::BlockWeights<'_, QMatrix, [f32]> {
        crate::arch::decoder::BlockWeights {
            attn_norm: &self.attn_norm,
            qkv: [&self.wq, &self.wk, &self.wv],
            biases: [self.bq.as_deref(), self.bk.as_deref(), self.bv.as_deref()],
            head_norms: [self.q_norm.as_deref(), self.k_norm.as_deref()],
            wo: &self.wo,
            ffn_norm: &self.ffn_norm,
            gate_up: [&self.w_gate, &self.w_up],
            w_down: &self.w_down,
            post_norms: [self.post_norms[0].as_deref(), self.post_norms[1].as_deref()],
        }
    }
}

/// All of a decoder's weights.
#[derive(Debug)]
pub struct Weights {
    /// Token embeddings (`vocab × n_embd`), as stored: [`ModelConfig::embedding_scale`]
    /// applies to the rows looked up.
    pub token_embd: QMatrix,
    /// Blocks.
    pub layers: Vec<Block>,
    /// Final RMSNorm.
    pub output_norm: Vec<f32>,
    /// LM head; `None` when tied to the embeddings.
    pub output: Option<QMatrix>,
    /// RoPE's per-pair frequency divisors (Llama 3's scaling), `rope_dims / 2` of them.
    pub rope_freqs: Option<Vec<f32>>,
}

impl Weights {
    /// The LM head (the embeddings when tied).
    pub fn lm_head(&self) -> &QMatrix {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Read every tensor the configuration needs.
    pub fn load(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig) -> Result<Self, Error> {
        // The block count comes from the file: reserve no more layers than it has tensors
        // (a fuzz finding: a count of 16 million reserved 8 GB before the first missing
        // tensor was noticed).
        let mut layers = Vec::with_capacity(cfg.n_layer.min(g.tensors.len()));
        for i in 0..cfg.n_layer {
            layers.push(Block::load(g, src, cfg, i)?);
        }
        let output = Self::load_output(g, src, cfg)?;
        Ok(Weights {
            token_embd: Self::load_token_embd(g, src, cfg)?,
            layers,
            output_norm: Self::load_output_norm(g, src, cfg)?,
            output,
            rope_freqs: Self::load_rope_freqs(g, src, cfg)?,
        })
    }

    /// RoPE's frequency divisors, if the file has them (`rope_dims / 2`, each finite and
    /// positive: a zero would make an angle infinite): Llama 3's, or Phi-3's LongRoPE
    /// factors (short or long, [`ModelConfig::long_rope`]). Those two architectures' alone,
    /// as llama.cpp reads them: its other graphs rotate by the plain angles whatever the
    /// file holds.
    pub fn load_rope_freqs(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig) -> Result<Option<Vec<f32>>, Error> {
        use super::config::Arch;
        let name = match cfg.arch {
            Arch::Llama => tensors::ROPE_FREQS,
            // LongRoPE: the long factors where the context window is past the original one.
            Arch::Phi3 if cfg.long_rope => tensors::ROPE_FACTORS_LONG,
            Arch::Phi3 => tensors::ROPE_FACTORS_SHORT,
            _ => return Ok(None),
        };
        if g.tensor(name).is_none() {
            return Ok(None);
        }
        let v = vector(g, src, name, (cfg.rope_dims / 2) as u64)?;
        if v.iter().any(|f| !f.is_finite() || *f <= 0.0) {
            return Err(Error::BadParam { key: name.into() });
        }
        Ok(Some(v))
    }

    /// The token embeddings (`vocab × n_embd`).
    pub fn load_token_embd(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig) -> Result<QMatrix, Error> {
        matrix(g, src, tensors::TOKEN_EMBEDDINGS.0, cfg.n_embd as u64, cfg.vocab as u64)
    }

    /// The final RMSNorm's weight.
    pub fn load_output_norm(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig) -> Result<Vec<f32>, Error> {
        vector(g, src, tensors::OUTPUT_NORM.0, cfg.n_embd as u64)
    }

    /// The LM head, or `None` when it is tied to the embeddings.
    pub fn load_output(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig) -> Result<Option<QMatrix>, Error> {
        if g.tensor(tensors::HEAD.0).is_none() {
            return Ok(None);
        }
        matrix(g, src, tensors::HEAD.0, cfg.n_embd as u64, cfg.vocab as u64).map(Some)
    }
}

impl Block {
    /// Block `i`'s tensors (a backend that copies them elsewhere, the GPU one, reads one
    /// block at a time and drops it).
    pub fn load(g: &GgufFile, src: &dyn ByteSource, cfg: &ModelConfig, i: usize) -> Result<Block, Error> {
        let (e, qw, kv, ff) = (cfg.n_embd as u64, cfg.q_width() as u64, cfg.kv_width() as u64, cfg.n_ff as u64);
        let n = |t: BlockTensor| t.gguf(i);
        let optional = |t: BlockTensor, len: u64| -> Result<Option<Vec<f32>>, Error> {
            t.exists_in(cfg.arch).then(|| vector(g, src, &n(t), len)).transpose()
        };
        let hd = cfg.head_dim as u64;
        // Phi-3's files hold Q, K and V as one matrix, and gate and up as one: split by
        // rows here (Q's rows, then K's, then V's; the gate's, then up's), so the backends
        // see the matrices every other model has.
        let fused = |t: BlockTensor| cfg.arch.fuses_projections() && g.tensor(&n(t)).is_some();
        let [wq, wk, wv] = if fused(BlockTensor::Qkv) {
            let name = n(BlockTensor::Qkv);
            let rows = qw + 2 * kv;
            [
                matrix_rows(g, src, &name, (e, rows), (0, qw))?,
                matrix_rows(g, src, &name, (e, rows), (qw, kv))?,
                matrix_rows(g, src, &name, (e, rows), (qw + kv, kv))?,
            ]
        } else {
            [
                matrix(g, src, &n(BlockTensor::Q), e, qw)?,
                matrix(g, src, &n(BlockTensor::K), e, kv)?,
                matrix(g, src, &n(BlockTensor::V), e, kv)?,
            ]
        };
        let [w_gate, w_up] = if cfg.arch.fuses_projections() && g.tensor(&n(BlockTensor::Gate)).is_none() {
            let name = n(BlockTensor::Up);
            [matrix_rows(g, src, &name, (e, 2 * ff), (0, ff))?, matrix_rows(g, src, &name, (e, 2 * ff), (ff, ff))?]
        } else {
            [matrix(g, src, &n(BlockTensor::Gate), e, ff)?, matrix(g, src, &n(BlockTensor::Up), e, ff)?]
        };
        Ok(Block {
            attn_norm: vector(g, src, &n(BlockTensor::AttnNorm), e)?,
            wq,
            wk,
            wv,
            bq: optional(BlockTensor::QBias, qw)?,
            bk: optional(BlockTensor::KBias, kv)?,
            bv: optional(BlockTensor::VBias, kv)?,
            q_norm: optional(BlockTensor::QNorm, hd)?,
            k_norm: optional(BlockTensor::KNorm, hd)?,
            wo: matrix(g, src, &n(BlockTensor::Output), qw, e)?,
            ffn_norm: vector(g, src, &n(BlockTensor::FfnNorm), e)?,
            w_gate,
            w_up,
            w_down: matrix(g, src, &n(BlockTensor::Down), ff, e)?,
            post_norms: [optional(BlockTensor::AttnPostNorm, e)?, optional(BlockTensor::FfnPostNorm, e)?],
        })
    }
}

/// The decoder's input: each token's row of `token_embd`, one after another, times the
/// model's embedding scale ([`ModelConfig::embedding_scale`]), as every backend looks them
/// up. An id past the vocabulary takes its last row (the GPU backend refuses such ids
/// before it asks).
pub(crate) fn embed_tokens(cfg: &ModelConfig, token_embd: &QMatrix, tokens: impl Iterator<Item = u32>) -> Vec<f32> {
    let (e, scale) = (cfg.n_embd, cfg.embedding_scale());
    let mut x = Vec::with_capacity(tokens.size_hint().0 * e);
    let mut row = Vec::with_capacity(e);
    for tok in tokens {
        token_embd.row_f32((tok as usize).min(cfg.vocab.saturating_sub(1)), &mut row);
        x.extend(row.iter().map(|v| v * scale));
    }
    x
}

pub(crate) fn tensor_info<'g>(g: &'g GgufFile, name: &str, dims: &[u64]) -> Result<&'g TensorInfo, Error> {
    let t = g.tensor(name).ok_or_else(|| Error::MissingTensor { name: name.to_owned() })?;
    if t.dims != dims {
        return Err(Error::TensorShape { name: name.to_owned(), found: t.dims.clone(), expected: dims.to_vec() });
    }
    Ok(t)
}

fn tensor_bytes(g: &GgufFile, src: &dyn ByteSource, name: &str, dims: &[u64]) -> Result<(GgmlType, Vec<u8>), Error> {
    let t = tensor_info(g, name, dims)?;
    Ok((t.ggml_type, g.tensor_bytes(src, t)?))
}

/// A weight matrix, in the layout the CPU kernels read fastest ([`QMatrix::for_matmul`]).
/// A matrix that is re-laid is read eight rows at a time straight into its new layout, so
/// loading never holds two copies of it.
fn matrix(g: &GgufFile, src: &dyn ByteSource, name: &str, cols: u64, rows: u64) -> Result<QMatrix, Error> {
    matrix_rows(g, src, name, (cols, rows), (0, rows))
}

/// Rows `first..first + rows` of the `cols × all_rows` matrix `name` (a whole matrix, or
/// one of those a fused one stacks), as [`matrix`] lays them out.
fn matrix_rows(
    g: &GgufFile,
    src: &dyn ByteSource,
    name: &str,
    (cols, all_rows): (u64, u64),
    (first, rows): (u64, u64),
) -> Result<QMatrix, Error> {
    let shape_err = || Error::TensorShape { name: name.to_owned(), found: vec![cols, rows], expected: vec![cols, all_rows] };
    let t = tensor_info(g, name, &[cols, all_rows])?;
    let ty = t.ggml_type;
    // A row is whole blocks (the file's tensor sizes were checked against their shapes).
    if first + rows > all_rows || !cols.is_multiple_of(ty.block_elements()) {
        return Err(shape_err());
    }
    let row_bytes = cols / ty.block_elements() * ty.block_bytes();
    let offset = t.offset + first * row_bytes;
    let (r, c) = (rows as usize, cols as usize);
    if x8::relays(ty, r) && c.is_multiple_of(256) && row_bytes == (c / 256) as u64 * ty.block_bytes() {
        let blocks = c / 256;
        let (group_src, group_dst) = (x8::ROWS * blocks * ty.block_bytes() as usize, x8::relaid_bytes(ty, x8::ROWS, blocks));
        let mut out = vec![0u8; x8::relaid_bytes(ty, r, blocks)];
        let mut scratch = vec![0u8; group_src];
        for (k, dst) in out.chunks_exact_mut(group_dst).enumerate() {
            src.read_at(offset + (k * group_src) as u64, &mut scratch)?;
            x8::interleave_into(ty, &scratch, blocks, dst);
        }
        return QMatrix::relaid(ty, r, c, out).ok_or_else(shape_err);
    }
    let len = usize::try_from(rows * row_bytes).map_err(|_| shape_err())?;
    let mut bytes = vec![0u8; len];
    src.read_at(offset, &mut bytes)?;
    QMatrix::new(ty, r, c, bytes).ok_or_else(shape_err)
}

fn vector(g: &GgufFile, src: &dyn ByteSource, name: &str, len: u64) -> Result<Vec<f32>, Error> {
    let (ty, bytes) = tensor_bytes(g, src, name, &[len])?;
    let mut out = Vec::with_capacity(len as usize);
    dequantize(ty, &bytes, &mut out).map_err(|_| Error::TensorShape { name: name.to_owned(), found: vec![len], expected: vec![len] })?;
    Ok(out)
}
