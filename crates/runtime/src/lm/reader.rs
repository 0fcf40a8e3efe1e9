//! A local [`Lm`] as the core's [`ReaderModel`]: the MemReader prompt goes in as the
//! user turn of the model's chat template, is prefilled once, and the candidates continue
//! that prefix together ([`Lm::generate_paths`]: the KV cache is forked, not recomputed,
//! and the paths are decoded as one batch per step, optionally with drafts from the prompt).

use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};
use std::cell::Cell;

use docmem_core::reader::{Generated, ReaderModel, ReadingCost, SampleSpec};
use docmem_core::Scorer;

use super::{now_seconds, Backend, DraftSettings, Lm, LmContext, PrefillOptions, Prompt, PromptLookup, SamplingParams, WorkDone};
use crate::chat::ChatMessage;

/// A model's [`LmContext`] with the name the model is known by (for provenance and
/// prompt choice): the context keeps a window's work when the reader is interrupted.
pub struct LmReader<'a, B: Backend> {
    /// The model and what it keeps.
    pub context: &'a LmContext<B>,
    /// Its name (the file name, say).
    pub name: String,
    /// Prompt-lookup drafts while decoding (the memory copies the document's words; greedy
    /// output is the same with or without, sampled output is distributed the same). Off by
    /// default: verifying a drafted token costs the CPU backend about what decoding it
    /// does (its decode is compute-bound on small machines: 0.76× measured on SmolLM2 with
    /// two cores); a memory-bound backend (a GPU) is where they pay.
    pub drafts: Option<DraftSettings>,
    /// Asked between prompt pieces and before every decoding step: `true` stops the
    /// generation there ([`docmem_core::Error::Cancelled`]), and the context keeps what it read
    /// and wrote, so the same window asked for again goes on where it stopped
    /// ([`LmContext::generate_paths_resumable`]). A page that writes memories in the background
    /// gives the model to a question this way without waiting for a candidate to end, and
    /// without losing the window's work.
    pub interrupt: Option<&'a dyn Fn() -> bool>,
    /// Told, with [`LmReader::interrupt`], how far a window has got (prompt tokens read,
    /// tokens written): progress finer than the core's, which counts finished candidates.
    pub on_work: Option<&'a dyn Fn(&WorkDone)>,
    /// What its work has cost so far ([`ReaderModel::cost`]).
    cost: Cell<ReadingCost>,
}

impl<B: Backend> std::fmt::Debug for LmReader<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmReader")
            .field("context", self.context)
            .field("name", &self.name)
            .field("drafts", &self.drafts)
            .finish_non_exhaustive()
    }
}

impl<'a, B: Backend> LmReader<'a, B> {
    /// Read with the model of `context`, known as `name`.
    pub fn new(context: &'a LmContext<B>, name: impl Into<String>) -> Self {
        LmReader { context, name: name.into(), drafts: None, interrupt: None, on_work: None, cost: Cell::default() }
    }

    /// The model.
    fn lm(&self) -> &'a Lm<B> {
        self.context.model()
    }
}

/// Prompt tokens prefilled between two questions to [`LmReader::interrupt`] (a 1.5B model
/// on two wasm threads prefills about 30 tokens a second: a stop waits about a second). A
/// stopped window goes on from a whole piece, so this must not change between calls.
const PREFILL_CHUNK: usize = 32;

impl<B: Backend> Scorer for LmReader<'_, B> {
    fn continuation_logprobs<'a>(
        &'a mut self,
        pairs: &'a [(&'a str, &'a str)],
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        boxed(async move {
            let started = now_seconds();
            let out = self.lm().scorer_logprobs(pairs).await;
            self.count_scoring(started);
            out
        })
    }

    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
        boxed(async move {
            let started = now_seconds();
            let out = self.lm().scorer_next_token_logprobs(prompt, candidates).await;
            self.count_scoring(started);
            out
        })
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        self.lm().scorer_count_tokens(text)
    }
}

impl<B: Backend> ReaderModel for LmReader<'_, B> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn context_tokens(&self) -> usize {
        self.lm().context_window()
    }

    fn chat_overhead_tokens(&mut self) -> usize {
        let messages = [ChatMessage::new("user", "")];
        self.lm().prompt_tokens(Prompt::Chat(&messages)).map_or(32, |t| t.len())
    }

    fn generate<'a>(
        &'a mut self,
        user_turn: &'a str,
        specs: &'a [SampleSpec],
        max_tokens: usize,
        after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
        boxed(self.generate_candidates(user_turn, specs, max_tokens, after_each))
    }

    fn cost(&self) -> Option<ReadingCost> {
        Some(self.cost.get())
    }
}

