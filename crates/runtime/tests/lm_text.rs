//! `LmText`, the short-reply model of clues and routing, on SmolLM2: a reply continued
//! from the kept opening is exactly the whole prompt's greedy generation, and the opening
//! is prefilled once for every request that shares it.

mod common;

use std::ops::ControlFlow;

use common::model;
use docmem_core::local_future::poll_once;
use docmem_core::text_model::TextModel;
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::{Lm, LmText, LoadOptions, Prompt, SamplingParams};

#[test]
fn replies_from_the_kept_opening_equal_whole_prompt_generation() {
    let lm = Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap();
    let context = "Notes on the library:\n# printing.md\n- Caxton: William Caxton brought the printing press to England in 1476.\n\n";
    let requests = ["Question: Who brought printing to England?\n", "Question: In which year did printing reach England?\n"];
    let mut text = LmText::new(&lm);
    for (i, request) in requests.iter().enumerate() {
        let got = poll_once(text.complete(context, request, 12)).unwrap().unwrap();
        let user = format!("{context}{request}");
        let whole = docmem_runtime::block_on(lm.generate(
            Prompt::Chat(&[ChatMessage::new("user", &user)]),
            &SamplingParams { max_tokens: 12, ..SamplingParams::default() },
            |_| ControlFlow::Continue(()),
        ))
        .unwrap();
        assert_eq!(got, whole.text, "request {i}");
        assert!(!got.is_empty());
        assert_eq!(text.reused, i, "the opening is prefilled once");
    }
    // No context: nothing kept, same reply as a plain generation.
    let got = poll_once(text.complete("", "Say hello.\n", 4)).unwrap().unwrap();
    assert!(!got.is_empty());
}
