//! The model that writes the answer: one streamed reply to a user turn.
//!
//! A trait because the answer may come from the local [`Lm`] on any backend or from a
//! hosted model ([`crate::remote::RemoteModel`]); [`crate::pipeline::qa::answer`] and
//! [`crate::session::Session::ask`] take either.
//!
//! A local model also reports how likely it found its own answer and the refusal, from
//! the one prefill of the prompt: the evidence [`docmem_core::answerability`] decides
//! "not in the documents" with. A hosted model reports none, nor does a local model the
//! rule was not fitted on ([`calibrated_for`]).

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};

use crate::chat::ChatMessage;
use crate::lm::{Backend, Finish, Lm, LmContext, PrefillOptions, Prefilled, Prefix, Prompt, SamplingParams, StateAt};
use crate::probe::ProbePosition;
use crate::Error;

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
    /// Prompt tokens not run again: the start this prompt shares with one the model had
    /// kept (the last answer's, or one read ahead: [`Answerer::read_ahead`]).
    pub reused_tokens: usize,
    /// The prompt's tokens, reused ones included (0 for a hosted model: its count is not
    /// asked for).
    pub prompt_tokens: usize,
    /// The answerer's probabilities for its reply and for the refusal (local models only).
    pub probabilities: Option<ReplyProbabilities>,
}

/// How to write one reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyOptions {
    /// Most reply tokens.
    pub max_tokens: usize,
    /// Whether a local answerer's answerability probe ([`crate::probe`]) decides before
    /// the reply is written, once the prompt is read: where it reads the passages as not
    /// answering, nothing is written ([`Finish::Withheld`]; the check would refuse any
    /// reply, so the user does not watch one being written only to see it replaced, and
    /// the decoding is saved). Off, the model writes as it will: a calibration run, an ask
    /// with the check off. (Letting a wide margin overrule the model's own refusal, its
    /// opening token banned, was measured on dev questions the probe was not fitted on:
    /// the answers it drew out were mostly wrong, F1 unchanged, and more unanswerable
    /// questions got answers; so the model's own refusals stand.)
    pub probe_decides: bool,
}

impl ReplyOptions {
    /// At most `max_tokens`, the probe deciding.
    pub fn new(max_tokens: usize) -> Self {
        ReplyOptions { max_tokens, probe_decides: true }
    }
}

/// What a local answerer thought of its reply, scored after the same prefilled prompt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplyProbabilities {
    /// Sum of the log-probabilities of the refusal's tokens ([`REFUSAL`]).
    pub refusal: f32,
    /// Mean log-probability per token of the reply written.
    pub reply: f32,
    /// Asked after its reply whether the passages state that answer ([`VERIFY`]):
    /// log P("Yes") − log P("No") as its next token (`None`: not measured, see
    /// [`measure_verification`], or the conversation could not be continued from the
    /// prompt's cache, as with a template that rewrites earlier turns).
    pub verified: Option<f32>,
    /// The answerability probe's reading of the prompt's hidden state: its log-odds that
    /// the passages answer the question, less its threshold ([`crate::probe`]; `None`: no
    /// probe for this model, or a backend that does not hand the state back).
    pub probe: Option<f32>,
}

/// The question put to a local answerer after its reply, as a second user turn: its
/// "Yes" against its "No" is the answerability check's verification feature. Asked in the
/// same conversation, so only the reply and this turn are run through the model (a few
/// dozen tokens), not the passages again.
pub const VERIFY: &str = "Do the passages above state that answer to the question as it was asked? Reply Yes or No.";

/// Whether the answerability rule was fitted on this model's answers: the default
/// answerer's file (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), known by its identity
/// ([`crate::probe::for_model`]), not by its shape, which another qwen2 of 28 layers and
/// width 1536 shares. Another model's probabilities are not measured, so a rule fitted on
/// another model's answers does not judge its own (a small model's evidence lies
/// elsewhere: both fits refused correct SmolLM2 answers), its own refusals stand, and it
/// pays nothing for the scoring.
pub fn calibrated_for(identity: Option<&crate::model::ModelIdentity>) -> bool {
    crate::probe::for_model(identity).is_some()
}

