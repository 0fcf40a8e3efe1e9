//! Multi-path decoding on SmolLM2 against its reference, the sequential path: a batched
//! step gives each sequence the very logits (bit for bit) it gets decoded alone, and
//! `generate_paths` gives each path exactly what `generate_after` gives for its settings.

mod common;

use std::ops::ControlFlow;

use common::model;
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::Logits;
use docmem_runtime::lm::{
    Backend, DraftSettings, Finish, Lm, LmContext, LoadOptions, PrefillOptions, Prompt, PromptLookup, SamplingParams,
};

fn smollm2() -> Lm {
    Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_batched_step_equals_each_sequence_alone_bit_for_bit() {
    let lm = smollm2();
    let b = &lm.backend;
    let vocab = b.config().vocab;
    let prompt = lm.tokenizer.encode_prompt("The printing press was invented by").unwrap();
    let mut base = b.new_cache();
    docmem_runtime::block_on(Backend::forward(b, &mut base, &prompt, Logits::Last)).unwrap();
    // Sequences of different lengths (one forked twice and grown), one, two and three new
    // tokens each (three: a drafted run verified in one pass).
    let mut longer = base.clone();
    docmem_runtime::block_on(Backend::forward(b, &mut longer, &[1000, 2000], Logits::Last)).unwrap();
    let starts = [base.clone(), longer, base.clone(), base.clone()];
    let feeds: [&[u32]; 4] = [&[42], &[314, 15], &[7], &[271, 828, 1001]];
    let mut want = Vec::new();
    for (cache, feed) in starts.iter().zip(feeds) {
        let mut c = cache.clone();
        for &t in feed {
            want.extend(docmem_runtime::block_on(Backend::forward(b, &mut c, &[t], Logits::Last)).unwrap());
        }
    }
    let mut caches = starts.clone();
    let mut seqs: Vec<(&mut _, &[u32])> = caches.iter_mut().zip(feeds).collect();
    let got = docmem_runtime::block_on(Backend::forward_batch(b, &mut seqs)).unwrap();
    assert_eq!(got.len(), 7 * vocab);
    for row in 0..7 {
        let r = row * vocab..(row + 1) * vocab;
        assert!(bits(&got[r.clone()]) == bits(&want[r]), "row {row}: batched logits differ from sequential ones");
    }
    for (c, (s, f)) in caches.iter().zip(starts.iter().zip(feeds)) {
        assert_eq!(b.cache_len(c), b.cache_len(s) + f.len());
    }
}

fn specs(max_tokens: usize) -> Vec<SamplingParams> {
    let mut v = vec![SamplingParams { max_tokens, ..Default::default() }];
    v.extend((0..3).map(|i| SamplingParams { temperature: 0.7, top_p: 0.8, seed: 7 + i, max_tokens, ..Default::default() }));
    v
}

#[test]
fn generate_paths_equals_sequential_generation() {
    let lm = smollm2();
    let messages = [ChatMessage::new("user", "Write two sentences about the printing press.")];
    let prefix =
        docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages)).unwrap(), PrefillOptions::default())).unwrap().prefix;
    // Greedy + three sampled paths (MoM's settings), then paths that leave the batch
    // early: a short max_tokens, and a stop string.
    let mut paths = specs(48);
    paths[2].max_tokens = 5;
    paths[3].stop = vec![" the".to_owned()];
    let batched = docmem_runtime::block_on(lm.generate_paths(&prefix, &paths)).unwrap();
    assert_eq!(batched.len(), 4);
    for (i, (p, g)) in paths.iter().zip(&batched).enumerate() {
        let want = docmem_runtime::block_on(lm.generate_after(&prefix, "", p, |_| ControlFlow::Continue(()))).unwrap();
        assert_eq!(g.tokens, want.tokens, "path {i}: tokens");
        assert_eq!(g.text, want.text, "path {i}: text");
        assert_eq!(g.finish, want.finish, "path {i}: finish");
        assert_eq!(g.prompt_tokens, want.prompt_tokens);
    }
    assert_eq!(batched[2].tokens.len(), 5);
    assert_eq!(batched[2].finish, Finish::Length);
    // Sampled paths are reproducible, and the seeds make them differ.
    let again = docmem_runtime::block_on(lm.generate_paths(&prefix, &paths)).unwrap();
    for (a, b) in batched.iter().zip(&again) {
        assert_eq!(a.tokens, b.tokens);
    }
    let sampled = docmem_runtime::block_on(lm.generate_paths(&prefix, &specs(24))).unwrap();
    assert!(sampled[1..].iter().any(|g| g.tokens != sampled[1].tokens) || sampled[1].tokens != sampled[0].tokens, "seeds should matter");
}

