//! A local [`Lm`] as the core's [`ReaderModel`]: the MemReader prompt goes in as the
//! user turn of the model's chat template, is prefilled once, and the candidates continue
//! that prefix together ([`Lm::generate_paths`]: the KV cache is forked, not recomputed,
//! and the paths are decoded as one batch per step, optionally with drafts from the prompt).

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::reader::{Generated, ModelError, ReaderModel, SampleSpec};
use docmem_core::{ScoreError, Scorer};

use super::{Backend, DraftSettings, Lm, Prompt, PromptLookup, SamplingParams};
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
    /// Asked before every decoding step: `true` stops the generation there, as a cancel
    /// does ([`ModelError::Cancelled`]). A page that writes memories in the background
    /// gives the model to a question this way without waiting for a candidate to end.
    pub interrupt: Option<&'a dyn Fn() -> bool>,
}

impl<B: Backend> std::fmt::Debug for LmReader<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmReader").field("lm", self.lm).field("name", &self.name).field("drafts", &self.drafts).finish_non_exhaustive()
    }
}

impl<'a, B: Backend> LmReader<'a, B> {
    /// Wrap `lm`, known as `name`.
    pub fn new(lm: &'a Lm<B>, name: impl Into<String>) -> Self {
        LmReader { lm, name: name.into(), drafts: None, interrupt: None }
    }
}

/// Prompt tokens prefilled between two questions to [`LmReader::interrupt`] (a 1.5B model
/// on two wasm threads prefills about 11 tokens a second: a stop waits a few seconds).
const PREFILL_CHUNK: usize = 32;

fn backend(e: impl std::fmt::Display) -> ModelError {
    ModelError::Backend { message: e.to_string() }
}

impl<B: Backend> Scorer for LmReader<'_, B> {
    fn continuation_logprobs<'a>(&'a mut self, pairs: &'a [(&'a str, &'a str)]) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, ScoreError>> {
        boxed(self.lm.scorer_logprobs(pairs))
    }

    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, ScoreError>> {
        boxed(self.lm.scorer_next_token_logprobs(prompt, candidates))
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, ScoreError> {
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
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, ModelError>> {
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
    ) -> Result<Vec<Generated>, ModelError> {
        let messages = [ChatMessage::new("user", user_turn)];
        let prefix = match self.interrupt {
            // Asked between chunks of the prompt too, so a stop never waits for a whole prefill.
            Some(stop) => {
                let tokens = self.lm.prompt_tokens(Prompt::Chat(&messages)).map_err(backend)?;
                self.lm.prefill_stoppable(tokens, PREFILL_CHUNK, stop).await.map_err(backend)?.ok_or(ModelError::Cancelled)?
            }
            None => self.lm.prefill(Prompt::Chat(&messages)).await.map_err(backend)?,
        };
        let params: Vec<SamplingParams> = specs
            .iter()
            .map(|spec| SamplingParams {
                temperature: spec.temperature,
                top_p: spec.top_p,
                seed: spec.seed,
                max_tokens,
                ..SamplingParams::default()
            })
            .collect();
        let (mut done, mut cancelled) = (0, false);
        let lookup = self.drafts.map(|d| PromptLookup::new(prefix.tokens(), d));
        let interrupt = self.interrupt;
        let mut interrupted = false;
        let out = self
            .lm
            .generate_paths_drafted(
                &prefix,
                &params,
                lookup.as_ref(),
                |_, g| {
                    done += 1;
                    cancelled = !after_each(done, &Generated { tokens: g.tokens.len(), text: g.text.clone() });
                    if cancelled {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
                &mut || {
                    interrupted = interrupt.is_some_and(|stop| stop());
                    if interrupted {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
            )
            .await
            .map_err(backend)?;
        if cancelled || interrupted {
            return Err(ModelError::Cancelled);
        }
        Ok(out.into_iter().map(|g| Generated { tokens: g.tokens.len(), text: g.text }).collect())
    }
}
