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
//!
//! The dispatches' parameter blocks go the same way: each takes a slot of a uniform buffer
//! the recording holds (a ring of [`RING_BYTES`], another when one fills), and each
//! ring is written once, before the submission, where every dispatch used to write a
//! buffer of its own (a call into the driver, and in a browser one to the GPU process,
//! several hundred times a token). A slot is bound at its offset; since a forward of the
//! same shape takes the same slots of rings that come back from the pool in the same
//! order, its bind groups repeat and stay cached.

use super::device::Gpu;
use super::pool::Use;

/// Bytes of one uniform buffer of parameter slots (256 slots at the usual alignment).
const RING_BYTES: usize = 64 << 10;

/// One uniform buffer of parameter slots and the bytes to write to it.
struct Ring {
    buffer: wgpu::Buffer,
    bytes: Vec<u8>,
}

/// A command encoder with at most one compute pass open on it.
pub struct Recorder {
    /// The open pass, and whether it is a timed dispatch's (which nothing else may join).
    /// Declared first, so it is ended before the encoder goes.
    pass: Option<(wgpu::ComputePass<'static>, bool)>,
    enc: wgpu::CommandEncoder,
    counters: std::sync::Arc<super::device::Counters>,
    /// The ring taking parameter blocks, and those already full.
    ring: Option<Ring>,
    full: Vec<Ring>,
}

impl Recorder {
    /// A new encoder for `gpu`.
    pub(crate) fn new(gpu: &Gpu, label: &'static str) -> Self {
        Recorder {
            pass: None,
            enc: gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) }),
            counters: gpu.counters.clone(),
            ring: None,
            full: Vec::new(),
        }
    }

    /// The compute pass to record the next dispatch into: the open one, or, for a timed
    /// dispatch (`timestamps`), a pass of its own.
    pub(crate) fn pass(&mut self, timestamps: Option<wgpu::ComputePassTimestampWrites<'_>>) -> &mut wgpu::ComputePass<'static> {
        let timed = timestamps.is_some();
        if timed || self.pass.as_ref().is_some_and(|(_, was_timed)| *was_timed) {
            self.pass = None;
        }
        let (enc, counters) = (&mut self.enc, &self.counters);
        let pass = self.pass.take().unwrap_or_else(|| {
            counters.pass();
            (enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: timestamps }).forget_lifetime(), timed)
        });
        &mut self.pass.insert(pass).0
    }

    /// The encoder itself, for copies: ends the open pass first.
    pub fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        &mut self.enc
    }

    /// A slot holding `words` for the next dispatch: its ring's buffer, offset and size.
    pub(crate) fn param_slot(&mut self, gpu: &Gpu, words: &[u32]) -> (wgpu::Buffer, u64, u64) {
        let size = (words.len() * 4).next_multiple_of(16);
        let stride = size.next_multiple_of(gpu.uniform_alignment());
        if self.ring.as_ref().is_some_and(|r| r.bytes.len() + stride > RING_BYTES) {
            self.full.extend(self.ring.take());
        }
        let ring = self.ring.get_or_insert_with(|| Ring {
            buffer: gpu.pool.take(&gpu.device, Use::Uniform, RING_BYTES),
            bytes: Vec::with_capacity(RING_BYTES),
        });
        let offset = ring.bytes.len();
        ring.bytes.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        ring.bytes.resize(offset + stride, 0);
        (ring.buffer.clone(), offset as u64, size as u64)
    }

    /// The recorded commands, with each ring of parameters written (once) and held by the
    /// pool until the submission.
    pub(crate) fn finish(mut self, gpu: &Gpu) -> wgpu::CommandBuffer {
        self.pass = None;
        for ring in std::mem::take(&mut self.full).into_iter().chain(self.ring.take()) {
            gpu.queue.write_buffer(&ring.buffer, 0, &ring.bytes);
            gpu.pool.hold(Use::Uniform, ring.buffer);
        }
        self.enc.finish()
    }
}
