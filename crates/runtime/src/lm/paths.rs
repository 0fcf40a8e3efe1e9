//! Multi-path generation: several continuations of one prefilled prefix (MoM's greedy
//! memory plus its sampled candidates), decoded together.
//!
//! Each path forks the prefix's K/V cache; every step feeds the next token of every live
//! path to [`Backend::forward_batch`] as one batch, so the weights are read once per step
//! instead of once per path (decoding is memory-bound, so that is nearly the whole cost of
//! a step). A path that ends (end-of-text, a stop string, its `max_tokens`, the context
//! window) leaves the batch and frees its cache.
//!
//! Each path's output is exactly what [`Lm::generate_after`] gives for its settings (the
//! CPU backend sums every batched row in the one-token order), which the tests check.

use std::ops::ControlFlow;

use super::{find_stop, now_seconds, Backend, Finish, Generation, Lm, LmError, Prefix, Sampler, SamplingParams, Utf8Stream};

/// One path in flight.
struct Path<C> {
    cache: C,
    history: Vec<u32>,
    sampler: Sampler,
    stream: Utf8Stream,
    text: String,
    tokens: Vec<u32>,
    logits: Vec<f32>,
    /// `Some` once the path has ended.
    finish: Option<Finish>,
    /// Whether `on_done` has seen it end.
    reported: bool,
}

impl<B: Backend> Lm<B> {
    /// Generate one continuation of `prefix` per entry of `paths` (each with its own
    /// sampling settings, seed, stop strings and `max_tokens`), decoded together as one
    /// batch per step. The prefix is left as it was. Results are in the order of `paths`;
    /// every one carries the batch's total decode time.
    pub fn generate_paths(&self, prefix: &Prefix<B::Cache>, paths: &[SamplingParams]) -> Result<Vec<Generation>, LmError> {
        self.generate_paths_with(prefix, paths, |_, _| ControlFlow::Continue(()))
    }

    /// [`generate_paths`](Self::generate_paths), calling `on_done(index, generation)` as
    /// each path ends (in the order they end); `ControlFlow::Break` stops the others,
    /// which are returned as they are with [`Finish::Cancelled`].
    pub fn generate_paths_with(
        &self,
        prefix: &Prefix<B::Cache>,
        paths: &[SamplingParams],
        mut on_done: impl FnMut(usize, &Generation) -> ControlFlow<()>,
    ) -> Result<Vec<Generation>, LmError> {
        let start = now_seconds();
        let prompt_tokens = prefix.tokens.len();
        let mut live: Vec<Path<B::Cache>> = paths
            .iter()
            .map(|p| Path {
                cache: prefix.cache.clone(),
                history: prefix.tokens.clone(),
                sampler: Sampler::new(p.clone()),
                stream: Utf8Stream::default(),
                text: String::new(),
                tokens: Vec::new(),
                logits: prefix.last_logits.clone(),
                finish: (p.max_tokens == 0).then_some(Finish::Length),
                reported: false,
            })
            .collect();
        let generation = |p: &Path<B::Cache>| Generation {
            text: p.text.clone(),
            tokens: p.tokens.clone(),
            prompt_tokens,
            finish: p.finish.unwrap_or(Finish::Cancelled),
            prefill_seconds: 0.0,
            decode_seconds: now_seconds() - start,
        };
        let mut cancelled = false;
        // Report the paths that have ended (and free what they held).
        let mut report = |live: &mut [Path<B::Cache>], cancelled: &mut bool| {
            for (i, p) in live.iter_mut().enumerate() {
                if p.finish.is_some() && !p.reported {
                    p.reported = true;
                    p.logits = Vec::new();
                    p.cache = self.backend.new_cache();
                    if !*cancelled && on_done(i, &generation(p)).is_break() {
                        *cancelled = true;
                    }
                }
            }
        };
        report(&mut live, &mut cancelled);
        while !cancelled {
            // Pick each live path's next token; the ones that go on form this step's batch.
            let mut step: Vec<usize> = Vec::new();
            for (i, p) in live.iter_mut().enumerate().filter(|(_, p)| p.finish.is_none()) {
                let params = &paths[i];
                let next = p.sampler.sample(&mut p.logits, &p.history);
                let finish = if self.tokenizer.stop_ids().contains(&next) {
                    Some(Finish::EndOfText)
                } else {
                    p.tokens.push(next);
                    p.history.push(next);
                    let piece = p.stream.push(&self.tokenizer.token_bytes(next)?);
                    let before = p.text.len();
                    p.text.push_str(&piece);
                    if let Some(cut) = find_stop(&p.text, before, &params.stop) {
                        p.text.truncate(cut);
                        Some(Finish::Stop)
                    } else if p.tokens.len() >= params.max_tokens {
                        Some(Finish::Length)
                    } else if p.history.len() >= self.context {
                        Some(Finish::ContextFull)
                    } else {
                        None
                    }
                };
                match finish {
                    Some(f) => p.finish = Some(f),
                    None => step.push(i),
                }
            }
            report(&mut live, &mut cancelled);
            if step.is_empty() || cancelled {
                break;
            }
            let mut seqs: Vec<(&mut B::Cache, &[u32])> = live
                .iter_mut()
                .filter(|p| p.finish.is_none())
                .map(|p| {
                    let Path { cache, tokens, .. } = p;
                    let tokens: &Vec<u32> = tokens;
                    (cache, &tokens[tokens.len() - 1..])
                })
                .collect();
            let logits = self.backend.forward_batch(&mut seqs)?;
            let vocab = self.config().vocab;
            for (row, &i) in step.iter().enumerate() {
                live[i].logits.clear();
                live[i].logits.extend_from_slice(&logits[row * vocab..(row + 1) * vocab]);
            }
        }
        Ok(live.iter().map(generation).collect())
    }
}
