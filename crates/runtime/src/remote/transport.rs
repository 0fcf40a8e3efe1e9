//! How requests reach a hosted model's API (see the module docs of [`crate::remote`]).

use std::ops::ControlFlow;

use docmem_core::local_future::LocalBoxFuture;

use crate::Error;

/// A whole HTTP reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpReply {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// POSTs JSON to one API's base URL, with its credentials. Implemented by each front end
/// over the HTTP client it has; paths are the API's (`/v1/chat/completions`).
pub trait Transport {
    /// POST `body` to `path` and return the whole reply, whatever its status.
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, Error>>;

    /// POST `body` to `path` and hand the body to `on_bytes` piece by piece as it arrives.
    /// A reply with an error status is not handed over: its whole body comes back as the
    /// [`HttpReply`] (with `on_bytes` never called), and a successful one comes back with
    /// an empty body. `on_bytes` returning `Break` ends the request (the connection is
    /// closed, so the host stops generating).
    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, Error>>;

    /// [`Transport::post`], waiting for the reply on this thread: for the embedder, whose
    /// trait is synchronous (the library embeds while it adds and searches).
    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, Error>;
}

impl<T: Transport + ?Sized> Transport for &T {
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        (**self).post(path, body)
    }
    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        (**self).post_streaming(path, body, on_bytes)
    }
    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, Error> {
        (**self).post_blocking(path, body)
    }
}

impl<T: Transport + ?Sized> Transport for std::rc::Rc<T> {
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        (**self).post(path, body)
    }
    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        (**self).post_streaming(path, body, on_bytes)
    }
    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, Error> {
        (**self).post_blocking(path, body)
    }
}
