//! Weights and activations on the GPU.
//!
//! Weights keep their GGUF blocks, read by the shaders as `u32` words. A block whose size is
//! not a multiple of four bytes is re-laid at upload so every block starts on a word: Q8_0's
//! 34 bytes become 36 (its f16 scale, two zero bytes, its 32 values); Q4_0's 18 and Q5_0's
//! 22 become Q4_1's 20 and Q5_1's 24 (two zero bytes where those keep their minimum, so one
//! kernel reads both); Q6_K's 210 become 212 (two zero bytes after its scale). f16 and
//! bf16 weights are read in 32-value blocks like the others. A matrix larger than
//! the device's largest binding is split by rows into several buffers. Uploads go in writes
//! of at most [`MAX_WRITE_BYTES`], so a caller streaming a tensor never needs it whole.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::device::Gpu;
use super::pool::Use;
use crate::gguf::GgmlType;
use crate::Error;

/// The largest single write to a GPU buffer.
pub const MAX_WRITE_BYTES: usize = 64 << 20;

/// How a tensor type's blocks lie in GPU words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockLayout {
    /// Values per block.
    pub values: usize,
    /// Bytes per block in the file.
    pub file_bytes: usize,
    /// Words per block on the GPU.
    pub words: usize,
}

impl BlockLayout {
    /// The words a matrix's start must be a multiple of: a whole block, and a whole
    /// 32-value sub-block (the matrix kernels' unit; 32 words for f32).
    pub fn start_words(&self) -> usize {
        self.words * (32 / self.values).max(1)
    }
}

/// The GPU layout of `ty`. Every type the CPU backend reads has one, so a model's matrices
/// go to either device (their rows must be whole 32-value blocks on the GPU, as every
/// model's are but where llama.cpp fell back to F16 for an odd width).
pub(crate) fn block_layout(ty: GgmlType) -> BlockLayout {
    match ty {
        GgmlType::F32 => BlockLayout { values: 1, file_bytes: 4, words: 1 },
        GgmlType::F16 | GgmlType::BF16 => BlockLayout { values: 32, file_bytes: 64, words: 16 },
        GgmlType::Q4_0 => BlockLayout { values: 32, file_bytes: 18, words: 5 },
        GgmlType::Q4_1 => BlockLayout { values: 32, file_bytes: 20, words: 5 },
        GgmlType::Q5_0 => BlockLayout { values: 32, file_bytes: 22, words: 6 },
        GgmlType::Q5_1 => BlockLayout { values: 32, file_bytes: 24, words: 6 },
        GgmlType::Q8_0 => BlockLayout { values: 32, file_bytes: 34, words: 9 },
        GgmlType::Q4K => BlockLayout { values: 256, file_bytes: 144, words: 36 },
        GgmlType::Q5K => BlockLayout { values: 256, file_bytes: 176, words: 44 },
        GgmlType::Q6K => BlockLayout { values: 256, file_bytes: 210, words: 53 },
    }
}

/// `ty`'s file blocks (`src`, whole blocks) in GPU words, appended to `out` as bytes.
fn relay_blocks(ty: GgmlType, src: &[u8], out: &mut Vec<u8>) {
    match ty {
        // The scale, then two zero bytes (Q8_0's padding; Q4_0's and Q5_0's in the place
        // of Q4_1's and Q5_1's minimum), then the rest of the block.
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => {
            for b in src.chunks_exact(ty.block_bytes() as usize) {
                out.extend_from_slice(&b[..2]);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&b[2..]);
            }
        }
        GgmlType::Q6K => {
            for b in src.chunks_exact(210) {
                out.extend_from_slice(b);
                out.extend_from_slice(&[0, 0]);
            }
        }
        _ => out.extend_from_slice(src),
    }
}

