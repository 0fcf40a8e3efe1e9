//! Hosted models through an OpenAI-compatible API: the edge worker (`worker/`), or any
//! host that speaks the same protocol (vLLM, llama.cpp's `llama-server`).
//!
//! Why it exists: some users want a bigger reader or answerer (MemReader-7B) than their
//! device can run. Each role (reader, scorer, answerer, embedder) is chosen on its own, so
//! a user may send documents to a hosted reader once and still answer questions locally.
//! Nothing here runs unless a caller builds it: text leaves the device only by the user's
//! choice, and every front end says so when it does.
//!
//! The pieces:
//! - [`Transport`]: how bytes reach the API. The runtime has no HTTP client of its own,
//!   because each front end already has one: the CLI's blocking client, the browser's and
//!   Node's `fetch` in the npm package. A transport POSTs JSON and returns the reply, or
//!   hands a streamed reply over as it arrives.
//! - [`api`]: the protocol (request bodies, replies, the API's errors), and [`sse`], the
//!   server-sent events a streamed reply comes in.
//! - [`RemoteModel`]: a hosted chat model as the core's reader
//!   ([`docmem_core::reader::ReaderModel`]), scorer ([`docmem_core::Scorer`], from the
//!   API's token log-probabilities), short-reply model
//!   ([`docmem_core::text_model::TextModel`]) and answerer ([`crate::answerer::Answerer`]).
//! - [`RemoteEmbedder`]: a hosted embedding model as the core's [`docmem_core::Embedder`].
//! - [`retry`]: which failed requests are sent again, and after how long (the transports
//!   wait; this decides).

pub mod api;
mod embedder;
mod model;
pub mod retry;
pub mod sse;
mod transport;

pub use embedder::RemoteEmbedder;
pub use model::{RemoteModel, DEFAULT_REMOTE_CONTEXT};
pub use transport::{HttpReply, Transport};

#[cfg(test)]
pub(crate) mod testing;