impl<B: Backend> LmReader<'_, B> {
    fn count_scoring(&self, started: f64) {
        let mut c = self.cost.get();
        c.scorings += 1;
        c.scoring_seconds += now_seconds() - started;
        self.cost.set(c);
    }

    /// Count one prompt of `prompt_tokens` read in `prefill` seconds and its candidates
    /// written in `decode` seconds.
    fn count_prompt(&self, prompt_tokens: usize, prefill: f64, decode: f64, out: &[super::Generation]) {
        let mut c = self.cost.get();
        c.prompts += 1;
        c.prompt_tokens += prompt_tokens;
        c.prefill_seconds += prefill;
        c.written_tokens += out.iter().map(|g| g.tokens.len()).sum::<usize>();
        c.decode_seconds += decode;
        self.cost.set(c);
    }

    /// [`ReaderModel::generate`]: prefill the user turn once, decode every spec's path from it.
    async fn generate_candidates(
        &self,
        user_turn: &str,
        specs: &[SampleSpec],
        max_tokens: usize,
        after_each: &mut dyn FnMut(usize, &Generated) -> bool,
    ) -> Result<Vec<Generated>, docmem_core::Error> {
        let messages = [ChatMessage::new("user", user_turn)];
        let params: Vec<SamplingParams> = specs
            .iter()
            .map(|spec| SamplingParams {
                temperature: spec.temperature,
                top_p: spec.top_p,
                seed: spec.seed,
                max_tokens,
                opening: spec.opening,
                ..SamplingParams::default()
            })
            .collect();
        let (mut done, mut cancelled) = (0, false);
        let mut on_done = |_, g: &super::Generation| {
            done += 1;
            cancelled = !after_each(done, &Generated { tokens: g.tokens.len(), text: g.text.clone() });
            if cancelled {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let out = match self.interrupt {
            // Background work: asked between prompt pieces and decoding steps; a stopped
            // window is kept by the model and goes on where it stopped when it is read
            // again (see `suspended`).
            Some(stop) => {
                let started = now_seconds();
                let tokens = self.lm().prompt_tokens(Prompt::Chat(&messages)).map_err(docmem_core::Error::from)?;
                let prompt_tokens = tokens.len();
                let on_work = self.on_work;
                let stop = |work: &WorkDone| {
                    if let Some(tell) = on_work {
                        tell(work);
                    }
                    stop()
                };
                let out = self.context.generate_paths_resumable(tokens, &params, PREFILL_CHUNK, self.drafts, &mut on_done, &stop).await;
                match out.map_err(docmem_core::Error::from)? {
                    Some(out) => {
                        // A window resumed after a stop counts only the prefill of this call.
                        let prefill = out.first().map_or(0.0, |g| g.prefill_seconds);
                        self.count_prompt(prompt_tokens, prefill, now_seconds() - started - prefill, &out);
                        out
                    }
                    None => return Err(docmem_core::Error::Cancelled),
                }
            }
            None => {
                let started = now_seconds();
                let tokens = self.lm().prompt_tokens(Prompt::Chat(&messages)).map_err(docmem_core::Error::from)?;
                let prefix = self.lm().prefill(tokens, PrefillOptions::default()).await.map_err(docmem_core::Error::from)?.prefix;
                let prefilled = now_seconds();
                let lookup = self.drafts.map(|d| PromptLookup::new(prefix.tokens(), d));
                let mut go_on = || ControlFlow::Continue(());
                let out = self
                    .lm()
                    .generate_paths_drafted(&prefix, &params, lookup.as_ref(), &mut on_done, &mut go_on)
                    .await
                    .map_err(docmem_core::Error::from)?;
                self.count_prompt(prefix.tokens().len(), prefilled - started, now_seconds() - prefilled, &out);
                out
            }
        };
        if cancelled {
            // A cancel, unlike a stop to give way, keeps nothing.
            return Err(docmem_core::Error::Cancelled);
        }
        Ok(out.into_iter().map(|g| Generated { tokens: g.tokens.len(), text: g.text }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::testing::{tiny_lm, TinyTokenizer};
    use crate::lm::LoadOptions;
    use crate::source::MemorySource;

    #[test]
    fn the_reader_counts_what_each_prompt_and_its_candidates_cost() {
        let context = LmContext::new(
            Lm::load_from(&MemorySource::new(tiny_lm("qwen2", TinyTokenizer::Gpt2, None)), &LoadOptions::default()).unwrap(),
        );
        let lm = context.model();
        let mut reader = LmReader::new(&context, "tiny");
        assert_eq!(reader.cost(), Some(ReadingCost::default()), "nothing done, nothing counted");
        let specs = [SampleSpec::GREEDY, SampleSpec { temperature: 0.8, top_p: 0.9, seed: 3, opening: None }];
        let mut go_on = |_: usize, _: &Generated| true;
        let first = crate::block_on(reader.generate("read this", &specs, 6, &mut go_on)).unwrap();
        let second = crate::block_on(reader.generate("and this, which is longer", &specs[..1], 4, &mut go_on)).unwrap();
        let cost = reader.cost().unwrap();
        assert_eq!(cost.prompts, 2);
        let tokens = |turn: &str| lm.prompt_tokens(Prompt::Chat(&[ChatMessage::new("user", turn)])).unwrap().len();
        assert_eq!(cost.prompt_tokens, tokens("read this") + tokens("and this, which is longer"));
        let written: usize = first.iter().chain(&second).map(|g| g.tokens).sum();
        assert!(written > 0);
        assert_eq!(cost.written_tokens, written, "every candidate's tokens");
        assert!(cost.prefill_seconds >= 0.0 && cost.decode_seconds >= 0.0);
        assert_eq!((cost.scorings, cost.scoring_seconds), (0, 0.0));
        // Scoring is counted apart.
        crate::block_on(reader.next_token_logprobs("a prompt", &["a", "b"])).unwrap();
        assert_eq!(reader.cost().unwrap().scorings, 1);
        assert!((reader.cost().unwrap().seconds() - (cost.prefill_seconds + cost.decode_seconds)) >= 0.0);
    }
}
