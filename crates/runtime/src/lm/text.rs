//! A local [`Lm`] as the core's [`TextModel`]: short greedy replies for clues, sub-queries
//! and judgements, with the shared opening of a prompt kept processed between calls.
//!
//! The clue writer sends the same global memory before every question; re-reading a few
//! thousand tokens per question would cost more than the whole reply. So the tokens of the
//! prompt up to the end of the `context` part are prefilled once and their K/V cache kept
//! ([`Lm::prefill`]); a later prompt whose tokens start with them continues a copy
//! ([`Lm::generate_after_tokens`]). The cut is made in the whole prompt's tokens, not in
//! its text: a pre-tokenizer may join the context's last characters with what follows
//! (Qwen2's joins a full stop with the line breaks after it), and a cut in the text would
//! then feed the model tokens a whole-prompt tokenization never gives. The reply is
//! therefore exactly what [`Lm::generate`] gives for the whole prompt.

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::text_model::TextModel;

use super::{Backend, Lm, PrefillOptions, Prefix, Prompt, SamplingParams};
use crate::chat::ChatMessage;
use crate::Error;

/// An [`Lm`] that answers short requests (see the module docs).
#[derive(Debug)]
pub struct LmText<'a, B: Backend> {
    lm: &'a Lm<B>,
    /// The opening of the last prompt with a context, prefilled.
    kept: Option<Prefix<B::Cache>>,
    /// Calls that found their opening kept.
    pub reused: usize,
}

impl<'a, B: Backend> LmText<'a, B> {
    /// Wrap `lm`.
    pub fn new(lm: &'a Lm<B>) -> Self {
        LmText { lm, kept: None, reused: 0 }
    }

    async fn reply(&mut self, context: &str, request: &str, max_tokens: usize) -> Result<String, Error> {
        let user = format!("{context}{request}");
        let messages = [ChatMessage::new("user", &user)];
        let sampling = SamplingParams { max_tokens, ..SamplingParams::default() };
        let full = self.lm.prompt_tokens(Prompt::Chat(&messages))?;
        let reusable = |p: &Prefix<B::Cache>| p.tokens().len() < full.len() && full.starts_with(p.tokens());
        if self.kept.as_ref().is_some_and(reusable) {
            self.reused += 1;
        } else if !context.is_empty() {
            // The opening: the tokens the whole prompt and the rendered text up to the end
            // of the context agree on (the last piece of the context may merge with what
            // follows it, so it is left to the suffix).
            let rendered = self.lm.render_chat(&messages)?;
            let head_tokens = match rendered.find(&user) {
                Some(at) => self.lm.prompt_tokens(Prompt::Text(&rendered[..at + context.len()]))?,
                None => Vec::new(),
            };
            let n = full.iter().zip(&head_tokens).take_while(|(a, b)| a == b).count().min(full.len().saturating_sub(1));
            self.kept = None;
            if n > 0 {
                self.kept = Some(self.lm.prefill(full[..n].to_vec(), PrefillOptions::default()).await?.prefix);
            }
        }
        let g = match &self.kept {
            Some(prefix) if reusable(prefix) => {
                self.lm.generate_after_tokens(prefix, &full[prefix.tokens().len()..], &sampling, |_| ControlFlow::Continue(())).await?
            }
            _ => self.lm.generate(Prompt::Chat(&messages), &sampling, |_| ControlFlow::Continue(())).await?,
        };
        Ok(g.text)
    }
}

impl<B: Backend> TextModel for LmText<'_, B> {
    fn context_tokens(&self) -> usize {
        self.lm.context_window()
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        self.lm.scorer_count_tokens(text)
    }

    fn complete<'a>(
        &'a mut self,
        context: &'a str,
        request: &'a str,
        max_tokens: usize,
    ) -> LocalBoxFuture<'a, Result<String, docmem_core::Error>> {
        boxed(async move { self.reply(context, request, max_tokens).await.map_err(docmem_core::Error::from) })
    }
}
