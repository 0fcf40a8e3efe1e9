//! The decoder forward pass on the CPU (llama, qwen2, qwen3, gemma3): the blocks are the shared
//! schedule (`arch::decoder`) over this backend's operations (`CpuPass`: Q/K/V
//! in one threaded pass over the three matrices, gate and up in another, causal attention
//! with grouped KV heads); then the final norm and the LM head for the positions asked for.
//!
//! Numerics follow llama.cpp's CPU path so that greedy outputs agree token for token: the
//! K/V cache, the query in `Q·K`, and the attention weights in `P·V` are rounded to half
//! precision (llama.cpp keeps K/V in f16 and converts the other operand to f16); RMSNorm
//! sums in f64; RoPE angles advance by repeated multiplication in f32.

// Unsafe code: attention tasks write disjoint (token, head) slices of the output through a
// shared raw pointer (`SyncPtr`).
#![allow(unsafe_code)]

use super::attention::{attend, rope, Head, RopeFrequencies, Scratch};
use super::dot::Batch;
use super::ggml_order::{dot_f16, Order};
use super::mathfn::{geglu, swiglu};
use super::matmul::QMatrix;
use super::matmul::{matmul_as, matmul_many_as, Activations};
use super::threads::Threads;
use crate::arch::decoder::{run_blocks, Act, DecoderOps};
use crate::lm::Logits;
use crate::model::{embed_tokens, Block, Gate, ModelConfig, Weights};

/// Keys and values of the tokens seen so far, per layer; cheap to fork for prefix reuse.
#[derive(Clone, Debug)]
pub struct KvCache {
    /// Per layer: `len × kv_width` keys (half-rounded).
    k: Vec<Vec<f32>>,
    /// Per layer: `len × kv_width` values (half-rounded).
    v: Vec<Vec<f32>>,
    len: usize,
    kv_width: usize,
}

impl KvCache {
    /// An empty cache for `cfg`.
    pub fn new(cfg: &ModelConfig) -> Self {
        KvCache { k: vec![Vec::new(); cfg.n_layer], v: vec![Vec::new(); cfg.n_layer], len: 0, kv_width: cfg.kv_width() }
    }

    /// Tokens cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forget everything after the first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        let len = len.min(self.len);
        for l in 0..self.k.len() {
            self.k[l].truncate(len * self.kv_width);
            self.v[l].truncate(len * self.kv_width);
        }
        self.len = len;
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(|x| x.capacity() * 4).sum()
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// A decoder on the CPU.
#[derive(Debug)]
pub struct CpuTransformer {
    /// Hyper-parameters.
    pub cfg: ModelConfig,
    /// Tensors.
    pub weights: Weights,
    threads: Threads,
    /// RoPE's frequencies (base, and Llama 3's divisors where the file has them): of the
    /// global layers, and of the sliding-window layers.
    ropes: [RopeFrequencies; 2],
}

#[derive(Clone, Copy)]
struct SyncPtr(*mut f32);
// SAFETY: tasks write disjoint slices of a buffer that outlives them (the attention's
// (token, head) slices, SwiGLU's ranges of values).
unsafe impl Send for SyncPtr {}
// SAFETY: as for `Send`: the tasks sharing it write disjoint slices, never the same value.
unsafe impl Sync for SyncPtr {}

/// Values of SwiGLU per thread task: about two tokens of a 1.5B's FFN (decoding, one
/// token, runs on the calling thread).
const SWIGLU_TASK: usize = 16_384;

impl SyncPtr {
    fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

impl CpuTransformer {
    /// Wrap loaded weights; `threads` 0 means one per core.
    pub fn new(cfg: ModelConfig, weights: Weights, threads: usize) -> Self {
        let ropes = RopeFrequencies::of_model(&cfg, weights.rope_freqs.clone());
        CpuTransformer { cfg, weights, threads: Threads::new(threads), ropes }
    }

    /// Worker threads in use.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Run `tokens` (positions `cache.len()..`) through the model, append their K/V to
    /// `cache`, and return logits (`vocab` per position asked for).
    pub fn forward(&self, cache: &mut KvCache, tokens: &[u32], which: Logits) -> Vec<f32> {
        let t_n = tokens.len();
        let first = match which {
            Logits::Last => t_n.saturating_sub(1),
            Logits::All => 0,
        };
        self.run(&mut [(cache, tokens)], Batch::of(t_n), Order::for_tokens(t_n), first, None)
    }

