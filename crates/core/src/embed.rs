//! The embedder seam, and a model-free hashing embedder.
//!
//! Retrieval and the semantic chunker need sentence vectors; the runtime provides them from
//! a real model (`docmem_runtime::embed`). The core only sees the [`Embedder`]
//! trait. Queries and passages are told apart ([`EmbedRole`]) because many models prefix
//! them differently (`query: ` / `passage: `); callers never need to know the model.
//!
//! [`HashingEmbedder`] is the feature-hashing trick over words, word bigrams and CJK
//! character bigrams: a real, deterministic bag-of-words embedding, weak at paraphrase but
//! needing no model. It runs the retrieval-only demo and the tests.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::local_future::LocalBoxFuture;
use crate::text::lexical_terms;
use crate::vector::normalize;
use crate::Error;

/// Whether a text is a query or a passage (models may prefix them differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EmbedRole {
    /// A question or search query.
    Query,
    /// A passage to be searched.
    Passage,
}

/// Turns texts into unit vectors of a fixed dimension.
pub trait Embedder {
    /// The vector dimension.
    fn dim(&self) -> usize;
    /// One L2-normalised vector per text, in order.
    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, Error>;
    /// A short name for provenance (model name or `hashing-384`).
    fn name(&self) -> String;

    /// Whether [`Embedder::embed`] cannot answer here and the vectors must be awaited
    /// ([`Embedder::embed_async`]): a GPU encoder in a browser. Steps that embed run through
    /// [`crate::embed_ahead::ahead`] for it.
    fn needs_await(&self) -> bool {
        false
    }

    /// [`Embedder::embed`], awaited: an embedder whose vectors come back later (the GPU's)
    /// overrides it; for the rest the future is ready at once.
    fn embed_async<'a>(&'a mut self, texts: &'a [&'a str], role: EmbedRole) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>> {
        let out = self.embed(texts, role);
        crate::local_future::boxed(core::future::ready(out))
    }
}

/// A boxed embedder is the embedder it holds (the CLI opens one by name, as a box).
impl<E: Embedder + ?Sized> Embedder for alloc::boxed::Box<E> {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, Error> {
        (**self).embed(texts, role)
    }
    fn name(&self) -> String {
        (**self).name()
    }
    fn needs_await(&self) -> bool {
        (**self).needs_await()
    }
    fn embed_async<'a>(&'a mut self, texts: &'a [&'a str], role: EmbedRole) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>> {
        (**self).embed_async(texts, role)
    }
}

/// Feature-hashing embedder (see the module docs).
#[derive(Clone, Debug)]
pub struct HashingEmbedder {
    dim: usize,
}

impl HashingEmbedder {
    /// An embedder with `dim` buckets (at least 1).
    pub fn new(dim: usize) -> Self {
        HashingEmbedder { dim: dim.max(1) }
    }

    fn add(&self, v: &mut [f32], feature: &str, weight: f32) {
        // FNV-1a, 64-bit: stable across platforms and releases.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in feature.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let bucket = (h % self.dim as u64) as usize;
        let sign = if (h >> 63) == 0 { 1.0 } else { -1.0 };
        v[bucket] += sign * weight;
    }

    /// The vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dim];
        let terms = lexical_terms(text);
        for t in &terms {
            self.add(&mut v, t, 1.0);
        }
        let mut bigram = String::new();
        for w in terms.windows(2) {
            bigram.clear();
            bigram.push_str(&w[0]);
            bigram.push(' ');
            bigram.push_str(&w[1]);
            self.add(&mut v, &bigram, 0.5);
        }
        normalize(&mut v);
        v
    }
}

impl Embedder for HashingEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, texts: &[&str], _role: EmbedRole) -> Result<Vec<Vec<f32>>, Error> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }

    fn name(&self) -> String {
        alloc::format!("hashing-{}", self.dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::dot;

    #[test]
    fn similar_texts_are_closer() {
        let e = HashingEmbedder::new(384);
        let a = e.embed_one("the river flooded the valley");
        let b = e.embed_one("a valley flooded by the river");
        let c = e.embed_one("quantum computers use qubits");
        assert!(dot(&a, &b) > dot(&a, &c) + 0.3);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(e.embed_one("").iter().filter(|x| **x != 0.0).count(), 0);
    }
}
