//! What clues ([`crate::clues`]) and routing ([`crate::route`]) need from a language model:
//! a short greedy reply to one user turn.
//!
//! Apart from [`crate::reader::ReaderModel`] because the calls differ in shape. The reader
//! samples several long candidates of one prompt; clue writing, sub-query writing and
//! judging each ask for one short reply, and many of them share a long opening (the
//! global memory before each question). So a prompt comes in two parts: a `context` that
//! repeats across calls, which a model may keep processed between calls (the runtime's
//! `LmChat` keeps its K/V cache), and the `request` that follows it.

use alloc::string::String;

use crate::local_future::LocalBoxFuture;
use crate::Error;

/// A chat model that writes short replies (see the module docs).
pub trait TextModel {
    /// The context window in tokens.
    fn context_tokens(&self) -> usize;
    /// Tokens in `text` (no chat template around it).
    fn count_tokens(&mut self, text: &str) -> Result<usize, Error>;
    /// The greedy reply to the user turn `context` + `request`, at most `max_tokens` long.
    /// Async: a model on WebGPU waits for its logits ([`crate::local_future`]).
    fn complete<'a>(&'a mut self, context: &'a str, request: &'a str, max_tokens: usize) -> LocalBoxFuture<'a, Result<String, Error>>;
}

#[cfg(test)]
pub(crate) mod testing {
    //! A scripted [`TextModel`] for tests: replies chosen by a closure over the prompt.

    use crate::Error;
    use alloc::boxed::Box;
    use alloc::string::String;
    use alloc::vec::Vec;

    use super::TextModel;
    use crate::local_future::{boxed, LocalBoxFuture};

    /// Replies with `reply(context + request)`; records every prompt.
    pub struct Scripted {
        pub reply: Box<dyn FnMut(&str) -> String>,
        pub prompts: Vec<String>,
    }

    impl Scripted {
        pub fn new(reply: impl FnMut(&str) -> String + 'static) -> Self {
            Scripted { reply: Box::new(reply), prompts: Vec::new() }
        }
    }

    impl TextModel for Scripted {
        fn context_tokens(&self) -> usize {
            2048
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, Error> {
            // About four bytes a token, as for English with a BPE vocabulary.
            Ok(text.len().div_ceil(4))
        }
        fn complete<'a>(&'a mut self, context: &'a str, request: &'a str, _max_tokens: usize) -> LocalBoxFuture<'a, Result<String, Error>> {
            let prompt = alloc::format!("{context}{request}");
            let out = (self.reply)(&prompt);
            self.prompts.push(prompt);
            boxed(async move { Ok(out) })
        }
    }
}
