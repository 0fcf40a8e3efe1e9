//! The decoder's blocks (llama, qwen2, qwen3 and gemma3), written once over the operations
//! a backend provides ([`DecoderOps`]).
//!
//! Per block: RMSNorm → Q/K/V projections (qwen2 adds biases; qwen3 and gemma3 RMS-norm
//! each head of Q and K) → RoPE → K/V appended to the cache and causal attention over it
//! → output projection (gemma3 RMS-norms it again) → residual → RMSNorm → gated
//! feed-forward (gate and up, SiLU or GELU of the gate times up, then down; gemma3 norms it
//! again) → residual. The architectures differ only in data (biases and norms present or
//! not, the gate's activation, RoPE's pairing and frequencies per layer, a layer's attention
//! window: [`crate::model::Arch`], [`crate::model::ModelConfig`]), so one schedule serves
//! them all.
//!
//! Why a schedule over operations: the CPU backend (llama.cpp's numerics, threads) and the
//! WebGPU backend (kernels recorded into one command buffer) used to write this sequence
//! each in its own file, and a change to one (a bias, a parity trace) had to be made twice.
//! Here a backend implements the operations on its own buffers, named by [`Act`]; how it
//! computes each (the CPU's half-precision roundings, the GPU's input conversions) stays
//! inside the operation. The token embeddings before the blocks and the head after them
//! differ by backend (which rows, picking on the device) and stay with each backend.

/// A decoder's activations, by role: the backend holds one buffer per role (rows × width),
/// the schedule names which each operation reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    /// The residual stream (`n_embd` per row).
    Residual,
    /// The residual after an RMSNorm (`n_embd`).
    Normed,
    /// Queries (`n_head · head_dim`: `n_embd`, or more where heads are wider).
    Q,
    /// Keys of the new rows (`kv_width`).
    K,
    /// Values of the new rows (`kv_width`).
    V,
    /// Attention's output (`n_head · head_dim`).
    Attention,
    /// A projection's output added back to the residual (`n_embd`).
    Out,
    /// The feed-forward's gate, then the gated product (`n_ff`).
    Gate,
    /// The feed-forward's up projection (`n_ff`).
    Up,
}

impl Act {
    /// Every role, in a fixed order (a backend may index its buffers by it).
    pub(crate) const ALL: [Act; 9] = [Act::Residual, Act::Normed, Act::Q, Act::K, Act::V, Act::Attention, Act::Out, Act::Gate, Act::Up];

