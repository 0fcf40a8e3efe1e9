//! A local answerer's own evidence on SmolLM2, against the same quantities computed from
//! scratch: the verification (its "Yes" against its "No" when asked, after its reply,
//! whether the passages state that answer) is read from the prompt's cache continued with
//! the reply and the question, and must equal a fresh prefill of the whole conversation.

mod common;

use std::ops::ControlFlow;

use common::model;
use docmem_runtime::answerer::{Answerer, REFUSAL, VERIFY};
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::{log_prob, Lm, LoadOptions, Prompt};

#[test]
fn the_verification_read_from_the_cache_equals_a_fresh_prefill_of_the_conversation() {
    docmem_runtime::answerer::measure_verification(true);
    let lm = Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap();
    let turn = "Answer from the passage.\n\n[1] Printing\nText: William Caxton set up a printing press at Westminster in 1476.\n\nQuestion: Who set up a press at Westminster?";
    let reply = docmem_runtime::block_on(lm.reply(turn, 16, &mut |_| ControlFlow::Continue(()))).unwrap();
    // The rule was fitted on the 1.5B's answers: SmolLM2's are not judged, nor measured.
    assert!(!docmem_runtime::answerer::calibrated_for(lm.config()) && reply.probabilities.is_none());
    let question = ChatMessage::new("user", turn);
    let prefix = docmem_runtime::block_on(lm.prefill(Prompt::Chat(std::slice::from_ref(&question)))).unwrap();
    let verified = docmem_runtime::block_on(lm.verify_after(&prefix, &question, &reply.text))
        .unwrap()
        .expect("SmolLM2's template continues the prompt, and Yes and No are one token each");

    let conversation = [question.clone(), ChatMessage::new("assistant", reply.text.trim()), ChatMessage::new("user", VERIFY)];
    let (_, logits) = docmem_runtime::block_on(lm.next_token_logits(Prompt::Chat(&conversation))).unwrap();
    let (yes, no) = (lm.single_token("Yes").unwrap().unwrap(), lm.single_token("No").unwrap().unwrap());
    let fresh = log_prob(&logits, yes) - log_prob(&logits, no);
    assert!((verified - fresh).abs() < 1e-3, "from the cache {verified}, from scratch {fresh}");

    assert!(!REFUSAL.is_empty());
}
