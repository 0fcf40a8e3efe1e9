//! A decoder on the GPU: the shared block schedule (`arch::decoder`) over WGSL kernels
//! (`GpuPass`), behind the same [`Backend`] trait as the CPU's, so
//! [`crate::lm::Lm`] generates with it unchanged.
//!
//! A forward pass records every layer into one command buffer (one compute pass) and reads
//! back only the logits or the picked token. The schedule's steps are fused as they are
//! recorded ([`GpuPass`] says how): a decode step of a Q4_K_M 1.5B is 9 dispatches a layer
//! on the f16 path and 8 on the f32 path, where it was 24. The token embeddings stay on the
//! CPU (one row per token is looked up and uploaded); the rest of the weights live in GPU buffers, uploaded from a loaded CPU
//! model ([`GpuTransformer::from_cpu`]) or read from the file one block at a time
//! ([`GpuTransformer::load`]). The K/V cache is one pair of
//! buffers per layer that grows by doubling; forking a sequence copies its filled rows on
//! the GPU.
//!
//! Scratch, parameter blocks and read-back buffers come from the device's pool
//! ([`super::pool`]): after its first steps, decoding creates no buffer per token (a test
//! counts them), and bind groups come from the device's cache. Greedy decoding picks the
//! token on the GPU (4 bytes back per token), and so does sampling with temperature, top-k
//! and top-p (`sample.wgsl`) unless the draw needs the whole row.
//!
//! A prompt's matrix products take tiles of 8 tokens per workgroup (matvec.wgsl), so a
//! weight row is read once per tile, not once per token. Each matrix reads its input in the
//! form its kernel takes ([`super::Input`]): f32, 8-bit (the 32-value block formats) or, on
//! the f16 path, packed f16 (the K-quants); only the forms some matrix reads are made. A tile reads its
//! weights straight from memory, not staged in workgroup memory and shared across rows as a
//! tiled matrix multiplication would.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::buffers::{GpuVector, Staged};
use super::device::Gpu;
use super::kernels::{attention_scratch, f16_len, q8_len, AttentionShape, Copies, Epilogue, Kernels, Operand, Placement, SAMPLE_FALLBACK};
use super::recorder::Recorder;
use super::GpuMatrix;
use crate::arch::decoder::{run_blocks, Act, BlockWeights, DecoderOps};
use crate::cpu::attention::RopeFrequencies;
use crate::cpu::matmul::QMatrix;
use crate::cpu::transformer::CpuTransformer;
use crate::gguf::GgufFile;
use crate::lm::Logits;
use crate::lm::{Backend, DeviceDraw, Drawn};
use crate::model::{embed_tokens, tensor_info, Block, Gate, ModelConfig, Weights};
use crate::source::ByteSource;
use crate::Error;

/// One layer's weights on the GPU.
#[derive(Debug)]
struct GpuLayer {
    attn_norm: GpuVector,
    wq: GpuMatrix,
    wk: GpuMatrix,
    wv: GpuMatrix,
    /// Query, key and value biases (qwen2), added to every token's row.
    biases: [Option<GpuVector>; 3],
    /// The same biases side by side (q | k | v, zeros where one is missing), as the step
    /// after the products adds them (`rope_append.wgsl`); `None` without biases.
    qkv_bias: Option<GpuVector>,
    /// Each query head's and each key head's RMSNorm weight (qwen3, gemma3).
    head_norms: [Option<GpuVector>; 2],
    /// RMSNorm weights of attention's and the feed-forward's outputs (gemma3).
    post_norms: [Option<GpuVector>; 2],
    wo: GpuMatrix,
    ffn_norm: GpuVector,
    w_gate: GpuMatrix,
    w_up: GpuMatrix,
    w_down: GpuMatrix,
    /// The stacked projections one dispatch multiplies by together, where they are of one
    /// format ([`GpuMatrix::joined`]), made once here rather than per forward pass: Q and K,
    /// Q, K and V, gate and up.
    qk: Option<GpuMatrix>,
    qkv: Option<GpuMatrix>,
    gate_up: Option<GpuMatrix>,
}

impl GpuLayer {
    /// This block's weights as the decoder schedule reads them.
    fn schedule_weights(&self) -> BlockWeights<'_, GpuMatrix, GpuVector> {
        BlockWeights {
            attn_norm: &self.attn_norm,
            qkv: [&self.wq, &self.wk, &self.wv],
            biases: [self.biases[0].as_ref(), self.biases[1].as_ref(), self.biases[2].as_ref()],
            head_norms: [self.head_norms[0].as_ref(), self.head_norms[1].as_ref()],
            wo: &self.wo,
            ffn_norm: &self.ffn_norm,
            gate_up: [&self.w_gate, &self.w_up],
            w_down: &self.w_down,
            post_norms: [self.post_norms[0].as_ref(), self.post_norms[1].as_ref()],
        }
    }
}

fn upload_matrix(gpu: &Gpu, m: &QMatrix) -> Result<GpuMatrix, Error> {
    GpuMatrix::upload(gpu, m.ty, m.rows, m.cols, &m.gguf_bytes())
}

/// File bytes read per run when a matrix is streamed to the GPU ([`stream_matrix`]).
const STREAM_BYTES: usize = 16 << 20;

/// Tensor `name` (`rows` × `cols`) read from the file a run of whole rows at a time (at
/// most [`STREAM_BYTES`]) and written to the GPU as it is read: never whole in memory.
fn stream_matrix(gpu: &Gpu, g: &GgufFile, src: &dyn ByteSource, name: &str, cols: usize, rows: usize) -> Result<GpuMatrix, Error> {
    let t = tensor_info(g, name, &[cols as u64, rows as u64])?;
    let bytes = usize::try_from(t.size).map_err(|_| Error::GpuShape { what: "matrix data (bytes)", expected: usize::MAX, got: 0 })?;
    let read = |at: usize, len: usize, run: &mut Vec<u8>| -> Result<(), Error> {
        run.resize(len, 0);
        src.read_at(t.offset + at as u64, run)
    };
    GpuMatrix::upload_rows(gpu, (t.ggml_type, rows, cols), bytes, (gpu.max_binding_bytes() as usize, STREAM_BYTES), read)
}

