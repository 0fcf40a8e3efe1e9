//! Background generation that gave way, kept so that it goes on where it stopped.
//!
//! Why: a page writes a document's memory in the background with the same model that
//! answers questions, and a question takes the model at once (the reader is asked before
//! every prompt piece and decoding step). On two CPU cores the 1.5B reads a window's
//! prompt (about 1,200 tokens) for most of a minute and writes its memory for minutes more, and a user asks
//! (or types, which reads ahead) more often than that: a window that started again from
//! nothing after each question would never end. So the work stopped is kept, the prompt
//! read so far or the paths being decoded with their caches and samplers, and the next
//! call for the same prompt and settings continues it ([`super::LmContext::generate_paths_resumable`]).
//!
//! Continuing is exact: the prompt runs in the same pieces it would have run in, and the
//! paths are decoded step by step as before, so the output is the one an uninterrupted
//! call gives, greedy or sampled.
//!
//! One piece of stopped work is kept, the latest (a background queue works on one window
//! at a time); it is apart from the answerer's kept prompt (`prompt_cache`), so a question
//! never displaces it. It costs the K/V cache of what was read and written, per path (for
//! the 1.5B on the CPU about 57 KB a token; on WebGPU the caches grow in powers of two, and
//! a memory there samples four paths: a few hundred MB of GPU memory for a long window),
//! until it is finished, replaced by other stopped work, or dropped with
//! [`super::LmContext::forget_suspended`] (the page's worker does when the memory ends).
//!
//! The last few finished results are kept too (their text and tokens only). A window is
//! a sequence of generations, not one: when the reader's memory does not parse, each
//! sentence group is summarized in a generation of its own. A stop during the second
//! makes the caller ask for the first again; without its result at hand, the first would
//! run again and displace the second's kept work, and each would undo the other forever.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Mutex;

use super::paths::Path;
use super::{now_seconds, Backend, DraftSettings, Generation, LmContext, Prefix, PromptLookup, SamplingParams};
use crate::Error;

/// How far a resumable generation has got, as its `stop` sees it before each prompt piece
/// and decoding step (a page shows it as a memory's progress within a window).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkDone {
    /// Prompt tokens read so far.
    pub read: usize,
    /// The prompt's tokens.
    pub prompt: usize,
    /// Tokens written by the longest path still writing (0 while the prompt is read).
    pub written: usize,
}

impl WorkDone {
    /// A rough share (0 to 0.95) of a generation done, counting a prompt token and a written
    /// token alike, for a generation expected to write `expected` tokens. Capped below one:
    /// a generation can write more than expected, and only its end says it is done.
    pub fn share(&self, expected: usize) -> f64 {
        let total = (self.prompt + expected.max(self.written)).max(1);
        ((self.read + self.written) as f64 / total as f64).min(0.95)
    }
}

/// Work stopped part way (see the module docs).
pub(crate) enum Suspended<C> {
    /// The prompt was being read: `cache` holds its first `read` tokens.
    Reading { prompt: Vec<u32>, read: usize, cache: C },
    /// The paths were being decoded.
    Writing { prompt: Vec<u32>, params: Vec<SamplingParams>, paths: Vec<Path<C>> },
}

impl<C> Suspended<C> {
    /// The prompt it was for.
    fn prompt(&self) -> &[u32] {
        match self {
            Suspended::Reading { prompt, .. } | Suspended::Writing { prompt, .. } => prompt,
        }
    }

    /// Tokens whose work is kept: the prompt read so far, or the whole prompt and the
    /// longest path's tokens.
    fn tokens(&self) -> usize {
        match self {
            Suspended::Reading { read, .. } => *read,
            Suspended::Writing { prompt, paths, .. } => prompt.len() + paths.iter().map(|p| p.written()).max().unwrap_or(0),
        }
    }
}