    /// This role's place in [`Act::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One block's weights as a backend holds them: matrices `M`, vectors `V`.
pub(crate) struct BlockWeights<'a, M, V: ?Sized> {
    /// RMSNorm weight before attention.
    pub attn_norm: &'a V,
    /// Query, key and value projections.
    pub qkv: [&'a M; 3],
    /// Query, key and value biases (qwen2; llama has none).
    pub biases: [Option<&'a V>; 3],
    /// RMSNorm weights of each query head and each key head (qwen3), `head_dim` wide.
    pub head_norms: [Option<&'a V>; 2],
    /// Attention's output projection.
    pub wo: &'a M,
    /// RMSNorm weight before the feed-forward.
    pub ffn_norm: &'a V,
    /// SwiGLU's gate and up projections.
    pub gate_up: [&'a M; 2],
    /// SwiGLU's down projection.
    pub w_down: &'a M,
    /// RMSNorm weights of attention's output and of the feed-forward's, before their
    /// residual adds (gemma3).
    pub post_norms: [Option<&'a V>; 2],
}

/// The operations a decoder block needs, on one backend's buffers.
pub(crate) trait DecoderOps {
    /// A weight matrix as the backend holds it.
    type Matrix;
    /// A weight vector (norm scales, biases) as the backend holds it.
    type Vector: ?Sized;
    /// What an operation can fail with.
    type Error;

    /// `out = x / rms(x) · weight`, row by row.
    fn rms_norm(&mut self, x: Act, weight: &Self::Vector, out: Act) -> Result<(), Self::Error>;
    /// `out = input · Wᵀ` for each `(W, out)`, all reading the same input.
    fn products(&mut self, input: Act, jobs: &[(&Self::Matrix, Act)]) -> Result<(), Self::Error>;
    /// `to += bias` on every row.
    fn add_bias(&mut self, to: Act, bias: &Self::Vector) -> Result<(), Self::Error>;
    /// `rows = rows / rms(rows) · weight`, each `weight.len()` values (one head) apart:
    /// [`Act::Q`] or [`Act::K`] in place.
    fn head_norm(&mut self, rows: Act, weight: &Self::Vector) -> Result<(), Self::Error>;
    /// Rotary position embedding of [`Act::Q`] or [`Act::K`], each row at its position,
    /// with layer `layer`'s frequencies (a windowed layer's differ).
    fn rope(&mut self, rows: Act, layer: usize) -> Result<(), Self::Error>;
    /// Append [`Act::K`] and [`Act::V`] to layer `layer`'s cache, then causal attention of
    /// [`Act::Q`] over it (over the layer's window where it has one) into
    /// [`Act::Attention`].
    fn attend(&mut self, layer: usize) -> Result<(), Self::Error>;
    /// `to += from`.
    fn add(&mut self, to: Act, from: Act) -> Result<(), Self::Error>;
    /// [`Act::Gate`] `= act(Gate) · Up`, `act` the model's gate activation (SiLU, GELU).
    fn glu(&mut self) -> Result<(), Self::Error>;
    /// Layer `layer` is done ([`Act::Residual`] holds its output): a backend keeps the
    /// state a probe reads here.
    fn block_done(&mut self, layer: usize) -> Result<(), Self::Error>;
    /// A named stage's values (llama.cpp's tensor names), for parity dumps; most backends
    /// ignore it.
    fn trace(&mut self, _stage: &str, _layer: usize, _act: Act) {}
}

/// Run `blocks` in order over the rows the backend's [`Act::Residual`] holds.
pub(crate) fn run_blocks<'a, O>(
    ops: &mut O,
    blocks: impl IntoIterator<Item = BlockWeights<'a, O::Matrix, O::Vector>>,
) -> Result<(), O::Error>
where
    O: DecoderOps,
    O::Matrix: 'a,
    O::Vector: 'a,
{
    for (l, w) in blocks.into_iter().enumerate() {
        ops.rms_norm(Act::Residual, w.attn_norm, Act::Normed)?;
        ops.trace("attn_norm", l, Act::Normed);
        let [wq, wk, wv] = w.qkv;
        ops.products(Act::Normed, &[(wq, Act::Q), (wk, Act::K), (wv, Act::V)])?;
        for (act, bias) in [Act::Q, Act::K, Act::V].into_iter().zip(w.biases) {
            if let Some(b) = bias {
                ops.add_bias(act, b)?;
            }
        }
        for ((act, name), norm) in [(Act::Q, "Qcur_normed"), (Act::K, "Kcur_normed")].into_iter().zip(w.head_norms) {
            if let Some(n) = norm {
                ops.head_norm(act, n)?;
                ops.trace(name, l, act);
            }
        }
        ops.rope(Act::Q, l)?;
        ops.rope(Act::K, l)?;
        ops.attend(l)?;
        ops.trace("Qcur", l, Act::Q);
        ops.trace("Kcur", l, Act::K);
        ops.trace("Vcur", l, Act::V);
        ops.trace("kqv_out", l, Act::Attention);
        ops.products(Act::Attention, &[(w.wo, Act::Out)])?;
        ops.trace("attn_out", l, Act::Out);
        add_normed(ops, w.post_norms[0], ("attn_post_norm", l))?;

        ops.rms_norm(Act::Residual, w.ffn_norm, Act::Normed)?;
        let [w_gate, w_up] = w.gate_up;
        ops.products(Act::Normed, &[(w_gate, Act::Gate), (w_up, Act::Up)])?;
        ops.trace("ffn_norm", l, Act::Normed);
        ops.trace("ffn_gate", l, Act::Gate);
        ops.trace("ffn_up", l, Act::Up);
        ops.glu()?;
        ops.trace("ffn_glu", l, Act::Gate);
        ops.products(Act::Gate, &[(w.w_down, Act::Out)])?;
        add_normed(ops, w.post_norms[1], ("ffn_post_norm", l))?;
        ops.trace("l_out", l, Act::Residual);
        ops.block_done(l)?;
    }
    Ok(())
}

/// `Residual += Out`, or `Residual += rms_norm(Out)` where the block norms that output
/// again (the norm goes to [`Act::Normed`], free at both places the schedule adds).
fn add_normed<O: DecoderOps>(ops: &mut O, post_norm: Option<&O::Vector>, (name, l): (&str, usize)) -> Result<(), O::Error> {
    match post_norm {
        Some(n) => {
            ops.rms_norm(Act::Out, n, Act::Normed)?;
            ops.trace(name, l, Act::Normed);
            ops.add(Act::Residual, Act::Normed)
        }
        None => ops.add(Act::Residual, Act::Out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the operations as text: the schedule's order is what both backends run.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl DecoderOps for Log {
        type Matrix = &'static str;
        type Vector = str;
        type Error = ();
        fn rms_norm(&mut self, x: Act, weight: &str, out: Act) -> Result<(), ()> {
            self.0.push(format!("norm {x:?} {weight} {out:?}"));
            Ok(())
        }
        fn products(&mut self, input: Act, jobs: &[(&&'static str, Act)]) -> Result<(), ()> {
            let jobs: Vec<String> = jobs.iter().map(|(w, out)| format!("{w}→{out:?}")).collect();
            self.0.push(format!("products {input:?} {}", jobs.join(" ")));
            Ok(())
        }
        fn add_bias(&mut self, to: Act, bias: &str) -> Result<(), ()> {
            self.0.push(format!("bias {to:?} {bias}"));
            Ok(())
        }
        fn head_norm(&mut self, rows: Act, weight: &str) -> Result<(), ()> {
            self.0.push(format!("head norm {rows:?} {weight}"));
            Ok(())
        }
        fn rope(&mut self, rows: Act, _layer: usize) -> Result<(), ()> {
            self.0.push(format!("rope {rows:?}"));
            Ok(())
        }
        fn attend(&mut self, layer: usize) -> Result<(), ()> {
            self.0.push(format!("attend {layer}"));
            Ok(())
        }
        fn add(&mut self, to: Act, from: Act) -> Result<(), ()> {
            self.0.push(format!("add {to:?} {from:?}"));
            Ok(())
        }
        fn glu(&mut self) -> Result<(), ()> {
            self.0.push("glu".into());
            Ok(())
        }
        fn block_done(&mut self, layer: usize) -> Result<(), ()> {
            self.0.push(format!("done {layer}"));
            Ok(())
        }
    }

    /// A block's weights named by their roles, with the optional ones given.
    type Named = Option<&'static str>;
    fn block(biases: [Named; 3], head_norms: [Named; 2], post_norms: [Named; 2]) -> BlockWeights<'static, &'static str, str> {
        BlockWeights {
            attn_norm: "an",
            qkv: [&"wq", &"wk", &"wv"],
            biases,
            head_norms,
            wo: &"wo",
            ffn_norm: "fn",
            gate_up: [&"wg", &"wu"],
            w_down: &"wd",
            post_norms,
        }
    }

    #[test]
    fn a_qwen2_block_adds_its_biases_and_a_llama_block_has_none() {
        let block = |biases: [Named; 3]| block(biases, [None; 2], [None; 2]);
        let mut qwen2 = Log::default();
        run_blocks(&mut qwen2, [block([Some("bq"), Some("bk"), Some("bv")])]).unwrap();
        assert_eq!(
            qwen2.0,
            [
                "norm Residual an Normed",
                "products Normed wq→Q wk→K wv→V",
                "bias Q bq",
                "bias K bk",
                "bias V bv",
                "rope Q",
                "rope K",
                "attend 0",
                "products Attention wo→Out",
                "add Residual Out",
                "norm Residual fn Normed",
                "products Normed wg→Gate wu→Up",
                "glu",
                "products Gate wd→Out",
                "add Residual Out",
                "done 0",
            ]
        );
        let mut llama = Log::default();
        run_blocks(&mut llama, [block([None; 3]), block([None; 3])]).unwrap();
        assert!(!llama.0.iter().any(|op| op.starts_with("bias")));
        assert_eq!(llama.0.iter().filter(|op| op.starts_with("done")).count(), 2);
        assert!(!llama.0.iter().chain(&qwen2.0).any(|op| op.starts_with("head norm")));
    }

    #[test]
    fn a_qwen3_block_norms_each_head_of_q_and_k_before_rope() {
        let block = block([None; 3], [Some("qn"), Some("kn")], [None; 2]);
        let mut qwen3 = Log::default();
        run_blocks(&mut qwen3, [block]).unwrap();
        assert_eq!(
            qwen3.0[..6],
            ["norm Residual an Normed", "products Normed wq→Q wk→K wv→V", "head norm Q qn", "head norm K kn", "rope Q", "rope K"]
        );
    }

    #[test]
    fn a_gemma3_block_norms_each_output_again_before_adding_it() {
        let block = block([None; 3], [Some("qn"), Some("kn")], [Some("apn"), Some("fpn")]);
        let mut gemma3 = Log::default();
        run_blocks(&mut gemma3, [block]).unwrap();
        assert_eq!(
            gemma3.0[7..],
            [
                "products Attention wo→Out",
                "norm Out apn Normed",
                "add Residual Normed",
                "norm Residual fn Normed",
                "products Normed wg→Gate wu→Up",
                "glu",
                "products Gate wd→Out",
                "norm Out fpn Normed",
                "add Residual Normed",
                "done 0",
            ]
        );
    }
}