/// One block's weights, copied to the GPU. The projections that read one input are
/// stacked in one buffer each (queries, keys and values; gate and up), so a forward pass
/// multiplies by those of one format in one dispatch ([`GpuMatrix::joined`]).
fn upload_layer(gpu: &Gpu, l: &Block) -> Result<GpuLayer, Error> {
    let [wq, wk, wv] = GpuMatrix::stack(gpu, [upload_matrix(gpu, &l.wq)?, upload_matrix(gpu, &l.wk)?, upload_matrix(gpu, &l.wv)?]);
    let [w_gate, w_up] = GpuMatrix::stack(gpu, [upload_matrix(gpu, &l.w_gate)?, upload_matrix(gpu, &l.w_up)?]);
    let sides = [(&l.bq, l.wq.rows), (&l.bk, l.wk.rows), (&l.bv, l.wv.rows)];
    let qkv_bias = sides.iter().any(|(b, _)| b.is_some()).then(|| {
        let joined: Vec<f32> = sides.iter().flat_map(|(b, rows)| b.as_deref().map_or_else(|| vec![0.0; *rows], <[f32]>::to_vec)).collect();
        GpuVector::from_slice(gpu, &joined)
    });
    let qk = wq.joined(&wk);
    let qkv = qk.as_ref().and_then(|qk| qk.joined(&wv));
    let gate_up = w_gate.joined(&w_up);
    Ok(GpuLayer {
        qk,
        qkv,
        gate_up,
        attn_norm: GpuVector::from_slice(gpu, &l.attn_norm),
        wq,
        wk,
        wv,
        biases: [&l.bq, &l.bk, &l.bv].map(|b| b.as_deref().map(|b| GpuVector::from_slice(gpu, b))),
        qkv_bias,
        head_norms: [&l.q_norm, &l.k_norm].map(|n| n.as_deref().map(|n| GpuVector::from_slice(gpu, n))),
        post_norms: [&l.post_norms[0], &l.post_norms[1]].map(|n| n.as_deref().map(|n| GpuVector::from_slice(gpu, n))),
        wo: upload_matrix(gpu, &l.wo)?,
        ffn_norm: GpuVector::from_slice(gpu, &l.ffn_norm),
        w_gate,
        w_up,
        w_down: upload_matrix(gpu, &l.w_down)?,
    })
}

/// The decoder on a GPU device.
#[derive(Debug)]
pub struct GpuTransformer {
    gpu: Gpu,
    kernels: std::sync::Arc<Kernels>,
    cfg: ModelConfig,
    token_embd: QMatrix,
    layers: Vec<GpuLayer>,
    output_norm: GpuVector,
    head: GpuMatrix,
    /// RoPE's frequencies, from which each pass's angles are computed on the CPU: of the
    /// global layers and of the sliding-window layers.
    ropes: [RopeFrequencies; 2],
    /// GELU's table (gemma's gated feed-forward reads it; [`crate::cpu::mathfn::gelu_tanh_table`]).
    gelu_table: Option<GpuVector>,
    /// The copies of a normed row that the layers' products read (written by the norm).
    normed_copies: Copies,
    /// Draws made on the GPU, and draws handed back as logits ([`GpuTransformer::draws`]).
    drawn: [AtomicUsize; 2],
}

/// A sequence's K/V cache on the GPU.
#[derive(Debug)]
pub struct GpuKvCache {
    device: wgpu::Device,
    queue: wgpu::Queue,
    k: Vec<GpuVector>,
    v: Vec<GpuVector>,
    len: usize,
    /// Rows each layer's buffers hold.
    capacity: usize,
    kv_width: usize,
}

impl Clone for GpuKvCache {
    fn clone(&self) -> Self {
        let rows = self.capacity;
        let copy = |src: &GpuVector| {
            let dst = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kv cache"),
                size: src.buffer.size(),
                usage: src.buffer.usage(),
                mapped_at_creation: false,
            });
            let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("fork") });
            let filled = self.filled_bytes();
            if filled > 0 {
                enc.copy_buffer_to_buffer(&src.buffer, 0, &dst, 0, filled);
            }
            self.queue.submit([enc.finish()]);
            GpuVector { len: rows * self.kv_width / 2, buffer: dst }
        };
        GpuKvCache {
            device: self.device.clone(),
            queue: self.queue.clone(),
            k: self.k.iter().map(copy).collect(),
            v: self.v.iter().map(copy).collect(),
            len: self.len,
            capacity: self.capacity,
            kv_width: self.kv_width,
        }
    }
}

impl GpuKvCache {
    /// Bytes of one layer's K (or V) buffer that hold rows: two bytes a value (f16).
    fn filled_bytes(&self) -> u64 {
        (self.len * self.kv_width * 2) as u64
    }
}

/// Rows a new cache holds before it first grows.
const FIRST_CAPACITY: usize = 256;

impl GpuTransformer {
    /// Upload a loaded CPU model's weights to `gpu`; the token embeddings move over as they
    /// are (looked up on the CPU), not copied.
    pub fn from_cpu(gpu: Gpu, cpu: CpuTransformer) -> Result<GpuTransformer, Error> {
        let mut layers = Vec::with_capacity(cpu.weights.layers.len());
        for l in &cpu.weights.layers {
            layers.push(upload_layer(&gpu, l)?);
        }
        let output_norm = GpuVector::from_slice(&gpu, &cpu.weights.output_norm);
        let head = upload_matrix(&gpu, cpu.weights.lm_head())?;
        let ropes = RopeFrequencies::of_model(&cpu.cfg, cpu.weights.rope_freqs);
        Self::assemble(gpu, cpu.cfg.clone(), cpu.weights.token_embd, layers, output_norm, head, ropes)
    }

    /// Load a GGUF decoder straight onto the GPU: one block's tensors at a time are read
    /// from `src`, uploaded (in writes of bounded size) and dropped, so the whole model is
    /// never in CPU memory (in a browser, wasm's linear memory holds one block and the
    /// token embeddings, which stay on the CPU for the row lookups).
    pub fn load(gpu: Gpu, g: &GgufFile, src: &dyn ByteSource, cfg: ModelConfig) -> Result<GpuTransformer, Error> {
        let mut layers = Vec::with_capacity(cfg.n_layer.min(g.tensors.len()));
        for i in 0..cfg.n_layer {
            layers.push(upload_layer(&gpu, &Block::load(g, src, &cfg, i)?)?);
        }
        let output_norm = GpuVector::from_slice(&gpu, &Weights::load_output_norm(g, src, &cfg)?);
        let token_embd = Weights::load_token_embd(g, src, &cfg)?;
        // The head (its own matrix, or the token embeddings where they are tied) is streamed
        // from the file: a 150k-token vocabulary's head is 180 MB, and held whole beside the
        // token embeddings it took the 1.5B model's wasm heap to 572 MiB (now about 230).
        let head = if g.tensor("output.weight").is_some() { "output.weight" } else { "token_embd.weight" };
        let head = stream_matrix(&gpu, g, src, head, cfg.n_embd, cfg.vocab)?;
        let ropes = RopeFrequencies::of_model(&cfg, Weights::load_rope_freqs(g, src, &cfg)?);
        Self::assemble(gpu, cfg, token_embd, layers, output_norm, head, ropes)
    }

