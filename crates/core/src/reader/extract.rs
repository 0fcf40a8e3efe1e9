//! Memory extraction end to end: windows → prompt → N+1 candidates from one shared
//! prefill → parse → align → fallback check → score → RRF selection → stitch.
//!
//! Everything model-shaped goes through [`ReaderModel`] and [`Scorer`], so this module
//! is the whole MoM procedure and is tested with a scripted model; the runtime supplies
//! real ones. Choices where the paper leaves room:
//! - The greedy path is always one of the candidates (MoM's "plus one greedy
//!   path"); identical candidate texts are parsed and scored once.
//! - A window keeps its best *acceptable* candidate: one that parsed and whose chunks
//!   covered at least [`FallbackPolicy::min_coverage`] of the text before repair. When
//!   only one is acceptable it is kept unscored; when none is, that window falls back to
//!   the sentence chunker with a one-line core per chunk written by the reader, and the
//!   provenance says so (per window, with the reason).
//! - The window budget is half of the context left after the prompt: the other half is
//!   for the reply, which for a MemReader-style memory is well under the window's length.
//! - A reply may run to the window's tokens plus 512, but for a short window to at most
//!   twice its tokens plus 96 ([`reply_budget`]): a memory restates its text at most once
//!   (cores) with a few tags per group, and a reader that runs away on a two-sentence
//!   document (small ones echo it over and over) stops within seconds, not minutes.
//!   Reasoning (`<think>`) takes room whatever the window's size, so it keeps the +512.
//! - A reply that has not opened its format within a few dozen tokens
//!   ([`ReaderPrompt::opening`]) is stopped there: it cannot parse, so the window falls
//!   back at once.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::fallback::{fallback_reason, FallbackPolicy};
use super::misplaced_core::drop_misplaced_cores;
use super::model::{Generated, ReaderModel, SampleSpec};
use super::prompt::{choose_prompt, ReaderPrompt};
use super::scoring::{score_candidate, ScoringLimits};
use super::window::{plan_windows, stitch, WindowMemory};
use crate::align::{align_memory_units, AlignParams, AlignmentStats};
use crate::chunk::{sentence_chunks, ApproxTokenCounter, SentenceParams, TokenCounter};
use crate::document::Document;
use crate::memory::{DocumentMemory, MemoryScores, Provenance, SamplingRecord, Scenario, MEMORY_FORMAT_VERSION};
use crate::score::Scorer;
use crate::select::{select_candidates, CandidateScores};
use crate::span::Span;
use crate::Error;

/// Extraction settings; the defaults are the MoM paper's where it gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtractSettings {
    /// Which instruction (default: chosen per document and model).
    pub prompt: ReaderPrompt,
    /// Sampled candidates besides the greedy one (default 3).
    pub samples: usize,
    /// Sampling temperature (default 0.7).
    pub temperature: f32,
    /// Nucleus threshold (default 0.8).
    pub top_p: f32,
    /// Seed of the first sampled candidate; the others follow it.
    pub seed: u64,
    /// Most document tokens per window (0: half the context left after the prompt).
    pub max_window_tokens: usize,
    /// Tokens consecutive windows share (default 128).
    pub overlap_tokens: usize,
    /// Most tokens per reply (0: [`reply_budget`], within the context).
    pub max_new_tokens: usize,
    /// Alignment settings.
    pub align: AlignParams,
    /// When to fall back to a chunker.
    pub fallback: FallbackPolicy,
    /// How much text the scorer sees.
    pub scoring: ScoringLimits,
    /// RRF constant of the candidate selection (default 60).
    pub rrf_k: f64,
    /// Chunk size of the fallback chunker, in tokens (default 256).
    pub fallback_chunk_tokens: usize,
}

impl Default for ExtractSettings {
    fn default() -> Self {
        ExtractSettings {
            prompt: ReaderPrompt::Auto,
            samples: 3,
            temperature: 0.7,
            top_p: 0.8,
            seed: 1,
            max_window_tokens: 0,
            overlap_tokens: 128,
            max_new_tokens: 0,
            align: AlignParams::default(),
            fallback: FallbackPolicy::default(),
            scoring: ScoringLimits::default(),
            rrf_k: 60.0,
            fallback_chunk_tokens: 256,
        }
    }
}

/// The fewest document tokens a window may hold: below this a window holds a sentence or
/// two, too little for a reader to outline, and the reader's prompt outweighs the document.
pub const MIN_WINDOW_TOKENS: usize = 32;

/// What extraction is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Generating candidates.
    Reading,
    /// Scoring candidates.
    Scoring,
    /// Writing one-line cores for fallback chunks.
    Fallback,
    /// The document is done.
    Done,
}

/// A progress report: where in the document, and how many candidates are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The stage.
    pub stage: Stage,
    /// Window being read (from 1) and how many there are.
    pub window: usize,
    /// Number of windows.
    pub windows: usize,
    /// Document tokens of the windows finished so far.
    pub tokens_done: usize,
    /// Document tokens in all windows (overlaps counted twice).
    pub tokens_total: usize,
    /// Candidates generated so far, over all windows.
    pub candidates_done: usize,
    /// Candidates to generate over all windows.
    pub candidates_total: usize,
}