#[test]
fn paths_are_reported_as_they_end_and_can_be_cancelled() {
    let lm = smollm2();
    let prefix =
        docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Text("Once upon a time")).unwrap(), PrefillOptions::default()))
            .unwrap()
            .prefix;
    let mut paths = specs(12);
    paths[1].max_tokens = 3;
    paths[3].max_tokens = 0;
    let mut ended = Vec::new();
    let out = docmem_runtime::block_on(lm.generate_paths_with(&prefix, &paths, |i, g| {
        ended.push((i, g.tokens.len()));
        ControlFlow::Continue(())
    }))
    .unwrap();
    assert_eq!(ended.first(), Some(&(3, 0)), "a path with nothing to generate ends first");
    assert_eq!(ended.get(1), Some(&(1, 3)));
    assert_eq!(ended.len(), 4);
    assert!(out[0].tokens.len() <= 12);
    // Breaking at the first path to end returns the others as they were, cancelled.
    let out = docmem_runtime::block_on(lm.generate_paths_with(&prefix, &paths[..3], |_, _| ControlFlow::Break(()))).unwrap();
    assert_eq!(out[1].finish, Finish::Length);
    assert_eq!(out[1].tokens.len(), 3);
    assert_eq!(out[0].finish, Finish::Cancelled);
    assert_eq!(out[0].tokens.len(), 3);
}

/// A reader's reply that has not opened its format within its allowance ends there, in a
/// batch and alone alike; one that has goes on; and the reader role passes the opening on.
#[test]
fn a_path_that_does_not_open_as_its_format_asks_ends_there() {
    use docmem_core::reader::{Generated, Opening, ReaderModel, SampleSpec};
    use docmem_runtime::lm::LmReader;
    let lm = smollm2();
    let messages = [ChatMessage::new("user", "Write two sentences about the printing press.")];
    let prefix =
        docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages)).unwrap(), PrefillOptions::default())).unwrap().prefix;
    let never = Opening { markers: &["<scenario>"], within_tokens: 6 };
    let mut paths = specs(24);
    paths.truncate(2);
    paths[0].opening = Some(never);
    // Whatever it writes holds a space within ten tokens: the opening is seen, it goes on.
    paths[1].opening = Some(Opening { markers: &[" "], within_tokens: 10 });
    let batched = docmem_runtime::block_on(lm.generate_paths(&prefix, &paths)).unwrap();
    assert_eq!((batched[0].tokens.len(), batched[0].finish), (6, Finish::OffFormat));
    assert!(batched[1].tokens.len() > 10 && batched[1].finish != Finish::OffFormat, "{:?}", batched[1].finish);
    for (i, (p, g)) in paths.iter().zip(&batched).enumerate() {
        let want = docmem_runtime::block_on(lm.generate_after(&prefix, "", p, |_| ControlFlow::Continue(()))).unwrap();
        assert_eq!((&g.tokens, &g.text, g.finish), (&want.tokens, &want.text, want.finish), "path {i}");
    }
    let context = LmContext::new(lm);
    let mut reader = LmReader::new(&context, "SmolLM2-135M-Instruct.Q4_1.gguf");
    let spec = [SampleSpec { opening: Some(never), ..SampleSpec::GREEDY }];
    let out = docmem_runtime::block_on(reader.generate("Write about bells.", &spec, 64, &mut |_, _: &Generated| true)).unwrap();
    assert_eq!(out[0].tokens, 6);
}