    fn assemble(
        gpu: Gpu,
        cfg: ModelConfig,
        token_embd: QMatrix,
        layers: Vec<GpuLayer>,
        output_norm: GpuVector,
        head: GpuMatrix,
        ropes: [RopeFrequencies; 2],
    ) -> Result<GpuTransformer, Error> {
        let kernels = gpu.kernels();
        let readers: Vec<_> = layers.iter().flat_map(|l| [l.wq.ty, l.wk.ty, l.wv.ty, l.w_gate.ty, l.w_up.ty]).collect();
        let normed_copies = kernels.copies_for(&readers);
        let gelu_table = (cfg.arch.gate() == Gate::GeluTanh).then(|| GpuVector::from_slice(&gpu, crate::cpu::mathfn::gelu_tanh_table()));
        gpu.check()?;
        Ok(GpuTransformer {
            gpu,
            kernels,
            cfg,
            token_embd,
            layers,
            output_norm,
            head,
            ropes,
            gelu_table,
            normed_copies,
            drawn: Default::default(),
        })
    }

    /// Sampled draws so far: made on the GPU, and handed back as logits for the CPU to
    /// finish (top-k above 256, or a nucleus the 256 most likely tokens do not fill).
    pub fn draws(&self) -> (usize, usize) {
        (self.drawn[0].load(Ordering::Relaxed), self.drawn[1].load(Ordering::Relaxed))
    }

    /// The device this model runs on (its adapter, for reports).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// A layer's K or V buffers for `rows` positions: f16 pairs, a u32 word per two values.
    fn cache_buffers(&self, rows: usize) -> Vec<GpuVector> {
        (0..self.cfg.n_layer).map(|_| GpuVector::zeros(&self.gpu, rows * self.cfg.kv_width() / 2)).collect()
    }

