//! The future type of the model traits ([`crate::Scorer`], [`crate::reader::ReaderModel`]).
//!
//! Why the model traits are async: in a browser the GPU hands results back only through
//! the page's event loop (`mapAsync`), so a reader or scorer running on WebGPU cannot block
//! until its logits arrive; it must yield. One async pipeline serves every backend: the
//! CPU backend's futures are ready the first time they are polled, and native callers
//! block on them (`docmem_runtime::block_on`).
//!
//! Boxed, because extraction holds its models as `&mut dyn ReaderModel` (an `async fn` in
//! a trait is not object-safe), and not `Send`: a WebGPU future holds JavaScript objects
//! and runs on the thread that made it.

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;

/// A boxed future that stays on its thread.
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Box `future` as a [`LocalBoxFuture`].
pub fn boxed<'a, T>(future: impl Future<Output = T> + 'a) -> LocalBoxFuture<'a, T> {
    Box::pin(future)
}

/// Poll `future` once with a waker that does nothing: its output if it was ready, `None` if
/// it was not. For tests and fakes whose futures never wait.
pub fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = core::pin::pin!(future);
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        core::task::Poll::Ready(out) => Some(out),
        core::task::Poll::Pending => None,
    }
}
