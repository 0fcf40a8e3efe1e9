//! The last answer prompt's K/V cache, kept so that the next prompt that starts the same
//! way runs only what differs.
//!
//! Why: on a CPU an answer's first words wait for its whole prompt to be prefilled (the
//! 1.5B reads about 30 tokens a second in wasm on two cores), and answer prompts share a
//! long start: the chat template and the instructions always, the first passages when a
//! follow-up question finds them again, and every passage when the prompt was read ahead
//! while the question was still being typed ([`super::LmContext::prefill_ahead`]). As llama.cpp's
//! server does with `cache_prompt`, the longest common run of tokens is reused and only the
//! rest is run.
//!
//! One prompt is kept per model context (for the 1.5B about 57 KB a token: 34 MB for a
//! 600-token prompt). Only the context's own prefills use it (the answerer's); a reader's
//! prompts run on the model and never displace it.
//!
//! The tokens after the reused start run as a batch of their own, so their float sums may
//! group differently from a single prefill's (llama.cpp's own prompt cache has the same
//! property); the parity tests with llama.cpp run whole prompts.

use std::sync::Mutex;

use super::Prefix;

/// One kept prompt (see the module docs).
pub(crate) struct PromptCache<C> {
    last: Mutex<Option<Prefix<C>>>,
}

impl<C> Default for PromptCache<C> {
    fn default() -> Self {
        PromptCache { last: Mutex::new(None) }
    }
}

impl<C> PromptCache<C> {
    /// The kept prompt, taken out: the caller keeps it, or what it made from it, again
    /// with [`PromptCache::keep`].
    pub(crate) fn take(&self) -> Option<Prefix<C>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Keep `prefix` as the prompt the next one is compared with.
    pub(crate) fn keep(&self, prefix: Prefix<C>) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(prefix);
    }

    /// Whether the kept prompt starts with `tokens`.
    pub(crate) fn starts_with(&self, tokens: &[u32]) -> bool {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|p| p.tokens().starts_with(tokens))
    }

    /// Tokens kept.
    pub(crate) fn len(&self) -> usize {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, |p| p.tokens().len())
    }
}

/// How many tokens `a` and `b` share at their start.
pub(crate) fn common_start(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_start_stops_at_the_first_difference_or_the_shorter_end() {
        assert_eq!(common_start(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_start(&[1, 2], &[1, 2, 3]), 2);
        assert_eq!(common_start(&[], &[1]), 0);
        assert_eq!(common_start(&[5], &[1]), 0);
    }
}
