//! The worker threads one model's kernels share: a rayon pool natively, the calling
//! thread alone on wasm (where threads need cross-origin isolation we cannot assume).

/// A fixed set of worker threads.
pub struct Threads {
    #[cfg(not(target_arch = "wasm32"))]
    pool: Option<rayon::ThreadPool>,
    n: usize,
}

impl std::fmt::Debug for Threads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Threads({})", self.n)
    }
}

impl Threads {
    /// `n` threads (0: one per available core). Falls back to one thread if the pool
    /// cannot be created.
    pub fn new(n: usize) -> Self {
        let n = if n == 0 { std::thread::available_parallelism().map_or(1, |v| v.get()) } else { n };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let pool = if n > 1 {
                rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("docmem-cpu-{i}")).build().ok()
            } else {
                None
            };
            let n = if pool.is_some() { n } else { 1 };
            Threads { pool, n }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = n;
            Threads { n: 1 }
        }
    }

    /// Number of threads.
    pub fn count(&self) -> usize {
        self.n
    }

    /// Run `f(0..tasks)`, spread over the threads; returns when all are done.
    pub fn for_each(&self, tasks: usize, f: impl Fn(usize) + Sync + Send) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(pool) = &self.pool {
            use rayon::prelude::*;
            pool.install(|| (0..tasks).into_par_iter().for_each(&f));
            return;
        }
        (0..tasks).for_each(f);
    }
}
