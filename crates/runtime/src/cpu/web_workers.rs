//! Threads in wasm: Web Workers (or Node worker threads) that share the module's memory.
//!
//! `std::thread::spawn` does not exist on wasm32-unknown-unknown, even in a build with the
//! `atomics` target feature: a thread there is a JavaScript worker that instantiates the
//! same module on the same shared memory, and only JavaScript can start one. Starting it is
//! asynchronous (the worker loads and compiles before it runs anything), so a thread cannot
//! be created at the moment a pool wants it. Instead JavaScript starts the helpers first,
//! and each calls [`serve`], which parks it here until Rust hands it a closure to run:
//! [`spawn`] then works like `std::thread::spawn` for as many threads as are idle. A
//! closure that returns leaves the worker idle again.
//!
//! Blocking here uses `memory.atomic.wait` (std's `Mutex` and `Condvar` in this build),
//! which a browser allows in workers but not on a page's main thread: the package runs
//! models in its own worker, so the thread that calls into a pool is never the page's.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// A closure for a helper to run.
type Job = Box<dyn FnOnce() + Send>;

/// Helpers waiting in [`serve`] and the closures not yet taken by one.
struct Registry {
    idle: usize,
    jobs: VecDeque<Job>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { idle: 0, jobs: VecDeque::new() });
static WAKE: Condvar = Condvar::new();

/// Run on a helper worker for as long as it lives: wait for a closure, run it, repeat.
/// Never returns (the worker is terminated from JavaScript).
pub fn serve() -> ! {
    loop {
        let job = {
            let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            reg.idle += 1;
            loop {
                if let Some(job) = reg.jobs.pop_front() {
                    reg.idle -= 1;
                    break job;
                }
                reg = WAKE.wait(reg).unwrap_or_else(|e| e.into_inner());
            }
        };
        job();
    }
}

/// Helpers waiting for a closure and not yet promised one.
pub fn idle() -> usize {
    let reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    reg.idle.saturating_sub(reg.jobs.len())
}

/// Waits for a helper's closure to return (the `join` of a thread).
pub struct JoinHandle<T> {
    done: Arc<(Mutex<bool>, Condvar)>,
    _result: core::marker::PhantomData<T>,
}

impl JoinHandle<()> {
    /// Block until the closure has returned (always `Ok`: a panic in wasm aborts, so a
    /// closure that is not done never reports).
    pub fn join(self) -> std::thread::Result<()> {
        let (lock, cv) = &*self.done;
        let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
        Ok(())
    }
}

/// Run `f` on an idle helper; `None` (and `f` dropped unrun) when no helper is idle.
pub fn spawn(f: Job) -> Option<JoinHandle<()>> {
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let signal = Arc::clone(&done);
    let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    if reg.idle <= reg.jobs.len() {
        return None;
    }
    reg.jobs.push_back(Box::new(move || {
        f();
        let (lock, cv) = &*signal;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }));
    WAKE.notify_all();
    Some(JoinHandle { done, _result: core::marker::PhantomData })
}