/// A storage buffer of `bytes` (rounded up to a word).
fn storage(gpu: &Gpu, bytes: usize, label: &str) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (bytes.max(4).div_ceil(4) * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// Write `data` at the start of `buffer` in pieces of at most [`MAX_WRITE_BYTES`].
fn write(gpu: &Gpu, buffer: &wgpu::Buffer, data: &[u8]) {
    for (i, piece) in data.chunks(MAX_WRITE_BYTES).enumerate() {
        gpu.queue.write_buffer(buffer, (i * MAX_WRITE_BYTES) as u64, piece);
    }
}

/// One row range of a matrix, in its own buffer, from word `word_offset` of it (a matrix
/// stacked with others starts past their words: [`GpuMatrix::stack`]).
#[derive(Debug)]
pub(crate) struct MatrixPart {
    pub first_row: usize,
    pub rows: usize,
    pub buffer: wgpu::Buffer,
    pub word_offset: usize,
}

/// A weight matrix on the GPU: `rows` × `cols` in GGUF blocks of `ty`.
#[derive(Debug)]
pub struct GpuMatrix {
    /// Block format.
    pub ty: GgmlType,
    /// Output features.
    pub rows: usize,
    /// Input features.
    pub cols: usize,
    pub(crate) parts: Vec<MatrixPart>,
}

impl GpuMatrix {
    /// Upload `data` (`rows` rows of `cols` values in `ty`'s blocks, GGUF's layout), split
    /// by rows where it is larger than the device's largest binding.
    pub fn upload(gpu: &Gpu, ty: GgmlType, rows: usize, cols: usize, data: &[u8]) -> Result<GpuMatrix, Error> {
        Self::upload_in_parts(gpu, ty, rows, cols, data, gpu.max_binding_bytes() as usize)
    }

    /// [`GpuMatrix::upload`] with parts of at most `part_bytes` (whole rows; at least one).
    pub(crate) fn upload_in_parts(
        gpu: &Gpu,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        data: &[u8],
        part_bytes: usize,
    ) -> Result<GpuMatrix, Error> {
        let rows_of = |at: usize, len: usize, run: &mut Vec<u8>| -> Result<(), Error> {
            run.extend_from_slice(&data[at..at + len]);
            Ok(())
        };
        Self::upload_rows(gpu, (ty, rows, cols), data.len(), (part_bytes, MAX_WRITE_BYTES), rows_of)
    }

    /// Upload a matrix whose `bytes` (GGUF's layout) are read a run of whole rows at a time
    /// by `read(byte offset, length, run)`, which appends those bytes to the empty `run`
    /// (at most `run_bytes` of the file, and at most [`MAX_WRITE_BYTES`] re-laid, per run),
    /// in parts of at most `part_bytes`: a matrix streamed from a file is never whole in
    /// memory.
    pub(crate) fn upload_rows<E: From<Error>>(
        gpu: &Gpu,
        (ty, rows, cols): (GgmlType, usize, usize),
        bytes: usize,
        (part_bytes, run_bytes): (usize, usize),
        mut read: impl FnMut(usize, usize, &mut Vec<u8>) -> Result<(), E>,
    ) -> Result<GpuMatrix, E> {
        let layout = block_layout(ty);
        if !cols.is_multiple_of(layout.values) {
            return Err(Error::GpuShape { what: "matrix row", expected: cols.next_multiple_of(layout.values), got: cols }.into());
        }
        let blocks = cols / layout.values;
        let file_row = blocks * layout.file_bytes;
        if bytes != rows * file_row {
            return Err(Error::GpuShape { what: "matrix data (bytes)", expected: rows * file_row, got: bytes }.into());
        }
        let gpu_row = blocks * layout.words * 4;
        let per_part = (part_bytes / gpu_row.max(1)).max(1);
        // Re-lay and write a bounded run of rows at a time.
        let rows_per_run = (MAX_WRITE_BYTES / gpu_row.max(1)).min(run_bytes / file_row.max(1)).max(1);
        let mut parts = Vec::new();
        let mut relaid = Vec::new();
        for first_row in (0..rows.max(1)).step_by(per_part) {
            let n = per_part.min(rows - first_row.min(rows));
            let buffer = storage(gpu, n * gpu_row, "weights");
            for r in (0..n).step_by(rows_per_run) {
                let m = rows_per_run.min(n - r);
                let mut run = Vec::with_capacity(m * file_row);
                read((first_row + r) * file_row, m * file_row, &mut run)?;
                if run.len() != m * file_row {
                    return Err(Error::GpuShape { what: "matrix rows read", expected: m * file_row, got: run.len() }.into());
                }
                relaid.clear();
                relay_blocks(ty, &run, &mut relaid);
                gpu.queue.write_buffer(&buffer, (r * gpu_row) as u64, &relaid);
            }
            parts.push(MatrixPart { first_row, rows: n, buffer, word_offset: 0 });
        }
        gpu.check()?;
        Ok(GpuMatrix { ty, rows, cols, parts })
    }
}

impl GpuMatrix {
    /// Words this matrix's weights take on the GPU.
    pub(crate) fn words(&self) -> usize {
        let l = block_layout(self.ty);
        self.rows * self.cols / l.values * l.words
    }

    /// `matrices` moved into one buffer, one after another, each starting on one of its own
    /// blocks ([`BlockLayout::start_words`]): the projections of a layer that read the same input, so one dispatch can run
    /// those of one format together ([`GpuMatrix::joined`]). Each comes back as before
    /// (its own type and shape), now a view of the shared buffer; the old buffers are
    /// dropped. Matrices already split into parts, or whose sum passes the device's largest
    /// binding, come back as they were.
    pub fn stack<const N: usize>(gpu: &Gpu, matrices: [GpuMatrix; N]) -> [GpuMatrix; N] {
        let mut at = Vec::with_capacity(N);
        let mut end = 0usize;
        for m in &matrices {
            let (layout, words, [part]) = (block_layout(m.ty), m.words(), &m.parts[..]) else { return matrices };
            if part.word_offset != 0 {
                return matrices;
            }
            let start = end.next_multiple_of(layout.start_words());
            at.push(start);
            end = start + words;
        }
        if N < 2 || (end * 4) as u64 > gpu.max_binding_bytes() {
            return matrices;
        }
        let shared = storage(gpu, end * 4, "stacked weights");
        let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("stack weights") });
        for (m, &start) in matrices.iter().zip(&at) {
            let bytes = m.words() * 4;
            if bytes > 0 {
                enc.copy_buffer_to_buffer(&m.parts[0].buffer, 0, &shared, (start * 4) as u64, bytes as u64);
            }
        }
        gpu.queue.submit([enc.finish()]);
        let mut i = 0;
        matrices.map(|m| {
            let part = MatrixPart { first_row: 0, rows: m.rows, buffer: shared.clone(), word_offset: at[i] };
            i += 1;
            GpuMatrix { ty: m.ty, rows: m.rows, cols: m.cols, parts: vec![part] }
        })
    }

    /// One matrix spanning `self` and `next` when `next` lies right after `self` in the same
    /// buffer with the same format and width (stacked by [`GpuMatrix::stack`]): its rows are
    /// `self`'s, then `next`'s, and one dispatch multiplies by both.
    pub fn joined(&self, next: &GpuMatrix) -> Option<GpuMatrix> {
        let ([a], [b]) = (&self.parts[..], &next.parts[..]) else { return None };
        let adjacent = a.buffer == b.buffer && b.word_offset == a.word_offset + self.words();
        (adjacent && self.ty == next.ty && self.cols == next.cols).then(|| GpuMatrix {
            ty: self.ty,
            rows: self.rows + next.rows,
            cols: self.cols,
            parts: vec![MatrixPart { first_row: 0, rows: self.rows + next.rows, buffer: a.buffer.clone(), word_offset: a.word_offset }],
        })
    }
}

