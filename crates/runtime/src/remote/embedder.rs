//! A hosted embedding model as the core's [`Embedder`].
//!
//! The library fixes its vector width when it is made, so the width is learned once, from
//! one probe, when the embedder is connected. Vectors are normalised here (the library
//! compares unit vectors; hosts differ in whether they normalise). The query/passage role
//! is not sent: the API has no field for it, and the models served for this
//! (all-MiniLM, bge) embed both alike.

use docmem_core::embed::EmbedRole;
use docmem_core::Embedder;

use super::{api, Transport};
use crate::Error;

/// Texts per request: small enough for a worker's body limit with long chunks.
const BATCH: usize = 32;

/// A hosted embedding model (see the module docs).
#[derive(Debug)]
pub struct RemoteEmbedder<T: Transport> {
    transport: T,
    model: String,
    dim: usize,
}

impl<T: Transport> RemoteEmbedder<T> {
    /// Connect to `model` through `transport`, asking for one vector to learn the width.
    pub fn connect(transport: T, model: impl Into<String>) -> Result<Self, Error> {
        let model = model.into();
        let probe = embed_batch(&transport, &model, &["docmem"])?;
        let dim = probe.first().map_or(0, Vec::len);
        if dim == 0 {
            return Err(Error::RemoteBadReply { message: format!("'{model}' returned an empty vector") });
        }
        Ok(RemoteEmbedder { transport, model, dim })
    }

    /// The model's name on the host.
    pub fn model(&self) -> &str {
        &self.model
    }
}

fn embed_batch<T: Transport>(transport: &T, model: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
    let reply = transport.post_blocking(api::EMBEDDINGS_PATH, &api::embeddings_request(model, texts))?;
    api::read_embeddings(&api::success_json(&reply)?, texts.len())
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

impl<T: Transport> Embedder for RemoteEmbedder<T> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, texts: &[&str], _role: EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            for v in embed_batch(&self.transport, &self.model, batch)? {
                if v.len() != self.dim {
                    return Err(docmem_core::Error::EmbedderWrongDimension { expected: self.dim, got: v.len() });
                }
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(docmem_core::Error::EmbedderFailed {
                        message: format!("'{}' returned a vector with a non-finite value", self.model),
                    });
                }
                out.push(normalised(v));
            }
        }
        Ok(out)
    }

    fn name(&self) -> String {
        format!("remote:{}", self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing::{reply, FakeTransport};

    fn vectors_of_width(width: usize) -> FakeTransport {
        FakeTransport::new(move |_, body| {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            let n = v["input"].as_array().unwrap().len();
            let data: Vec<_> = (0..n).map(|i| serde_json::json!({"index": i, "embedding": vec![3.0; width]})).collect();
            reply(200, &serde_json::json!({ "data": data }).to_string())
        })
    }

    #[test]
    fn the_width_is_learned_and_vectors_come_back_unit_length_in_batches() {
        let t = vectors_of_width(4);
        let mut e = RemoteEmbedder::connect(&t, "minilm").unwrap();
        assert_eq!((e.dim(), e.name()), (4, "remote:minilm".to_string()));
        let texts: Vec<String> = (0..70).map(|i| format!("text {i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let out = e.embed(&refs, EmbedRole::Passage).unwrap();
        assert_eq!(out.len(), 70);
        assert!(out.iter().all(|v| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-6));
        assert_eq!(t.requests().len(), 1 + 3, "a probe, then batches of 32");
    }

    #[test]
    fn a_refusal_or_a_wrong_width_is_an_error() {
        let t = FakeTransport::new(|_, _| reply(403, r#"{"error":{"code":"model_not_allowed","message":"no"}}"#));
        let e = RemoteEmbedder::connect(&t, "x").unwrap_err();
        assert!(matches!(e, Error::RemoteStatus { status: 403, .. }));
        let t = vectors_of_width(4);
        let mut e = RemoteEmbedder::connect(&t, "x").unwrap();
        e.dim = 8;
        assert!(matches!(e.embed(&["a"], EmbedRole::Query), Err(docmem_core::Error::EmbedderWrongDimension { expected: 8, got: 4 })));
    }
}