static MEASURE_VERIFICATION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether local answers measure the verification ([`VERIFY`]): a few dozen tokens of
/// prefill per answer, so only when the rule in use weighs it or a calibration run records
/// it (`docmem eval answers --no-check` sets this).
pub fn measure_verification(on: bool) {
    MEASURE_VERIFICATION.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn verification_measured() -> bool {
    MEASURE_VERIFICATION.load(std::sync::atomic::Ordering::Relaxed) || docmem_core::answerability::LOCAL.verification != 0.0
}

/// The refusal as the answer prompt asks for it, at the start of a reply.
pub const REFUSAL: &str = "Not in the documents.";

/// Stop strings of an answer: a blank line ends it (the prompt asks for the answer, then
/// at most a sentence of support; what follows a blank line is a small model echoing the
/// prompt's layout or inventing sources).
pub fn answer_stops() -> Vec<String> {
    vec!["\n\n".to_owned()]
}

/// Writes the greedy reply to one user turn (see the module docs).
pub trait Answerer {
    /// The reply to `user_turn`, as `options` say, its text streamed to `on_text` as it is
    /// written; `on_text` returning `Break` stops it ([`Finish::Cancelled`]).
    fn reply<'a>(
        &'a self,
        user_turn: &'a str,
        options: ReplyOptions,
        on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<Reply, Error>>;

    /// Read the start of a user turn ahead of its reply, while the rest (the question) is
    /// still being written: a local model runs it into the prompt it keeps, so the reply
    /// whose turn begins with it runs only the rest ([`LmContext::prefill_ahead`]); `stop` is
    /// asked between pieces of [`AHEAD_CHUNK`] tokens and what was read is kept. Returns
    /// the tokens now kept; a hosted model reads nothing ahead (0).
    fn read_ahead<'a>(&'a self, user_turn_start: &'a str, stop: &'a dyn Fn() -> bool) -> LocalBoxFuture<'a, Result<usize, Error>> {
        let _ = (user_turn_start, stop);
        boxed(async { Ok(0) })
    }

    /// Whether [`Answerer::read_ahead`] keeps anything: false for a hosted model, so that
    /// a read-ahead skips the search (and a hosted embedder's request) it would throw away.
    fn reads_ahead(&self) -> bool {
        false
    }
}

/// Tokens read ahead between two looks at `stop` ([`Answerer::read_ahead`]): a request
/// that arrives waits for at most this many (about half a second for the 1.5B in wasm on
/// two cores), and enough to keep the matrix products batched.
pub const AHEAD_CHUNK: usize = 16;

