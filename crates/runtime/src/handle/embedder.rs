//! [`EmbedderHandle`]: a sentence embedder here (CPU or WebGPU), a hosted one, or none
//! (words hashed into buckets).

use docmem_core::embed::EmbedRole;
use docmem_core::local_future::LocalBoxFuture;
use docmem_core::{Embedder, HashingEmbedder};

use crate::embed::SentenceEmbedder;
use crate::remote::{RemoteEmbedder, Transport};

/// An embedder wherever it runs. A local one chooses the CPU or WebGPU itself
/// ([`SentenceEmbedder`]); a hosted one asks the host.
#[allow(clippy::large_enum_variant)] // one per library; the local model dwarfs either variant
pub enum EmbedderHandle<T: Transport> {
    /// A sentence embedder running here.
    Local(SentenceEmbedder),
    /// A hosted embedding model.
    Hosted(RemoteEmbedder<T>),
    /// No model: words hashed into buckets (tests and benchmarks of the library itself).
    Hashing(HashingEmbedder),
}

impl<T: Transport> From<SentenceEmbedder> for EmbedderHandle<T> {
    fn from(e: SentenceEmbedder) -> Self {
        EmbedderHandle::Local(e)
    }
}

impl<T: Transport> EmbedderHandle<T> {
    /// The embedder as the core's seam.
    fn inner(&self) -> &dyn Embedder {
        match self {
            EmbedderHandle::Local(e) => e,
            EmbedderHandle::Hosted(e) => e,
            EmbedderHandle::Hashing(e) => e,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Embedder {
        match self {
            EmbedderHandle::Local(e) => e,
            EmbedderHandle::Hosted(e) => e,
            EmbedderHandle::Hashing(e) => e,
        }
    }
}

impl<T: Transport> Embedder for EmbedderHandle<T> {
    fn dim(&self) -> usize {
        self.inner().dim()
    }
    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, docmem_core::Error> {
        self.inner_mut().embed(texts, role)
    }
    fn name(&self) -> String {
        self.inner().name()
    }
    fn needs_await(&self) -> bool {
        self.inner().needs_await()
    }
    fn embed_async<'a>(
        &'a mut self,
        texts: &'a [&'a str],
        role: EmbedRole,
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        self.inner_mut().embed_async(texts, role)
    }
}
