//! The worker threads one model's kernels share.
//!
//! A decode step is a few hundred short parallel jobs (one per matrix group, one per
//! attention), each tens of microseconds. A general-purpose pool (rayon) puts each job in
//! a queue and wakes sleeping workers through the kernel, while the calling thread waits:
//! the wake-ups cost as much as the work. So, as llama.cpp does, the calling thread works
//! too, and the helpers spin on a job counter between jobs, parking only after a while
//! without work so an idle model costs no CPU.
//!
//! In wasm, threads exist only in a build with the `atomics` target feature (shared
//! memory, which a page may use only when it is cross-origin isolated): there the helpers
//! are Web Workers (or Node worker threads) that JavaScript starts and hands to
//! [`super::web_workers`], and every model shares one pool of them, since a page's worker
//! runs one model at a time and the helpers cannot be started on demand. In the plain
//! wasm build the calling thread runs everything.

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
mod pool {
    // Unsafe code: `run` hands the job closure to the helper threads as a lifetime-erased
    // raw pointer (scoped sharing: it returns only after every helper is done with it).
    #![allow(unsafe_code)]

    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Duration;

    #[cfg(target_arch = "wasm32")]
    use super::super::web_workers::JoinHandle;
    #[cfg(not(target_arch = "wasm32"))]
    use std::thread::JoinHandle;

    /// How long a helper spins for the next job before parking.
    #[cfg(not(target_arch = "wasm32"))]
    const SPIN: Duration = Duration::from_millis(2);
    /// Spins before parking where there is no clock (wasm32-unknown-unknown has none):
    /// about as long as `SPIN` on a laptop core.
    #[cfg(target_arch = "wasm32")]
    const SPIN_ROUNDS: u32 = 1 << 20;

    /// Tasks run on helper threads since the process started: how a test shows that more
    /// than one thread did work.
    pub static HELPER_TASKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Set by the wasm module's panic hook ([`super::Threads::note_panic`]): a thread has
    /// panicked, which in wasm aborts it, so `run` must not wait for its helpers.
    pub static ABORTED: AtomicBool = AtomicBool::new(false);