impl<B: Backend> Answerer for LmContext<B> {
    fn reply<'a>(
        &'a self,
        user_turn: &'a str,
        options: ReplyOptions,
        on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<Reply, Error>> {
        boxed(async move {
            let messages = [ChatMessage::new("user", user_turn)];
            let sampling = SamplingParams { max_tokens: options.max_tokens, stop: answer_stops(), ..SamplingParams::default() };
            // The prompt runs once (less the start it shares with the kept one); the reply
            // and the refusal are both scored after it.
            let lm = self.model();
            let start = crate::lm::now_seconds();
            let fitted = crate::probe::for_model(lm.identity());
            let tokens = lm.prompt_tokens(Prompt::Chat(&messages))?;
            let state_at = match fitted {
                Some(p) => lm.probe_reads_at(p.position, user_turn, &tokens)?.map(|after_tokens| StateAt { layer: p.layer, after_tokens }),
                None => None,
            };
            let Prefilled { prefix, reused: reused_tokens, state } = self.prefill(tokens, PrefillOptions { state_at }).await?;
            let probe = fitted.zip(state).map(|(p, state)| p.margin(&state));
            let prompt_tokens = prefix.tokens().len();
            let prefill_seconds = crate::lm::now_seconds() - start;
            if options.probe_decides && probe.is_some_and(|margin| margin < 0.0) {
                let refusal: f32 = lm.score_after(&prefix, REFUSAL).await?.iter().sum();
                return Ok(Reply {
                    text: String::new(),
                    finish: Finish::Withheld,
                    prefill_seconds,
                    decode_seconds: 0.0,
                    reused_tokens,
                    prompt_tokens,
                    probabilities: Some(ReplyProbabilities { refusal, reply: 0.0, verified: None, probe }),
                });
            }
            let g = lm.generate_after(&prefix, "", &sampling, on_text).await?;
            let probabilities = if g.finish == Finish::Cancelled || !calibrated_for(lm.identity()) {
                None
            } else {
                let refusal: f32 = lm.score_after(&prefix, REFUSAL).await?.iter().sum();
                let reply = lm.score_after(&prefix, &g.text).await?;
                let mean = if reply.is_empty() { 0.0 } else { reply.iter().sum::<f32>() / reply.len() as f32 };
                let verified = if verification_measured() { lm.verify_after(&prefix, &messages[0], &g.text).await? } else { None };
                Some(ReplyProbabilities { refusal, reply: mean, verified, probe })
            };
            Ok(Reply {
                text: g.text,
                finish: g.finish,
                prefill_seconds: prefill_seconds + g.prefill_seconds,
                decode_seconds: g.decode_seconds,
                reused_tokens,
                prompt_tokens,
                probabilities,
            })
        })
    }

    fn reads_ahead(&self) -> bool {
        true
    }

    fn read_ahead<'a>(&'a self, user_turn_start: &'a str, stop: &'a dyn Fn() -> bool) -> LocalBoxFuture<'a, Result<usize, Error>> {
        boxed(async move {
            // The instructions alone (an app waiting for a question): nothing to read when
            // the kept prompt starts with them in either language, so that a Chinese
            // question's prompt is not cut back to read the English ones.
            let instructions = [false, true].map(docmem_core::answer::instructions);
            if instructions.contains(&user_turn_start) {
                for start in instructions {
                    if let Some(tokens) = self.model().turn_start_tokens(start)?.filter(|t| self.keeps_prompt_start(t)) {
                        return Ok(tokens.len());
                    }
                }
            }
            match self.model().turn_start_tokens(user_turn_start)? {
                Some(tokens) => self.prefill_ahead(&tokens, AHEAD_CHUNK, stop).await,
                None => Ok(0),
            }
        })
    }
}

impl<B: Backend> Lm<B> {
    /// How many of `tokens`, the prompt of a chat of the one user turn `user_turn`, come up
    /// to and including the token a probe at `position` reads; `None` when the turn's end
    /// cannot be found among them (a template that rewrites the turn).
    pub fn probe_reads_at(&self, position: ProbePosition, user_turn: &str, tokens: &[u32]) -> Result<Option<usize>, Error> {
        Ok(match position {
            ProbePosition::Prompt => Some(tokens.len()),
            ProbePosition::Question => self.user_turn_end(user_turn, tokens)?,
        })
    }

    /// How many of `tokens`, the prompt of a chat of the one user turn `user_turn`, come up
    /// to the end of that turn's text, before the template closes it; `None` when they do
    /// not begin with the tokens of the rendered chat up to there.
    pub fn user_turn_end(&self, user_turn: &str, tokens: &[u32]) -> Result<Option<usize>, Error> {
        let head = self.rendered_tokens_through(user_turn, user_turn.trim_end())?.unwrap_or_default();
        Ok((!head.is_empty() && head.len() <= tokens.len() && tokens.starts_with(&head)).then_some(head.len()))
    }