    /// Make room for `more` rows, doubling the buffers (and copying what they hold).
    fn reserve(&self, cache: &mut GpuKvCache, more: usize) {
        let need = cache.len + more;
        if need <= cache.capacity {
            return;
        }
        let rows = need.next_power_of_two().max(FIRST_CAPACITY);
        let (k, v) = (self.cache_buffers(rows), self.cache_buffers(rows));
        let mut enc = self.gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("grow cache") });
        let filled = cache.filled_bytes();
        if filled > 0 {
            for (old, new) in cache.k.iter().zip(&k).chain(cache.v.iter().zip(&v)) {
                enc.copy_buffer_to_buffer(&old.buffer, 0, &new.buffer, 0, filled);
            }
        }
        self.gpu.queue.submit([enc.finish()]);
        (cache.k, cache.v, cache.capacity) = (k, v, rows);
    }

    /// Append `tokens` to `cache` and read back the logits of the last row or of every
    /// row, waiting for the read-back without blocking (a browser resolves it through its
    /// event loop; natively wgpu's poll has already run it). [`Backend::forward`] is this.
    pub async fn forward_async(&self, cache: &mut GpuKvCache, tokens: &[u32], which: Logits) -> Result<Vec<f32>, Error> {
        match self.submit(cache, tokens, which, Pick::None, None)? {
            Some(out) => self.read_staged(out).await,
            None => Ok(Vec::new()),
        }
    }

    /// [`GpuTransformer::forward_async`] for the last row's logits, with that row's
    /// residual after `layer` read back too ([`Backend::forward_state`] is this).
    pub async fn forward_state_async(
        &self,
        cache: &mut GpuKvCache,
        tokens: &[u32],
        layer: usize,
    ) -> Result<(Vec<f32>, Option<Vec<f32>>), Error> {
        let Some(mut out) = self.submit(cache, tokens, Logits::Last, Pick::None, Some(layer))? else { return Ok((Vec::new(), None)) };
        let state = out.state.take();
        let logits = self.read_staged(out).await?;
        let state = match state {
            Some(v) => Some(self.read_and_recycle(v).await?),
            None => None,
        };
        Ok((logits, state))
    }

    /// Append each sequence's tokens to its cache in one pass (the weights read once for
    /// all their rows) and read back every row's logits, sequence after sequence.
    /// [`Backend::forward_batch`] is this: batched paths and drafts verify through it.
    pub async fn forward_batch_async(&self, seqs: &mut [(&mut GpuKvCache, &[u32])]) -> Result<Vec<f32>, Error> {
        match self.submit_batch(seqs, Logits::All, Pick::None, None)? {
            Some(out) => self.read_staged(out).await,
            None => Ok(Vec::new()),
        }
    }

    /// Append `tokens` to `cache` and pick the most likely next token on the GPU (the
    /// first of equal ones, as the CPU sampler picks): 4 bytes come back, not the logits.
    pub async fn forward_greedy(&self, cache: &mut GpuKvCache, tokens: &[u32]) -> Result<Option<u32>, Error> {
        let Some(out) = self.submit(cache, tokens, Logits::Last, Pick::Argmax, None)? else { return Ok(None) };
        Ok(self.read_staged(out).await?.first().map(|v| v.to_bits()))
    }

    /// Append `tokens` to `cache` and draw the next token on the GPU as `draw` says
    /// (penalty, temperature, top-k, top-p; `wgsl/sample.wgsl`): 4 bytes come back. When
    /// the draw needs the whole row (top-k above 256, or a nucleus the 256 most likely
    /// tokens do not fill) the logits come back instead, for the CPU to finish with the
    /// same uniform number. `None` for no tokens.
    pub async fn forward_draw(&self, cache: &mut GpuKvCache, tokens: &[u32], draw: &DeviceDraw) -> Result<Option<Drawn>, Error> {
        let Some(mut out) = self.submit(cache, tokens, Logits::Last, Pick::Draw(draw), None)? else { return Ok(None) };
        // The logits stay until the draw is known: a draw the GPU cannot finish reads them.
        let logits = out.logits.take();
        let penalized = out.penalized;
        let token = self.read_staged(out).await?.first().map(|v| v.to_bits());
        match (token, logits) {
            (Some(t), logits) if t != SAMPLE_FALLBACK => {
                if let Some(l) = logits {
                    self.kernels.recycle(&self.gpu, l);
                }
                self.drawn[0].fetch_add(1, Ordering::Relaxed);
                Ok(Some(Drawn::Token(t)))
            }
            (_, Some(l)) => {
                self.drawn[1].fetch_add(1, Ordering::Relaxed);
                Ok(Some(Drawn::Logits { logits: self.read_and_recycle(l).await?, penalized }))
            }
            (_, None) => Err(Error::GpuShape { what: "logits of a draw the GPU could not finish", expected: 1, got: 0 }),
        }
    }

    /// What a submitted pass staged for reading (the pick, or else the logits), read; the
    /// pass's output buffers go back to the pool.
    async fn read_staged(&self, out: Outputs) -> Result<Vec<f32>, Error> {
        for v in out.picked.into_iter().chain(out.logits).chain(out.state) {
            self.kernels.recycle(&self.gpu, v);
        }
        out.staged.read(&self.gpu).await
    }

    /// A pass's result, read back; its buffer goes back to the pool.
    async fn read_and_recycle(&self, v: GpuVector) -> Result<Vec<f32>, Error> {
        let out = v.read(&self.gpu).await;
        self.kernels.recycle(&self.gpu, v);
        out
    }

    /// An empty sequence.
    pub fn new_cache(&self) -> GpuKvCache {
        GpuKvCache {
            device: self.gpu.device.clone(),
            queue: self.gpu.queue.clone(),
            k: Vec::new(),
            v: Vec::new(),
            len: 0,
            capacity: 0,
            kv_width: self.cfg.kv_width(),
        }
    }

    /// Record and submit the forward pass of `tokens` after `cache`: the buffer the logits
    /// will be in, and with a pick the buffer its one slot will be in (`None` for no
    /// tokens). The caller reads what it needs and recycles both.
    fn submit(
        &self,
        cache: &mut GpuKvCache,
        tokens: &[u32],
        which: Logits,
        pick: Pick<'_>,
        state_layer: Option<usize>,
    ) -> Result<Option<Outputs>, Error> {
        self.submit_batch(&mut [(cache, tokens)], which, pick, state_layer)
    }

    /// [`GpuTransformer::submit`] for several sequences at once, each appended to its own
    /// cache: their rows go through every matrix together (the weights are read once for
    /// all), and only the cache writes and attention run per sequence. With more than one
    /// sequence the logits are every row's ([`Logits::All`]) and nothing is picked. With
    /// `state_layer`, the last row's residual after that layer is kept too
    /// ([`Outputs::state`]).
    fn submit_batch(
        &self,
        seqs: &mut [(&mut GpuKvCache, &[u32])],
        which: Logits,
        pick: Pick<'_>,
        state_layer: Option<usize>,
    ) -> Result<Option<Outputs>, Error> {
        let cfg = &self.cfg;
        let (e, kvw, hd) = (cfg.n_embd, cfg.kv_width(), cfg.head_dim);
        let seqs: Vec<(&mut GpuKvCache, &[u32])> = seqs.iter_mut().filter(|(_, t)| !t.is_empty()).map(|(c, t)| (&mut **c, *t)).collect();
        let t_n: usize = seqs.iter().map(|(_, t)| t.len()).sum();
        if t_n == 0 {
            return Ok(None);
        }
        if seqs.len() > 1 && (which != Logits::All || !matches!(pick, Pick::None)) {
            return Err(Error::GpuShape {
                what: "sequences in a batch that picks or keeps only the last logits",
                expected: 1,
                got: seqs.len(),
            });
        }
        if let Some(&bad) = seqs.iter().flat_map(|(_, t)| t.iter()).find(|&&t| t as usize >= cfg.vocab) {
            return Err(Error::GpuShape { what: "token id (the vocabulary's size)", expected: cfg.vocab, got: bad as usize });
        }
        let mut seqs = seqs;
        for (cache, tokens) in seqs.iter_mut() {
            self.reserve(cache, tokens.len());
        }
        let gpu = &self.gpu;
        let k = &self.kernels;
        // Token embeddings, looked up on the CPU.
        let x = embed_tokens(cfg, &self.token_embd, seqs.iter().flat_map(|(_, t)| t.iter().copied()));
        // RoPE's angles for each row's position in its sequence, computed as the CPU
        // backend computes them: for the global layers, and for the sliding-window layers
        // where the model has them.
        let pairs = cfg.rope_dims / 2;
        let mut cs = vec![(0f32, 0f32); pairs];
        let mut angles_of = |freqs: &RopeFrequencies| {
            let mut angles = Vec::with_capacity(t_n * pairs * 2);
            for (cache, tokens) in &seqs {
                for p in cache.len..cache.len + tokens.len() {
                    freqs.angles(p, &mut cs);
                    angles.extend(cs.iter().flat_map(|&(c, s)| [c, s]));
                }
            }
            angles
        };
        let angles = angles_of(&self.ropes[0]);
        let windowed_angles = cfg.sliding_window.is_some().then(|| angles_of(&self.ropes[1]));
        // Each sequence's rows, cache position and attention shape.
        let mut first = 0;
        let parts: Vec<(usize, AttentionShape)> = seqs
            .iter()
            .map(|(cache, tokens)| {
                let shape = AttentionShape {
                    head_dim: hd,
                    heads: cfg.n_head,
                    kv_heads: cfg.n_head_kv,
                    tokens: tokens.len(),
                    n_past: cache.len,
                    first_row: first,
                    window: 0,
                };
                first += tokens.len();
                (cache.len, shape)
            })
            .collect();
        // Scratch from the pool (back to it below, once the pass is submitted).
        let zeros = |n: usize| k.scratch(gpu, n);
        let x = k.scratch_from(gpu, &x);
        let angles = k.scratch_from(gpu, &angles);
        let windowed_angles = windowed_angles.map(|a| k.scratch_from(gpu, &a));
        let (h, q, kk, vv, attn, o) = (
            zeros(t_n * e),
            zeros(t_n * cfg.n_head * hd),
            zeros(t_n * kvw),
            zeros(t_n * kvw),
            zeros(t_n * cfg.n_head * hd),
            zeros(t_n * e),
        );
        let (gate, up) = (zeros(t_n * cfg.n_ff), zeros(t_n * cfg.n_ff));
        // Where heads are normed (qwen3), the buffers the normed queries and keys go to.
        let head_norms = cfg.arch.has_head_norms();
        let spares = head_norms.then(|| (zeros(t_n * cfg.n_head * hd), zeros(t_n * kvw)));
        // Each row's queries, keys and values side by side, as their products write them.
        let qkv = zeros(t_n * (cfg.n_head * hd + 2 * kvw));
        // Room for the copies of the matrices' inputs that their kernels read (8-bit, f16).
        let copies = |n: usize| (zeros(q8_len(n)), zeros(f16_len(n)));
        let ((hq, h16), (attn_q, attn16), (gate_q, gate16)) = (copies(t_n * e), copies(t_n * cfg.n_head * hd), copies(t_n * cfg.n_ff));
        // Attention's scratch, reused by each sequence in turn.
        let scores = zeros(parts.iter().map(|&(_, a)| attention_scratch(a)).max().unwrap_or(0));
        let logit_rows = if which == Logits::All { t_n } else { 1 };
        let (normed, logits) = (zeros(logit_rows * e), zeros(logit_rows * cfg.vocab));
        let (normed_q, normed16) = copies(logit_rows * e);
        let state = state_layer.filter(|&l| l < self.layers.len()).map(|l| (l, zeros(e)));
        let picked = match pick {
            Pick::None => None,
            Pick::Argmax => Some(zeros(logit_rows)),
            Pick::Draw(_) => Some(zeros(1)),
        };
        // The repetition penalty's tokens, as bits in f32 slots.
        // `penalized` is empty unless the penalty applies (`Sampler::device_draw`).
        let penalized = match pick {
            Pick::Draw(d) if d.repetition_penalty > 0.0 && !d.penalized.is_empty() => {
                let bits: Vec<f32> = d.penalized.iter().map(|&t| f32::from_bits(t)).collect();
                Some(k.scratch_from(gpu, &bits))
            }
            _ => None,
        };
        let mut staged = None;
        k.run(gpu, |enc| {
            let caches = seqs.iter().zip(&parts).map(|((cache, _), &(n_past, shape))| (&**cache, n_past, shape)).collect();
            let mut pass = GpuPass {
                model: self,
                enc,
                bufs: [&x, &h, &q, &kk, &vv, &attn, &o, &gate, &up],
                copies: [(Act::Normed, &hq, &h16), (Act::Attention, &attn_q, &attn16), (Act::Gate, &gate_q, &gate16)],
                rows: t_n,
                angles: [&angles, windowed_angles.as_ref().unwrap_or(&angles)],
                caches,
                scores: &scores,
                state: state.as_ref().map(|(at, out)| (*at, out)),
                qkv: &qkv,
                spares: spares.as_ref().map_or([None; 2], |(q, k)| [Some(q), Some(k)]),
                layer: 0,
                deferred: Deferred::Nothing,
                copies_made: Vec::new(),
            };
            run_blocks(&mut pass, self.layers.iter().map(GpuLayer::schedule_weights))?;
            pass.flush()?;
            let enc = pass.enc;
            // The head's rows are read from the residual where they are (no copy, which
            // would end the compute pass).
            let normed_in = Operand { f32: &normed, q8: &normed_q, f16: &normed16 };
            k.rms_norm_with_copies(
                gpu,
                enc,
                (&x, t_n - logit_rows),
                &self.output_norm,
                cfg.rms_eps,
                normed_in,
                k.copies_for(&[self.head.ty]),
            )?;
            k.product(gpu, enc, &self.head, normed_in, logit_rows, &logits)?;
            if let (Pick::Draw(d), Some(ids)) = (pick, &penalized) {
                k.penalize(gpu, enc, &logits, ids, d.repetition_penalty)?;
            }
            match (pick, &picked) {
                (Pick::Argmax, Some(out)) => k.argmax(gpu, enc, &logits, cfg.vocab, out)?,
                (Pick::Draw(d), Some(out)) if d.temperature > 0.0 && d.temperature.is_finite() => k.sample(gpu, enc, &logits, d, out)?,
                (Pick::Draw(_), Some(out)) => k.argmax(gpu, enc, &logits, cfg.vocab, out)?,
                _ => {}
            }
            // The read-back's copy in the same command buffer: one submission a token.
            staged = Some(picked.as_ref().unwrap_or(&logits).stage(gpu, enc.encoder()));
            Ok(())
        })?;
        let Some(staged) = staged else {
            return Err(Error::GpuShape { what: "a forward pass's read-back (recorded)", expected: 1, got: 0 });
        };
        for (cache, tokens) in seqs.iter_mut() {
            cache.len += tokens.len();
        }
        // Back in the reverse of the order taken, so the next step gets each role the same
        // buffer (`pool`), and the same bind groups.
        let was_penalized = penalized.is_some();
        if let Some(ids) = penalized {
            k.recycle(gpu, ids);
        }
        if let Some((sq, sk)) = spares {
            k.recycle(gpu, sk);
            k.recycle(gpu, sq);
        }
        if let Some(a) = windowed_angles {
            k.recycle(gpu, a);
        }
        for v in
            [normed16, normed_q, normed, scores, gate16, gate_q, attn16, attn_q, h16, hq, qkv, up, gate, o, attn, vv, kk, q, h, angles, x]
        {
            k.recycle(gpu, v);
        }
        Ok(Some(Outputs { logits: Some(logits), picked, penalized: was_penalized, state: state.map(|(_, v)| v), staged }))
    }
}