/// Prompt-lookup drafts change how many passes decoding takes, not what greedy decoding
/// writes: the same tokens with and without drafts, and drafts were accepted.
#[test]
fn greedy_output_is_identical_with_and_without_drafts() {
    let lm = smollm2();
    let doc = "Johannes Gutenberg introduced printing to Europe with his mechanical movable-type printing press. \
               His work started the Printing Revolution in Europe, which is regarded as a milestone of the second millennium.";
    let messages = [ChatMessage::new("user", &format!("Copy this text exactly:\n\n{doc}"))];
    let prefix =
        docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages)).unwrap(), PrefillOptions::default())).unwrap().prefix;
    let lookup = PromptLookup::new(prefix.tokens(), DraftSettings::default());
    let mut paths = specs(40);
    paths.truncate(2);
    paths[1] = SamplingParams { max_tokens: 25, ..Default::default() };
    let plain = docmem_runtime::block_on(lm.generate_paths(&prefix, &paths)).unwrap();
    let drafted =
        docmem_runtime::block_on(
            lm.generate_paths_drafted(&prefix, &paths, Some(&lookup), |_, _| ControlFlow::Continue(()), &mut || ControlFlow::Continue(())),
        )
        .unwrap();
    for (i, (a, b)) in plain.iter().zip(&drafted).enumerate() {
        assert_eq!(a.tokens, b.tokens, "path {i}");
        assert_eq!(a.text, b.text);
        assert_eq!(a.finish, b.finish);
    }
    let (d, acc): (usize, usize) = drafted.iter().fold((0, 0), |(d, a), g| (d + g.drafted, a + g.accepted));
    eprintln!("drafted {d}, accepted {acc}: {:?}", drafted[0].text);
    assert!(acc > 0 && acc <= d, "drafted {d}, accepted {acc}");
    // Sampled paths with drafts run, are reproducible and end as asked.
    let sampled = specs(20);
    let a = docmem_runtime::block_on(lm.generate_paths_drafted(
        &prefix,
        &sampled,
        Some(&lookup),
        |_, _| ControlFlow::Continue(()),
        &mut || ControlFlow::Continue(()),
    ))
    .unwrap();
    let b = docmem_runtime::block_on(lm.generate_paths_drafted(
        &prefix,
        &sampled,
        Some(&lookup),
        |_, _| ControlFlow::Continue(()),
        &mut || ControlFlow::Continue(()),
    ))
    .unwrap();
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(a.tokens, b.tokens);
        assert!(a.tokens.len() <= 20);
    }
}

#[test]
fn scoring_after_a_prefill_equals_scoring_the_whole_prompt() {
    // eval qa generates an answer from a prefilled prompt, then scores the gold answer
    // after the same prefix; that must be what scoring the rendered prompt gives.
    let lm = smollm2();
    let messages = [ChatMessage::new("user", "Who printed the first book in English?")];
    let prefix =
        docmem_runtime::block_on(lm.prefill(lm.prompt_tokens(Prompt::Chat(&messages)).unwrap(), PrefillOptions::default())).unwrap().prefix;
    let rendered = lm.render_chat(&messages).unwrap();
    let gold = " William Caxton";
    let whole = docmem_runtime::block_on(lm.score(&[(rendered.as_str(), gold)])).unwrap().remove(0);
    let after = docmem_runtime::block_on(lm.score_after(&prefix, gold)).unwrap();
    assert!(whole.len() >= 2, "a multi-token answer: {whole:?}");
    assert_eq!(bits(&after), bits(&whole));
    // The prefix is left as it was: generating from it still works, and again it scores the same.
    let g = docmem_runtime::block_on(
        lm.generate_after(&prefix, "", &SamplingParams { max_tokens: 3, ..Default::default() }, |_| ControlFlow::Continue(())),
    )
    .unwrap();
    assert_eq!(g.prompt_tokens, prefix.tokens().len());
    assert_eq!(bits(&docmem_runtime::block_on(lm.score_after(&prefix, gold)).unwrap()), bits(&whole));
    assert!(docmem_runtime::block_on(lm.score_after(&prefix, "")).unwrap().is_empty());
}

