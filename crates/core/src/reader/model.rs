//! What extraction needs from a language model, as a trait: the runtime's local models and
//! the remote (edge-worker) backend implement it, and tests use a scripted fake.

use alloc::string::String;
use alloc::vec::Vec;

use crate::local_future::LocalBoxFuture;
use crate::score::Scorer;
use crate::Error;

/// How one candidate is sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleSpec {
    /// Softmax temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus threshold.
    pub top_p: f32,
    /// Random seed.
    pub seed: u64,
    /// What the reply must open with, if anything: a reader that writes something else
    /// for this long is stopped there (its reply cannot parse, so every further token is
    /// wasted). A model that cannot stop mid-reply may ignore it.
    pub opening: Option<Opening>,
}

impl SampleSpec {
    /// The most likely token every time, with no expected opening.
    pub const GREEDY: SampleSpec = SampleSpec { temperature: 0.0, top_p: 1.0, seed: 0, opening: None };
}

/// A reply's expected opening: one of `markers` within its first `within_tokens` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    /// Texts any one of which the reply must contain (a format's opening tags).
    pub markers: &'static [&'static str],
    /// How many tokens a reply has to show one (room for a short preamble).
    pub within_tokens: usize,
}

impl Opening {
    /// Whether `text`, `tokens` tokens into a reply, has gone past this opening without
    /// showing it.
    pub fn missed(&self, text: &str, tokens: usize) -> bool {
        tokens >= self.within_tokens && !self.markers.iter().any(|m| text.contains(m))
    }
}

/// One generated text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// The text.
    pub text: String,
    /// Tokens generated.
    pub tokens: usize,
}

/// What a reader's work has cost so far: where a memory's time goes. Prompts are the
/// windows asked about and any fallback's or retry's prompts; every candidate's tokens
/// count as written; scoring is the candidates' clarity and completeness reads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReadingCost {
    /// Prompts read (one per [`ReaderModel::generate`] call).
    pub prompts: usize,
    /// Their tokens (chat template included).
    pub prompt_tokens: usize,
    /// Seconds reading them.
    pub prefill_seconds: f64,
    /// Tokens written, over every candidate.
    pub written_tokens: usize,
    /// Seconds writing them.
    pub decode_seconds: f64,
    /// Scoring calls.
    pub scorings: usize,
    /// Seconds scoring.
    pub scoring_seconds: f64,
}

impl ReadingCost {
    /// Seconds in all.
    pub fn seconds(&self) -> f64 {
        self.prefill_seconds + self.decode_seconds + self.scoring_seconds
    }
}

/// A chat model that reads documents. It is also a [`Scorer`], so by default the reader
/// scores its own candidates.
pub trait ReaderModel: Scorer {
    /// A short name for provenance (file or hosted-model name).
    fn name(&self) -> String;
    /// The context window in tokens.
    fn context_tokens(&self) -> usize;
    /// Tokens the chat template adds around one user turn (and the assistant's opening).
    fn chat_overhead_tokens(&mut self) -> usize;
    /// Send `user_turn` as the user's message and generate one reply per spec, each at most
    /// `max_tokens` long, returned in the order of `specs`. The prompt is processed once and
    /// shared by all of them, and they are asked for together so that a model can decode
    /// them as one batch. `after_each` is called as each candidate ends (in the order they
    /// end) with the number done so far; returning false cancels.
    /// Async: a reader on WebGPU waits for its logits ([`crate::local_future`]).
    fn generate<'a>(
        &'a mut self,
        user_turn: &'a str,
        specs: &'a [SampleSpec],
        max_tokens: usize,
        after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, Error>>;
    /// What this reader's work has cost since it was made; `None` when it does not keep
    /// count (a hosted model, a scripted one).
    fn cost(&self) -> Option<ReadingCost> {
        None
    }
}
