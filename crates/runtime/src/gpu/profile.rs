//! GPU time per kernel, from timestamp queries (the benchmark's "GPU time
//! per token, split by kernel").
//!
//! Why timestamps and not wall clocks: the kernels of a forward pass go to the GPU as one
//! command buffer, so the CPU sees only its total; a timestamp written at the beginning and
//! end of each compute pass (every dispatch has its own pass) gives each kernel's share.
//! Only where the adapter offers `timestamp-query` and the caller asked for it
//! ([`super::GpuOptions::profile`]): a query set costs a resolve and a read-back per
//! submission, which ordinary use should not pay. Natively only (the read-back waits on
//! the device); in a browser the option is ignored.
//!
//! A submission times at most [`MAX_PASSES`] passes (wgpu's query-set limit is 4,096
//! timestamps); passes past that run untimed and are counted as such.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Passes timed per submission (two timestamps each).
pub const MAX_PASSES: u32 = 2048;

/// One kernel's time over the passes recorded since the last reset.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelTime {
    /// The kernel's name (its WGSL file, e.g. `matvec_q4_k`).
    pub kernel: String,
    /// Dispatches timed.
    pub dispatches: usize,
    /// GPU seconds, summed.
    pub seconds: f64,
}

/// What the timestamps have added up to so far.
#[derive(Default)]
struct Tally {
    /// Kernel name → (dispatches, seconds).
    by_kernel: BTreeMap<&'static str, (usize, f64)>,
    /// Passes that ran past [`MAX_PASSES`] in a submission.
    untimed: usize,
}

/// The query set, its resolve and read-back buffers, and the names of the passes recorded
/// into the current command buffer.
pub(crate) struct Profiler {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    period: f64,
    pending: Mutex<Vec<&'static str>>,
    tally: Mutex<Tally>,
    /// Whether passes are timed now ([`super::Gpu::set_profiling`]).
    enabled: AtomicBool,
    /// Held from a command buffer's recording to its collection, so two recordings at once
    /// cannot mix their passes' query slots.
    recording: Mutex<()>,
}

impl Profiler {
    pub(crate) fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Profiler {
        let bytes = u64::from(MAX_PASSES) * 2 * 8;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size: bytes, usage, mapped_at_creation: false })
        };
        Profiler {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("docmem kernel timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: MAX_PASSES * 2,
            }),
            resolved: buffer("timestamps resolved", wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            readback: buffer("timestamps read back", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            period: f64::from(queue.get_timestamp_period()),
            pending: Mutex::new(Vec::new()),
            tally: Mutex::new(Tally::default()),
            enabled: AtomicBool::new(true),
            recording: Mutex::new(()),
        }
    }

    /// Time passes from now on, or stop.
    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Hold this while recording, submitting and collecting one command buffer.
    pub(crate) fn recording(&self) -> Option<MutexGuard<'_, ()>> {
        self.recording.lock().ok()
    }

    /// The timestamp writes for the next pass, a dispatch of `kernel` (none once the query
    /// set is full: that pass is counted untimed).
    pub(crate) fn pass(&self, kernel: &'static str) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        if !self.is_enabled() {
            return None;
        }
        let mut pending = self.pending.lock().ok()?;
        let i = pending.len() as u32;
        if i >= MAX_PASSES {
            if let Ok(mut t) = self.tally.lock() {
                t.untimed += 1;
            }
            return None;
        }
        pending.push(kernel);
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        })
    }

    /// Record the copy of this command buffer's timestamps to the read-back buffer.
    pub(crate) fn resolve(&self, enc: &mut wgpu::CommandEncoder) {
        let n = self.pending.lock().map(|p| p.len() as u32).unwrap_or(0);
        if n > 0 {
            enc.resolve_query_set(&self.queries, 0..2 * n, &self.resolved, 0);
            enc.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, u64::from(n) * 16);
        }
    }

    /// After the submission: wait for it, read the timestamps and add each pass's time to
    /// its kernel's. A recording that was dropped unsubmitted (`submitted` false) only
    /// forgets its passes.
    pub(crate) fn collect(&self, device: &wgpu::Device, submitted: bool) {
        let names = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        if names.is_empty() || !submitted {
            return;
        }
        let bytes = names.len() as u64 * 16;
        let slice = self.readback.slice(0..bytes);
        let mapped = std::sync::Arc::new(AtomicBool::new(false));
        let done = mapped.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| done.store(r.is_ok(), Ordering::Release));
        // A failed wait or mapping means a lost device, which the caller's check reports;
        // the figures are only skipped.
        if device.poll(wgpu::PollType::wait_indefinitely()).is_err() || !mapped.load(Ordering::Acquire) {
            return;
        }
        let Ok(view) = slice.get_mapped_range() else { return };
        let stamps: Vec<u64> = view.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect();
        drop(view);
        self.readback.unmap();
        if let Ok(mut t) = self.tally.lock() {
            for (name, pair) in names.iter().zip(stamps.chunks_exact(2)) {
                let e = t.by_kernel.entry(name).or_default();
                e.0 += 1;
                e.1 += pair[1].saturating_sub(pair[0]) as f64 * self.period * 1e-9;
            }
        }
    }

    /// The times so far, the longest first, and the passes left untimed.
    pub(crate) fn times(&self) -> (Vec<KernelTime>, usize) {
        let Ok(t) = self.tally.lock() else { return (Vec::new(), 0) };
        let mut v: Vec<KernelTime> =
            t.by_kernel.iter().map(|(k, &(dispatches, seconds))| KernelTime { kernel: (*k).to_string(), dispatches, seconds }).collect();
        v.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        (v, t.untimed)
    }

    /// Start counting afresh.
    pub(crate) fn reset(&self) {
        if let Ok(mut t) = self.tally.lock() {
            *t = Tally::default();
        }
    }
}
