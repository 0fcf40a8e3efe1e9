//! Multi-path generation: several continuations of one prefilled prefix (MoM's greedy
//! memory plus its sampled candidates), decoded together.
//!
//! Each path forks the prefix's K/V cache; every step feeds the next token of every live
//! path to [`Backend::forward_batch`] as one batch, so the weights are read once per step
//! instead of once per path (decoding is memory-bound, so that is nearly the whole cost of
//! a step). A path that ends (end-of-text, a stop string, its `max_tokens`, the context
//! window) leaves the batch and frees its cache.
//!
//! With drafts ([`PromptLookup`]), a path's next token goes in with the tokens the prompt
//! suggests after it, all verified in that one pass: each drafted token is kept while the
//! model agrees (greedy: it is the argmax; sampling: the acceptance rule of
//! [`Sampler::sample_with_draft`]), the first disagreement gives the path's next token
//! instead, and the cache drops the rows after it.
//!
//! Without drafts each path's output is exactly what [`Lm::generate_after`] gives for its
//! settings (the CPU backend sums every batched row in the one-token order); with drafts,
//! greedy paths are still identical and sampled ones are distributed the same. The tests
//! check both.

use std::ops::ControlFlow;

use super::drafts::PromptLookup;
use super::{find_stop, now_seconds, Backend, Finish, Generation, Lm, Prefix, Sampler, SamplingParams, Utf8Stream};
use crate::Error;

/// One path in flight.
pub(super) struct Path<C> {
    cache: C,
    history: Vec<u32>,
    sampler: Sampler,
    stream: Utf8Stream,
    text: String,
    tokens: Vec<u32>,
    /// The token chosen last, to be fed next.
    pending: u32,
    /// Where the path's last draft ended in the prompt.
    draft_at: usize,
    /// Tokens drafted and accepted.
    drafted: usize,
    accepted: usize,
    /// `Some` once the path has ended.
    finish: Option<Finish>,
    /// Whether `on_done` has seen it end.
    reported: bool,
}

impl<C> Path<C> {
    /// The path as a [`Generation`] (decode time counted from `start`).
    pub(super) fn generation(&self, start: f64) -> Generation {
        Generation {
            text: self.text.clone(),
            tokens: self.tokens.clone(),
            // The history is the prompt and what the path wrote.
            prompt_tokens: self.history.len() - self.tokens.len(),
            finish: self.finish.unwrap_or(Finish::Cancelled),
            prefill_seconds: 0.0,
            decode_seconds: now_seconds() - start,
            drafted: self.drafted,
            accepted: self.accepted,
        }
    }

    /// Tokens this path has written.
    pub(super) fn written(&self) -> usize {
        self.tokens.len()
    }

    /// Let the next [`Lm::run_paths`] report this path again if it has ended (a resumed
    /// caller counts the paths that end from scratch).
    pub(super) fn report_again(&mut self) {
        self.reported = false;
    }
}

impl<B: Backend> Lm<B> {
    /// Generate one continuation of `prefix` per entry of `paths` (each with its own
    /// sampling settings, seed, stop strings and `max_tokens`), decoded together as one
    /// batch per step. The prefix is left as it was. Results are in the order of `paths`;
    /// every one carries the batch's total decode time.
    pub async fn generate_paths(&self, prefix: &Prefix<B::Cache>, paths: &[SamplingParams]) -> Result<Vec<Generation>, Error> {
        self.generate_paths_drafted(prefix, paths, None, |_, _| ControlFlow::Continue(()), &mut || ControlFlow::Continue(())).await
    }

    /// [`generate_paths`](Self::generate_paths), calling `on_done(index, generation)` as
    /// each path ends (in the order they end); `ControlFlow::Break` stops the others,
    /// which are returned as they are with [`Finish::Cancelled`].
    pub async fn generate_paths_with(
        &self,
        prefix: &Prefix<B::Cache>,
        paths: &[SamplingParams],
        on_done: impl FnMut(usize, &Generation) -> ControlFlow<()>,
    ) -> Result<Vec<Generation>, Error> {
        self.generate_paths_drafted(prefix, paths, None, on_done, &mut || ControlFlow::Continue(())).await
    }

    /// [`generate_paths_with`](Self::generate_paths_with), each step also verifying the
    /// tokens `drafts` proposes for each path (prompt-lookup decoding; none: plain
    /// decoding). [`Generation::drafted`] and [`Generation::accepted`] count them.
    /// `before_step` is asked before every decoding step: `ControlFlow::Break` stops every
    /// path there, as a `Break` from `on_done` does (a caller that must give the model to
    /// other work stops within one step, not at the end of a path).
    pub async fn generate_paths_drafted(
        &self,
        prefix: &Prefix<B::Cache>,
        paths: &[SamplingParams],
        drafts: Option<&PromptLookup>,
        on_done: impl FnMut(usize, &Generation) -> ControlFlow<()>,
        before_step: &mut dyn FnMut() -> ControlFlow<()>,
    ) -> Result<Vec<Generation>, Error> {
        let start = now_seconds();
        let live = self.start_paths(prefix, paths)?;
        let (live, _) = self.run_paths(live, start, paths, drafts, on_done, &mut |_| before_step()).await?;
        Ok(live.iter().map(|p| p.generation(start)).collect())
    }