    /// The tokens of a chat whose user turn begins with `user_turn_start`, as the reply will
    /// render it, up to the end of that start less its last token (which may join what
    /// follows into another token in the whole prompt); `None` when there are none.
    fn turn_start_tokens(&self, user_turn_start: &str) -> Result<Option<Vec<u32>>, Error> {
        if user_turn_start.is_empty() {
            return Ok(None);
        }
        let Some(mut tokens) = self.rendered_tokens_through(user_turn_start, user_turn_start)? else { return Ok(None) };
        tokens.pop();
        Ok(Some(tokens).filter(|t| !t.is_empty()))
    }

    /// The tokens of the chat of the one user turn `user_turn`, rendered as a reply renders
    /// it, up to the end of the last `through` in it; `None` when it holds no `through`.
    fn rendered_tokens_through(&self, user_turn: &str, through: &str) -> Result<Option<Vec<u32>>, Error> {
        let rendered = self.render_chat(&[ChatMessage::new("user", user_turn)])?;
        let Some(at) = rendered.rfind(through) else { return Ok(None) };
        Ok(Some(self.tokenizer.encode_prompt(&rendered[..at + through.len()])?))
    }

    /// The token a reply opens with when it is the refusal ([`REFUSAL`]'s first token, as
    /// it stands at the start of the assistant's turn); `None` when it encodes to nothing.
    pub fn refusal_opening(&self) -> Result<Option<u32>, Error> {
        Ok(self.tokenizer.encode(REFUSAL)?.first().copied())
    }

    /// The answerer's "Yes" against its "No" to [`VERIFY`], asked after `reply` in the
    /// conversation whose prompt `prefix` holds; `None` when the rendered conversation does
    /// not begin with the prompt's tokens (its cache could not be reused) or the model has
    /// no single-token "Yes" and "No".
    pub async fn verify_after(&self, prefix: &Prefix<B::Cache>, question: &ChatMessage, reply: &str) -> Result<Option<f32>, Error> {
        let conversation = [question.clone(), ChatMessage::new("assistant", reply.trim()), ChatMessage::new("user", VERIFY)];
        let tokens = self.prompt_tokens(Prompt::Chat(&conversation))?;
        let Some(tail) = tokens.strip_prefix(prefix.tokens()) else { return Ok(None) };
        let (Some(yes), Some(no)) = (self.single_token("Yes")?, self.single_token("No")?) else { return Ok(None) };
        if tail.is_empty() {
            return Ok(None);
        }
        let logits = self.logits_after(prefix, tail).await?;
        Ok(Some(crate::lm::log_prob(&logits, yes) - crate::lm::log_prob(&logits, no)))
    }
}

/// A scripted answerer for the pipeline's and the session's tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::ops::ControlFlow;

    use docmem_core::local_future::{boxed, LocalBoxFuture};

    use super::{Answerer, Reply, ReplyOptions, ReplyProbabilities};
    use crate::lm::Finish;
    use crate::Error;

    /// Writes `text` a word at a time (stopping where the callback breaks, as a model
    /// does), with `probabilities` as its evidence.
    pub(crate) struct Scripted {
        pub text: &'static str,
        pub probabilities: Option<ReplyProbabilities>,
    }

    impl Answerer for Scripted {
        fn reply<'a>(
            &'a self,
            _user_turn: &'a str,
            _options: ReplyOptions,
            on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
        ) -> LocalBoxFuture<'a, Result<Reply, Error>> {
            boxed(async move {
                let mut text = String::new();
                let mut finish = Finish::EndOfText;
                for word in self.text.split_inclusive(' ') {
                    text.push_str(word);
                    if on_text(word).is_break() {
                        finish = Finish::Cancelled;
                        break;
                    }
                }
                let probabilities = self.probabilities;
                Ok(Reply { text, finish, prefill_seconds: 0.0, decode_seconds: 0.0, reused_tokens: 0, prompt_tokens: 0, probabilities })
            })
        }
    }
}
