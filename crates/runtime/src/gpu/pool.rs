//! Buffers kept for reuse, so that decoding creates no GPU buffer per token once its first
//! steps have run: the per-dispatch parameter blocks, the forward pass's scratch
//! activations and the read-back staging buffers all come from here and go back after use.
//!
//! Buffers are kept by use and size class (a power of two, at least 256 bytes), so the
//! scratch of a growing sequence (attention scores widen by a row each token) still finds
//! its buffer from the step before. A buffer goes back only once the work that used it is
//! submitted: WebGPU orders a later `write_buffer` after the submissions before it, so the
//! next pass may overwrite it. A free list hands back the buffer given last: a caller that
//! gives its buffers back in the reverse of the order it took them gets the same buffer for
//! the same role every step, so the bind groups over them repeat every step too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What a pooled buffer is for.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Use {
    /// Activations and scratch (storage, copy source and destination).
    Storage,
    /// A kernel's parameter block.
    Uniform,
    /// A read-back staging buffer (mappable).
    Read,
}

impl Use {
    fn usages(self) -> wgpu::BufferUsages {
        match self {
            Use::Storage => wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            Use::Uniform => wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            Use::Read => wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        }
    }
}

/// Free buffers by use and size class, and the parameter blocks of work recorded but not
/// yet submitted.
#[derive(Debug, Default)]
pub struct BufferPool {
    free: Mutex<HashMap<(Use, u64), Vec<wgpu::Buffer>>>,
    pending: Mutex<Vec<(Use, wgpu::Buffer)>>,
    created: AtomicUsize,
}

/// The size class of `bytes`.
fn class(bytes: usize) -> u64 {
    (bytes.max(256) as u64).next_power_of_two()
}

impl BufferPool {
    /// A buffer of at least `bytes` for `use_`, reused when one is free.
    pub(crate) fn take(&self, device: &wgpu::Device, use_: Use, bytes: usize) -> wgpu::Buffer {
        let size = class(bytes);
        if let Some(b) = self.free.lock().ok().and_then(|mut f| f.get_mut(&(use_, size)).and_then(Vec::pop)) {
            return b;
        }
        self.created.fetch_add(1, Ordering::Relaxed);
        device.create_buffer(&wgpu::BufferDescriptor { label: Some("pooled"), size, usage: use_.usages(), mapped_at_creation: false })
    }

    /// Return a buffer whose work has been submitted.
    pub(crate) fn give(&self, use_: Use, buffer: wgpu::Buffer) {
        if let Ok(mut f) = self.free.lock() {
            f.entry((use_, buffer.size())).or_default().push(buffer);
        }
    }

    /// Hold a buffer used by work being recorded until [`BufferPool::submitted`].
    pub(crate) fn hold(&self, use_: Use, buffer: wgpu::Buffer) {
        if let Ok(mut p) = self.pending.lock() {
            p.push((use_, buffer));
        }
    }

    /// The recorded work was submitted: what it held is free again. Given back last first,
    /// so the next pass, taking them in the same order, gets each dispatch the buffer it had
    /// (and its bind group from the cache, [`super::bind_groups`]).
    pub(crate) fn submitted(&self) {
        let held = self.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
        for (use_, b) in held.into_iter().rev() {
            self.give(use_, b);
        }
    }

    /// Buffers this pool has created so far (a test checks that decoding stops creating
    /// them).
    pub fn created(&self) -> usize {
        self.created.load(Ordering::Relaxed)
    }
}
