//! The CPU backend's threads, as JavaScript starts and inspects them, and its kernel check.
//!
//! Only the threads build (`atomics`, shared memory; built with a pinned nightly, see
//! `scripts/build-wasm.sh`) has any: there `js/threads.js` starts helper workers on the
//! module's memory, each of which calls `threadServe` and stays in it, and every model
//! loaded afterwards shares them. The plain build runs on the calling thread, and these
//! exports say so rather than fail.

use docmem_runtime::cpu::threads::Threads;
use wasm_bindgen::prelude::*;

/// Whether this build can run threads (it was built with shared memory).
#[wasm_bindgen(js_name = threadsBuild)]
pub fn threads_build() -> bool {
    cfg!(target_feature = "atomics")
}

/// Serve as a helper thread: called once by each helper worker; runs the CPU backend's
/// tasks until the worker is terminated, so it never returns in the threads build. In the
/// plain build it returns an error at once.
#[wasm_bindgen(js_name = threadServe)]
pub fn thread_serve() -> Result<(), JsValue> {
    #[cfg(target_feature = "atomics")]
    {
        docmem_runtime::cpu::web_workers::serve()
    }
    #[cfg(not(target_feature = "atomics"))]
    {
        Err(crate::error_with(docmem_core::ErrorCode::BadArgument, "this wasm build has no threads (it was built without shared memory)"))
    }
}

/// Helper workers waiting for work (started, and not yet taken by the models' pool).
#[wasm_bindgen(js_name = threadsIdle)]
pub fn threads_idle() -> usize {
    #[cfg(target_feature = "atomics")]
    {
        docmem_runtime::cpu::web_workers::idle()
    }
    #[cfg(not(target_feature = "atomics"))]
    {
        0
    }
}

/// JSON `{"threads": N, "helperTasks": T}`: the threads the models run on (the caller's
/// included; 1 until a model has taken the helpers) and the kernel tasks helper threads
/// have run so far.
#[wasm_bindgen(js_name = threadStats)]
pub fn thread_stats() -> String {
    let threads = Threads::shared_count();
    format!("{{\"threads\":{threads},\"helperTasks\":{}}}", Threads::helper_tasks())
}

/// The CPU kernels' vector code (wasm `simd128`) against their portable loops on seeded
/// inputs, extremes included: the number of cases checked, or an `INTERNAL` error naming
/// the kernel, the case and both values. The wasm LM test calls it.
#[wasm_bindgen(js_name = cpuKernelCheck)]
pub fn cpu_kernel_check() -> Result<usize, JsValue> {
    docmem_runtime::cpu::check_kernels().map_err(|e| crate::error_with(docmem_core::ErrorCode::Internal, e))
}