impl Progress {
    /// Share of the work done, 0 to 1 (generation dominates, so candidates are counted,
    /// weighted by window size through the token count).
    pub fn fraction(&self) -> f64 {
        if self.stage == Stage::Done || self.candidates_total == 0 {
            return if self.stage == Stage::Done { 1.0 } else { 0.0 };
        }
        (self.candidates_done as f64 / self.candidates_total as f64).min(1.0)
    }

    /// [`Progress::fraction`] with the candidate being written `share` (0 to 1) done:
    /// between two candidates, minutes apart on a CPU, the share still moves.
    pub fn fraction_within(&self, share: f64) -> f64 {
        if self.stage == Stage::Done || self.candidates_total == 0 {
            return self.fraction();
        }
        ((self.candidates_done as f64 + share.clamp(0.0, 1.0)) / self.candidates_total as f64).min(1.0)
    }
}

/// Counts tokens with the reader's tokenizer, or estimates when it fails.
struct ReaderCounter<'a>(RefCell<&'a mut dyn ReaderModel>);

impl TokenCounter for ReaderCounter<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.borrow_mut().count_tokens(text).unwrap_or_else(|_| ApproxTokenCounter.count_tokens(text))
    }
}

/// A scorer's failure as the reader's. A hosted scorer's failure stays the host's, so
/// callers can tell it apart, and a cancellation stays one.
fn backend(e: Error) -> Error {
    match e {
        Error::Remote { .. } | Error::Cancelled => e,
        e => Error::ModelFailed { message: e.to_string() },
    }
}

/// One acceptable candidate of a window.
struct Candidate {
    index: usize,
    outline: Vec<String>,
    scenarios: Vec<Scenario>,
    stats: AlignmentStats,
}

/// What one window produced.
#[derive(Debug)]
pub(super) struct WindowResult {
    pub(super) memory: WindowMemory,
    pub(super) chosen: Option<(usize, CandidateScores, Option<f64>)>,
    pub(super) stats: AlignmentStats,
    pub(super) fallback: Option<String>,
}

/// Make spans tile `0..len`: each starts where the previous ended.
fn retile(spans: &[Span], len: usize) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        let start = out.last().map_or(0, |p| p.end);
        let end = if i + 1 == spans.len() { len } else { s.end.max(start) };
        if end > start {
            out.push(Span::new(start, end));
        }
    }
    if out.is_empty() && len > 0 {
        out.push(Span::new(0, len));
    }
    out
}

fn first_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    line.chars().take(240).collect()
}

/// Sentence chunks of the window with a one-line core each, from the reader.
async fn fallback_window(
    window_text: &str,
    chinese: bool,
    reader: &mut dyn ReaderModel,
    settings: &ExtractSettings,
) -> Result<Vec<Scenario>, Error> {
    let params = SentenceParams { chunk_size: settings.fallback_chunk_tokens.max(16), chunk_overlap: 0, ..SentenceParams::default() };
    let spans = retile(&sentence_chunks(window_text, &params, &ApproxTokenCounter), window_text.len());
    let mut out = Vec::with_capacity(spans.len());
    for span in spans {
        let chunk = span.slice(window_text).unwrap_or("");
        let ask = if chinese {
            format!("用一句话写出下面这段文字的要点。\n\n文字：\n{chunk}")
        } else {
            format!("State the key point of the following text in one line.\n\nText:\n{chunk}")
        };
        let greedy = [SampleSpec::GREEDY];
        let reply = reader.generate(&ask, &greedy, 64, &mut |_, _| true).await?;
        let core = reply.first().map(|g| first_line(&g.text)).unwrap_or_default();
        out.push(Scenario { span, core, outline_item: None });
    }
    Ok(out)
}

/// The most tokens a reply about a window of `tokens` tokens may take (before the
/// context's limit and the user's `max_new_tokens`): see the module's notes.
pub fn reply_budget(tokens: usize, thinks: bool) -> usize {
    if thinks {
        tokens + 512
    } else {
        (tokens + 512).min(2 * tokens + 96)
    }
}

/// "412 tokens", "768 tokens, the limit" when the reply was cut there, or "48 tokens,
/// stopped without the format's opening" when it was stopped for not opening as asked.
fn reply_length(tokens: usize, max_new: usize, opened: bool) -> String {
    if !opened && tokens < max_new {
        format!("{tokens} tokens, stopped without the format's opening")
    } else if tokens >= max_new {
        format!("{tokens} tokens, the limit")
    } else {
        format!("{tokens} tokens")
    }
}

