//! Embedding ahead: running a synchronous step (index a document, chunk semantically,
//! search) with an embedder that must be awaited.
//!
//! Why: the indexes, the semantic chunker and search call [`Embedder::embed`] in the middle
//! of plain functions, which is right for every embedder that can answer at once (the CPU
//! encoder, the hashing embedder, a hosted one over a synchronous request). A GPU encoder
//! in a browser cannot: its vectors come back through the page's event loop, so it can
//! only be awaited ([`Embedder::embed_async`]). Rather than make every index function
//! async, [`ahead`] runs the step against a stand-in that answers from vectors already
//! computed and notes the texts it lacks (failing the step, which these steps take back
//! whole: an index that fails to embed changes nothing); then it awaits the real embedder
//! for those texts, all in one batch, and runs the step again. A step embeds once or
//! twice (the semantic chunker's sentences, a document's layers), so a step runs at most
//! a few times, and only the cheap part reruns: embedding is its cost. With an embedder
//! that can answer at once ([`Embedder::needs_await`] false) the step runs once, directly.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use crate::embed::{EmbedRole, Embedder};
use crate::Error;

/// How many times [`ahead`] runs a step before giving up on embedding everything it asks
/// for ahead (a step that asks for new texts each run, which no step here does).
pub const MAX_RUNS: usize = 4;

/// Run `step` with `embedder`, awaiting its vectors ahead of the step where it
/// [`Embedder::needs_await`] (see the module docs). `step` must ask for the same texts when
/// run again on the same input and change nothing when embedding fails.
pub async fn ahead<T, E: From<Error>>(
    embedder: &mut dyn Embedder,
    mut step: impl FnMut(&mut dyn Embedder) -> Result<T, E>,
) -> Result<T, E> {
    if !embedder.needs_await() {
        return step(embedder);
    }
    let mut known = Known { dim: embedder.dim(), name: embedder.name(), vectors: BTreeMap::new(), missing: Vec::new() };
    for _ in 1..MAX_RUNS {
        let out = step(&mut known);
        if known.missing.is_empty() {
            return out;
        }
        for (role, texts) in
            [(EmbedRole::Passage, known.take_missing(EmbedRole::Passage)), (EmbedRole::Query, known.take_missing(EmbedRole::Query))]
        {
            if texts.is_empty() {
                continue;
            }
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = embedder.embed_async(&refs, role).await?;
            if vectors.len() != texts.len() {
                return Err(Error::EmbedderWrongCount { expected: texts.len(), got: vectors.len() }.into());
            }
            known.vectors.extend(texts.into_iter().map(|t| (role, t)).zip(vectors));
        }
    }
    // The last run: whatever it still lacks fails it, with the stand-in's error.
    step(&mut known)
}

/// The stand-in: vectors by (role, text), and the texts asked for that it lacks.
struct Known {
    dim: usize,
    name: String,
    vectors: BTreeMap<(EmbedRole, String), Vec<f32>>,
    missing: Vec<(EmbedRole, String)>,
}

impl Known {
    /// The missing texts of `role`, each once, in the order first asked for.
    fn take_missing(&mut self, role: EmbedRole) -> Vec<String> {
        let mut seen = alloc::collections::BTreeSet::new();
        let mut texts: Vec<String> = Vec::new();
        for (r, t) in &self.missing {
            if *r == role && seen.insert(t.as_str()) {
                texts.push(t.clone());
            }
        }
        self.missing.retain(|(r, _)| *r != role);
        texts
    }
}

impl Embedder for Known {
    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, texts: &[&str], role: EmbedRole) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for &t in texts {
            match self.vectors.get(&(role, String::from(t))) {
                Some(v) => out.push(v.clone()),
                None => self.missing.push((role, String::from(t))),
            }
        }
        if out.len() == texts.len() {
            Ok(out)
        } else {
            Err(Error::EmbedderFailed {
                message: alloc::format!("{} texts are still being embedded ahead of this step", texts.len() - out.len()),
            })
        }
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashingEmbedder;
    use crate::local_future::{boxed, poll_once, LocalBoxFuture};

    /// A hashing embedder that must be awaited, counting its calls.
    struct Awaited {
        inner: HashingEmbedder,
        batches: Vec<(EmbedRole, usize)>,
        fail: bool,
    }

    impl Embedder for Awaited {
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn embed(&mut self, _: &[&str], _: EmbedRole) -> Result<Vec<Vec<f32>>, Error> {
            panic!("an embedder that must be awaited was called synchronously");
        }
        fn needs_await(&self) -> bool {
            true
        }
        fn embed_async<'a>(&'a mut self, texts: &'a [&'a str], role: EmbedRole) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>> {
            self.batches.push((role, texts.len()));
            let out = if self.fail { Err(Error::EmbedderFailed { message: "device lost".into() }) } else { self.inner.embed(texts, role) };
            boxed(async move { out })
        }
        fn name(&self) -> String {
            self.inner.name()
        }
    }

    fn awaited() -> Awaited {
        Awaited { inner: HashingEmbedder::new(16), batches: Vec::new(), fail: false }
    }

    #[test]
    fn a_step_gets_the_vectors_it_would_get_directly_in_one_batch_per_role() {
        let mut e = awaited();
        let mut runs = 0;
        let got = poll_once(ahead(&mut e, |emb: &mut dyn Embedder| -> Result<_, Error> {
            runs += 1;
            let passages = emb.embed(&["alpha beta", "gamma", "alpha beta"], EmbedRole::Passage)?;
            let query = emb.embed(&["gamma?"], EmbedRole::Query)?;
            Ok((passages, query))
        }))
        .unwrap()
        .unwrap();
        let mut direct = HashingEmbedder::new(16);
        assert_eq!(got.0, direct.embed(&["alpha beta", "gamma", "alpha beta"], EmbedRole::Passage).unwrap());
        assert_eq!(got.1, direct.embed(&["gamma?"], EmbedRole::Query).unwrap());
        // The first run stops at the passages; the second at the query; the third has all.
        assert_eq!(runs, 3);
        // A repeated text is embedded once.
        assert_eq!(e.batches, [(EmbedRole::Passage, 2), (EmbedRole::Query, 1)]);
    }

    #[test]
    fn an_embedder_that_answers_at_once_runs_the_step_once_directly() {
        let mut e = HashingEmbedder::new(16);
        let mut runs = 0;
        let got = poll_once(ahead(&mut e, |emb: &mut dyn Embedder| {
            runs += 1;
            emb.embed(&["x"], EmbedRole::Passage)
        }))
        .unwrap()
        .unwrap();
        assert_eq!((runs, got.len()), (1, 1));
    }

    #[test]
    fn a_failing_embedder_or_a_step_that_never_settles_is_an_error() {
        let mut e = Awaited { fail: true, ..awaited() };
        let r = poll_once(ahead(&mut e, |emb: &mut dyn Embedder| emb.embed(&["x"], EmbedRole::Passage))).unwrap();
        assert_eq!(r, Err(Error::EmbedderFailed { message: "device lost".into() }));
        // A step asking for a new text every run gives up after MAX_RUNS runs.
        let mut e = awaited();
        let mut runs = 0;
        let r = poll_once(ahead(&mut e, |emb: &mut dyn Embedder| {
            runs += 1;
            emb.embed(&[alloc::format!("text {runs}").as_str()], EmbedRole::Passage)
        }))
        .unwrap();
        assert!(matches!(r, Err(Error::EmbedderFailed { .. })), "{r:?}");
        assert_eq!(runs, MAX_RUNS);
    }
}
