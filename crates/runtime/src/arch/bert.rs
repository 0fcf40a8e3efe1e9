//! The BERT-family encoder's layers (BERT, and XLM-R, which differs only in its position
//! offset and vocabulary), written once over the operations a backend provides
//! ([`EncoderOps`]).
//!
//! After the embeddings (word + position + token type 0, looked up by each backend): a
//! LayerNorm, then per layer `LN(x + Wo·attn(x) + bo)` and `LN(x + W2·gelu(W1·x + b1) +
//! b2)`, post-norm as Hugging Face's `BertModel`. Sequences are packed end to end, so the
//! linear layers run once over every token and attention runs per sequence. Pooling stays
//! with the caller.

use crate::embed::encoder::LayerOf;

/// An encoder's activations, by role (each `tokens ×` its width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncAct {
    /// The hidden states: the embeddings, then each layer's output (`hidden`).
    Hidden,
    /// A layer's state after attention (`hidden`).
    Middle,
    /// Queries, keys and values stacked (`3 · hidden`).
    Qkv,
    /// Attention's output (`hidden`).
    Context,
    /// The feed-forward's inner activations (`intermediate`).
    Inner,
}

impl EncAct {
    /// This role's place in a backend's array of buffers (in declaration order).
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The operations an encoder layer needs, on one backend's buffers.
pub(crate) trait EncoderOps {
    /// A linear layer (weights and bias) as the backend holds it.
    type Linear;
    /// A LayerNorm's scale and shift as the backend holds them.
    type Norm;
    /// What an operation can fail with.
    type Error;

    /// `x = LN(x)`, row by row.
    fn norm(&mut self, x: EncAct, norm: &Self::Norm) -> Result<(), Self::Error>;
    /// `out = W·x + b` for each row, through GELU when `gelu`.
    fn linear(&mut self, x: EncAct, w: &Self::Linear, out: EncAct, gelu: bool) -> Result<(), Self::Error>;
    /// Each sequence's self-attention over its own tokens: [`EncAct::Qkv`] into
    /// [`EncAct::Context`].
    fn attend(&mut self) -> Result<(), Self::Error>;
    /// `to = LN(to + residual)`.
    fn add_norm(&mut self, to: EncAct, residual: EncAct, norm: &Self::Norm) -> Result<(), Self::Error>;
}

/// The embedding LayerNorm, then `layers` in order, over the embeddings the backend's
/// [`EncAct::Hidden`] holds; the output is left there.
pub(crate) fn run_layers<'a, O>(
    ops: &mut O,
    embed_norm: &O::Norm,
    layers: impl IntoIterator<Item = &'a LayerOf<O::Linear, O::Norm>>,
) -> Result<(), O::Error>
where
    O: EncoderOps,
    O::Linear: 'a,
    O::Norm: 'a,
{
    ops.norm(EncAct::Hidden, embed_norm)?;
    for layer in layers {
        ops.linear(EncAct::Hidden, &layer.qkv, EncAct::Qkv, false)?;
        ops.attend()?;
        ops.linear(EncAct::Context, &layer.attn_out, EncAct::Middle, false)?;
        ops.add_norm(EncAct::Middle, EncAct::Hidden, &layer.attn_norm)?;
        ops.linear(EncAct::Middle, &layer.up, EncAct::Inner, true)?;
        ops.linear(EncAct::Inner, &layer.down, EncAct::Hidden, false)?;
        ops.add_norm(EncAct::Hidden, EncAct::Middle, &layer.out_norm)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the operations as text.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl EncoderOps for Log {
        type Linear = &'static str;
        type Norm = &'static str;
        type Error = ();
        fn norm(&mut self, x: EncAct, norm: &&'static str) -> Result<(), ()> {
            self.0.push(format!("norm {x:?} {norm}"));
            Ok(())
        }
        fn linear(&mut self, x: EncAct, w: &&'static str, out: EncAct, gelu: bool) -> Result<(), ()> {
            self.0.push(format!("linear {x:?} {w} {out:?}{}", if gelu { " gelu" } else { "" }));
            Ok(())
        }
        fn attend(&mut self) -> Result<(), ()> {
            self.0.push("attend".into());
            Ok(())
        }
        fn add_norm(&mut self, to: EncAct, residual: EncAct, norm: &&'static str) -> Result<(), ()> {
            self.0.push(format!("add_norm {to:?} {residual:?} {norm}"));
            Ok(())
        }
    }

    #[test]
    fn a_layer_is_post_norm_attention_then_a_gelu_feed_forward() {
        let layer = LayerOf { qkv: "qkv", attn_out: "o", attn_norm: "n1", up: "up", down: "down", out_norm: "n2" };
        let mut log = Log::default();
        run_layers(&mut log, &"embed", [&layer]).unwrap();
        assert_eq!(
            log.0,
            [
                "norm Hidden embed",
                "linear Hidden qkv Qkv",
                "attend",
                "linear Context o Middle",
                "add_norm Middle Hidden n1",
                "linear Middle up Inner gelu",
                "linear Inner down Hidden",
                "add_norm Hidden Middle n2",
            ]
        );
    }
}