/// One forward pass being recorded: the decoder schedule's operations ([`DecoderOps`]) as
/// kernels on buffers indexed by [`Act`].
///
/// Fusion happens here, not in the schedule: an operation whose kernel can take the next
/// one in is recorded late ([`Deferred`]), and the next operation decides. Q/K/V products
/// wait for their biases, RoPE and attention (then: the products, written side by side into
/// `qkv`, one dispatch where the three are of one format or of a pair of formats one kernel
/// takes; one `rope_append`; attention,
/// which also writes the copies the output projection reads); a projection waits for the
/// residual add (then added by the product's epilogue); gate and up wait for SwiGLU (then
/// one product of the stacked pair with SwiGLU as its epilogue). Anything else first
/// records what waits as it was asked ([`GpuPass::flush`]), so the result never depends on
/// a pattern being recognized, only the number of dispatches does. The schedule stays
/// the CPU's, and so does the order of every float operation the checks compare.
struct GpuPass<'p> {
    model: &'p GpuTransformer,
    enc: &'p mut Recorder,
    bufs: [&'p GpuVector; 9],
    /// The 8-bit and f16 copies of the activations the matrices read, made as their
    /// kernels need ([`Kernels::prepare`]).
    copies: [(Act, &'p GpuVector, &'p GpuVector); 3],
    rows: usize,
    /// RoPE's angles for each row: of the global layers, and of the sliding-window layers
    /// (the same buffer where the model has none).
    angles: [&'p GpuVector; 2],
    /// Each sequence's cache, the rows it held before this pass, and its attention's shape.
    caches: Vec<(&'p GpuKvCache, usize, AttentionShape)>,
    scores: &'p GpuVector,
    /// The layer whose output the probe reads, and where the last row of it goes.
    state: Option<(usize, &'p GpuVector)>,
    /// Each row's queries, keys and values side by side (`n_head · head_dim + 2 · kv_width`).
    qkv: &'p GpuVector,
    /// For per-head norms (qwen3): a buffer the size of [`Act::Q`]'s and one of
    /// [`Act::K`]'s. A norm writes into the spare, which then takes the role's place (a
    /// dispatch may not read and write one buffer), and the old buffer becomes the spare.
    spares: [Option<&'p GpuVector>; 2],
    /// The block being recorded.
    layer: usize,
    /// What waits for the next operation.
    deferred: Deferred<'p>,
    /// The activations whose copies (8-bit, f16) hold their current values.
    copies_made: Vec<Act>,
}

/// An operation recorded late, so that the next one can join it ([`GpuPass`]).
enum Deferred<'p> {
    /// Nothing waits.
    Nothing,
    /// The current layer's query, key and value products, with the biases and RoPEs asked
    /// for since (Q, K, V; Q, K).
    Qkv { biased: [bool; 3], roped: [bool; 2] },
    /// One product of `matrix` by `input` into `out`.
    Projection { input: Act, out: Act, matrix: &'p GpuMatrix },
    /// The current layer's gate and up products.
    GateUp,
}

impl<'p> GpuPass<'p> {
    fn layer(&self) -> &'p GpuLayer {
        &self.model.layers[self.layer.min(self.model.layers.len() - 1)]
    }

    /// The current layer's RoPE angles.
    fn angles(&self) -> &'p GpuVector {
        self.angles[usize::from(self.model.cfg.is_windowed(self.layer))]
    }

    /// `shape` for layer `layer`'s attention (its window, if it has one).
    fn shape_of_layer(&self, shape: AttentionShape, layer: usize) -> AttentionShape {
        AttentionShape { window: self.model.cfg.window(layer).unwrap_or(0), ..shape }
    }

    /// `input` with its copies.
    fn operand(&self, input: Act) -> Result<Operand<'p>, Error> {
        let Some(&(_, q8, f16)) = self.copies.iter().find(|(act, _, _)| *act == input) else {
            return Err(Error::GpuShape { what: "a matrix input with no 8-bit and f16 copies", expected: 0, got: input.index() });
        };
        Ok(Operand { f32: self.bufs[input.index()], q8, f16 })
    }

    /// `input` with its copies, made now unless they are current.
    fn prepared(&mut self, input: Act, readers: &[crate::gguf::GgmlType]) -> Result<Operand<'p>, Error> {
        let x = self.operand(input)?;
        if !self.copies_made.contains(&input) {
            let m = self.model;
            m.kernels.prepare(&m.gpu, self.enc, x, readers)?;
        }
        Ok(x)
    }

    /// `input`'s values changed: its copies are stale unless the writer made them.
    fn rewritten(&mut self, act: Act, with_copies: bool) {
        self.copies_made.retain(|&a| a != act);
        if with_copies {
            self.copies_made.push(act);
        }
    }

    /// Products, each into its own buffer, as asked.
    fn record_products(&mut self, input: Act, jobs: &[(&GpuMatrix, Act)]) -> Result<(), Error> {
        let m = self.model;
        let types: Vec<_> = jobs.iter().map(|(w, _)| w.ty).collect();
        let x = self.prepared(input, &types)?;
        for &(w, out) in jobs {
            m.kernels.product(&m.gpu, self.enc, w, x, self.rows, self.bufs[out.index()])?;
            self.rewritten(out, false);
        }
        Ok(())
    }

    /// Record what waits, as it was asked.
    fn flush(&mut self) -> Result<(), Error> {
        let m = self.model;
        let l = self.layer();
        match std::mem::replace(&mut self.deferred, Deferred::Nothing) {
            Deferred::Nothing => Ok(()),
            Deferred::Qkv { biased, roped } => {
                self.record_products(Act::Normed, &[(&l.wq, Act::Q), (&l.wk, Act::K), (&l.wv, Act::V)])?;
                for (i, act) in [Act::Q, Act::K, Act::V].into_iter().enumerate() {
                    if let (true, Some(b)) = (biased[i], &l.biases[i]) {
                        m.kernels.add(&m.gpu, self.enc, self.bufs[act.index()], b)?;
                    }
                }
                for (i, act) in [Act::Q, Act::K].into_iter().enumerate() {
                    if roped[i] {
                        self.record_rope(act)?;
                    }
                }
                Ok(())
            }
            Deferred::Projection { input, out, matrix } => self.record_products(input, &[(matrix, out)]),
            Deferred::GateUp => self.record_products(Act::Normed, &[(&l.w_gate, Act::Gate), (&l.w_up, Act::Up)]),
        }
    }

    fn record_rope(&mut self, rows: Act) -> Result<(), Error> {
        let (m, cfg) = (self.model, &self.model.cfg);
        let heads = if rows == Act::K { cfg.n_head_kv } else { cfg.n_head };
        let shape = (self.rows, heads, cfg.head_dim, cfg.rope_dims / 2);
        m.kernels.rope(&m.gpu, self.enc, self.bufs[rows.index()], self.angles(), shape, cfg.arch.rope_neox())
    }

    /// The deferred Q/K/V products, their biases and RoPE, the cache append and attention
    /// for layer `layer`, fused: the products side by side into `qkv` (stacked ones of one
    /// format in one dispatch), then per sequence one `rope_append` and one attention that
    /// also writes the copies the output projection reads.
    fn attend_fused(&mut self, layer: usize, biased: [bool; 3]) -> Result<(), Error> {
        let (m, cfg) = (self.model, &self.model.cfg);
        let l = self.layer();
        let (qw, kvw) = (cfg.n_head * cfg.head_dim, cfg.kv_width());
        let width = qw + 2 * kvw;
        let x = self.prepared(Act::Normed, &[l.wq.ty, l.wk.ty, l.wv.ty])?;
        let store = |offset| Placement { width, offset, epilogue: Epilogue::Store };
        match (&l.qkv, &l.qk) {
            (Some(all), _) => m.kernels.product_to(&m.gpu, self.enc, all, x, self.rows, self.qkv, store(0))?,
            (None, Some(qk)) if m.kernels.pairs(qk, &l.wv) => {
                m.kernels.product_pair(&m.gpu, self.enc, (qk, &l.wv), x, self.rows, self.qkv, (width, 0))?;
            }
            (None, Some(qk)) => {
                m.kernels.product_to(&m.gpu, self.enc, qk, x, self.rows, self.qkv, store(0))?;
                m.kernels.product_to(&m.gpu, self.enc, &l.wv, x, self.rows, self.qkv, store(qw + kvw))?;
            }
            (None, None) => {
                for (w, offset) in [(&l.wq, 0), (&l.wk, qw), (&l.wv, qw + kvw)] {
                    m.kernels.product_to(&m.gpu, self.enc, w, x, self.rows, self.qkv, store(offset))?;
                }
            }
        }
        let bias = if biased.iter().any(|&b| b) { l.qkv_bias.as_ref() } else { None };
        let (q, attn) = (self.bufs[Act::Q.index()], self.operand(Act::Attention)?);
        let copies = m.kernels.copies_for(&[l.wo.ty]);
        let copies = (copies.any() && cfg.head_dim.is_multiple_of(32)).then_some(copies);
        for &(cache, _, shape) in &self.caches {
            let shape = self.shape_of_layer(shape, layer);
            let kv = (&cache.k[layer], &cache.v[layer]);
            m.kernels.rope_append(
                &m.gpu,
                self.enc,
                self.qkv,
                bias,
                self.angles(),
                q,
                kv,
                shape,
                (cfg.rope_dims / 2, cfg.arch.rope_neox()),
            )?;
            let out = (attn.f32, copies.map(|c| (attn, c)));
            m.kernels.attention_with_copies(&m.gpu, self.enc, q, kv, self.scores, out, shape)?;
        }
        self.rewritten(Act::Attention, copies.is_some());
        Ok(())
    }
}

