//! Synthetic models: the exact shapes and block formats of real models, with seeded random
//! values, built in memory as GGUF files.
//!
//! Why: speed depends on shapes and formats, not on what the weights say, and a 1.1 GB
//! model file cannot travel to a lent benchmark machine while a generator of a few
//! kilobytes can. A synthetic model is a GGUF file like any other ([`decoder_gguf`],
//! [`embedder_gguf`]), so it loads through the same loader, the same buffer layout and the
//! same kernels as a model read from disk, and llama.cpp loads the same bytes written to a
//! file (`docmem synth-gguf`), so a peer is timed on identical weights.
//!
//! What is synthetic:
//! - the values: every quantized block is random bytes with its scales overwritten by
//!   finite, positive f16 values sized so each matrix's weights have a standard deviation
//!   of about 0.02 (the usual initialisation), so activations stay in range over any number
//!   of layers, and the output head's about 3 / sqrt(width), so the logits spread as a
//!   trained model's do (sampling's cost depends on it); norms are about 1, biases about
//!   0.02; nothing is NaN or infinite;
//! - the vocabulary: the 256 byte-level BPE characters (so any text tokenizes, in our
//!   tokenizer and in llama.cpp's), then filler pieces `t256`, `t257`, …, then ChatML's
//!   control tokens; no merges. Benchmarks draw token ids directly.
//!
//! What is real: every tensor's name, shape and GGML type, following llama.cpp's own
//! choice of type per tensor for each quantization (`q4_k_m`: Q6_K for the output head and
//! for `attn_v`/`ffn_down` in the layers llama.cpp gives more bits, Q4_K elsewhere), and
//! the hyper-parameters of the named model ([`DECODERS`]). Where a row is not whole K-quant
//! blocks (Qwen2.5-0.5B's 896, SmolLM2's 576, Gemma 3 1B's 1,152), the type is llama.cpp's
//! fallback (Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for Q6_K), as in the files people download.

mod blocks;
mod decoder;
mod embedder;

use std::fmt;
use std::str::FromStr;

pub use decoder::{decoder_gguf, decoder_tensors, DecoderShape, PlannedTensor, Quant, Vocabulary, DECODERS};
pub use embedder::{embedder_gguf, EmbedderShape, BENCH_WORDS, EMBEDDERS};

use crate::Error;

/// A synthetic decoder: a model's shapes and a quantization, `qwen2-1.5b:q4_k_m`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecoderSpec {
    /// The model's shapes.
    pub shape: &'static DecoderShape,
    /// How its tensors are stored.
    pub quant: Quant,
}

impl FromStr for DecoderSpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (name, quant) = spec.trim().split_once(':').ok_or_else(|| Error::BadSpec { spec: spec.to_owned() })?;
        let shape = DECODERS
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnknownModel { name: name.to_owned(), known: DECODERS.iter().map(|d| d.name).collect() })?;
        let quant = Quant::ALL
            .into_iter()
            .find(|q| q.name().eq_ignore_ascii_case(quant))
            .ok_or_else(|| Error::UnknownQuant { name: quant.to_owned(), known: Quant::ALL.iter().map(|q| q.name()).collect() })?;
        Ok(DecoderSpec { shape, quant })
    }
}

impl fmt::Display for DecoderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape.name, self.quant.name())
    }
}

/// A synthetic embedder by name (`minilm`).
pub fn embedder_shape(name: &str) -> Result<&'static EmbedderShape, Error> {
    EMBEDDERS
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| Error::UnknownModel { name: name.to_owned(), known: EMBEDDERS.iter().map(|e| e.name).collect() })
}

#[cfg(test)]
mod tests;
