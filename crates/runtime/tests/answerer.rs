//! A local answerer's own evidence on SmolLM2, against the same quantities computed from
//! scratch: the verification (its "Yes" against its "No" when asked, after its reply,
//! whether the passages state that answer) is read from the prompt's cache continued with
//! the reply and the question, and must equal a fresh prefill of the whole conversation.

mod common;

use std::ops::ControlFlow;

use common::model;
use docmem_runtime::answerer::{Answerer, ReplyOptions, REFUSAL, VERIFY};
use docmem_runtime::chat::ChatMessage;
use docmem_runtime::lm::{log_prob, Finish, Lm, LmContext, LoadOptions, PrefillOptions, Prompt, StateAt};
use docmem_runtime::probe::ProbePosition;

#[test]
fn the_verification_read_from_the_cache_equals_a_fresh_prefill_of_the_conversation() {
    docmem_runtime::answerer::measure_verification(true);
    let answerer =
        LmContext::new(Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap());
    let lm = answerer.model();
    let turn = "Answer from the passage.\n\n[1] Printing\nText: William Caxton set up a printing press at Westminster in 1476.\n\nQuestion: Who set up a press at Westminster?";
    let reply = docmem_runtime::block_on(answerer.reply(turn, ReplyOptions::new(16), &mut |_| ControlFlow::Continue(()))).unwrap();
    // The rule was fitted on the 1.5B's answers: SmolLM2's are not judged, nor measured.
    assert!(!docmem_runtime::answerer::calibrated_for(lm.identity()) && reply.probabilities.is_none());
    let question = ChatMessage::new("user", turn);
    let prefix = docmem_runtime::block_on(
        lm.prefill(lm.prompt_tokens(Prompt::Chat(std::slice::from_ref(&question))).unwrap(), PrefillOptions::default()),
    )
    .unwrap()
    .prefix;
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

/// The hidden state the answerability probe reads comes from the answer's own prefill: on
/// a fresh model it is the state a separate pass over the prompt gives, bit for bit, at the
/// prompt's last token and at the user turn's (the prompt run in two pieces); after a
/// read-ahead (most of the prompt kept, only its end run) it is the same state to within
/// the batch's summation order.
#[test]
fn the_prefills_hidden_state_is_the_prompts() {
    let lm = || Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap();
    let turn = [ChatMessage::new(
        "user",
        "[1] Printing\nText: William Caxton set up a printing press at Westminster in 1476.\n\nQuestion: Who set up a press?",
    )];
    let fresh = lm();
    let tokens = fresh.prompt_tokens(Prompt::Chat(&turn)).unwrap();
    let layer = 20;
    let want = fresh.prompt_states(Prompt::Chat(&turn), &[layer]).unwrap().remove(0);
    assert_eq!(want.len(), fresh.config().n_embd);
    let at_end = StateAt { layer, after_tokens: tokens.len() };
    let (_, reused, state) = docmem_runtime::block_on(fresh.prefill(tokens.clone(), PrefillOptions { state_at: Some(at_end) }))
        .map(|p| (p.prefix, p.reused, p.state))
        .unwrap();
    assert_eq!((reused, state.as_deref()), (0, Some(&want[..])));

    // At the user turn's end: the state of the prompt cut there, and the same prompt after.
    let turn_end = fresh.user_turn_end(&turn[0].content, &tokens).unwrap().expect("the turn's end is found");
    assert!(turn_end < tokens.len(), "the template closes the turn after it");
    assert_eq!(fresh.probe_reads_at(ProbePosition::Question, &turn[0].content, &tokens).unwrap(), Some(turn_end));
    let rendered = fresh.render_chat(&turn).unwrap();
    let cut = &rendered[..rendered.rfind("press?").unwrap() + "press?".len()];
    assert_eq!(fresh.prompt_tokens(Prompt::Text(cut)).unwrap(), tokens[..turn_end]);
    let want_at_turn = fresh.prompt_states(Prompt::Text(cut), &[layer]).unwrap().remove(0);
    let split = lm();
    let at_turn = StateAt { layer, after_tokens: turn_end };
    let (prefix, _, state) = docmem_runtime::block_on(split.prefill(tokens.clone(), PrefillOptions { state_at: Some(at_turn) }))
        .map(|p| (p.prefix, p.reused, p.state))
        .unwrap();
    assert_eq!(state.as_deref(), Some(&want_at_turn[..]));
    assert_eq!(prefix.tokens(), &tokens[..], "the whole prompt was run");
    // A state outside the prompt is not read.
    let outside = StateAt { layer, after_tokens: tokens.len() + 1 };
    let options = PrefillOptions { state_at: Some(outside) };
    assert_eq!(docmem_runtime::block_on(lm().prefill(tokens.clone(), options)).unwrap().state, None);

    let ahead = LmContext::new(lm());
    let kept = docmem_runtime::block_on(ahead.prefill_ahead(&tokens[..tokens.len() - 6], 16, &|| false)).unwrap();
    assert_eq!(kept, tokens.len() - 6);
    let (_, reused, state) = docmem_runtime::block_on(ahead.prefill(tokens, PrefillOptions { state_at: Some(at_end) }))
        .map(|p| (p.prefix, p.reused, p.state))
        .unwrap();
    assert_eq!(reused, kept);
    let state = state.unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>();
    let cosine = dot(&state, &want) / (dot(&state, &state) * dot(&want, &want)).sqrt();
    assert!(cosine > 0.9999, "cosine {cosine}");
}

/// The default answerer's reply carries the probe's reading of the prompt's state: a
/// synthetic Qwen2.5 1.5B (its tensors, seeded values) standing in for the real file, whose
/// identity it is given; by its own identity, the same shape has no probe.
#[test]
fn the_default_answerers_reply_carries_the_probes_reading() {
    use docmem_runtime::model::ModelIdentity;
    use docmem_runtime::source::MemorySource;
    use docmem_runtime::synthetic::{decoder_gguf, DecoderSpec};
    let spec: DecoderSpec = "qwen2-1.5b:q4_k_m".parse().unwrap();
    let lm = Lm::load_from(
        &MemorySource::new(decoder_gguf(spec.shape, spec.quant, 1)),
        &LoadOptions { threads: 2, context: 256, ..Default::default() },
    )
    .unwrap();
    assert!(docmem_runtime::probe::for_model(lm.identity()).is_none(), "a file of the 1.5B's shape is not the 1.5B");
    let answerer = LmContext::new(lm.with_identity(ModelIdentity::from_hex(docmem_runtime::probe::QWEN_1_5B_IDENTITY).unwrap()));
    let lm = answerer.model();
    let probe = docmem_runtime::probe::for_model(lm.identity()).expect("the 1.5B has a probe");
    let turn = "Question: who?";
    let free = ReplyOptions { max_tokens: 2, probe_decides: false };
    let reply = docmem_runtime::block_on(answerer.reply(turn, free, &mut |_| ControlFlow::Continue(()))).unwrap();
    // The state at the token the probe reads: the prompt cut after it, read alone.
    let chat = [ChatMessage::new("user", turn)];
    let tokens = lm.prompt_tokens(Prompt::Chat(&chat)).unwrap();
    let at = lm.probe_reads_at(probe.position, turn, &tokens).unwrap().expect("the probe's token is found");
    let rendered = lm.render_chat(&chat).unwrap();
    let text = match probe.position {
        ProbePosition::Question => &rendered[..rendered.rfind(turn).unwrap() + turn.len()],
        _ => &rendered[..],
    };
    assert_eq!(lm.prompt_tokens(Prompt::Text(text)).unwrap(), tokens[..at]);
    let state = lm.prompt_states(Prompt::Text(text), &[probe.layer]).unwrap().remove(0);
    let margin = probe.margin(&state);
    assert_eq!(reply.probabilities.expect("the 1.5B is judged").probe, Some(margin));
    assert!(!reply.text.is_empty() && reply.finish != Finish::Withheld, "the probe decides nothing unless asked");

    // Asked to decide, the probe withholds the reply when it reads the prompt as not
    // answered, and otherwise lets it be written.
    // (The prompt is kept from the first reply, so only the probe's token and what follows
    // it run again: the same state to within the batch's summation order.)
    let decided = docmem_runtime::block_on(answerer.reply(turn, ReplyOptions::new(2), &mut |_| ControlFlow::Continue(()))).unwrap();
    let reading = decided.probabilities.unwrap().probe.expect("the probe read the state");
    assert!((reading - margin).abs() <= 0.05 * margin.abs() + 1e-3, "{reading} against {margin}");
    if reading < 0.0 {
        assert_eq!((decided.text.as_str(), decided.finish), ("", Finish::Withheld));
    } else {
        assert!(!decided.text.is_empty() && decided.finish != Finish::Withheld);
    }
}