impl DecoderOps for GpuPass<'_> {
    type Matrix = GpuMatrix;
    type Vector = GpuVector;
    type Error = Error;

    fn rms_norm(&mut self, x: Act, weight: &GpuVector, out: Act) -> Result<(), Error> {
        self.flush()?;
        let m = self.model;
        let (copies, y) = match (out, self.operand(out)) {
            (Act::Normed, Ok(y)) => (m.normed_copies, y),
            (_, _) => (Copies::NONE, Operand { f32: self.bufs[out.index()], q8: self.bufs[out.index()], f16: self.bufs[out.index()] }),
        };
        m.kernels.rms_norm_with_copies(&m.gpu, self.enc, (self.bufs[x.index()], 0), weight, m.cfg.rms_eps, y, copies)?;
        self.rewritten(out, copies.any());
        Ok(())
    }

    fn products(&mut self, input: Act, jobs: &[(&GpuMatrix, Act)]) -> Result<(), Error> {
        self.flush()?;
        let l = self.layer();
        let is = |job: &(&GpuMatrix, Act), w: &GpuMatrix, out: Act| std::ptr::eq(job.0, w) && job.1 == out;
        self.deferred = match (input, jobs) {
            (Act::Normed, [q, k, v]) if is(q, &l.wq, Act::Q) && is(k, &l.wk, Act::K) && is(v, &l.wv, Act::V) => {
                Deferred::Qkv { biased: [false; 3], roped: [false; 2] }
            }
            (Act::Normed, [g, u]) if is(g, &l.w_gate, Act::Gate) && is(u, &l.w_up, Act::Up) => Deferred::GateUp,
            (_, [(w, out)]) if std::ptr::eq(*w, &l.wo) => Deferred::Projection { input, out: *out, matrix: &l.wo },
            (_, [(w, out)]) if std::ptr::eq(*w, &l.w_down) => Deferred::Projection { input, out: *out, matrix: &l.w_down },
            _ => return self.record_products(input, jobs),
        };
        Ok(())
    }

    fn add_bias(&mut self, to: Act, bias: &GpuVector) -> Result<(), Error> {
        let l = self.layer();
        if let Deferred::Qkv { biased, roped } = &mut self.deferred {
            let i = [Act::Q, Act::K, Act::V].iter().position(|&a| a == to);
            // Once, and before any RoPE of its rows: the order rope_append keeps.
            let in_order = |i: usize| !biased[i] && roped.get(i).is_none_or(|r| !r);
            if let Some(i) = i.filter(|&i| in_order(i) && l.biases[i].as_ref().is_some_and(|b| std::ptr::eq(b, bias))) {
                biased[i] = true;
                return Ok(());
            }
        }
        self.flush()?;
        let m = self.model;
        m.kernels.add(&m.gpu, self.enc, self.bufs[to.index()], bias)?;
        self.rewritten(to, false);
        Ok(())
    }

    fn head_norm(&mut self, rows: Act, weight: &GpuVector) -> Result<(), Error> {
        self.flush()?;
        let i = [Act::Q, Act::K].iter().position(|&a| a == rows);
        let Some((i, spare)) = i.and_then(|i| Some((i, self.spares[i]?))) else {
            return Err(Error::GpuShape {
                what: "a head norm of rows other than Q or K, or of a model without them",
                expected: 0,
                got: rows.index(),
            });
        };
        let m = self.model;
        m.kernels.rms_norm(&m.gpu, self.enc, self.bufs[rows.index()], weight, m.cfg.rms_eps, spare)?;
        self.spares[i] = Some(std::mem::replace(&mut self.bufs[rows.index()], spare));
        self.rewritten(rows, false);
        Ok(())
    }

    fn rope(&mut self, rows: Act, _layer: usize) -> Result<(), Error> {
        if let Deferred::Qkv { roped, .. } = &mut self.deferred {
            if let Some(i) = [Act::Q, Act::K].iter().position(|&a| a == rows) {
                roped[i] = true;
                return Ok(());
            }
        }
        self.flush()?;
        self.record_rope(rows)
    }

    fn attend(&mut self, layer: usize) -> Result<(), Error> {
        if let Deferred::Qkv { biased, roped: [true, true] } = self.deferred {
            // rope_append adds every bias the layer has: fused only where all were asked for.
            let present = self.layer().biases.each_ref().map(Option::is_some);
            if layer == self.layer && biased == present {
                self.deferred = Deferred::Nothing;
                return self.attend_fused(layer, biased);
            }
        }
        self.flush()?;
        let (m, kvw) = (self.model, self.model.cfg.kv_width());
        let b = self.bufs;
        let (k, v, q, attn) = (b[Act::K.index()], b[Act::V.index()], b[Act::Q.index()], b[Act::Attention.index()]);
        for &(cache, n_past, shape) in &self.caches {
            let shape = self.shape_of_layer(shape, layer);
            m.kernels.kv_store_rows(&m.gpu, self.enc, (k, shape.first_row), &cache.k[layer], kvw, shape.tokens, n_past)?;
            m.kernels.kv_store_rows(&m.gpu, self.enc, (v, shape.first_row), &cache.v[layer], kvw, shape.tokens, n_past)?;
            m.kernels.attention(&m.gpu, self.enc, q, (&cache.k[layer], &cache.v[layer]), self.scores, attn, shape)?;
        }
        self.rewritten(Act::Attention, false);
        Ok(())
    }

    fn add(&mut self, to: Act, from: Act) -> Result<(), Error> {
        if let Deferred::Projection { input, out, matrix } = self.deferred {
            if out == from && to != input && to != out {
                self.deferred = Deferred::Nothing;
                let m = self.model;
                let x = self.prepared(input, &[matrix.ty])?;
                let y = self.bufs[to.index()];
                let at = Placement { width: matrix.rows, offset: 0, epilogue: Epilogue::Add };
                return m.kernels.product_to(&m.gpu, self.enc, matrix, x, self.rows, y, at);
            }
        }
        self.flush()?;
        let m = self.model;
        m.kernels.add(&m.gpu, self.enc, self.bufs[to.index()], self.bufs[from.index()])?;
        self.rewritten(to, false);
        Ok(())
    }

    fn glu(&mut self) -> Result<(), Error> {
        let m = self.model;
        let l = self.layer();
        if let Some(table) = &m.gelu_table {
            self.flush()?;
            m.kernels.geglu(&m.gpu, self.enc, self.bufs[Act::Gate.index()], self.bufs[Act::Up.index()], table)?;
        } else if let (Deferred::GateUp, Some(stacked)) = (&self.deferred, &l.gate_up) {
            self.deferred = Deferred::Nothing;
            let x = self.prepared(Act::Normed, &[stacked.ty])?;
            let at = Placement { width: l.w_gate.rows, offset: 0, epilogue: Epilogue::Glu };
            m.kernels.product_to(&m.gpu, self.enc, stacked, x, self.rows, self.bufs[Act::Gate.index()], at)?;
        } else {
            self.flush()?;
            m.kernels.swiglu(&m.gpu, self.enc, self.bufs[Act::Gate.index()], self.bufs[Act::Up.index()])?;
        }
        self.rewritten(Act::Gate, false);
        Ok(())
    }

    fn block_done(&mut self, layer: usize) -> Result<(), Error> {
        self.flush()?;
        self.layer = layer + 1;
        if let Some((_, out)) = self.state.filter(|(at, _)| *at == layer) {
            let (x, e) = (self.bufs[Act::Residual.index()], self.model.cfg.n_embd);
            let from = ((self.rows - 1) * e * 4) as u64;
            self.enc.encoder().copy_buffer_to_buffer(&x.buffer, from, &out.buffer, 0, (e * 4) as u64);
        }
        Ok(())
    }
}

