//! Semantic chunks: break where the embeddings of neighbouring sentences drift apart
//! (LangChain's `SemanticChunker`, percentile breakpoints).
//!
//! Each sentence is embedded together with `buffer` sentences on each side; the cosine
//! distance between consecutive windows is computed; a chunk ends after sentence i when
//! distance i is above the `percentile`-th percentile of all distances (linear
//! interpolation, as numpy computes it).

use alloc::string::String;
use alloc::vec::Vec;

use super::sentence_split::split_sentences;
use crate::embed::{EmbedRole, Embedder};
use crate::span::Span;
use crate::vector::dot;
use crate::Error;

/// Settings, with LangChain's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SemanticParams {
    /// Sentences on each side embedded with a sentence (default 1).
    pub buffer: usize,
    /// Break above this percentile of distances (default 95).
    pub percentile: f64,
}

impl Default for SemanticParams {
    fn default() -> Self {
        SemanticParams { buffer: 1, percentile: 95.0 }
    }
}

/// The `p`-th percentile of `values` with linear interpolation (numpy's default).
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = (p.clamp(0.0, 100.0) / 100.0) * (v.len() - 1) as f64;
    let lo = libm::floor(pos) as usize;
    let hi = libm::ceil(pos) as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Semantic chunks of `text`, embedding with `embedder` (as passages).
pub fn semantic_chunks(text: &str, embedder: &mut dyn Embedder, params: &SemanticParams) -> Result<Vec<Span>, Error> {
    let sentences: Vec<Span> = split_sentences(text).into_iter().filter(|s| !s.trim(text).is_empty()).collect();
    if sentences.len() <= 1 {
        return Ok(sentences.into_iter().map(|s| s.trim(text)).filter(|s| !s.is_empty()).collect());
    }
    let windows: Vec<String> = (0..sentences.len())
        .map(|i| {
            let lo = i.saturating_sub(params.buffer);
            let hi = (i + params.buffer).min(sentences.len() - 1);
            let span = Span::new(sentences[lo].start, sentences[hi].end);
            String::from(span.slice(text).unwrap_or("").trim())
        })
        .collect();
    let refs: Vec<&str> = windows.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs, EmbedRole::Passage)?;
    if vectors.len() != refs.len() {
        return Err(Error::EmbedderWrongCount { expected: refs.len(), got: vectors.len() });
    }
    let distances: Vec<f64> = vectors.windows(2).map(|w| 1.0 - f64::from(dot(&w[0], &w[1]))).collect();
    let threshold = percentile(&distances, params.percentile);
    let mut chunks = Vec::new();
    let mut start = 0;
    for (i, &d) in distances.iter().enumerate() {
        if d > threshold {
            chunks.push(Span::new(sentences[start].start, sentences[i].end).trim(text));
            start = i + 1;
        }
    }
    chunks.push(Span::new(sentences[start].start, sentences[sentences.len() - 1].end).trim(text));
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;

    #[test]
    fn percentile_matches_numpy() {
        // numpy.percentile([1, 2, 3, 4], 95) == 3.85
        assert!((percentile(&[4.0, 1.0, 3.0, 2.0], 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 50.0), 7.0);
    }

    #[test]
    fn breaks_at_topic_change() {
        let text = "Cats purr and cats nap. Cats chase mice. Cats like warm naps. \
                    Rockets burn fuel. Rockets reach orbit. Rockets carry satellites.";
        let mut e = HashingEmbedder::new(256);
        let p = SemanticParams { buffer: 0, percentile: 80.0 };
        let chunks = semantic_chunks(text, &mut e, &p).unwrap();
        let texts: Vec<_> = chunks.iter().map(|s| s.slice(text).unwrap()).collect();
        assert_eq!(
            texts,
            [
                "Cats purr and cats nap. Cats chase mice. Cats like warm naps.",
                "Rockets burn fuel. Rockets reach orbit. Rockets carry satellites."
            ]
        );
    }

    #[test]
    fn single_sentence() {
        let mut e = HashingEmbedder::new(32);
        let c = semantic_chunks("Just one. ", &mut e, &SemanticParams::default()).unwrap();
        assert_eq!(c, [Span::new(0, 9)]);
    }
}
