//! Drafts from the prompt (prompt-lookup decoding). A document memory copies the first and
//! last characters of each chunk of the document it reads, so when the last few tokens a
//! path generated also occur in the prompt, the tokens that follow them there are a good
//! guess at what the path writes next. The guess costs no model: the n-grams of the prompt
//! are indexed once, and each step looks up the path's last `n` tokens (the longest `n`
//! first). The drafted run is verified in the same forward pass as the path's next token
//! ([`super::Lm::generate_paths_drafted`]); what the model agrees with is kept.

use std::collections::HashMap;

/// How drafts are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraftSettings {
    /// Longest n-gram looked up (tried first).
    pub max_ngram: usize,
    /// Shortest n-gram looked up.
    pub min_ngram: usize,
    /// Most tokens drafted per step.
    pub tokens: usize,
}

impl Default for DraftSettings {
    fn default() -> Self {
        DraftSettings { max_ngram: 3, min_ngram: 2, tokens: 6 }
    }
}

/// The n-grams of a prompt, ready to draft from.
#[derive(Clone, Debug)]
pub struct PromptLookup {
    tokens: Vec<u32>,
    /// Per n (index `n - min_ngram`): n-gram → the positions just after its occurrences,
    /// in order.
    index: Vec<HashMap<Vec<u32>, Vec<usize>>>,
    settings: DraftSettings,
}

impl PromptLookup {
    /// Index `tokens` (the prompt) for drafting with `settings`.
    pub fn new(tokens: &[u32], settings: DraftSettings) -> Self {
        let min = settings.min_ngram.max(1);
        let max = settings.max_ngram.max(min);
        let settings = DraftSettings { min_ngram: min, max_ngram: max, ..settings };
        let index = (min..=max)
            .map(|n| {
                let mut m: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
                for end in n..tokens.len() {
                    m.entry(tokens[end - n..end].to_vec()).or_default().push(end);
                }
                m
            })
            .collect();
        PromptLookup { tokens: tokens.to_vec(), index, settings }
    }

    /// The settings in use.
    pub fn settings(&self) -> DraftSettings {
        self.settings
    }

    /// Up to `settings.tokens` tokens the prompt continues `history` with, where its last
    /// n-gram occurs in the prompt (the longest n that matches); `after` is where the
    /// path's previous draft came from, so that a path copying a passage keeps following
    /// it rather than jumping to the passage's first occurrence. Returns the draft and
    /// where it ends in the prompt.
    pub fn draft(&self, history: &[u32], after: usize) -> (Vec<u32>, usize) {
        let s = self.settings;
        for n in (s.min_ngram..=s.max_ngram).rev() {
            if history.len() < n {
                continue;
            }
            let Some(ends) = self.index[n - s.min_ngram].get(&history[history.len() - n..]) else { continue };
            let at = ends.iter().copied().find(|&e| e >= after).unwrap_or(ends[0]);
            let stop = (at + s.tokens).min(self.tokens.len());
            if stop > at {
                return (self.tokens[at..stop].to_vec(), stop);
            }
        }
        (Vec::new(), after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_continue_the_longest_matching_ngram_and_follow_the_passage() {
        let prompt = [1, 2, 3, 4, 5, 6, 9, 2, 3, 7, 8, 2, 3, 4, 10, 11];
        let lookup = PromptLookup::new(&prompt, DraftSettings { max_ngram: 3, min_ngram: 2, tokens: 3 });
        // "2 3" occurs three times; "1 2 3" once: the trigram wins.
        assert_eq!(lookup.draft(&[0, 1, 2, 3], 0), (vec![4, 5, 6], 6));
        // Bigram only: the first occurrence at or after `after`.
        assert_eq!(lookup.draft(&[0, 9, 2, 3], 0), (vec![7, 8, 2], 12));
        assert_eq!(lookup.draft(&[5, 5, 2, 3], 4), (vec![7, 8, 2], 12));
        assert_eq!(lookup.draft(&[5, 5, 2, 3], 10), (vec![4, 10, 11], 16));
        // Nothing to continue from.
        assert_eq!(lookup.draft(&[42, 43], 3), (vec![], 3));
        assert_eq!(lookup.draft(&[10, 11], 0), (vec![], 0));
    }
}