/// What a forward pass picks where the logits are.
#[derive(Clone, Copy)]
enum Pick<'a> {
    /// Nothing: the logits come back.
    None,
    /// Each row's most likely token.
    Argmax,
    /// A draw from the last row.
    Draw(&'a DeviceDraw),
}

/// A submitted pass's buffers.
struct Outputs {
    logits: Option<GpuVector>,
    picked: Option<GpuVector>,
    /// Whether the repetition penalty was applied to `logits`.
    penalized: bool,
    /// The last row's residual after the layer asked for.
    state: Option<GpuVector>,
    /// The pick, or else the logits, copied for reading by the pass itself.
    staged: Staged,
}

impl GpuTransformer {
    /// Every id is one of the vocabulary's.
    fn check_ids(&self, tokens: &[u32]) -> Result<(), Error> {
        match tokens.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            Some(&bad) => Err(Error::UnknownTokenId { id: bad }),
            None => Ok(()),
        }
    }
}

/// The forward pass waits for the read-back: natively wgpu's poll has already run the
/// callback, in a browser the event loop does.
impl Backend for GpuTransformer {
    type Cache = GpuKvCache;

    fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    fn new_cache(&self) -> GpuKvCache {
        GpuTransformer::new_cache(self)
    }

    fn cache_len(&self, cache: &GpuKvCache) -> usize {
        cache.len
    }

