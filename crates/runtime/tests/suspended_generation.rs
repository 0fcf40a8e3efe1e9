//! Background generation that gives way and goes on, on SmolLM2: a generation stopped
//! while reading its prompt or while decoding, again and again, ends with exactly what an
//! uninterrupted one writes, and no prompt piece or decoding step is run twice; a memory
//! draft whose windows keep giving way to questions (SmolLM2's memories fall back to a
//! generation per sentence group, so a window is several generations) writes the memory
//! an uninterrupted extraction writes.

mod common;

use std::cell::Cell;
use std::ops::ControlFlow;

use common::model;
use docmem_core::reader::{extract_memory, ExtractSettings, MemoryDraft};
use docmem_core::Document;
use docmem_runtime::block_on;
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::{Generation, Lm, LmContext, LmReader, LoadOptions, Prompt, SamplingParams, WorkDone};

fn smollm() -> LmContext {
    LmContext::new(Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap())
}

/// A greedy path and a sampled one, as a memory window's candidates.
fn paths() -> Vec<SamplingParams> {
    let greedy = SamplingParams { temperature: 0.0, max_tokens: 24, ..SamplingParams::default() };
    vec![greedy.clone(), SamplingParams { temperature: 0.8, top_p: 0.95, seed: 7, ..greedy }]
}

fn prompt(lm: &LmContext) -> Vec<u32> {
    let messages = [ChatMessage::new(
        "user",
        "Summarize in two sentences: William Caxton brought the printing press to England in 1476. \
         He set up his shop at Westminster, and his first book printed in England was an edition \
         of The Canterbury Tales. Printing spread quickly to other towns.",
    )];
    lm.model().prompt_tokens(Prompt::Chat(&messages)).unwrap()
}

const PIECE: usize = 8;

/// Run to the end, stopping at every `every`-th question asked; returns the generations,
/// the work each question that was answered "go on" saw, and the stops.
fn run_with_stops(lm: &LmContext, every: usize) -> (Vec<Generation>, Vec<WorkDone>, usize) {
    let (asked, went_on, stops) = (Cell::new(0), std::cell::RefCell::new(Vec::new()), Cell::new(0));
    let stop = |work: &WorkDone| {
        asked.set(asked.get() + 1);
        let stopping = every > 0 && asked.get() % every == 0;
        if stopping {
            stops.set(stops.get() + 1);
        } else {
            went_on.borrow_mut().push(*work);
        }
        stopping
    };
    let mut kept = 0;
    loop {
        let out =
            block_on(lm.generate_paths_resumable(prompt(lm), &paths(), PIECE, None, |_, _| ControlFlow::Continue(()), &stop)).unwrap();
        match out {
            Some(g) => {
                assert_eq!(lm.suspended_tokens(), 0, "finished work is not kept");
                return (g, went_on.into_inner(), stops.get());
            }
            None => {
                let now = lm.suspended_tokens();
                assert!(now > kept, "each stop keeps more than the last ({kept} then {now})");
                kept = now;
            }
        }
    }
}

#[test]
fn a_generation_stopped_again_and_again_ends_as_an_uninterrupted_one_without_running_anything_twice() {
    let lm = smollm();
    let n = prompt(&lm).len();
    let (whole, work, stops) = run_with_stops(&lm, 0);
    assert_eq!(stops, 0);
    assert!(whole.iter().all(|g| g.tokens.len() > 5), "{whole:?}");
    // The work seen before each piece and step: the prompt piece by piece, then the tokens.
    assert_eq!(work[0], WorkDone { read: 0, prompt: n, written: 0 });
    assert_eq!(work[1].read, PIECE);
    assert!(work.windows(2).all(|w| w[0].read <= w[1].read && (w[0].read < n || w[0].written < w[1].written)), "{work:?}");
    assert_eq!(work.last().map(|w| (w.read, w.written)), Some((n, 23)), "the longest path's 24th token is the last step's");

    // Stopped every third question: in the prompt (it has several pieces) and in decoding.
    let lm = smollm();
    assert!(n > 4 * PIECE);
    let (resumed, resumed_work, stops) = run_with_stops(&lm, 3);
    assert!(stops > 10, "{stops} stops");
    for (a, b) in whole.iter().zip(&resumed) {
        assert_eq!(a.tokens, b.tokens, "the same tokens as an uninterrupted generation");
        assert_eq!(a.text, b.text);
        assert_eq!(a.finish, b.finish);
    }
    assert_eq!(resumed_work, work, "every prompt piece and decoding step ran once, in the same order");

    // Asked again, the finished call's result comes back at once (a window's later
    // generation that gave way makes the caller ask for its earlier ones again).
    let again =
        block_on(lm.generate_paths_resumable(prompt(&lm), &paths(), PIECE, None, |_, _| ControlFlow::Continue(()), &|_| true)).unwrap();
    assert_eq!(again.map(|g| g.iter().map(|g| g.text.clone()).collect::<Vec<_>>()), Some(resumed.iter().map(|g| g.text.clone()).collect()));
}