#[test]
fn a_reader_interrupted_between_steps_stops_within_one_step() {
    use docmem_core::reader::{Generated, ReaderModel, SampleSpec};
    use docmem_runtime::lm::LmReader;
    use std::cell::Cell;
    let lm = smollm2();
    let steps = Cell::new(0usize);
    let stop_after_five = || {
        steps.set(steps.get() + 1);
        steps.get() > 5
    };
    let context = LmContext::new(lm);
    let mut reader = LmReader::new(&context, "SmolLM2-135M-Instruct.Q4_1.gguf");
    reader.interrupt = Some(&stop_after_five);
    let specs = [SampleSpec::GREEDY, SampleSpec { temperature: 0.7, top_p: 0.9, seed: 1, opening: None }];
    let mut ended = 0;
    let r = docmem_runtime::block_on(reader.generate("Write about bells.", &specs, 64, &mut |_, _: &Generated| {
        ended += 1;
        true
    }));
    assert_eq!(r.unwrap_err(), docmem_core::Error::Cancelled);
    assert_eq!(steps.get(), 6, "asked before each step, stopped at the first true");
    assert_eq!(ended, 0, "no path ran to its end");
    // Without the interrupt the same call runs to the end.
    reader.interrupt = None;
    let out = docmem_runtime::block_on(reader.generate("Write about bells.", &specs, 8, &mut |_, _| true)).unwrap();
    assert_eq!(out.len(), 2);
}

#[test]
fn a_prompt_read_ahead_in_chunks_continues_as_the_whole_prefill_and_stops_between_chunks() {
    use std::cell::Cell;
    let lm = smollm2();
    let messages = [ChatMessage::new("user", "Write two sentences about the printing press and the bells of London.")];
    let tokens = lm.prompt_tokens(Prompt::Chat(&messages)).unwrap();
    let whole = docmem_runtime::block_on(lm.prefill(tokens.clone(), PrefillOptions::default())).unwrap().prefix;
    // Read ahead 8 tokens at a time up to the last token, then the prompt itself reuses them.
    let context = LmContext::new(smollm2());
    let ahead = docmem_runtime::block_on(context.prefill_ahead(&tokens[..tokens.len() - 1], 8, &|| false)).unwrap();
    assert_eq!(ahead, tokens.len() - 1);
    let reusing = docmem_runtime::block_on(context.prefill(tokens.clone(), PrefillOptions::default())).unwrap();
    assert_eq!((reusing.reused, reusing.prefix.tokens()), (tokens.len() - 1, whole.tokens()));
    let greedy = SamplingParams { max_tokens: 12, ..Default::default() };
    let after = |p| docmem_runtime::block_on(lm.generate_after(p, "", &greedy, |_| ControlFlow::Continue(()))).unwrap().tokens;
    assert_eq!(after(&reusing.prefix), after(&whole), "the same greedy continuation from either prefix");
    // A fresh model told to stop before its third chunk keeps the two it ran.
    let fresh = LmContext::new(smollm2());
    let asked = Cell::new(0);
    let stop_at_third = || {
        asked.set(asked.get() + 1);
        asked.get() == 3
    };
    assert_eq!(docmem_runtime::block_on(fresh.prefill_ahead(&tokens, 8, &stop_at_third)).unwrap(), 16);
    assert_eq!(asked.get(), 3, "asked before each chunk, stopped at the first true");
}
