//! Bind groups kept for reuse, so that decoding stops creating them per dispatch.
//!
//! A forward pass is a few hundred dispatches, and each binds its buffers through a bind
//! group. Creating one is CPU work in the driver (and in the browser, a call across to
//! the GPU process), repeated every token for the same pipelines and, thanks to the
//! buffer pool, mostly the same buffers: the pool hands back its buffers in an order that
//! repeats every other token. So a bind group is kept under its pipeline and buffers (the
//! parameter block included) and used again when a dispatch names them again. Keys hold
//! the resources (reference-counted handles), so a kept group never outlives what it
//! binds; the cache is emptied when it grows past [`MAX_KEPT`] (a prefill of a new length
//! brings new keys), so it stays bounded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bind groups kept before the cache is emptied.
const MAX_KEPT: usize = 4096;

/// A pipeline, the buffers bound at bindings 0, 1, …, and the parameter block after them
/// (its buffer and offset: a slot of the recording's ring, `super::recorder`).
type Key = (wgpu::ComputePipeline, Vec<wgpu::Buffer>, (wgpu::Buffer, u64));

/// Kept bind groups, and how many were created.
#[derive(Debug, Default)]
pub struct BindGroupCache {
    kept: Mutex<HashMap<Key, wgpu::BindGroup>>,
    created: AtomicUsize,
}

impl BindGroupCache {
    /// The bind group of `pipeline` (group 0) over `buffers` and, after them, the
    /// parameter block `size` bytes at `offset` of `uniform`; made once per key.
    pub(crate) fn get(
        &self,
        device: &wgpu::Device,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        (uniform, offset, size): (wgpu::Buffer, u64, u64),
    ) -> wgpu::BindGroup {
        let key: Key = (pipeline.clone(), buffers.iter().map(|b| (*b).clone()).collect(), (uniform.clone(), offset));
        if let Some(bind) = self.kept.lock().ok().and_then(|k| k.get(&key).cloned()) {
            return bind;
        }
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> =
            buffers.iter().enumerate().map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() }).collect();
        entries.push(wgpu::BindGroupEntry {
            binding: buffers.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &uniform,
                offset,
                size: std::num::NonZeroU64::new(size),
            }),
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        self.created.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
            kept.insert(key, bind.clone());
        }
        bind
    }

    /// Bind groups created so far (a test checks that decoding stops creating them).
    pub fn created(&self) -> usize {
        self.created.load(Ordering::Relaxed)
    }
}
