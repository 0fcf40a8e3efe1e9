//! What a forward pass is recorded into: a command encoder and, between dispatches, one
//! open compute pass.
//!
//! Why one pass: a pass per dispatch cost the CPU tens of microseconds each (its begin and
//! end, and the resource tracking around it), and a 1.5B model's decode step is several
//! hundred dispatches: on an H100 the CPU's recording took as long as the GPU's work. wgpu
//! still orders the dispatches within a pass (each dispatch is its own usage scope, with
//! barriers where one writes what another reads). A dispatch that is timed (the profiler's
//! timestamps are written at a pass's start and end) gets a pass of its own, and the pass
//! is ended before anything else is recorded on the encoder (copies, query resolves).

use super::device::Gpu;

/// A command encoder with at most one compute pass open on it.
pub struct Recorder {
    enc: wgpu::CommandEncoder,
    pass: Option<wgpu::ComputePass<'static>>,
}

impl Recorder {
    /// A new encoder for `gpu`.
    pub(crate) fn new(gpu: &Gpu, label: &'static str) -> Self {
        Recorder { enc: gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) }), pass: None }
    }

    /// The compute pass to record the next dispatch into: the open one, or, for a timed
    /// dispatch (`timestamps`), a pass of its own.
    pub(crate) fn pass(&mut self, timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>) -> &mut wgpu::ComputePass<'static> {
        if timestamps.is_some() {
            self.pass = None;
        }
        let enc = &mut self.enc;
        let pass = self.pass.take().unwrap_or_else(|| {
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: timestamps }).forget_lifetime()
        });
        self.pass.insert(pass)
    }

    /// The encoder itself, for copies: ends the open pass first.
    pub fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        &mut self.enc
    }

    /// The recorded commands.
    pub(crate) fn finish(mut self) -> wgpu::CommandBuffer {
        self.pass = None;
        self.enc.finish()
    }
}