#[test]
fn work_for_another_prompt_or_other_settings_starts_afresh() {
    let lm = smollm();
    let stop_at_once_after = |n: usize| {
        let asked = Cell::new(0);
        move |_: &WorkDone| {
            asked.set(asked.get() + 1);
            asked.get() > n
        }
    };
    let first =
        block_on(lm.generate_paths_resumable(prompt(&lm), &paths(), PIECE, None, |_, _| ControlFlow::Continue(()), &stop_at_once_after(2)))
            .unwrap();
    assert!(first.is_none());
    assert_eq!(lm.suspended_tokens(), 2 * PIECE, "two pieces read");

    // The prompt read so far serves any paths: other settings go on reading from it.
    let other = vec![SamplingParams { temperature: 0.0, max_tokens: 12, ..SamplingParams::default() }];
    let out =
        block_on(lm.generate_paths_resumable(prompt(&lm), &other, PIECE, None, |_, _| ControlFlow::Continue(()), &stop_at_once_after(1)))
            .unwrap();
    assert!(out.is_none());
    assert_eq!(lm.suspended_tokens(), 3 * PIECE);

    // Paths being decoded go on only with the settings they were started with.
    let n = prompt(&lm).len();
    let pieces_left = (n - 3 * PIECE).div_ceil(PIECE);
    let out = block_on(lm.generate_paths_resumable(
        prompt(&lm),
        &paths(),
        PIECE,
        None,
        |_, _| ControlFlow::Continue(()),
        &stop_at_once_after(pieces_left + 3),
    ))
    .unwrap();
    assert!(out.is_none());
    assert_eq!(lm.suspended_tokens(), n + 4, "the prompt, the first token and three steps");
    let out =
        block_on(lm.generate_paths_resumable(prompt(&lm), &other, PIECE, None, |_, _| ControlFlow::Continue(()), &stop_at_once_after(1)))
            .unwrap();
    assert!(out.is_none());
    assert_eq!(lm.suspended_tokens(), PIECE, "other settings start afresh");

    // Another prompt's stopped work takes its place; forgetting frees it.
    let mut shorter = prompt(&lm);
    shorter.truncate(3 * PIECE);
    let out = block_on(lm.generate_paths_resumable(shorter, &other, PIECE, None, |_, _| ControlFlow::Continue(()), &stop_at_once_after(1)))
        .unwrap();
    assert!(out.is_none());
    assert_eq!(lm.suspended_tokens(), PIECE);
    lm.forget_suspended();
    assert_eq!(lm.suspended_tokens(), 0);

    // A cancel from `on_done` keeps nothing: asked again, the call starts afresh (and is
    // stopped before its first piece), where a kept result would have come back at once.
    let out = block_on(lm.generate_paths_resumable(prompt(&lm), &paths(), PIECE, None, |_, _| ControlFlow::Break(()), &|_| false)).unwrap();
    assert!(out.is_some_and(|g| g.len() == 2));
    assert_eq!(lm.suspended_tokens(), 0);
    let again =
        block_on(lm.generate_paths_resumable(prompt(&lm), &paths(), PIECE, None, |_, _| ControlFlow::Continue(()), &|_| true)).unwrap();
    assert!(again.is_none(), "nothing of the cancelled call was kept");
}

#[test]
fn a_memory_whose_windows_keep_giving_way_is_the_one_written_without_stops() {
    let text = "William Caxton brought the printing press to England in 1476. He set up his shop at Westminster. \
                His first book printed in England was an edition of The Canterbury Tales. \
                The steam engine converts heat into work. James Watt added a separate condenser in 1765. \
                Watt's engines spread through the mills and mines of Britain within a few decades.";
    let doc = Document::new("history.txt", text);
    let settings = ExtractSettings { samples: 0, max_new_tokens: 32, ..ExtractSettings::default() };
    let lm = smollm();
    let mut reader = LmReader::new(&lm, "SmolLM2");
    let whole = block_on(extract_memory(&doc, &mut reader, None, &settings, &mut |_| true)).unwrap();
    // SmolLM2's 32 tokens do not make a memory: the window falls back to a generation per
    // sentence group after the reader's, so a window here is several generations.
    assert!(whole.provenance.fallback.is_some(), "{:?}", whole.provenance);

    // A question arrives every fifth prompt piece or decoding step.
    let lm = smollm();
    let asked = Cell::new(0);
    let stop = || {
        asked.set(asked.get() + 1);
        asked.get() % 5 == 0
    };
    let mut reader = LmReader::new(&lm, "SmolLM2");
    reader.interrupt = Some(&stop);
    let mut draft = MemoryDraft::plan(&doc, &mut reader, &settings).unwrap();
    let mut gave_way = 0;
    while !draft.is_complete() {
        match block_on(draft.read_next(&doc, &mut reader, None, &settings, &mut |_| true)) {
            Ok(()) => {}
            Err(docmem_core::Error::Cancelled) => gave_way += 1,
            Err(e) => panic!("{e}"),
        }
        assert!(gave_way < 1000, "the draft makes no progress");
    }
    assert!(gave_way > 5, "it gave way {gave_way} times");
    assert_eq!(draft.finish(&doc, &settings), whole, "the memory an uninterrupted extraction writes");
}