    /// Start one helper thread running `f`.
    fn spawn(i: usize, f: impl FnOnce() + Send + 'static) -> Option<JoinHandle<()>> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            std::thread::Builder::new().name(format!("docmem-cpu-{i}")).spawn(f).ok()
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = i;
            super::super::web_workers::spawn(Box::new(f))
        }
    }

    /// A job as helpers see it: a type- and lifetime-erased `&(dyn Fn(usize) + Sync)`.
    /// Valid while `Pool::run` waits for the helpers (it returns only when all are done).
    #[derive(Clone, Copy)]
    struct JobPtr(*const (dyn Fn(usize) + Sync));
    // SAFETY: the pointee is `Sync`, so sharing it with the helper threads is sound, and
    // it outlives every use (see `JobPtr` and `Pool::run`).
    unsafe impl Send for JobPtr {}

    struct Shared {
        /// Bumped once per job (and once at shutdown); helpers watch it.
        epoch: AtomicU64,
        /// The next task index to claim.
        next: AtomicUsize,
        /// Tasks in the current job.
        tasks: AtomicUsize,
        /// Helpers still working on the current job.
        busy: AtomicUsize,
        /// A helper's task panicked during the current job.
        panicked: AtomicBool,
        shutdown: AtomicBool,
        job: Mutex<Option<JobPtr>>,
        /// Parking for idle helpers (the mutex guards nothing but the wait).
        park: (Mutex<()>, Condvar),
        /// Held by `run` for a whole job: two callers sharing a pool take turns.
        running: Mutex<()>,
    }

    impl Shared {
        /// Claim and run tasks until none are left; returns how many this thread ran.
        fn work(&self, f: &(dyn Fn(usize) + Sync)) -> u64 {
            let tasks = self.tasks.load(Ordering::Acquire);
            let mut ran = 0;
            loop {
                let i = self.next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    break ran;
                }
                f(i);
                ran += 1;
            }
        }
    }

    /// The calling thread plus `n - 1` spinning helpers.
    pub struct Pool {
        shared: Arc<Shared>,
        helpers: Vec<JoinHandle<()>>,
    }

    impl Pool {
        /// A pool of `n` threads in all (`n - 1` helpers); `None` if a thread cannot start.
        pub fn new(n: usize) -> Option<Pool> {
            let shared = Arc::new(Shared {
                epoch: AtomicU64::new(0),
                next: AtomicUsize::new(0),
                tasks: AtomicUsize::new(0),
                busy: AtomicUsize::new(0),
                panicked: AtomicBool::new(false),
                shutdown: AtomicBool::new(false),
                job: Mutex::new(None),
                park: (Mutex::new(()), Condvar::new()),
                running: Mutex::new(()),
            });
            let mut helpers = Vec::new();
            for i in 1..n {
                let s = Arc::clone(&shared);
                match spawn(i, move || helper(&s)) {
                    Some(h) => helpers.push(h),
                    None => {
                        // Dropping the partial pool stops the helpers started so far.
                        drop(Pool { shared, helpers });
                        return None;
                    }
                }
            }
            Some(Pool { shared, helpers })
        }

        /// Run `f(0..tasks)` on all threads; returns when every task is done.
        pub fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
            let s = &*self.shared;
            let _turn = s.running.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: a lifetime erasure (the types are the same otherwise). Helpers use the
            // pointer only between the epoch bump below and their `busy` decrement, and we
            // wait for `busy == 0` (even when our own share of the tasks panics: it is run
            // under `catch_unwind`) before clearing `job` and returning, so `f` outlives
            // every use. (In wasm a panic aborts instead of unwinding: a panicking thread
            // never returns, and `ABORTED` stops the wait; nothing returns to use `f`.)
            let erased: JobPtr = JobPtr(unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f) });
            *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(erased);
            s.tasks.store(tasks, Ordering::Release);
            s.next.store(0, Ordering::Release);
            s.busy.store(self.helpers.len(), Ordering::Release);
            s.epoch.fetch_add(1, Ordering::AcqRel);
            {
                let _guard = s.park.0.lock().unwrap_or_else(|e| e.into_inner());
                s.park.1.notify_all();
            }
            // A panic here must not unwind past `f` while helpers still call it.
            let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.work(f);
            }));
            while s.busy.load(Ordering::Acquire) != 0 {
                // In wasm a panic aborts its thread, so a helper that panicked never
                // reports done: stop waiting (the module is unusable after a panic anyway).
                if cfg!(target_arch = "wasm32") && ABORTED.load(Ordering::Acquire) {
                    panic!("a CPU kernel task panicked on a helper thread");
                }
                std::hint::spin_loop();
            }
            *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
            if let Err(payload) = mine {
                std::panic::resume_unwind(payload);
            }
            if s.panicked.swap(false, Ordering::AcqRel) {
                panic!("a CPU kernel task panicked on a worker thread");
            }
        }
    }

    impl Pool {
        /// Threads in the pool, the caller's included.
        pub fn threads(&self) -> usize {
            self.helpers.len() + 1
        }
    }

    impl Drop for Pool {
        fn drop(&mut self) {
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.epoch.fetch_add(1, Ordering::AcqRel);
            {
                let _guard = self.shared.park.0.lock().unwrap_or_else(|e| e.into_inner());
                self.shared.park.1.notify_all();
            }
            for h in self.helpers.drain(..) {
                let _ = h.join();
            }
        }
    }

    fn helper(s: &Shared) {
        let mut seen = 0u64;
        loop {
            // Wait for a new epoch: spin a while, then park.
            #[cfg(not(target_arch = "wasm32"))]
            let start = std::time::Instant::now();
            let mut spins = 0u32;
            let epoch = loop {
                let e = s.epoch.load(Ordering::Acquire);
                if e != seen {
                    break e;
                }
                spins = spins.wrapping_add(1);
                #[cfg(not(target_arch = "wasm32"))]
                let spun_long = spins.is_multiple_of(1024) && start.elapsed() > SPIN;
                #[cfg(target_arch = "wasm32")]
                let spun_long = spins >= SPIN_ROUNDS;
                if spun_long {
                    let guard = s.park.0.lock().unwrap_or_else(|e| e.into_inner());
                    if s.epoch.load(Ordering::Acquire) == seen {
                        // A timeout too, so a missed wake-up costs latency, never a hang.
                        let _ = s.park.1.wait_timeout(guard, Duration::from_millis(50));
                    }
                } else {
                    std::hint::spin_loop();
                }
            };
            seen = epoch;
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(JobPtr(f)) = job {
                // SAFETY: see `JobPtr`: `run` keeps the job alive until `busy` reaches 0,
                // and this helper decrements `busy` only after its last use of `f`.
                let f = unsafe { &*f };
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.work(f))) {
                    Ok(ran) => _ = HELPER_TASKS.fetch_add(ran, Ordering::Relaxed),
                    Err(_) => s.panicked.store(true, Ordering::Release),
                }
            }
            s.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A fixed set of worker threads.
