//! A local [`Lm`] as the core's [`ReaderModel`]: the MemReader prompt goes in as the
//! user turn of the model's chat template, is prefilled once, and the candidates continue
//! that prefix together ([`Lm::generate_paths`]: the KV cache is forked, not recomputed,
//! and the paths are decoded as one batch per step, optionally with drafts from the prompt).

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::reader::{Generated, ReaderModel, SampleSpec};
use docmem_core::Scorer;

use super::{Backend, DraftSettings, Lm, Prompt, PromptLookup, SamplingParams, WorkDone};
use crate::chat::ChatMessage;

/// An [`Lm`] with the name it is known by (for provenance and prompt choice).
pub struct LmReader<'a, B: Backend> {
    /// The model.
    pub lm: &'a Lm<B>,
    /// Its name (the file name, say).
    pub name: String,
    /// Prompt-lookup drafts while decoding (the memory copies the document's words; greedy
    /// output is the same with or without, sampled output is distributed the same). Off by
    /// default: verifying a drafted token costs the CPU backend about what decoding it
    /// does (its decode is compute-bound on small machines: 0.76× measured on SmolLM2 with
    /// two cores); a memory-bound backend (a GPU) is where they pay.
    pub drafts: Option<DraftSettings>,
    /// Asked between prompt pieces and before every decoding step: `true` stops the
    /// generation there ([`docmem_core::Error::Cancelled`]), and the model keeps what it read and
    /// wrote, so the same window asked for again goes on where it stopped
    /// ([`Lm::generate_paths_resumable`]). A page that writes memories in the background
    /// gives the model to a question this way without waiting for a candidate to end, and
    /// without losing the window's work.
    pub interrupt: Option<&'a dyn Fn() -> bool>,
    /// Told, with [`LmReader::interrupt`], how far a window has got (prompt tokens read,
    /// tokens written): progress finer than the core's, which counts finished candidates.
    pub on_work: Option<&'a dyn Fn(&WorkDone)>,
}

impl<B: Backend> std::fmt::Debug for LmReader<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmReader").field("lm", self.lm).field("name", &self.name).field("drafts", &self.drafts).finish_non_exhaustive()
    }
}

impl<'a, B: Backend> LmReader<'a, B> {
    /// Wrap `lm`, known as `name`.
    pub fn new(lm: &'a Lm<B>, name: impl Into<String>) -> Self {
        LmReader { lm, name: name.into(), drafts: None, interrupt: None, on_work: None }
    }
}

/// Prompt tokens prefilled between two questions to [`LmReader::interrupt`] (a 1.5B model
/// on two wasm threads prefills about 30 tokens a second: a stop waits about a second). A
/// stopped window goes on from a whole piece, so this must not change between calls.
const PREFILL_CHUNK: usize = 32;

impl<B: Backend> Scorer for LmReader<'_, B> {
    fn continuation_logprobs<'a>(
        &'a mut self,
        pairs: &'a [(&'a str, &'a str)],
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        boxed(self.lm.scorer_logprobs(pairs))
    }

    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
        boxed(self.lm.scorer_next_token_logprobs(prompt, candidates))
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        self.lm.scorer_count_tokens(text)
    }
}

impl<B: Backend> ReaderModel for LmReader<'_, B> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn context_tokens(&self) -> usize {
        self.lm.context()
    }

    fn chat_overhead_tokens(&mut self) -> usize {
        let messages = [ChatMessage::new("user", "")];
        self.lm.prompt_tokens(Prompt::Chat(&messages)).map_or(32, |t| t.len())
    }

    fn generate<'a>(
        &'a mut self,
        user_turn: &'a str,
        specs: &'a [SampleSpec],
        max_tokens: usize,
        after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
        boxed(self.generate_candidates(user_turn, specs, max_tokens, after_each))
    }
}

impl<B: Backend> LmReader<'_, B> {
    /// [`ReaderModel::generate`]: prefill the user turn once, decode every spec's path from it.
    async fn generate_candidates(
        &self,
        user_turn: &str,
        specs: &[SampleSpec],
        max_tokens: usize,
        after_each: &mut dyn FnMut(usize, &Generated) -> bool,
    ) -> Result<Vec<Generated>, docmem_core::Error> {
        let messages = [ChatMessage::new("user", user_turn)];
        let params: Vec<SamplingParams> = specs
            .iter()
            .map(|spec| SamplingParams {
                temperature: spec.temperature,
                top_p: spec.top_p,
                seed: spec.seed,
                max_tokens,
                opening: spec.opening,
                ..SamplingParams::default()
            })
            .collect();
        let (mut done, mut cancelled) = (0, false);
        let mut on_done = |_, g: &super::Generation| {
            done += 1;
            cancelled = !after_each(done, &Generated { tokens: g.tokens.len(), text: g.text.clone() });
            if cancelled {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let out = match self.interrupt {
            // Background work: asked between prompt pieces and decoding steps; a stopped
            // window is kept by the model and goes on where it stopped when it is read
            // again (see `suspended`).
            Some(stop) => {
                let tokens = self.lm.prompt_tokens(Prompt::Chat(&messages)).map_err(docmem_core::Error::from)?;
                let on_work = self.on_work;
                let stop = |work: &WorkDone| {
                    if let Some(tell) = on_work {
                        tell(work);
                    }
                    stop()
                };
                let out = self.lm.generate_paths_resumable(tokens, &params, PREFILL_CHUNK, self.drafts, &mut on_done, &stop).await;
                match out.map_err(docmem_core::Error::from)? {
                    Some(out) => out,
                    None => return Err(docmem_core::Error::Cancelled),
                }
            }
            None => {
                let prefix = self.lm.prefill(Prompt::Chat(&messages)).await.map_err(docmem_core::Error::from)?;
                let lookup = self.drafts.map(|d| PromptLookup::new(prefix.tokens(), d));
                let mut go_on = || ControlFlow::Continue(());
                self.lm
                    .generate_paths_drafted(&prefix, &params, lookup.as_ref(), &mut on_done, &mut go_on)
                    .await
                    .map_err(docmem_core::Error::from)?
            }
        };
        if cancelled {
            // A cancel, unlike a stop to give way, keeps nothing.
            return Err(docmem_core::Error::Cancelled);
        }
        Ok(out.into_iter().map(|g| Generated { tokens: g.tokens.len(), text: g.text }).collect())
    }
}