    fn truncate(&self, cache: &mut GpuKvCache, len: usize) {
        cache.len = cache.len.min(len);
    }

    async fn forward(&self, cache: &mut GpuKvCache, tokens: &[u32], which: Logits) -> Result<Vec<f32>, Error> {
        self.check_ids(tokens)?;
        self.forward_async(cache, tokens, which).await
    }

    fn picks_on_device(&self) -> bool {
        true
    }

    async fn forward_state(&self, cache: &mut GpuKvCache, tokens: &[u32], layer: usize) -> Result<(Vec<f32>, Option<Vec<f32>>), Error> {
        self.check_ids(tokens)?;
        self.forward_state_async(cache, tokens, layer).await
    }

    async fn forward_batch(&self, seqs: &mut [(&mut GpuKvCache, &[u32])]) -> Result<Vec<f32>, Error> {
        for (_, tokens) in seqs.iter() {
            self.check_ids(tokens)?;
        }
        self.forward_batch_async(seqs).await
    }

    async fn forward_argmax(&self, cache: &mut GpuKvCache, tokens: &[u32]) -> Result<u32, Error> {
        self.check_ids(tokens)?;
        GpuTransformer::forward_greedy(self, cache, tokens).await?.ok_or(Error::EmptyPrompt)
    }

    fn draws_on_device(&self) -> bool {
        true
    }

    async fn forward_draw(&self, cache: &mut GpuKvCache, tokens: &[u32], draw: &DeviceDraw) -> Result<Drawn, Error> {
        self.check_ids(tokens)?;
        GpuTransformer::forward_draw(self, cache, tokens, draw).await?.ok_or(Error::EmptyPrompt)
    }
}