/// Finished results kept (see the module docs): a window's generations, the memory and
/// one per fallback sentence group, are far fewer with the default settings (a window of
/// up to half of the 2,048-token wasm context, groups of 256 tokens). Past this, a result
/// dropped is run again when asked for, without undoing the kept work.
const FINISHED_KEPT: usize = 32;

/// What a finished call's result depends on.
#[derive(PartialEq)]
struct FinishedKey {
    prompt: Vec<u32>,
    params: Vec<SamplingParams>,
    chunk: usize,
    drafts: Option<DraftSettings>,
}

/// A finished call's result.
struct Finished {
    key: FinishedKey,
    generations: Vec<Generation>,
}

/// The one kept piece of stopped work, and the last finished results.
pub(crate) struct SuspendedSlot<C> {
    kept: Mutex<Option<Suspended<C>>>,
    finished: Mutex<VecDeque<Finished>>,
}

impl<C> Default for SuspendedSlot<C> {
    fn default() -> Self {
        SuspendedSlot { kept: Mutex::new(None), finished: Mutex::new(VecDeque::new()) }
    }
}

impl<C> SuspendedSlot<C> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Suspended<C>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take the kept work if it was for `prompt`. Work for another prompt stays until new
    /// work is stopped in its place (an earlier generation of the same window may be run
    /// again first, when its result is no longer kept).
    pub(crate) fn take_for(&self, prompt: &[u32]) -> Option<Suspended<C>> {
        let mut kept = self.lock();
        if kept.as_ref()?.prompt() == prompt {
            kept.take()
        } else {
            None
        }
    }

    /// Keep `work` (replacing what was kept).
    pub(crate) fn keep(&self, work: Suspended<C>) {
        *self.lock() = Some(work);
    }

    /// Drop what is kept, finished results too.
    pub(crate) fn clear(&self) {
        *self.lock() = None;
        self.finished.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The result of a finished call with this `key`, if it is still kept.
    fn finished(&self, key: &FinishedKey) -> Option<Vec<Generation>> {
        let finished = self.finished.lock().unwrap_or_else(|p| p.into_inner());
        finished.iter().find(|f| &f.key == key).map(|f| f.generations.clone())
    }

    /// Keep a finished call's result (the oldest goes past [`FINISHED_KEPT`]).
    fn keep_finished(&self, key: FinishedKey, generations: Vec<Generation>) {
        let mut finished = self.finished.lock().unwrap_or_else(|p| p.into_inner());
        if finished.len() == FINISHED_KEPT {
            finished.pop_front();
        }
        finished.push_back(Finished { key, generations });
    }

    /// Tokens whose work is kept (0: none).
    pub(crate) fn tokens(&self) -> usize {
        self.lock().as_ref().map_or(0, Suspended::tokens)
    }
}