    /// One path per entry of `paths`, each with its first token drawn from the prefix's
    /// last logits (the caches fork the prefix's).
    pub(super) fn start_paths(&self, prefix: &Prefix<B::Cache>, paths: &[SamplingParams]) -> Result<Vec<Path<B::Cache>>, Error> {
        let mut live = Vec::with_capacity(paths.len());
        for params in paths {
            let mut p = Path {
                cache: prefix.cache.clone(),
                history: prefix.tokens.clone(),
                sampler: Sampler::new(params.clone()),
                stream: Utf8Stream::default(),
                text: String::new(),
                tokens: Vec::new(),
                pending: 0,
                draft_at: 0,
                drafted: 0,
                accepted: 0,
                finish: (params.max_tokens == 0).then_some(Finish::Length),
                reported: false,
            };
            if p.finish.is_none() {
                let next = p.sampler.sample(&mut prefix.last_logits.clone(), &p.history);
                p.finish = self.take(&mut p, next, params)?;
            }
            live.push(p);
        }
        Ok(live)
    }

    /// Decode `live` (started by [`Lm::start_paths`], or resumed) until every path ends, `on_done` breaks, or `before_step` (given the
    /// tokens the longest path still writing has written) breaks; decode times count from
    /// `start`. Paths
    /// that have ended and were not reported yet are reported first. Returns the paths as
    /// they are, and whether `before_step` stopped them (they can then go on later).
    pub(super) async fn run_paths(
        &self,
        mut live: Vec<Path<B::Cache>>,
        start: f64,
        paths: &[SamplingParams],
        drafts: Option<&PromptLookup>,
        mut on_done: impl FnMut(usize, &Generation) -> ControlFlow<()>,
        before_step: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<(Vec<Path<B::Cache>>, bool), Error> {
        let mut cancelled = false;
        // Report the paths that have ended (and free what they held).
        let mut report = |live: &mut [Path<B::Cache>], cancelled: &mut bool| {
            for (i, p) in live.iter_mut().enumerate() {
                if p.finish.is_some() && !p.reported {
                    p.reported = true;
                    p.cache = self.backend.new_cache();
                    if !*cancelled && on_done(i, &p.generation(start)).is_break() {
                        *cancelled = true;
                    }
                }
            }
        };
        report(&mut live, &mut cancelled);
        while !cancelled {
            let Some(written) = live.iter().filter(|p| p.finish.is_none()).map(|p| p.tokens.len()).max() else { break };
            if before_step(written).is_break() {
                return Ok((live, true));
            }
            // Each live path feeds its pending token and its draft.
            let mut feeds: Vec<(usize, Vec<u32>)> = Vec::new();
            for (i, p) in live.iter_mut().enumerate().filter(|(_, p)| p.finish.is_none()) {
                let mut feed = vec![p.pending];
                if let Some(lookup) = drafts {
                    // Never past max_tokens or the context window.
                    let room = (paths[i].max_tokens - p.tokens.len()).min(self.context_window.saturating_sub(p.history.len()));
                    let (mut d, at) = lookup.draft(&p.history, p.draft_at);
                    d.truncate(room);
                    p.draft_at = at;
                    feed.extend(d);
                }
                feeds.push((i, feed));
            }
            let bases: Vec<usize> = feeds.iter().map(|(i, _)| self.backend.cache_len(&live[*i].cache)).collect();
            let mut seqs: Vec<(&mut B::Cache, &[u32])> =
                live.iter_mut().filter(|p| p.finish.is_none()).zip(&feeds).map(|(p, (_, feed))| (&mut p.cache, &feed[..])).collect();
            let logits = self.backend.forward_batch(&mut seqs).await?;
            drop(seqs);
            let vocab = self.config().vocab;
            let mut row = 0;
            for ((i, feed), base) in feeds.iter().zip(bases) {
                let (p, params) = (&mut live[*i], &paths[*i]);
                let draft = &feed[1..];
                p.drafted += draft.len();
                let mut kept = feed.len();
                for r in 0..feed.len() {
                    let mut l = logits[(row + r) * vocab..(row + r + 1) * vocab].to_vec();
                    let next = match draft.get(r) {
                        Some(&d) => p.sampler.sample_with_draft(&mut l, &p.history, d),
                        None => p.sampler.sample(&mut l, &p.history),
                    };
                    p.finish = self.take(p, next, params)?;
                    if p.finish.is_some() {
                        break;
                    }
                    if draft.get(r) != Some(&next) {
                        // The model disagrees (or the draft is used up): `next` goes in
                        // next step; the rows after position `r` are dropped.
                        kept = r + 1;
                        break;
                    }
                    p.accepted += 1;
                }
                if p.finish.is_none() && kept < feed.len() {
                    self.backend.truncate(&mut p.cache, base + kept);
                }
                row += feed.len();
            }
            report(&mut live, &mut cancelled);
        }
        Ok((live, false))
    }

    /// Append `next` to path `p` (unless it ends the text) and say whether the path ends
    /// there, as [`Lm::generate_after`] decides; otherwise it becomes the pending token.
    fn take<C>(&self, p: &mut Path<C>, next: u32, params: &SamplingParams) -> Result<Option<Finish>, Error> {
        if self.tokenizer.stop_ids().contains(&next) {
            return Ok(Some(Finish::EndOfText));
        }
        p.tokens.push(next);
        p.history.push(next);
        p.pending = next;
        let piece = p.stream.push(&self.tokenizer.token_bytes(next)?);
        let before = p.text.len();
        p.text.push_str(&piece);
        Ok(if let Some(cut) = find_stop(&p.text, before, &params.stop) {
            p.text.truncate(cut);
            Some(Finish::Stop)
        } else if p.tokens.len() >= params.max_tokens {
            Some(Finish::Length)
        } else if p.history.len() >= self.context_window {
            Some(Finish::ContextFull)
        } else if params.opening.is_some_and(|o| o.missed(&p.text, p.tokens.len())) {
            Some(Finish::OffFormat)
        } else {
            None
        })
    }
}