/// The first `chars` characters of `text` on one line, with "…" when cut.
fn excerpt(text: &str, chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_window(
    text: &str,
    window: Span,
    prompt: &ReaderPrompt,
    chinese: bool,
    reader: &mut dyn ReaderModel,
    scorer: &mut Option<&mut dyn Scorer>,
    settings: &ExtractSettings,
    max_new: usize,
    progress: &mut dyn FnMut(Stage, usize) -> bool,
) -> Result<WindowResult, Error> {
    let window_text = window.slice(text).unwrap_or("");
    let opening = prompt.opening();
    let mut specs = vec![SampleSpec { opening, ..SampleSpec::GREEDY }];
    specs.extend((0..settings.samples).map(|i| SampleSpec {
        temperature: settings.temperature,
        top_p: settings.top_p,
        seed: settings.seed.wrapping_add(i as u64),
        opening,
    }));
    // `units`: what a numbered prompt showed, for placing `<chunk>FIRST-LAST</chunk>`.
    let (user_turn, units) = prompt.render_with_units(window_text);
    let instruction = prompt.render("");
    let mut cancelled = false;
    let generated = reader
        .generate(&user_turn, &specs, max_new, &mut |done, _: &Generated| {
            cancelled = !progress(Stage::Reading, done);
            !cancelled
        })
        .await;
    if cancelled {
        return Err(Error::Cancelled);
    }
    let generated = generated?;

    // Parse and align each distinct text; keep the acceptable ones.
    let mut acceptable: Vec<Candidate> = Vec::new();
    let mut first_reason: Option<String> = None;
    let mut seen: Vec<&str> = Vec::new();
    let mut best_stats = AlignmentStats::default();
    for (index, g) in generated.iter().enumerate() {
        if seen.contains(&g.text.as_str()) {
            continue;
        }
        seen.push(&g.text);
        let mut parsed = prompt.parse(&g.text);
        // Small readers sometimes copy the prompt's worked example (a core about tea in a
        // document about printing): a core found word for word in the instruction is not
        // the document's, so it is dropped (the chunk stays).
        for sc in &mut parsed.scenarios {
            if sc.core.len() >= 12 && instruction.contains(sc.core.as_str()) {
                sc.core.clear();
            }
        }
        let mut aligned = align_memory_units(window_text, &parsed, &units, &settings.align);
        drop_misplaced_cores(window_text, &mut aligned);
        if aligned.stats.coverage_before_repair >= best_stats.coverage_before_repair {
            best_stats = aligned.stats.clone();
        }
        match fallback_reason(&parsed, &aligned, &settings.fallback) {
            Some(reason) => {
                first_reason.get_or_insert_with(|| {
                    if parsed.scenarios.is_empty() {
                        // Say what it wrote instead, so the provenance explains the fallback
                        // (a reply cut at the token limit, an echo of the document, …).
                        let opened = opening.is_none_or(|o| !o.missed(&g.text, g.tokens));
                        format!("{reason} ({}; it began {:?})", reply_length(g.tokens, max_new, opened), excerpt(&g.text, 80))
                    } else {
                        reason
                    }
                });
            }
            None => acceptable.push(Candidate { index, outline: parsed.outline, scenarios: aligned.scenarios, stats: aligned.stats }),
        }
    }

    if acceptable.is_empty() {
        if !progress(Stage::Fallback, generated.len()) {
            return Err(Error::Cancelled);
        }
        let scenarios = fallback_window(window_text, chinese, reader, settings).await?;
        let reason = first_reason.unwrap_or_else(|| "the reader wrote nothing".into());
        // No core of a rejected candidate was kept, so none was dropped either.
        return Ok(WindowResult {
            memory: WindowMemory { window, outline: Vec::new(), scenarios },
            chosen: None,
            stats: AlignmentStats { misplaced_cores: 0, ..best_stats },
            fallback: Some(reason),
        });
    }

    let (pick, scores, rrf) = if acceptable.len() == 1 {
        (0, CandidateScores { clarity: None, completeness: None }, None)
    } else {
        if !progress(Stage::Scoring, generated.len()) {
            return Err(Error::Cancelled);
        }
        let mut all = Vec::with_capacity(acceptable.len());
        for c in &acceptable {
            let s: &mut dyn Scorer = match scorer {
                Some(s) => &mut **s,
                None => &mut *reader,
            };
            all.push(score_candidate(window_text, &c.scenarios, s, &settings.scoring).await.map_err(backend)?);
        }
        let ranked = select_candidates(&all, settings.rrf_k);
        let best = ranked[0];
        (best.index, best.scores, Some(best.rrf))
    };
    let c = acceptable.swap_remove(pick);
    Ok(WindowResult {
        memory: WindowMemory { window, outline: c.outline, scenarios: c.scenarios },
        chosen: Some((c.index, scores, rrf)),
        stats: c.stats,
        fallback: None,
    })
}

/// Extract a document's memory with `reader`, scoring candidates with `scorer` (the
/// reader itself when `None`). `progress` is called as work advances; returning false
/// cancels with [`Error::Cancelled`]. The memory's spans tile the document.
///
/// Async because the models are ([`crate::local_future`]); with a CPU reader the future is
/// ready when first polled.
pub async fn extract_memory(
    doc: &Document,
    reader: &mut dyn ReaderModel,
    mut scorer: Option<&mut dyn Scorer>,
    settings: &ExtractSettings,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<DocumentMemory, Error> {
    let mut draft = MemoryDraft::plan(doc, reader, settings)?;
    while !draft.is_complete() {
        draft.read_next(doc, reader, scorer.as_mut().map(|s| &mut **s as &mut dyn Scorer), settings, progress).await?;
    }
    let memory = draft.finish(doc, settings);
    progress(&draft.report);
    Ok(memory)
}

/// A memory being written one window at a time. Between windows the caller may do other
/// work with the same model (answer a question, say) and come back: what was read is kept,
/// and a window that was stopped halfway is asked for again from its start (a reader that
/// keeps stopped work, as the runtime's local models do, goes on from where it stopped).
/// This is how a page writes memories in the background while it stays free to answer.
#[derive(Debug)]
pub struct MemoryDraft {
    pub(super) name: String,
    prompt: ReaderPrompt,
    chinese: bool,
    available: usize,
    pub(super) windows: Vec<Span>,
    pub(super) window_tokens: Vec<usize>,
    pub(super) results: Vec<WindowResult>,
    pub(super) report: Progress,
}

impl MemoryDraft {
    /// Plan `doc`'s windows for `reader` (counting tokens, no generation).
    pub fn plan(doc: &Document, reader: &mut dyn ReaderModel, settings: &ExtractSettings) -> Result<Self, Error> {
        let name = reader.name();
        let prompt = choose_prompt(&settings.prompt, &doc.language, &name);
        let chinese = prompt.is_chinese() || doc.language == "zh";
        let overhead = reader.chat_overhead_tokens() + reader.count_tokens(&prompt.render("")).map_err(backend)?;
        let available = reader.context_tokens().saturating_sub(overhead);
        let mut window_max = available / 2;
        if settings.max_window_tokens > 0 {
            window_max = window_max.min(settings.max_window_tokens);
        }
        if window_max < MIN_WINDOW_TOKENS {
            return Err(Error::WindowLimit { tokens: window_max, minimum: MIN_WINDOW_TOKENS });
        }
        let (windows, window_tokens) = {
            let counter = ReaderCounter(RefCell::new(&mut *reader));
            let windows = plan_windows(&doc.text, window_max, settings.overlap_tokens.min(window_max / 4), &counter);
            let tokens: Vec<usize> = windows.iter().map(|w| counter.count_tokens(w.slice(&doc.text).unwrap_or(""))).collect();
            (windows, tokens)
        };
        let per_window = settings.samples + 1;
        let report = Progress {
            stage: Stage::Reading,
            window: 0,
            windows: windows.len(),
            tokens_done: 0,
            tokens_total: window_tokens.iter().sum(),
            candidates_done: 0,
            candidates_total: per_window * windows.len(),
        };
        Ok(MemoryDraft { name, prompt, chinese, available, windows, window_tokens, results: Vec::new(), report })
    }

    /// Whether every window has been read (then [`MemoryDraft::finish`]).
    pub fn is_complete(&self) -> bool {
        self.results.len() == self.windows.len()
    }

    /// Where the work stands: windows and document tokens read so far.
    pub fn progress(&self) -> Progress {
        self.report
    }

    /// Where the work stands while the next window is being read: [`MemoryDraft::progress`]
    /// with that window's number (from 1; the last window's once every one is read).
    pub fn progress_of_next(&self) -> Progress {
        Progress { window: (self.results.len() + 1).min(self.windows.len()), ..self.report }
    }

    /// The document tokens of the window [`MemoryDraft::read_next`] reads next (`None` once
    /// every window is read): about as many as its memory writes, since the memory's
    /// chunks are spans of it.
    pub fn next_window_tokens(&self) -> Option<usize> {
        self.window_tokens.get(self.results.len()).copied()
    }

    /// Read the next window. A cancel from `progress` (or any error) leaves the draft as
    /// it was before the call: the window is asked of the reader again by the next call (a
    /// reader that keeps stopped work, as the runtime's local models do, goes on where it
    /// stopped).
    pub async fn read_next(
        &mut self,
        doc: &Document,
        reader: &mut dyn ReaderModel,
        mut scorer: Option<&mut dyn Scorer>,
        settings: &ExtractSettings,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<(), Error> {
        let i = self.results.len();
        let (Some(&window), Some(&tokens)) = (self.windows.get(i), self.window_tokens.get(i)) else {
            return Ok(());
        };
        let per_window = settings.samples + 1;
        let mut max_new = reply_budget(tokens, self.prompt.thinks()).min(self.available.saturating_sub(tokens));
        if settings.max_new_tokens > 0 {
            max_new = max_new.min(settings.max_new_tokens);
        }
        let base = self.progress_of_next();
        let mut on = |stage: Stage, done: usize| {
            let r = Progress { stage, candidates_done: base.candidates_done + done, ..base };
            progress(&r)
        };
        if !on(Stage::Reading, 0) {
            return Err(Error::Cancelled);
        }
        let result = read_window(&doc.text, window, &self.prompt, self.chinese, reader, &mut scorer, settings, max_new, &mut on).await?;
        self.results.push(result);
        self.report.window = i + 1;
        self.report.candidates_done += per_window;
        self.report.tokens_done += tokens;
        Ok(())
    }

    /// The memory from the windows read (all of them, once [`MemoryDraft::is_complete`]):
    /// stitched, with its provenance.
    pub fn finish(&mut self, doc: &Document, settings: &ExtractSettings) -> DocumentMemory {
        let (name, prompt, results, windows) = (&self.name, &self.prompt, &self.results, &self.windows[..self.results.len()]);
        let per_window = settings.samples + 1;
        let mut report = self.report;
        let stitched = stitch(&doc.text, &results.iter().map(|r| r.memory.clone()).collect::<Vec<_>>());
        let mut scenarios = stitched.scenarios;
        if scenarios.is_empty() && !doc.text.is_empty() {
            scenarios.push(Scenario { span: Span::new(0, doc.text.len()), core: String::new(), outline_item: None });
        }

        // Provenance: the first window's choice; scores averaged over the windows that had them.
        let mean = |f: &dyn Fn(&WindowResult) -> Option<f64>| {
            let v: Vec<f64> = results.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let scores = MemoryScores {
            clarity: mean(&|r| r.chosen.and_then(|c| c.1.clarity)),
            completeness: mean(&|r| r.chosen.and_then(|c| c.1.completeness)),
            rrf: mean(&|r| r.chosen.and_then(|c| c.2)),
        };
        let chosen = results.iter().find_map(|r| r.chosen).map_or(0, |c| c.0);
        let sampling = SamplingRecord {
            temperature: if chosen == 0 { 0.0 } else { settings.temperature },
            top_p: if chosen == 0 { 1.0 } else { settings.top_p },
            top_k: 0,
            seed: if chosen == 0 { 0 } else { settings.seed.wrapping_add(chosen as u64 - 1) },
            candidate: chosen as u32,
            candidates: per_window as u32,
        };
        let mut alignment = AlignmentStats::default();
        let total: usize = windows.iter().map(Span::len).sum::<usize>().max(1);
        let mut coverage = 0.0f32;
        for (r, w) in results.iter().zip(windows) {
            alignment.chunks += r.stats.chunks;
            alignment.exact += r.stats.exact;
            alignment.fuzzy += r.stats.fuzzy;
            alignment.failed += r.stats.failed;
            alignment.merged_short += r.stats.merged_short;
            alignment.stopped_at_work_limit |= r.stats.stopped_at_work_limit;
            alignment.misplaced_cores += r.stats.misplaced_cores;
            coverage += r.stats.coverage_before_repair * w.len() as f32;
        }
        alignment.coverage_before_repair = coverage / total as f32;
        let reasons: Vec<String> = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                r.fallback.as_ref().map(|why| {
                    if windows.len() == 1 {
                        why.clone()
                    } else {
                        format!("window {} of {}: {why}", i + 1, windows.len())
                    }
                })
            })
            .collect();
        let memory = DocumentMemory {
            format_version: MEMORY_FORMAT_VERSION,
            doc_id: doc.id,
            outline: stitched.outline,
            scenarios,
            provenance: Provenance {
                reader: format!("{name} ({} prompt)", prompt.name()),
                sampling,
                scores,
                alignment,
                fallback: (!reasons.is_empty()).then(|| reasons.join("; ")),
            },
        };
        report.stage = Stage::Done;
        report.window = windows.len();
        self.report = report;
        memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::split_sentences;
    use crate::local_future::{boxed, poll_once, LocalBoxFuture};
    use crate::span::spans_tile;

    /// A scripted reader. For a memory request it writes one scenario per `group`
    /// sentences of the window it was given (candidate i uses group `1 + i % 3`), or the
    /// scripted `garbage` text; for a key-point request it answers "KEY <first word>".
    /// As a scorer it prefers cuts before a capital letter and gives every chunk token
    /// log-probability −1 after a core.
    struct FakeReader {
        context: usize,
        garbage: bool,
        /// Named as a MemReader checkpoint, so it gets the [MASK] prompt (else numbered).
        memreader: bool,
        calls: usize,
        prefills: usize,
    }

    fn words(s: &str) -> usize {
        s.split_whitespace().count()
    }

    impl Scorer for FakeReader {
        fn continuation_logprobs<'a>(&'a mut self, pairs: &'a [(&'a str, &'a str)]) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, Error>> {
            boxed(async move { Ok(pairs.iter().map(|(_, a)| vec![-1.0; words(a).max(1)]).collect()) })
        }
        fn next_token_logprobs<'a>(&'a mut self, prompt: &'a str, _: &'a [&'a str]) -> LocalBoxFuture<'a, Result<Vec<f32>, Error>> {
            let right = prompt.split("\n[2] ").nth(1).unwrap_or("");
            let split = right.trim_start().starts_with(|c: char| c.is_uppercase());
            boxed(async move { Ok(if split { vec![0.1f32.ln(), 0.9f32.ln()] } else { vec![0.9f32.ln(), 0.1f32.ln()] }) })
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, Error> {
            Ok(words(text))
        }
    }

    impl ReaderModel for FakeReader {
        fn name(&self) -> String {
            if self.memreader {
                "fake-memreader-1.5b".into()
            } else {
                "fake-1.5b".into()
            }
        }
        fn context_tokens(&self) -> usize {
            self.context
        }
        fn chat_overhead_tokens(&mut self) -> usize {
            4
        }
        fn generate<'a>(
            &'a mut self,
            user_turn: &'a str,
            specs: &'a [SampleSpec],
            _max_tokens: usize,
            after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
        ) -> LocalBoxFuture<'a, Result<Vec<Generated>, Error>> {
            boxed(async move { self.script(user_turn, specs, after_each) })
        }
    }

    impl FakeReader {
        fn script(
            &mut self,
            user_turn: &str,
            specs: &[SampleSpec],
            after_each: &mut dyn FnMut(usize, &Generated) -> bool,
        ) -> Result<Vec<Generated>, Error> {
            self.prefills += 1;
            let mut out = Vec::new();
            for (i, _) in specs.iter().enumerate() {
                self.calls += 1;
                let text = if let Some(chunk) = user_turn.split("Text:\n").nth(1).filter(|_| user_turn.starts_with("State")) {
                    format!("KEY {}\nmore", chunk.split_whitespace().next().unwrap_or(""))
                } else if self.garbage {
                    "I am sorry, I cannot do that.".into()
                } else if user_turn.contains("FIRST-LAST") {
                    // A numbered prompt: groups of 1 + i % 3 units, named by number, in tags
                    // or a line each as the prompt asks.
                    let doc = user_turn.rsplit("Document:\n").next().unwrap_or("");
                    let units = doc.lines().filter(|l| l.starts_with('[')).count();
                    let group = 1 + i % 3;
                    let groups: Vec<(usize, usize, String)> = (1..=units)
                        .step_by(group)
                        .map(|k| {
                            // The first core copies the prompt's example, as small models do.
                            let core = if k == 1 {
                                "Dutch traders brought tea from Java to Europe in the early 1600s.".to_string()
                            } else {
                                format!("About unit {k}")
                            };
                            (k, (k + group - 1).min(units), core)
                        })
                        .collect();
                    if user_turn.contains("FIRST-LAST | title | core") {
                        groups.iter().map(|(k, last, core)| format!("{k}-{last} | Part {k} | {core}\n")).collect()
                    } else {
                        let titles: String = groups.iter().map(|(k, _, _)| format!("Part {k}\n")).collect();
                        let scenarios: String = groups
                            .iter()
                            .map(|(k, last, core)| format!("<scenario>\n<chunk>{k}-{last}</chunk>\n{core}\n</scenario>\n"))
                            .collect();
                        format!("<outline>\n{titles}</outline>\n{scenarios}")
                    }
                } else {
                    let doc = user_turn.rsplit("Document:\n").next().unwrap_or("");
                    let sentences: Vec<&str> = split_sentences(doc).iter().filter_map(|s| s.slice(doc)).collect();
                    let group = 1 + i % 3;
                    let mut s = String::from("<think>plan</think>\n<outline>\n");
                    for (k, g) in sentences.chunks(group).enumerate() {
                        s += &format!("{}. Part {}\n", k + 1, g[0].split_whitespace().take(2).collect::<Vec<_>>().join(" "));
                    }
                    s += "</outline>\n";
                    for g in sentences.chunks(group) {
                        let joined: String = g.concat();
                        let w: Vec<&str> = joined.split_whitespace().collect();
                        let first = w.iter().take(3).copied().collect::<Vec<_>>().join(" ");
                        let last = w[w.len().saturating_sub(2)..].join(" ");
                        s += &format!("<scenario><chunk>{first}[MASK]{last}</chunk>About {}</scenario>\n", w[0]);
                    }
                    s
                };
                let g = Generated { tokens: words(&text), text };
                if !after_each(i + 1, &g) {
                    return Err(Error::Cancelled);
                }
                out.push(g);
            }
            Ok(out)
        }
    }

    /// [`extract_memory`] with the fake, whose futures never wait.
    fn extract(
        doc: &Document,
        reader: &mut FakeReader,
        settings: &ExtractSettings,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<DocumentMemory, Error> {
        poll_once(extract_memory(doc, reader, None, settings, progress)).expect("the fake reader never waits")
    }

    fn story(n: usize) -> String {
        (0..n).map(|i| format!("Topic {i} begins here and it goes on for a while about item {i}. ")).collect()
    }

    #[test]
    fn one_window_four_candidates_best_chosen_by_rrf() {
        for (memreader, setting, prompt) in [
            (true, ReaderPrompt::Auto, "en-think"),
            (false, ReaderPrompt::EnglishLines, "en-lines"),
            (false, ReaderPrompt::Auto, "en-numbered"),
        ] {
            one_window_four_candidates(memreader, setting, prompt);
        }
    }

    fn one_window_four_candidates(memreader: bool, setting: ReaderPrompt, prompt: &str) {
        let doc = Document::new("s.txt", story(6));
        let mut reader = FakeReader { context: 4096, garbage: false, memreader, calls: 0, prefills: 0 };
        let mut reports = Vec::new();
        let settings = ExtractSettings { prompt: setting, ..ExtractSettings::default() };
        let m = extract(&doc, &mut reader, &settings, &mut |p| {
            reports.push(*p);
            true
        })
        .unwrap();
        assert_eq!((reader.prefills, reader.calls), (1, 4), "one shared prompt, greedy + 3 samples");
        m.check(&doc).unwrap();
        assert_eq!(m.provenance.fallback, None);
        assert_eq!(m.provenance.sampling.candidates, 4);
        assert!(m.provenance.scores.rrf.is_some());
        // Every sentence starts with a capital: finer cuts score clearer, and all cores
        // complete the same; candidate 0 (greedy, one sentence per chunk) or 3 wins.
        assert_eq!(m.scenarios.len(), 6);
        assert!(m.provenance.reader.contains(&format!("1.5b ({prompt} prompt)")), "{}", m.provenance.reader);
        assert_eq!(m.outline.len(), 6);
        assert!(m.scenarios.iter().all(|s| !s.core.contains("Dutch traders")), "a core copied from the prompt's example is dropped");
        assert_eq!(reports.last().unwrap().stage, Stage::Done);
        assert!(reports.iter().any(|p| p.stage == Stage::Scoring));
        assert!(reports.windows(2).all(|w| w[1].candidates_done >= w[0].candidates_done));
    }

    #[test]
    fn a_fallback_names_the_reply_length_and_its_start() {
        assert_eq!(reply_length(768, 768, true), "768 tokens, the limit");
        assert_eq!(reply_length(12, 768, true), "12 tokens");
        assert_eq!(reply_length(48, 768, false), "48 tokens, stopped without the format's opening");
        assert_eq!(excerpt("<outline>\n  诺曼人\n历史", 12), "<outline> 诺曼…");
        assert_eq!(excerpt("short", 80), "short");
    }

    #[test]
    fn a_short_window_gets_a_reply_budget_in_proportion_and_a_reasoning_one_its_room() {
        assert_eq!(reply_budget(25, false), 146, "a two-sentence text: twice its tokens and 96");
        assert_eq!(reply_budget(416, false), 928, "where the two rules meet");
        assert_eq!(reply_budget(1000, false), 1512, "a long window: its tokens and 512");
        assert_eq!(reply_budget(25, true), 537, "reasoning takes room whatever the window's size");
    }

    #[test]
    fn every_built_in_prompt_expects_its_format_to_open_and_a_custom_one_nothing() {
        let numbered = ReaderPrompt::EnglishNumbered.opening().unwrap();
        assert!(numbered.missed("[1] The bell rang. [2] The bell rang again and again and again.", 48));
        let lines = ReaderPrompt::EnglishLines.opening().unwrap();
        assert!(lines.missed("[1] The bell rang. [2] The bell rang again and again and again.", 48), "an echo is not a group");
        assert!(!lines.missed("Here is the memory:\n1-2 | Bells | The bell rang twice.", 48));
        assert!(!lines.missed("[1]-[2] | Bells", 48));
        assert!(!numbered.missed("[1] The bell rang.", 47), "not before its allowance is spent");
        assert!(!numbered.missed("Here is the memory:\n<scenario>\n<chunk>1-2", 48));
        assert!(!numbered.missed("<outline>\nBells", 60), "a numbered reply may open with its outline");
        assert_eq!(ReaderPrompt::ChineseThink.opening().unwrap().markers, &["<think>"]);
        assert!(ReaderPrompt::English.opening().unwrap().markers.contains(&"<outline>"));
        assert_eq!(ReaderPrompt::Custom("Summarise {document}".into()).opening(), None);
    }

    #[test]
    fn garbage_falls_back_to_sentence_chunks_with_cores() {
        let doc = Document::new("s.txt", story(5));
        let mut reader = FakeReader { context: 4096, garbage: true, memreader: false, calls: 0, prefills: 0 };
        let m = extract(&doc, &mut reader, &ExtractSettings::default(), &mut |_| true).unwrap();
        m.check(&doc).unwrap();
        let why = m.provenance.fallback.as_deref().unwrap();
        assert!(why.contains("no parsable"), "{why}");
        assert!(why.contains("it began \"I am sorry, I cannot do that.\""), "what it wrote instead is named: {why}");
        assert!(m.scenarios.iter().all(|s| s.core.starts_with("KEY ")), "{:?}", m.scenarios);
    }

    #[test]
    fn long_documents_are_read_in_windows_and_stitched() {
        let doc = Document::new("long.txt", story(60));
        // About 14 words a sentence; a 400-token context gives windows of ~180 words.
        let mut reader = FakeReader { context: 400, garbage: false, memreader: false, calls: 0, prefills: 0 };
        let settings = ExtractSettings { samples: 1, overlap_tokens: 30, ..ExtractSettings::default() };
        let mut windows = 0;
        let m = extract(&doc, &mut reader, &settings, &mut |p| {
            windows = p.windows;
            true
        })
        .unwrap();
        assert!(windows >= 5, "{windows}");
        assert_eq!(reader.prefills, windows);
        m.check(&doc).unwrap();
        assert!(spans_tile(&doc.text, &m.scenarios.iter().map(|s| s.span).collect::<Vec<_>>()));
        // Overlaps are read twice but their outline items are kept once.
        assert!(m.outline.len() < 60 + 2 * windows, "{}", m.outline.len());
        assert!(m.outline.len() >= 50);
    }

    /// A reader of 400 tokens' context: windows of about 180 words.
    fn fresh() -> FakeReader {
        FakeReader { context: 400, garbage: false, memreader: false, calls: 0, prefills: 0 }
    }

    /// A story of several windows for [`fresh`], its settings, and its memory read at once.
    fn windowed_story() -> (Document, ExtractSettings, DocumentMemory) {
        let doc = Document::new("long.txt", story(40));
        let settings = ExtractSettings { samples: 1, overlap_tokens: 30, ..ExtractSettings::default() };
        let whole = extract(&doc, &mut fresh(), &settings, &mut |_| true).unwrap();
        (doc, settings, whole)
    }

    #[test]
    fn a_draft_stopped_between_and_inside_windows_resumes_to_the_same_memory() {
        let (doc, settings, whole) = windowed_story();

        let mut reader = fresh();
        let mut draft = MemoryDraft::plan(&doc, &mut reader, &settings).unwrap();
        assert!(draft.progress().windows >= 3, "{:?}", draft.progress());
        let mut steps = 0;
        while !draft.is_complete() {
            // Each window is first stopped halfway (its second candidate), then read whole.
            let before = draft.progress();
            // The window about to be read is numbered from 1, and a share of it moves the
            // fraction no further than the next candidate's end.
            let next = draft.progress_of_next();
            assert_eq!(next.window, steps + 1);
            assert_eq!(Progress { window: before.window, ..next }, before);
            assert!(draft.next_window_tokens().unwrap() > 0);
            assert_eq!(next.fraction_within(0.0), before.fraction());
            let half = next.fraction_within(0.5);
            assert!(half > before.fraction() && half < next.fraction_within(1.0), "{half}");
            let stopped =
                poll_once(draft.read_next(&doc, &mut reader, None, &settings, &mut |p| p.candidates_done < before.candidates_done + 1));
            assert_eq!(stopped.unwrap().unwrap_err(), Error::Cancelled);
            assert_eq!(draft.progress(), before, "a stopped window leaves the draft as it was");
            poll_once(draft.read_next(&doc, &mut reader, None, &settings, &mut |_| true)).unwrap().unwrap();
            assert!(draft.progress().tokens_done > before.tokens_done);
            steps += 1;
        }
        assert_eq!(steps, draft.progress().windows);
        assert_eq!(draft.next_window_tokens(), None);
        assert_eq!(draft.progress_of_next().window, steps, "the last window once all are read");
        let resumed = draft.finish(&doc, &settings);
        assert_eq!(resumed, whole, "the same memory as one uninterrupted extraction");
        assert_eq!(draft.progress().stage, Stage::Done);
    }

    /// A draft stored after each window and adopted by a new reading (a reload, a crash)
    /// goes on from the next window and ends in the memory one reading makes; a draft of
    /// another text, reader or settings is not adopted. (See `saved_draft`.)
    #[cfg(feature = "serde")]
    #[test]
    fn a_stored_draft_resumes_after_its_last_window_and_only_where_it_belongs() {
        let (doc, settings, whole) = windowed_story();

        let mut reader = fresh();
        let mut draft = MemoryDraft::plan(&doc, &mut reader, &settings).unwrap();
        let windows = draft.progress().windows;
        assert!(windows >= 3);
        for _ in 0..2 {
            poll_once(draft.read_next(&doc, &mut reader, None, &settings, &mut |_| true)).unwrap().unwrap();
        }
        let stored = draft.to_bytes(&doc, &settings);
        let read_before = reader.prefills;
        drop(draft);

        // A new reading (another reader instance: a reload) adopts the two windows.
        let mut reader = fresh();
        let mut again = MemoryDraft::plan(&doc, &mut reader, &settings).unwrap();
        assert_eq!(again.resume(&stored, &doc, &settings), 2);
        assert_eq!(again.progress().window, 2);
        assert_eq!(again.progress_of_next().window, 3);
        assert!(again.progress().fraction() > 0.0);
        assert_eq!(again.resume(&stored, &doc, &settings), 0, "adopted once, into a fresh draft");
        while !again.is_complete() {
            poll_once(again.read_next(&doc, &mut reader, None, &settings, &mut |_| true)).unwrap().unwrap();
        }
        assert_eq!(read_before + reader.prefills, windows, "each window read once over both readings");
        assert_eq!(again.finish(&doc, &settings), whole, "the memory of one uninterrupted reading");

        // Not adopted: another text, another reader, other settings, damaged bytes.
        let other_doc = Document::new("long.txt", story(41));
        let mut d = MemoryDraft::plan(&other_doc, &mut fresh(), &settings).unwrap();
        assert_eq!(d.resume(&stored, &other_doc, &settings), 0);
        let mut memreader = FakeReader { memreader: true, ..fresh() };
        let mut d = MemoryDraft::plan(&doc, &mut memreader, &settings).unwrap();
        assert_eq!(d.resume(&stored, &doc, &settings), 0);
        let hotter = ExtractSettings { temperature: 0.9, ..settings.clone() };
        let mut d = MemoryDraft::plan(&doc, &mut fresh(), &hotter).unwrap();
        assert_eq!(d.resume(&stored, &doc, &hotter), 0);
        let mut d = MemoryDraft::plan(&doc, &mut fresh(), &settings).unwrap();
        for cut in [0, 1, stored.len() / 2, stored.len() - 1] {
            assert_eq!(d.resume(&stored[..cut], &doc, &settings), 0);
        }
        assert_eq!(d.progress().window, 0);
    }

    #[test]
    fn cancelling_stops_and_a_tiny_context_is_an_error() {
        let doc = Document::new("s.txt", story(3));
        let mut reader = FakeReader { context: 4096, garbage: false, memreader: false, calls: 0, prefills: 0 };
        let r = extract(&doc, &mut reader, &ExtractSettings::default(), &mut |p| p.candidates_done < 2);
        assert_eq!(r.unwrap_err(), Error::Cancelled);
        assert!(reader.calls <= 2);
        let mut tiny = FakeReader { context: 100, garbage: false, memreader: false, calls: 0, prefills: 0 };
        let e = extract(&doc, &mut tiny, &ExtractSettings::default(), &mut |_| true).unwrap_err();
        assert!(matches!(e, Error::WindowLimit { minimum: MIN_WINDOW_TOKENS, .. }), "{e}");
        assert!(e.to_string().contains("smallest window (32 tokens)"), "{e}");
    }

    #[test]
    fn a_window_limit_below_the_smallest_window_is_refused_naming_the_limit() {
        let doc = Document::new("s.txt", story(3));
        let mut reader = FakeReader { context: 4096, garbage: false, memreader: false, calls: 0, prefills: 0 };
        let settings = ExtractSettings { max_window_tokens: 8, ..ExtractSettings::default() };
        let e = extract(&doc, &mut reader, &settings, &mut |_| true).unwrap_err();
        assert_eq!(e, Error::WindowLimit { tokens: 8, minimum: MIN_WINDOW_TOKENS });
        assert_eq!(reader.calls, 0, "refused before the reader was asked anything");
        assert_eq!(crate::error_code::HasErrorCode::code(&e), crate::error_code::ErrorCode::BadArgument);
    }
}
