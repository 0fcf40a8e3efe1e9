//! The model that writes the answer: one streamed reply to a user turn.
//!
//! A trait because the answer may come from the local [`Lm`] on any backend or from a
//! hosted model ([`crate::remote::RemoteModel`]); [`crate::qa::answer`] and
//! [`crate::guided::ask_guided`] take either.

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};

use crate::chat::ChatMessage;
use crate::lm::{Backend, Finish, Lm, LmError, Prompt, SamplingParams};

/// A finished reply.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Its text.
    pub text: String,
    /// Why it ended.
    pub finish: Finish,
    /// Seconds until the reply began (prompt processing; for a hosted model, the wait for
    /// its first text).
    pub prefill_seconds: f64,
    /// Seconds from then to the end.
    pub decode_seconds: f64,
}

/// Writes the greedy reply to one user turn (see the module docs).
pub trait Answerer {
    /// The reply to `user_turn`, at most `max_tokens` long, its text streamed to `on_text`
    /// as it is written; `on_text` returning `Break` stops it ([`Finish::Cancelled`]).
    fn reply<'a>(
        &'a self,
        user_turn: &'a str,
        max_tokens: usize,
        on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<Reply, LmError>>;
}

impl<B: Backend> Answerer for Lm<B> {
    fn reply<'a>(
        &'a self,
        user_turn: &'a str,
        max_tokens: usize,
        on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<Reply, LmError>> {
        boxed(async move {
            let messages = [ChatMessage::new("user", user_turn)];
            let sampling = SamplingParams { max_tokens, ..SamplingParams::default() };
            let g = self.generate(Prompt::Chat(&messages), &sampling, on_text).await?;
            Ok(Reply { text: g.text, finish: g.finish, prefill_seconds: g.prefill_seconds, decode_seconds: g.decode_seconds })
        })
    }
}