/// A vector (or a batch of rows) of f32 on the GPU.
#[derive(Debug)]
pub struct GpuVector {
    /// Elements.
    pub len: usize,
    pub(crate) buffer: wgpu::Buffer,
}

impl GpuVector {
    /// `len` zeros.
    pub fn zeros(gpu: &Gpu, len: usize) -> GpuVector {
        let buffer = storage(gpu, len * 4, "activations");
        GpuVector { len, buffer }
    }

    /// A copy of `values`.
    pub fn from_slice(gpu: &Gpu, values: &[f32]) -> GpuVector {
        let v = Self::zeros(gpu, values.len());
        v.write(gpu, values);
        v
    }

    /// Overwrite the start of the vector with `values`.
    pub fn write(&self, gpu: &Gpu, values: &[f32]) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        write(gpu, &self.buffer, &bytes);
    }

    /// The values, read back once the GPU has finished what was submitted before.
    pub async fn read(&self, gpu: &Gpu) -> Result<Vec<f32>, Error> {
        if self.len == 0 {
            return Ok(Vec::new());
        }
        let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("read-back") });
        let staged = self.stage(gpu, &mut enc);
        gpu.queue.submit([enc.finish()]);
        gpu.counters.submission();
        staged.read(gpu).await
    }

    /// Record on `enc` a copy of the values into a mappable buffer from the pool, to read
    /// with [`Staged::read`] once `enc`'s commands are submitted: a forward pass records its
    /// read-back in its own command buffer, one submission a token instead of two.
    pub(crate) fn stage(&self, gpu: &Gpu, enc: &mut wgpu::CommandEncoder) -> Staged {
        let bytes = (self.len * 4) as u64;
        let buffer = gpu.pool.take(&gpu.device, Use::Read, bytes.max(4) as usize);
        if bytes > 0 {
            enc.copy_buffer_to_buffer(&self.buffer, 0, &buffer, 0, bytes);
        }
        Staged { buffer, bytes }
    }
}

