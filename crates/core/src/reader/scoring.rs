//! Scoring a candidate memory with a [`Scorer`]: MoM's chunk clarity and core
//! completeness (the arithmetic is in [`crate::score`]).
//!
//! - Clarity of a boundary: the scorer is shown the text around the cut, then the two
//!   pieces, and asked whether the text should stay one piece or become two; the
//!   probability of "two" (normalised over the two answers) is the boundary's score.
//! - Completeness of a scenario: PPL(chunk | core), read as the log-probabilities of the
//!   chunk's tokens after "Key point: {core}\nFull text:".
//!
//! Texts shown to the scorer are cut to [`ScoringLimits`] so a long chunk costs a bounded
//! number of tokens: clarity looks at the ends that meet at the boundary, completeness at
//! the chunk's beginning (where a good core is most predictive).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::memory::Scenario;
use crate::score::{chunk_clarity, core_completeness, Scorer};
use crate::select::CandidateScores;
use crate::Error;

/// How much text the scorer sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoringLimits {
    /// Characters of each side of a boundary.
    pub boundary_chars: usize,
    /// Characters of a chunk scored against its core.
    pub chunk_chars: usize,
}

impl Default for ScoringLimits {
    fn default() -> Self {
        ScoringLimits { boundary_chars: 300, chunk_chars: 600 }
    }
}

fn head(s: &str, chars: usize) -> &str {
    s.char_indices().nth(chars).map_or(s, |(i, _)| &s[..i])
}

fn tail(s: &str, chars: usize) -> &str {
    let n = s.chars().count();
    if n <= chars {
        return s;
    }
    s.char_indices().nth(n - chars).map_or(s, |(i, _)| &s[i..])
}

/// The question asked at a boundary; the answers scored are " one" and " two".
pub fn boundary_prompt(left: &str, right: &str) -> String {
    format!(
        "Text:\n{left}{right}\n\nProposed split:\n[1] {left}\n[2] {right}\n\nShould the text stay one piece, or become these two pieces? Answer one or two.\nAnswer:"
    )
}

/// Log-probability that the text should be split at each boundary between `scenarios`.
pub async fn boundary_logprobs(
    text: &str,
    scenarios: &[Scenario],
    scorer: &mut dyn Scorer,
    limits: &ScoringLimits,
) -> Result<Vec<f64>, Error> {
    let mut out = Vec::new();
    for pair in scenarios.windows(2) {
        let (Some(a), Some(b)) = (pair[0].span.slice(text), pair[1].span.slice(text)) else { continue };
        let prompt = boundary_prompt(tail(a, limits.boundary_chars), head(b, limits.boundary_chars));
        let lp = scorer.next_token_logprobs(&prompt, &[" one", " two"]).await?;
        let (one, two) = (f64::from(lp[0]), f64::from(lp[1]));
        let max = one.max(two);
        let log_sum = max + libm::log(libm::exp(one - max) + libm::exp(two - max));
        out.push(two - log_sum);
    }
    Ok(out)
}

/// Clarity and completeness of one candidate's scenarios over `text`.
pub async fn score_candidate(
    text: &str,
    scenarios: &[Scenario],
    scorer: &mut dyn Scorer,
    limits: &ScoringLimits,
) -> Result<CandidateScores, Error> {
    let clarity = chunk_clarity(&boundary_logprobs(text, scenarios, scorer, limits).await?);
    let mut contexts = Vec::new();
    let mut chunks = Vec::new();
    let mut core_tokens = Vec::new();
    for s in scenarios {
        let chunk = s.span.slice(text).map(|c| head(c, limits.chunk_chars)).unwrap_or("");
        core_tokens.push(if s.core.trim().is_empty() { 0 } else { scorer.count_tokens(&s.core)? });
        contexts.push(format!("Key point: {}\nFull text:", s.core.trim()));
        chunks.push(format!(" {}", chunk.trim()));
    }
    let pairs: Vec<(&str, &str)> = contexts.iter().zip(&chunks).map(|(c, a)| (c.as_str(), a.as_str())).collect();
    let logprobs = if pairs.is_empty() { Vec::new() } else { scorer.continuation_logprobs(&pairs).await? };
    let per_scenario: Vec<(Vec<f32>, usize)> = logprobs.into_iter().zip(core_tokens).collect();
    Ok(CandidateScores { clarity, completeness: core_completeness(&per_scenario) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::{boxed, poll_once, LocalBoxFuture};
    use crate::span::Span;
    use alloc::vec;

    fn score(text: &str, scenarios: &[Scenario], l: &ScoringLimits) -> CandidateScores {
        poll_once(score_candidate(text, scenarios, &mut Fake, l)).expect("the fake scorer never waits").unwrap()
    }

    /// Says "two" with probability 0.8 when the right piece starts with a capital, and
    /// gives chunk tokens log-probability −1 after a non-empty core, −3 after an empty one.
    struct Fake;
    impl Scorer for Fake {
        fn continuation_logprobs<'a>(&'a mut self, pairs: &'a [(&'a str, &'a str)]) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>> {
            let out = pairs.iter().map(|(c, a)| vec![if c.contains("point: \n") { -3.0 } else { -1.0 }; a.len() / 4 + 1]).collect();
            boxed(async move { Ok(out) })
        }
        fn next_token_logprobs<'a>(&'a mut self, prompt: &'a str, _: &'a [&'a str]) -> LocalBoxFuture<'a, Result<Vec<f32>, Error>> {
            let right = prompt.split("\n[2] ").nth(1).unwrap_or("");
            let split = right.starts_with(|c: char| c.is_uppercase());
            boxed(async move { Ok(if split { vec![0.2f32.ln(), 0.8f32.ln()] } else { vec![0.8f32.ln(), 0.2f32.ln()] }) })
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, Error> {
            Ok(text.split_whitespace().count())
        }
    }

    fn sc(a: usize, b: usize, core: &str) -> Scenario {
        Scenario { span: Span::new(a, b), core: core.into(), outline_item: None }
    }

    #[test]
    fn clean_cuts_score_clearer_and_cores_complete() {
        let text = "Rivers flow to the sea. Mountains rise high above.";
        let clean = [sc(0, 24, "rivers reach the sea"), sc(24, text.len(), "mountains are high")];
        let messy = [sc(0, 10, "rivers reach the sea"), sc(10, text.len(), "")];
        let l = ScoringLimits::default();
        let a = score(text, &clean, &l);
        let b = score(text, &messy, &l);
        assert!((a.clarity.unwrap() - 0.8).abs() < 1e-6);
        assert!((b.clarity.unwrap() - 0.2).abs() < 1e-6);
        assert!(a.completeness.unwrap() > b.completeness.unwrap());
        // One chunk: no boundary to judge.
        assert_eq!(score(text, &[sc(0, text.len(), "all")], &l).clarity, None);
    }

    #[test]
    fn texts_are_cut_on_char_boundaries() {
        assert_eq!(head("文档记忆", 2), "文档");
        assert_eq!(tail("文档记忆", 2), "记忆");
        assert_eq!(tail("ab", 5), "ab");
        assert!(boundary_prompt("left.", " Right").contains("[2]  Right"));
    }
}