impl<B: Backend> LmContext<B> {
    /// [`super::Lm::generate_paths_drafted`] from prompt tokens, as background work that gives way
    /// and later goes on: the prompt runs `chunk` tokens at a time and `stop` is asked
    /// before each piece and before every decoding step, with how far the work has got.
    /// When it says stop, the work done so far is kept (the prompt read so far, or the
    /// paths with their caches and samplers) in place of any kept before, and `Ok(None)`
    /// comes back; the next call with the same prompt and paths continues it, and gives
    /// exactly what one uninterrupted call would have; a call that finished lately gives
    /// its result again at once. `on_done` is called as each path ends (a resumed call
    /// reports the paths that had ended before too); its `Break` cancels, and a cancelled
    /// call keeps nothing.
    pub async fn generate_paths_resumable(
        &self,
        prompt: Vec<u32>,
        paths: &[SamplingParams],
        chunk: usize,
        drafts: Option<DraftSettings>,
        mut on_done: impl FnMut(usize, &Generation) -> ControlFlow<()>,
        stop: &dyn Fn(&WorkDone) -> bool,
    ) -> Result<Option<Vec<Generation>>, Error> {
        let lm = &*self.model;
        if prompt.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        lm.check_fits(prompt.len())?;
        let key = FinishedKey { prompt, params: paths.to_vec(), chunk, drafts };
        if let Some(done) = self.suspended.finished(&key) {
            for (i, g) in done.iter().enumerate() {
                if on_done(i, g).is_break() {
                    break;
                }
            }
            return Ok(Some(done));
        }
        let prompt = &key.prompt;
        let start = now_seconds();
        let live = match self.suspended.take_for(prompt) {
            Some(Suspended::Writing { params, paths: mut live, .. }) if params == paths => {
                live.iter_mut().for_each(Path::report_again);
                live
            }
            kept => {
                let (mut cache, read) = match kept {
                    Some(Suspended::Reading { cache, read, .. }) => (cache, read),
                    _ => (lm.backend.new_cache(), 0),
                };
                // `read` is a whole number of pieces, so the pieces line up with an
                // uninterrupted call's.
                let pieces = Cell::new(0);
                let ask = || {
                    let at = (read + pieces.get() * chunk.max(1)).min(prompt.len());
                    pieces.set(pieces.get() + 1);
                    stop(&WorkDone { read: at, prompt: prompt.len(), written: 0 })
                };
                let (ran, last_logits) = lm.forward_pieces(&mut cache, &prompt[read..], chunk, &ask).await?;
                let read = read + ran;
                let Some(last_logits) = last_logits.filter(|_| read == prompt.len()) else {
                    if read > 0 {
                        self.suspended.keep(Suspended::Reading { prompt: prompt.clone(), read, cache });
                    }
                    return Ok(None);
                };
                // The paths fork the prefix's cache; the prefix itself is not kept.
                lm.start_paths(&Prefix { cache, tokens: prompt.clone(), last_logits }, paths)?
            }
        };
        let decode_start = now_seconds();
        let prefill_seconds = decode_start - start;
        let lookup = drafts.map(|d| PromptLookup::new(prompt, d));
        let mut before_step = |written| {
            if stop(&WorkDone { read: prompt.len(), prompt: prompt.len(), written }) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let mut cancelled = false;
        let on_done = |i, g: &Generation| {
            let flow = on_done(i, g);
            cancelled |= flow.is_break();
            flow
        };
        let (live, stopped) = lm.run_paths(live, decode_start, paths, lookup.as_ref(), on_done, &mut before_step).await?;
        if stopped {
            self.suspended.keep(Suspended::Writing { prompt: prompt.clone(), params: paths.to_vec(), paths: live });
            return Ok(None);
        }
        let out: Vec<Generation> = live.iter().map(|p| Generation { prefill_seconds, ..p.generation(decode_start) }).collect();
        if !cancelled {
            self.suspended.keep_finished(key, out.clone());
        }
        Ok(Some(out))
    }

    /// Tokens of stopped background work this context keeps to continue
    /// ([`LmContext::generate_paths_resumable`]): the prompt read so far, or the prompt and the
    /// longest path written so far; 0 when none is kept.
    pub fn suspended_tokens(&self) -> usize {
        self.suspended.tokens()
    }

    /// Drop the stopped background work this context keeps, and the finished results (the
    /// work they were for was cancelled), freeing its caches.
    pub fn forget_suspended(&self) {
        self.suspended.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::WorkDone;

    #[test]
    fn the_share_of_a_generation_done_counts_prompt_and_written_tokens_and_stays_below_one() {
        let reading = WorkDone { read: 50, prompt: 100, written: 0 };
        assert_eq!(reading.share(100), 0.25);
        let writing = WorkDone { read: 100, prompt: 100, written: 50 };
        assert_eq!(writing.share(100), 0.75);
        // Writing past what was expected: the total grows with it, short of one.
        let long = WorkDone { read: 100, prompt: 100, written: 400 };
        assert_eq!(long.share(100), 0.95);
        assert_eq!(WorkDone::default().share(0), 0.0);
    }
}