/// Values copied into a mappable buffer by recorded work ([`GpuVector::stage`]).
#[derive(Debug)]
pub(crate) struct Staged {
    buffer: wgpu::Buffer,
    bytes: u64,
}

impl Staged {
    /// The values, once the work that copied them has run (it must have been submitted);
    /// the buffer goes back to the pool.
    pub(crate) async fn read(self, gpu: &Gpu) -> Result<Vec<f32>, Error> {
        let Staged { buffer, bytes } = self;
        if bytes == 0 {
            gpu.pool.give(Use::Read, buffer);
            return Ok(Vec::new());
        }
        let slot = Arc::new(Mutex::new(MapSlot::default()));
        let sink = slot.clone();
        buffer.slice(..bytes).map_async(wgpu::MapMode::Read, move |r| {
            if let Ok(mut s) = sink.lock() {
                s.result = Some(r.map_err(|e| e.to_string()));
                if let Some(w) = s.waker.take() {
                    w.wake();
                }
            }
        });
        // Natively this runs the callback; in a browser the event loop does.
        #[cfg(not(target_arch = "wasm32"))]
        let _ = gpu.device.poll(wgpu::PollType::wait_indefinitely());
        MapWait { slot }.await.map_err(|message| Error::Readback { message })?;
        gpu.check()?;
        let view = buffer.slice(..bytes).get_mapped_range().map_err(|e| Error::Readback { message: e.to_string() })?;
        let out = view.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        drop(view);
        buffer.unmap();
        gpu.pool.give(Use::Read, buffer);
        Ok(out)
    }
}

#[derive(Default)]
struct MapSlot {
    result: Option<Result<(), String>>,
    waker: Option<Waker>,
}

/// Resolves when a `map_async` callback has run.
struct MapWait {
    slot: Arc<Mutex<MapSlot>>,
}

impl Future for MapWait {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut s) = self.slot.lock() else { return Poll::Ready(Err("the read-back state was poisoned".into())) };
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
