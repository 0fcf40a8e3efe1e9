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
    /// The open pass, and whether it is a timed dispatch's (which nothing else may join).
    /// Declared first, so it is ended before the encoder goes.
    pass: Option<(wgpu::ComputePass<'static>, bool)>,
    enc: wgpu::CommandEncoder,
}

impl Recorder {
    /// A new encoder for `gpu`.
    pub(crate) fn new(gpu: &Gpu, label: &'static str) -> Self {
        Recorder { pass: None, enc: gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) }) }
    }

    /// The compute pass to record the next dispatch into: the open one, or, for a timed
    /// dispatch (`timestamps`), a pass of its own.
    pub(crate) fn pass(&mut self, timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>) -> &mut wgpu::ComputePass<'static> {
        let timed = timestamps.is_some();
        if timed || self.pass.as_ref().is_some_and(|(_, was_timed)| *was_timed) {
            self.pass = None;
        }
        let enc = &mut self.enc;
        let pass = self.pass.take().unwrap_or_else(|| {
            (enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: timestamps }).forget_lifetime(), timed)
        });
        &mut self.pass.insert(pass).0
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