    /// [`forward`](Self::forward) of `tokens` that also returns the residual stream of the
    /// last token after each layer in `layers` (0-based; one `n_embd` row each, in the
    /// order asked): what a probe of the model's hidden state reads.
    pub fn forward_states(&self, cache: &mut KvCache, tokens: &[u32], layers: &[usize]) -> (Vec<f32>, Vec<Vec<f32>>) {
        let t_n = tokens.len();
        let mut states = vec![Vec::new(); layers.len()];
        let logits =
            self.run(&mut [(cache, tokens)], Batch::of(t_n), Order::for_tokens(t_n), t_n.saturating_sub(1), Some((layers, &mut states)));
        (logits, states)
    }

    /// One step of several independent sequences at once (multi-path decoding, and the
    /// verification of drafted tokens): each `(cache, tokens)` appends its tokens to its own
    /// cache. Every matmul runs once over all the rows, so the weights are read once per
    /// step rather than once per sequence; attention runs per sequence over its own cache.
    /// Returns logits for every row, sequence after sequence (`vocab` each).
    ///
    /// Every row is summed in the one-token order ([`Batch::Decode`], ggml's one-query
    /// attention order), so a sequence's logits are bit-identical to feeding its tokens
    /// one at a time through [`forward`](Self::forward), whatever it is batched with.
    pub fn forward_batch(&self, seqs: &mut [(&mut KvCache, &[u32])]) -> Vec<f32> {
        self.run(seqs, Batch::Decode, Order::VecDot, 0, None)
    }

    /// The forward pass over the rows of `seqs` (sequence after sequence), matmuls in batch
    /// class `batch`, attention in `order`; logits for rows `logits_from..`. With `states`
    /// `(layers, out)`, `out[i]` gets the last row's residual after layer `layers[i]`.
    fn run(
        &self,
        seqs: &mut [(&mut KvCache, &[u32])],
        batch: Batch,
        order: Order,
        logits_from: usize,
        states: Option<(&[usize], &mut Vec<Vec<f32>>)>,
    ) -> Vec<f32> {
        let cfg = &self.cfg;
        let e = cfg.n_embd;
        // Each row's sequence and position.
        let mut row_seq = Vec::new();
        let mut pos = Vec::new();
        for (s, (cache, tokens)) in seqs.iter().enumerate() {
            row_seq.extend(std::iter::repeat_n(s, tokens.len()));
            pos.extend(cache.len..cache.len + tokens.len());
        }
        let t_n = pos.len();
        if t_n == 0 {
            return Vec::new();
        }
        let x = embed_tokens(cfg, &self.weights.token_embd, seqs.iter().flat_map(|(_, tokens)| tokens.iter().copied()));
        let width = |act: Act| match act {
            Act::K | Act::V => cfg.kv_width(),
            Act::Q | Act::Attention => cfg.q_width(),
            Act::Gate | Act::Up => cfg.n_ff,
            Act::Residual | Act::Normed | Act::Out => e,
        };
        let mut bufs = Act::ALL.map(|act| vec![0f32; t_n * width(act)]);
        bufs[Act::Residual.index()] = x;
        let mut pass = CpuPass { model: self, seqs, row_seq, pos, batch, order, acts: Activations::default(), bufs, states };
        let Ok(()) = run_blocks(&mut pass, self.weights.layers.iter().map(Block::schedule_weights));
        let CpuPass { seqs, mut acts, bufs, .. } = pass;
        for (cache, tokens) in seqs.iter_mut() {
            cache.len += tokens.len();
        }
        let x = &bufs[Act::Residual.index()];
        let first = logits_from.min(t_n - 1);
        let rows = &x[first * e..];
        let mut normed = vec![0f32; rows.len()];
        rms_norm(rows, &self.weights.output_norm, cfg.rms_eps, &mut normed);
        acts.set(&normed, e);
        let mut logits = vec![0f32; (t_n - first) * cfg.vocab];
        // The head's batch is the rows it runs on (one, for generation).
        let head_batch = if batch == Batch::Decode { batch } else { Batch::of(t_n - first) };
        matmul_as(&self.threads, &mut acts, self.weights.lm_head(), &mut logits, head_batch);
        logits
    }

