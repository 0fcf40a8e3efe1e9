//! A scripted [`Transport`] for tests: replies chosen by a closure over (path, body);
//! streamed replies are handed over a few bytes at a time.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;

use docmem_core::local_future::{boxed, LocalBoxFuture};

use super::{HttpReply, Transport};
use crate::Error;

pub(crate) fn reply(status: u16, body: &str) -> HttpReply {
    HttpReply { status, body: body.to_string() }
}

type Script = Box<dyn Fn(&str, &str) -> HttpReply>;

pub(crate) struct FakeTransport {
    script: Script,
    requests: RefCell<Vec<(String, String)>>,
    cancelled: Cell<bool>,
}

impl std::fmt::Debug for FakeTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTransport").field("requests", &self.requests.borrow().len()).finish()
    }
}

impl FakeTransport {
    pub(crate) fn new(script: impl Fn(&str, &str) -> HttpReply + 'static) -> Self {
        FakeTransport { script: Box::new(script), requests: RefCell::new(Vec::new()), cancelled: Cell::new(false) }
    }
    pub(crate) fn requests(&self) -> Vec<(String, String)> {
        self.requests.borrow().clone()
    }
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled.get()
    }
    fn answer(&self, path: &str, body: &str) -> HttpReply {
        self.requests.borrow_mut().push((path.to_string(), body.to_string()));
        (self.script)(path, body)
    }
}

impl Transport for FakeTransport {
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        boxed(async move { Ok(self.answer(path, body)) })
    }
    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, Error>> {
        boxed(async move {
            let r = self.answer(path, body);
            if !(200..300).contains(&r.status) {
                return Ok(r);
            }
            for piece in r.body.as_bytes().chunks(7) {
                if on_bytes(piece).is_break() {
                    self.cancelled.set(true);
                    break;
                }
            }
            Ok(HttpReply { status: r.status, body: String::new() })
        })
    }
    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, Error> {
        Ok(self.answer(path, body))
    }
}
