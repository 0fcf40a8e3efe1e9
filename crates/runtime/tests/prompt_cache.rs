//! The answerer's kept prompt on SmolLM2: an answer prompt read ahead while its question is
//! typed is reused by the answer (only the question runs), a read ahead stopped early keeps
//! what it read, a follow-up question reuses the start it shares with the last answer's
//! prompt, and in each case the answer is the one a fresh model writes from scratch.

mod common;

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use common::model;
use docmem_core::chunk::{chunk_with, ChunkerKind};
use docmem_core::library::{Library, LibrarySettings, MemStore};
use docmem_core::{Document, DocumentMemory, HashingEmbedder};
use docmem_runtime::answerer::{Answerer, AHEAD_CHUNK};
use docmem_runtime::block_on;
use docmem_runtime::lm::{Lm, LmContext, LoadOptions};
use docmem_runtime::pipeline::qa::{Answer, AskParams};
use docmem_runtime::session::{Answering, AskOptions, Session};

const PRINTING: &str = "William Caxton brought the printing press to England in 1476. He set up his shop at Westminster. \
                        His first book printed in England was an edition of The Canterbury Tales. \
                        The steam engine converts heat into work. James Watt added a separate condenser in 1765.";

fn smollm() -> LmContext {
    LmContext::new(Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap())
}

fn library(e: &RefCell<HashingEmbedder>) -> Session<MemStore> {
    let mut lib = Library::open(MemStore::default(), &LibrarySettings::new("hashing-64".into(), 64)).unwrap();
    let doc = Document::new("printing.txt", PRINTING);
    let spans = chunk_with(ChunkerKind::Sentence, PRINTING, Default::default(), None).unwrap();
    lib.add(&doc, &DocumentMemory::from_spans(&doc, &spans, "sentence"), &mut *e.borrow_mut()).unwrap();
    Session::new(lib)
}

fn ask(session: &Session<MemStore>, e: &RefCell<HashingEmbedder>, lm: &LmContext, question: &str) -> Answer {
    let options = AskOptions { params: params(), ..AskOptions::default() };
    block_on(session.ask(question, &options, Answering::local(lm, "smollm"), e, &mut |_| ControlFlow::Continue(()))).unwrap()
}

fn read_ahead(session: &Session<MemStore>, e: &RefCell<HashingEmbedder>, lm: &LmContext, question: &str, stop: &dyn Fn() -> bool) -> usize {
    block_on(session.read_ahead(question, &params(), lm, e, stop)).unwrap()
}

fn params() -> AskParams {
    AskParams { k: 2, max_tokens: 24, ..AskParams::default() }
}

const QUESTION: &str = "Where did Caxton set up his shop?";

#[test]
fn an_answer_read_ahead_runs_only_its_question_and_answers_as_from_scratch() {
    let e = RefCell::new(HashingEmbedder::new(64));
    let lib = library(&e);
    let fresh = ask(&lib, &e, &smollm(), QUESTION);
    assert_eq!(fresh.reused_tokens, 0, "a new model keeps no prompt");

    // The whole question was typed before the read ahead ran: everything but the
    // question's tokens (and the token before it, which may join them) is read ahead.
    let lm = smollm();
    let kept = read_ahead(&lib, &e, &lm, QUESTION, &|| false);
    assert!(kept > 60 && kept == lm.kept_prompt_tokens(), "{kept} tokens read ahead");
    let a = ask(&lib, &e, &lm, QUESTION);
    assert_eq!(a.reused_tokens, kept, "the answer reuses all that was read ahead");
    assert!(fresh.prompt_tokens > kept && a.prompt_tokens == fresh.prompt_tokens, "{} prompt tokens, {kept} read ahead", a.prompt_tokens);
    assert_eq!(a.answer, fresh.answer);
    assert_eq!(a.cited, fresh.cited);

    // A follow-up question that finds the same passages reuses them from the last answer.
    let b = ask(&lib, &e, &lm, "Where did Caxton set up his shop at first?");
    assert!(b.reused_tokens >= kept, "{} reused of the {kept} the passages take", b.reused_tokens);
}

#[test]
fn a_read_ahead_stopped_early_keeps_what_it_read_and_a_partial_question_still_helps() {
    let e = RefCell::new(HashingEmbedder::new(64));
    let lib = library(&e);
    let fresh = ask(&lib, &e, &smollm(), QUESTION);

    // Stopped before its second piece: one piece kept.
    let lm = smollm();
    let asked = Cell::new(0);
    let stop = || {
        asked.set(asked.get() + 1);
        asked.get() > 1
    };
    let kept = read_ahead(&lib, &e, &lm, "Where did Caxton", &stop);
    assert_eq!(kept, AHEAD_CHUNK);
    let a = ask(&lib, &e, &lm, QUESTION);
    assert_eq!(a.reused_tokens, AHEAD_CHUNK);
    assert_eq!(a.answer, fresh.answer);

    // Read ahead on a partial question, then on an empty one (the instructions alone): the
    // second keeps the start both share and runs nothing.
    let lm = smollm();
    let whole = read_ahead(&lib, &e, &lm, "Where did Caxton", &|| false);
    let instructions = read_ahead(&lib, &e, &lm, "", &|| false);
    assert!(instructions > 20 && instructions < whole, "{instructions} of {whole}");
    assert_eq!(lm.kept_prompt_tokens(), whole, "the longer prompt stays kept");
    let a = ask(&lib, &e, &lm, QUESTION);
    assert!(a.reused_tokens >= instructions);
    assert_eq!(a.answer, fresh.answer);
}

#[test]
fn an_empty_start_or_a_stop_at_once_keeps_nothing() {
    let lm = smollm();
    assert_eq!(block_on(lm.read_ahead("", &|| false)).unwrap(), 0);
    assert_eq!(lm.kept_prompt_tokens(), 0);
    // Stopped at once with nothing kept: nothing is kept after either.
    assert_eq!(block_on(lm.read_ahead("Answer the question using only the passages below.", &|| true)).unwrap(), 0);
    assert_eq!(lm.kept_prompt_tokens(), 0);
}

#[test]
fn an_empty_read_ahead_leaves_a_chinese_answers_prompt_kept() {
    // The page reads the instructions ahead whenever it waits for a question; after a
    // Chinese question the kept prompt starts with the Chinese instructions, and reading
    // the English ones would cut it back for the next question.
    let e = RefCell::new(HashingEmbedder::new(64));
    let lib = library(&e);
    let lm = smollm();
    let question = "卡克斯顿最早在哪里开设印刷店？";
    let first = ask(&lib, &e, &lm, question);
    let kept = lm.kept_prompt_tokens();
    assert!(kept > 20 && first.prompt_tokens == kept, "{kept} kept of {} prompt tokens", first.prompt_tokens);
    let instructions = read_ahead(&lib, &e, &lm, "", &|| false);
    assert!(instructions > 20 && instructions < kept, "{instructions} of {kept}");
    assert_eq!(lm.kept_prompt_tokens(), kept, "the Chinese answer's prompt stays kept");
    let again = ask(&lib, &e, &lm, question);
    assert_eq!(again.reused_tokens, kept - 1, "all of it but the last token is reused");
    assert_eq!(again.answer, first.answer);
}