pub struct Threads {
    #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
    pool: Option<std::sync::Arc<pool::Pool>>,
    n: usize,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Threads({})", self.n)
    }
}

impl Threads {
    /// `n` threads (0: one per available core), the calling thread included. Falls back to
    /// one thread if helpers cannot be started. In the wasm threads build, any `n` but 1
    /// takes the one pool of Web Workers every model shares: as many threads as JavaScript
    /// started helpers for (see [`super::web_workers`]), which is where the count is chosen.
    pub fn new(n: usize) -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        let pool = {
            let n = if n == 0 { std::thread::available_parallelism().map_or(1, |v| v.get()) } else { n };
            if n > 1 {
                pool::Pool::new(n).map(std::sync::Arc::new)
            } else {
                None
            }
        };
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        let pool = if n != 1 { shared_web_pool() } else { None };
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
        {
            let n = pool.as_ref().map_or(1, |p| p.threads());
            Threads { pool, n }
        }
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        {
            let _ = n;
            Threads { n: 1 }
        }
    }

    /// Number of threads.
    pub fn count(&self) -> usize {
        self.n
    }

    /// Tasks run on helper threads (not the calling one) since the process started, over
    /// every pool: shows that more than one thread did work.
    pub fn helper_tasks() -> u64 {
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
        {
            pool::HELPER_TASKS.load(std::sync::atomic::Ordering::Relaxed)
        }
        #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
        {
            0
        }
    }

    /// Record that a thread panicked (called by the wasm module's panic hook): in wasm a
    /// panic aborts its thread, so a pool waiting for a helper that panicked gives up and
    /// panics in turn instead of spinning forever.
    pub fn note_panic() {
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
        pool::ABORTED.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Threads in the pool the models share (the wasm threads build, once a model has
    /// made it); 1 elsewhere or before. Creates nothing.
    pub fn shared_count() -> usize {
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        if let Some(pool) = SHARED_WEB_POOL.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return pool.threads();
        }
        1
    }

    /// Run `f(0..tasks)`, spread over the threads; returns when all are done.
    pub fn for_each(&self, tasks: usize, f: impl Fn(usize) + Sync + Send) {
        #[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
        if let Some(pool) = &self.pool {
            if tasks > 1 {
                pool.run(tasks, &f);
                return;
            }
        }
        (0..tasks).for_each(f);
    }
}

/// The pool every model shares in the wasm threads build (see [`shared_web_pool`]).
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
static SHARED_WEB_POOL: std::sync::Mutex<Option<std::sync::Arc<pool::Pool>>> = std::sync::Mutex::new(None);

/// The pool every model shares in the wasm threads build, made from the helpers idle when
/// the first model asks for threads (JavaScript starts them before it loads a model);
/// `None` when there are none.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn shared_web_pool() -> Option<std::sync::Arc<pool::Pool>> {
    use std::sync::Arc;
    let mut shared = SHARED_WEB_POOL.lock().unwrap_or_else(|e| e.into_inner());
    if shared.is_none() {
        let helpers = super::web_workers::idle();
        if helpers > 0 {
            *shared = pool::Pool::new(helpers + 1).map(Arc::new);
        }
    }
    shared.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_task_runs_exactly_once_over_many_jobs() {
        let threads = Threads::new(3);
        for tasks in [0usize, 1, 2, 7, 100, 1000] {
            let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
            threads.for_each(tasks, |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "tasks={tasks}");
        }
    }

    #[test]
    fn helpers_take_tasks_and_are_counted() {
        let threads = Threads::new(2);
        let before = Threads::helper_tasks();
        threads.for_each(40, |_| std::thread::sleep(std::time::Duration::from_millis(1)));
        assert!(Threads::helper_tasks() > before, "the helper ran none of 40 one-millisecond tasks");
    }

    #[test]
    fn helpers_wake_after_parking() {
        let threads = Threads::new(2);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let sum = AtomicUsize::new(0);
        threads.for_each(64, |i| {
            sum.fetch_add(i, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 64 * 63 / 2);
    }
}
