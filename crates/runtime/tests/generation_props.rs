//! Generation under any stop strings, any output bytes and any token budget (issue #20):
//! tiny models built in code (byte-level BPE and SentencePiece with byte tokens, so
//! sampled output includes broken and multi-byte UTF-8) sample with random seeds. Whatever
//! comes out: no panic, the pieces streamed to `on_text` concatenate to the returned text,
//! the text holds no stop string, and no more tokens than asked are generated.

use std::ops::ControlFlow;

use docmem_runtime::gguf::testing::{tiny_lm, TinyTokenizer};
use docmem_runtime::lm::{Finish, Lm, LoadOptions, Prompt, SamplingParams};
use docmem_runtime::source::MemorySource;
use proptest::prelude::*;

fn model(tokenizer: TinyTokenizer) -> Lm {
    let opts = LoadOptions { threads: 1, context: 256, ..LoadOptions::default() };
    Lm::load_from(&MemorySource::new(tiny_lm("llama", tokenizer, None)), &opts).expect("the tiny model loads")
}

/// Generate with `params`, returning what was streamed beside the result.
fn generate_streamed(lm: &Lm, params: &SamplingParams) -> (String, docmem_runtime::lm::Generation) {
    let mut streamed = String::new();
    let g = docmem_runtime::block_on(lm.generate(Prompt::Text("abc de"), params, |piece| {
        streamed.push_str(piece);
        ControlFlow::Continue(())
    }))
    .expect("generation on a tiny model");
    (streamed, g)
}

/// Regression (a CI failure of the property below): `"e"` was streamed, `"d"` came and
/// made the stop string `"ed"`, and the returned text was cut to `""`.
#[test]
fn text_streamed_before_a_stop_string_completes_is_not_recalled() {
    let lm = model(TinyTokenizer::Spm);
    let params = SamplingParams {
        temperature: 1.7198745,
        top_p: 1.0,
        top_k: 0,
        seed: 1163771518235113772,
        max_tokens: 2,
        stop: vec!["ed".to_owned()],
        ..SamplingParams::default()
    };
    let (streamed, g) = generate_streamed(&lm, &params);
    assert_eq!(streamed, g.text);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn streamed_pieces_make_the_text_and_stop_strings_never_survive(
        spm in any::<bool>(),
        seed in any::<u64>(),
        max_tokens in 0usize..48,
        stop in proptest::collection::vec("[a-e ▁é中\n]{0,3}", 0..4),
        temperature in prop_oneof![Just(0.0f32), 0.5f32..2.0],
    ) {
        let lm = model(if spm { TinyTokenizer::Spm } else { TinyTokenizer::Gpt2 });
        let params = SamplingParams { temperature, top_p: 1.0, top_k: 0, seed, max_tokens, stop: stop.clone(), ..SamplingParams::default() };
        let (streamed, g) = generate_streamed(&lm, &params);
        prop_assert_eq!(&streamed, &g.text);
        prop_assert!(g.tokens.len() <= max_tokens, "{} tokens for a budget of {max_tokens}", g.tokens.len());
        for s in stop.iter().filter(|s| !s.is_empty()) {
            prop_assert!(!g.text.contains(s.as_str()), "stop string {s:?} in {:?}", g.text);
        }
        if g.finish == Finish::Length {
            prop_assert_eq!(g.tokens.len(), max_tokens);
        }
    }
}