    /// Causal grouped-query attention of the `t_n` new query rows `q` (row `t` of sequence
    /// `row_seq[t]` at position `pos[t]`) over that sequence's cached keys/values
    /// `kv[row_seq[t]]`, positions `0..=pos[t]`; writes `t_n × q_width` to `out`. Sums follow
    /// ggml's `order` ([`ggml_order`]) so half-precision roundings fall as llama.cpp's do.
    fn attention(
        &self,
        layer: usize,
        q: &[f32],
        kv: &[(&[f32], &[f32])],
        (row_seq, pos): (&[usize], &[usize]),
        order: Order,
        out: &mut [f32],
    ) {
        let cfg = &self.cfg;
        let (hd, nh, kvw) = (cfg.head_dim, cfg.n_head, cfg.kv_width());
        let group = nh / cfg.n_head_kv;
        // Scores scaled, or (gemma) queries scaled before their rounding to half precision.
        let (q_scale, scale) = if cfg.arch.prescales_queries() { (cfg.attention_scale(), 1.0) } else { (1.0, cfg.attention_scale()) };
        let window = cfg.window(layer);
        let ptr = SyncPtr(out.as_mut_ptr());
        let e = cfg.q_width();
        let t_n = pos.len();
        let dump_kq = (traced().is_some() && tracing(&format!("kq-{layer}"))).then(|| std::sync::Mutex::new(vec![0f32; 256 * t_n * nh]));
        let dump =
            (traced().is_some() && tracing(&format!("kq_soft_max-{layer}"))).then(|| std::sync::Mutex::new(vec![0f32; 256 * t_n * nh]));
        // A task takes all the query heads of a key/value head and reads each cached row
        // once for them all (`attention::attend`) whenever that gives every thread a task:
        // decoding one token of Qwen2.5-1.5B (two key/value heads) on two threads, too,
        // where a task per head read the cache six times over and, a few thousand tokens
        // into a document, took more of each step than the weights. With fewer tasks than
        // threads, a task per head, so that the threads still share the work; traced runs
        // too, which record each head's scores. Either way every head's sums are the same.
        let grouped = t_n * cfg.n_head_kv >= self.threads.count() && dump_kq.is_none() && dump.is_none();
        let per_task = if grouped { group } else { 1 };
        let tasks_per_token = nh / per_task;
        self.threads.for_each(t_n * tasks_per_token, |task| {
            let (t, hh) = (task / tasks_per_token, task % tasks_per_token * per_task);
            let kvh = hh / group;
            let (kc, vc) = kv[row_seq[t]];
            let mut qh: Vec<f32> = q[t * e + hh * hd..t * e + (hh + per_task) * hd].to_vec();
            if q_scale != 1.0 {
                qh.iter_mut().for_each(|v| *v *= q_scale);
            }
            super::f16_round_all(&mut qh);
            let n_ctx = pos[t] + 1;
            let first = window.map_or(0, |w| n_ctx.saturating_sub(w));
            let head = Head { q: &qh, head_dim: hd, keys: kc, values: vc, stride: kvw, offset: kvh * hd, n_ctx, first, order, scale };
            // SAFETY: this task alone writes out[t, heads hh..hh + per_task], the
            // `per_task · hd` values at t · e + hh · hd: inside `out` (t_n × q_width values,
            // allocated so by `run`, and `e` is q_width = n_head · head_dim) because t < t_n
            // and hh + per_task ≤ n_head, and tasks cover disjoint heads (`per_task`
            // divides the group, which divides `n_head`).
            let dst = unsafe { std::slice::from_raw_parts_mut(ptr.at(t * e + hh * hd), per_task * hd) };
            SCRATCH.with_borrow_mut(|scratch| {
                let inv = attend(&head, scratch, dst);
                for (buf, raw) in [(&dump_kq, true), (&dump, false)] {
                    if let Some(buf) = buf {
                        let mut b = buf.lock().unwrap_or_else(|e| e.into_inner());
                        for (p, &s) in scratch.probs.iter().enumerate().take(256) {
                            // Raw scores are recomputed: the scratch holds probabilities.
                            let k = &kc[p * kvw + kvh * hd..p * kvw + (kvh + 1) * hd];
                            b[(t + t_n * hh) * 256 + p] = if raw { dot_f16(&qh, k, order) } else { s * inv };
                        }
                    }
                }
            });
        });
        if let Some(buf) = dump_kq {
            trace("kq", layer, &buf.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
        if let Some(buf) = dump {
            trace("kq_soft_max", layer, &buf.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
    }
}

/// One forward pass's state on the CPU: the decoder schedule's operations
/// ([`DecoderOps`]) on buffers indexed by [`Act`], with llama.cpp's numerics inside each.
struct CpuPass<'p, 'c, 't> {
    model: &'p CpuTransformer,
    seqs: &'p mut [(&'c mut KvCache, &'t [u32])],
    /// Each row's sequence and position.
    row_seq: Vec<usize>,
    pos: Vec<usize>,
    batch: Batch,
    order: Order,
    acts: Activations,
    bufs: [Vec<f32>; 9],
    states: Option<(&'p [usize], &'p mut Vec<Vec<f32>>)>,
}

impl CpuPass<'_, '_, '_> {
    /// Take a buffer out (to write it while others are read); [`CpuPass::put`] returns it.
    fn take(&mut self, act: Act) -> Vec<f32> {
        std::mem::take(&mut self.bufs[act.index()])
    }

    fn put(&mut self, act: Act, buf: Vec<f32>) {
        self.bufs[act.index()] = buf;
    }

    fn rows(&self) -> usize {
        self.pos.len()
    }
}

impl DecoderOps for CpuPass<'_, '_, '_> {
    type Matrix = QMatrix;
    type Vector = [f32];
    type Error = std::convert::Infallible;

    fn rms_norm(&mut self, x: Act, weight: &[f32], out: Act) -> Result<(), Self::Error> {
        let mut o = self.take(out);
        rms_norm(&self.bufs[x.index()], weight, self.model.cfg.rms_eps, &mut o);
        self.put(out, o);
        Ok(())
    }

    fn products(&mut self, input: Act, jobs: &[(&QMatrix, Act)]) -> Result<(), Self::Error> {
        let x = &self.bufs[input.index()];
        self.acts.set(x, x.len() / self.rows());
        let mut outs: Vec<Vec<f32>> = jobs.iter().map(|&(_, out)| self.take(out)).collect();
        let mut list: Vec<(&QMatrix, &mut [f32])> = jobs.iter().zip(outs.iter_mut()).map(|(&(w, _), o)| (w, &mut o[..])).collect();
        matmul_many_as(&self.model.threads, &mut self.acts, &mut list, self.batch);
        for (&(_, out), o) in jobs.iter().zip(outs) {
            self.put(out, o);
        }
        Ok(())
    }

    fn add_bias(&mut self, to: Act, bias: &[f32]) -> Result<(), Self::Error> {
        for r in self.bufs[to.index()].chunks_exact_mut(bias.len()) {
            r.iter_mut().zip(bias).for_each(|(a, b)| *a += b);
        }
        Ok(())
    }

    fn head_norm(&mut self, rows: Act, weight: &[f32]) -> Result<(), Self::Error> {
        let x = self.take(rows);
        let mut normed = vec![0f32; x.len()];
        rms_norm(&x, weight, self.model.cfg.rms_eps, &mut normed);
        self.put(rows, normed);
        Ok(())
    }

    fn rope(&mut self, rows: Act, layer: usize) -> Result<(), Self::Error> {
        let cfg = &self.model.cfg;
        let freqs = &self.model.ropes[usize::from(cfg.is_windowed(layer))];
        let buf = &mut self.bufs[rows.index()];
        let w = buf.len() / self.pos.len();
        for (t, &p) in self.pos.iter().enumerate() {
            rope(&mut buf[t * w..(t + 1) * w], cfg.head_dim, cfg.rope_dims, cfg.arch.rope_neox(), p, freqs);
        }
        Ok(())
    }

    fn attend(&mut self, layer: usize) -> Result<(), Self::Error> {
        let kvw = self.model.cfg.kv_width();
        let (k, v) = (&self.bufs[Act::K.index()], &self.bufs[Act::V.index()]);
        let mut r0 = 0;
        for (cache, tokens) in self.seqs.iter_mut() {
            let rows = r0 * kvw..(r0 + tokens.len()) * kvw;
            for (c, new) in [(&mut cache.k[layer], &k[rows.clone()]), (&mut cache.v[layer], &v[rows.clone()])] {
                let start = c.len();
                c.extend_from_slice(new);
                super::f16_round_all(&mut c[start..]);
            }
            r0 += tokens.len();
        }
        let mut attn = self.take(Act::Attention);
        let kv: Vec<(&[f32], &[f32])> = self.seqs.iter().map(|(c, _)| (&c.k[layer][..], &c.v[layer][..])).collect();
        self.model.attention(layer, &self.bufs[Act::Q.index()], &kv, (&self.row_seq, &self.pos), self.order, &mut attn);
        self.put(Act::Attention, attn);
        Ok(())
    }

    fn add(&mut self, to: Act, from: Act) -> Result<(), Self::Error> {
        let mut t = self.take(to);
        t.iter_mut().zip(&self.bufs[from.index()]).for_each(|(a, b)| *a += b);
        self.put(to, t);
        Ok(())
    }

    fn glu(&mut self) -> Result<(), Self::Error> {
        let mut gate = self.take(Act::Gate);
        let up = &self.bufs[Act::Up.index()];
        let n = gate.len().min(up.len());
        let gated: fn(&mut [f32], &[f32]) = match self.model.cfg.arch.gate() {
            Gate::Silu => swiglu,
            Gate::GeluTanh => geglu,
        };
        // A prompt's SwiGLU (tokens × the FFN's width, each value an `exp`) is split over
        // the threads: run on one, it was about a twentieth of a two-thread wasm prefill.
        // Element by element, so the split changes no value.
        let tasks = n.div_ceil(SWIGLU_TASK);
        if tasks <= 1 {
            gated(&mut gate[..n], &up[..n]);
        } else {
            let ptr = SyncPtr(gate.as_mut_ptr());
            self.model.threads.for_each(tasks, |task| {
                let (start, end) = (task * SWIGLU_TASK, ((task + 1) * SWIGLU_TASK).min(n));
                // SAFETY: task `task` alone writes gate[start..end], inside `gate` (end ≤ n
                // ≤ gate.len()), which outlives `for_each`.
                let g = unsafe { std::slice::from_raw_parts_mut(ptr.at(start), end - start) };
                gated(g, &up[start..end]);
            });
        }
        self.put(Act::Gate, gate);
        Ok(())
    }

    fn block_done(&mut self, layer: usize) -> Result<(), Self::Error> {
        if let Some((layers, out)) = self.states.as_mut() {
            let (x, e) = (&self.bufs[Act::Residual.index()], self.model.cfg.n_embd);
            for (i, _) in layers.iter().enumerate().filter(|(_, &want)| want == layer) {
                out[i] = x[x.len() - e..].to_vec();
            }
        }
        Ok(())
    }

    fn trace(&mut self, stage: &str, layer: usize, act: Act) {
        trace(stage, layer, &self.bufs[act.index()]);
    }
}

/// Parity debugging: with `DOCMEM_TRACE=name-layer` (llama.cpp's tensor names, e.g.
/// `kqv_out-11`), print that tensor's first and last values, or with `DOCMEM_TRACE_FILE`
/// write all of them, to set beside `scripts/llamacpp/golden_dump.cpp` run with the same
/// variables. `kq` and `kq_soft_max` are laid out as ggml's (256 positions per row, one
/// row per token and head). Costs one cached comparison when unset.
fn traced() -> Option<&'static str> {
    static WANT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    WANT.get_or_init(|| std::env::var("DOCMEM_TRACE").ok()).as_deref()
}

fn tracing(name: &str) -> bool {
    traced() == Some(name)
}

fn trace(name: &str, layer: usize, v: &[f32]) {
    if let Some(want) = traced() {
        if *want == format!("{name}-{layer}") && v.len() >= 12 {
            if let Ok(path) = std::env::var("DOCMEM_TRACE_FILE") {
                let text: String = v.iter().map(|x| format!("{x}\n")).collect();
                let _ = std::fs::write(path, text);
                return;
            }
            eprintln!("{want}: {:?} ... last: {:?}", &v[..12], &v[v.len() - 6..]);
        }
    }
}

/// `out = x / rms(x) · w`, row by row (`w.len()` wide), summing squares in f64.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    for (xr, or) in x.chunks_exact(w.len()).zip(out.chunks_exact_mut(w.len())) {
        let ss: f64 = xr.iter().map(|&a| f64::from(a * a)).sum();
        let mean = (ss / w.len() as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        or.iter_mut().zip(xr).zip(w).for_each(|((o, &a), &g)| *o = a * scale * g);
    }
}
