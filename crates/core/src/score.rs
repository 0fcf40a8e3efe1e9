//! MoM's memory-quality scores and informational support, from LM log-probabilities.
//!
//! The numbers come from a [`Scorer`] (the runtime's LM, or a remote one); this module only
//! does the arithmetic, so it is tested with fixed numbers.
//!
//! - **Chunk clarity**: the mean, over adjacent chunk pairs, of the probability the LM gives
//!   to "these are two pieces" when shown a_i and a_{i+1} joined. High when the reader cut
//!   where a reader should.
//! - **Core completeness**: the mean over scenarios of 1 / (PPL(a_i | c_i) · ln |c_i|):
//!   a core that lets the LM predict its chunk (low perplexity) in few tokens (small
//!   |c_i|) is complete and concise.
//!   *Short cores*: ln |c| is 0 at one token and negative below, which would make the score
//!   infinite or negative. We count |c| as at least 3 tokens (ln 3 ≈ 1.1), so a one- or
//!   two-token core scores like a three-token one at the same perplexity, and an empty core
//!   scores 0 (it cannot be complete).
//! - **Informational support**: the mean negative log-likelihood of the reference answer's
//!   tokens given the retrieved context; lower means the context supports the answer better.

use crate::local_future::LocalBoxFuture;
use crate::Error;
use alloc::vec::Vec;

/// Log-probabilities from a language model. Implemented by the runtime (CPU, WebGPU) and
/// the remote backend.
pub trait Scorer {
    /// For each `(context, continuation)` pair, the natural-log probability of each token of
    /// the continuation given the context and the tokens before it.
    /// Async: a scorer on WebGPU waits for its logits ([`crate::local_future`]).
    fn continuation_logprobs<'a>(&'a mut self, pairs: &'a [(&'a str, &'a str)]) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>>;
    /// Log-probabilities of each candidate as the next token(s) after `prompt` (for a
    /// multi-token candidate, the sum over its tokens).
    fn next_token_logprobs<'a>(&'a mut self, prompt: &'a str, candidates: &'a [&'a str]) -> LocalBoxFuture<'a, Result<Vec<f32>, Error>>;
    /// Number of tokens of `text` in this scorer's tokenizer.
    fn count_tokens(&mut self, text: &str) -> Result<usize, Error>;
}

/// Mean negative log-likelihood of a token sequence's log-probabilities; `None` when empty.
pub fn mean_nll(logprobs: &[f32]) -> Option<f64> {
    if logprobs.is_empty() {
        return None;
    }
    Some(-logprobs.iter().map(|&l| f64::from(l)).sum::<f64>() / logprobs.len() as f64)
}

/// Perplexity, exp(mean NLL); `None` when empty.
pub fn perplexity(logprobs: &[f32]) -> Option<f64> {
    mean_nll(logprobs).map(libm::exp)
}

/// Chunk clarity from the log-probability of "split" for each adjacent pair: the mean
/// probability. A memory with a single chunk has no boundary to judge: `None`.
pub fn chunk_clarity(boundary_logprobs: &[f64]) -> Option<f64> {
    if boundary_logprobs.is_empty() {
        return None;
    }
    Some(boundary_logprobs.iter().map(|&l| libm::exp(l)).sum::<f64>() / boundary_logprobs.len() as f64)
}

/// The smallest core length, in tokens, that enters ln |c| (see the module docs).
pub const MIN_CORE_TOKENS: usize = 3;

/// Completeness of one scenario: 1 / (PPL(a | c) · ln max(|c|, 3)); 0 for an empty core or
/// a chunk with no tokens.
pub fn scenario_completeness(chunk_logprobs_given_core: &[f32], core_tokens: usize) -> f64 {
    if core_tokens == 0 {
        return 0.0;
    }
    let Some(ppl) = perplexity(chunk_logprobs_given_core) else { return 0.0 };
    let ln_c = libm::log(core_tokens.max(MIN_CORE_TOKENS) as f64);
    1.0 / (ppl * ln_c)
}

/// Core completeness of a memory: the mean of [`scenario_completeness`]; `None` without
/// scenarios. Each item is (log-probs of the chunk's tokens given the core, core tokens).
pub fn core_completeness(scenarios: &[(Vec<f32>, usize)]) -> Option<f64> {
    if scenarios.is_empty() {
        return None;
    }
    Some(scenarios.iter().map(|(lp, n)| scenario_completeness(lp, *n)).sum::<f64>() / scenarios.len() as f64)
}

/// Informational support: mean NLL of the answer's tokens given the context (lower is
/// better); `None` for an empty answer.
pub fn informational_support(answer_logprobs: &[f32]) -> Option<f64> {
    mean_nll(answer_logprobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn clarity_is_mean_probability() {
        let c = chunk_clarity(&[libm::log(0.9), libm::log(0.5)]).unwrap();
        assert!(close(c, 0.7));
        assert_eq!(chunk_clarity(&[]), None);
    }

    #[test]
    fn completeness_by_hand() {
        // Mean NLL 1.0 -> PPL e; |c| = 10 -> ln 10.
        let lp = [-0.5f32, -1.5];
        let want = 1.0 / (core::f64::consts::E * libm::log(10.0));
        assert!(close(scenario_completeness(&lp, 10), want));
        // Short cores are counted as 3 tokens; empty cores score 0.
        let at3 = scenario_completeness(&lp, 3);
        assert!(close(scenario_completeness(&lp, 1), at3));
        assert!(close(scenario_completeness(&lp, 2), at3));
        assert_eq!(scenario_completeness(&lp, 0), 0.0);
        assert_eq!(scenario_completeness(&[], 5), 0.0);
        let m = core_completeness(&[(vec![-0.5, -1.5], 10), (vec![], 4)]).unwrap();
        assert!(close(m, want / 2.0));
    }

    #[test]
    fn support_is_mean_nll() {
        assert!(close(informational_support(&[-1.0, -3.0]).unwrap(), 2.0));
        assert_eq!(informational_support(&[]), None);
        assert!(close(perplexity(&[0.0]).unwrap(), 1.0));
    }
}
