//! [`LmContext`]: a model with the work it keeps between calls.
//!
//! Why apart from the model: as llama.cpp splits a model (weights, vocabulary) from a
//! context (the caches a conversation builds up) and from a sampler, an [`Lm`] here is
//! what was loaded, the same for every caller, and its calls start from nothing; what
//! outlives a call lives in a context. A context keeps two things, each for one role of
//! the model:
//!
//! - the last answer prompt (`prompt_cache`), which the next answer prompt reuses as far
//!   as the two agree, and which a question's start read ahead while it is typed fills;
//! - background work that gave way (`suspended`), a memory's window, continued where it
//!   stopped.
//!
//! They are apart so that neither displaces the other: a question asked while a memory is
//! being written keeps the memory's work, and a memory's window never evicts the answer
//! prompt. One context per model is what an app wants (the page's worker, the CLI); a
//! caller that wants a fresh one builds another over the same shared model.
//!
//! The sampler is the third piece ([`super::Sampler`]), built from [`super::SamplingParams`]
//! for each generation.

use std::rc::Rc;

use super::prompt_cache::{self, PromptCache};
use super::suspended::SuspendedSlot;
use super::{Backend, Lm, PrefillOptions, Prefilled, Prefix};
use crate::Error;

/// A model with the prompt and the background work it keeps (see the module docs).
pub struct LmContext<B: Backend = crate::cpu::transformer::CpuTransformer> {
    pub(super) model: Rc<Lm<B>>,
    /// The last answer prompt, for the next one to reuse its start.
    prompt_cache: PromptCache<B::Cache>,
    /// Background generation that gave way, to be continued.
    pub(super) suspended: SuspendedSlot<B::Cache>,
}

impl<B: Backend> std::fmt::Debug for LmContext<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmContext").field("model", &self.model).field("kept_prompt_tokens", &self.kept_prompt_tokens()).finish()
    }
}

impl<B: Backend> From<Lm<B>> for LmContext<B> {
    fn from(model: Lm<B>) -> Self {
        LmContext::new(model)
    }
}

impl<B: Backend> LmContext<B> {
    /// A context over `model` that keeps nothing yet.
    pub fn new(model: impl Into<Rc<Lm<B>>>) -> Self {
        LmContext { model: model.into(), prompt_cache: PromptCache::default(), suspended: SuspendedSlot::default() }
    }

    /// The model.
    pub fn model(&self) -> &Lm<B> {
        &self.model
    }

    /// The model, shared.
    pub fn shared_model(&self) -> Rc<Lm<B>> {
        self.model.clone()
    }

    /// [`Lm::prefill`] that reuses the longest start `tokens` share with the prompt this
    /// context keeps (the last one run here, or read ahead by
    /// [`LmContext::prefill_ahead`]) and keeps this one for the next, as for prompts that
    /// recur with a common start (the answerer's). With `state_at`, the kept start is
    /// reused only up to the token whose state is read.
    pub async fn prefill(&self, tokens: Vec<u32>, options: PrefillOptions) -> Result<Prefilled<B::Cache>, Error> {
        let lm = &*self.model;
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        lm.check_fits(tokens.len())?;
        let must_run = lm.must_run(&tokens, options);
        let (cache, reused) = match self.prompt_cache.take() {
            Some(kept) => {
                let reused = prompt_cache::common_start(kept.tokens(), &tokens).min(must_run);
                let mut cache = kept.cache;
                lm.backend.truncate(&mut cache, reused);
                (cache, reused)
            }
            None => (lm.backend.new_cache(), 0),
        };
        let prefilled = lm.prefill_from(cache, reused, tokens, options).await?;
        self.prompt_cache.keep(prefilled.prefix.clone());
        Ok(prefilled)
    }

    /// Run `tokens`, the start of a prompt expected soon (an answer prompt while its
    /// question is still being typed), into the prompt this context keeps for
    /// [`LmContext::prefill`]: what the kept prompt already shares is not run again, the
    /// rest runs `chunk` tokens at a time and `stop` is asked before each. Work stopped
    /// early is kept as far as it went. Returns how many of `tokens` are now kept.
    pub async fn prefill_ahead(&self, tokens: &[u32], chunk: usize, stop: &dyn Fn() -> bool) -> Result<usize, Error> {
        let lm = &*self.model;
        lm.check_fits(tokens.len())?;
        let Some(kept) = self.prompt_cache.take() else {
            return self.prefill_ahead_from(lm.backend.new_cache(), Vec::new(), tokens, chunk, stop).await;
        };
        let common = prompt_cache::common_start(kept.tokens(), tokens);
        if common == tokens.len() || stop() {
            // Nothing to run, or no time to: the kept prompt stays whole.
            self.prompt_cache.keep(kept);
            return Ok(common);
        }
        let mut cache = kept.cache;
        lm.backend.truncate(&mut cache, common);
        self.prefill_ahead_from(cache, tokens[..common].to_vec(), tokens, chunk, stop).await
    }

    /// [`LmContext::prefill_ahead`] from `cache`, which holds `done` (a start of `tokens`).
    async fn prefill_ahead_from(
        &self,
        mut cache: B::Cache,
        mut done: Vec<u32>,
        tokens: &[u32],
        chunk: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<usize, Error> {
        let (ran, last_logits) = self.model.forward_pieces(&mut cache, &tokens[done.len()..], chunk, stop).await?;
        done.extend_from_slice(&tokens[done.len()..done.len() + ran]);
        // Kept only with the logits of its last token (a cut back cache without them is
        // dropped: the next prompt runs from scratch, as without a kept prompt).
        let Some(last_logits) = last_logits else { return Ok(0) };
        let kept = done.len();
        self.prompt_cache.keep(Prefix { cache, tokens: done, last_logits });
        Ok(kept)
    }

    /// Tokens of the prompt this context keeps for [`LmContext::prefill`].
    pub fn kept_prompt_tokens(&self) -> usize {
        self.prompt_cache.len()
    }

    /// Whether the prompt this context keeps starts with `tokens`.
    pub fn keeps_prompt_start(&self, tokens: &[u32]) -> bool {
        self.prompt_cache.starts_with(tokens)
    }
}
