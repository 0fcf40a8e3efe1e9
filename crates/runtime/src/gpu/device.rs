//! The GPU device: one adapter, the limits the work needs requested from it (never assumed),
//! and errors that say what was missing so the caller can fall back to the CPU backend.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::bind_groups::BindGroupCache;
use super::pool::BufferPool;
use super::profile::{KernelTime, Profiler};
use crate::Error;

/// Storage buffers the widest kernel binds (attention: query, keys, values, scores,
/// output and the output's two copies); WebGPU guarantees 8.
const STORAGE_BUFFERS: u32 = 7;

/// What the caller needs from the device.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Bytes of the largest single buffer binding the work needs (0: whatever the adapter
    /// offers). A tensor larger than the adapter's binding limit is split by rows instead,
    /// so this is only a floor below which the backend is refused.
    pub min_binding_bytes: u64,
    /// Use a CPU adapter (llvmpipe, SwiftShader) when no real GPU is found: tests do this.
    pub allow_cpu_adapter: bool,
    /// Never use the f16 path, even where the adapter offers `shader-f16` (the tests check
    /// the f32 path this way; a benchmark compares the two).
    pub avoid_f16: bool,
    /// Time every kernel with timestamp queries where the adapter offers them (natively;
    /// [`Gpu::kernel_times`]): for benchmarks, as it costs a read-back per submission.
    pub profile: bool,
    /// Pick the kernel shapes a GPU runs (split attention, a matrix row a workgroup) even on
    /// a software adapter, where they are slower: a test counts on llvmpipe the dispatches
    /// a GPU records.
    pub gpu_kernels: bool,
}

/// Work recorded on a device since it was made ([`Gpu::work_counts`]): a decoder step's
/// cost on a GPU is mostly how many kernels it launches, so a benchmark reports these per
/// token and a test holds the decode step to a budget, on any adapter (llvmpipe included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkCounts {
    /// Kernel dispatches recorded.
    pub dispatches: usize,
    /// Compute passes begun.
    pub passes: usize,
    /// Command buffers submitted (a forward pass's, and each read-back's copy).
    pub submissions: usize,
}

impl std::ops::Sub for WorkCounts {
    type Output = WorkCounts;

    fn sub(self, before: WorkCounts) -> WorkCounts {
        WorkCounts {
            dispatches: self.dispatches - before.dispatches,
            passes: self.passes - before.passes,
            submissions: self.submissions - before.submissions,
        }
    }
}

/// The counters behind [`WorkCounts`], shared by a device's clones.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    dispatches: AtomicUsize,
    passes: AtomicUsize,
    submissions: AtomicUsize,
}

impl Counters {
    pub(crate) fn dispatch(&self) {
        self.dispatches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn pass(&self) {
        self.passes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn submission(&self) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> WorkCounts {
        WorkCounts {
            dispatches: self.dispatches.load(Ordering::Relaxed),
            passes: self.passes.load(Ordering::Relaxed),
            submissions: self.submissions.load(Ordering::Relaxed),
        }
    }
}

/// An adapter's identity, driver, features and limits ([`Gpu::adapter_report`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdapterReport {
    /// Its name (`NVIDIA H100 80GB HBM3`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The native API (`Vulkan`, `Metal`, `Dx12`) or `BrowserWebGpu`.
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `Cpu`, …
    pub device_type: String,
    /// PCI vendor id (0x10de NVIDIA).
    pub vendor: u32,
    /// PCI device id.
    pub device: u32,
    /// The driver's name.
    pub driver: String,
    /// The driver's version.
    pub driver_info: String,
    /// Whether the adapter offers `shader-f16`.
    pub shader_f16: bool,
    /// Whether it offers subgroup operations.
    pub subgroups: bool,
    /// Its smallest and largest subgroup.
    pub subgroup_sizes: (u32, u32),
    /// Whether it offers timestamp queries.
    pub timestamp_query: bool,
    /// The largest buffer.
    pub max_buffer_size: u64,
    /// The largest storage binding.
    pub max_storage_buffer_binding_size: u64,
    /// Workgroup memory, bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Threads per workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Whether this device runs the K-quants' f16 path.
    pub uses_f16_path: bool,
    /// Whether the kernels take a GPU's shapes ([`Gpu::runs_gpu_kernels`]).
    pub uses_gpu_shapes: bool,
}

/// A device and its queue, with the limits granted.
///
/// A clone is the same device (wgpu's handles are shared, and so are the buffer pool, the
/// bind-group cache and the profiler): the decoder and the embedder run on one device, so
/// a page asks the browser for one and its memory is counted once.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    /// What the adapter offers (the device is created with less: `limits`).
    offered: wgpu::Limits,
    adapter_features: wgpu::Features,
    f16: bool,
    /// [`GpuOptions::gpu_kernels`].
    gpu_kernels: bool,
    /// The first error the device reported outside any call (a lost device, say); checked
    /// after every submission.
    lost: Arc<Mutex<Option<String>>>,
    /// Scratch, parameter and read-back buffers kept for reuse.
    pub(crate) pool: Arc<BufferPool>,
    /// Bind groups kept for reuse (decoding binds the same buffers every other token).
    pub(crate) bind_groups: Arc<BindGroupCache>,
    /// Per-kernel timestamps, when asked for and offered.
    pub(crate) profiler: Option<Arc<Profiler>>,
    /// The kernels, compiled once per device on first use ([`Gpu::kernels`]): the decoder,
    /// the embedder and the checks on one device share them.
    kernels: Arc<std::sync::OnceLock<Arc<super::Kernels>>>,
    /// Held from the first dispatch recorded to the submission ([`super::Kernels::run`]):
    /// the parameter blocks recorded go back to the shared pool at submission, so two
    /// clones recording at once on two threads would hand each other's back too early.
    pub(crate) submission: Arc<Mutex<()>>,
    /// Dispatches, passes and submissions recorded ([`Gpu::work_counts`]).
    pub(crate) counters: Arc<Counters>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu").field("adapter", &self.info.name).field("backend", &self.info.backend).finish_non_exhaustive()
    }
}

impl Gpu {
    /// Find an adapter and create a device with the limits the work needs.
    pub async fn new(options: &GpuOptions) -> Result<Gpu, Error> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::PRIMARY,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::NoAdapter { message: e.to_string() })?;
        let info = adapter.get_info();
        if info.device_type == wgpu::DeviceType::Cpu && !options.allow_cpu_adapter {
            return Err(Error::NoAdapter { message: format!("only a CPU adapter ({}) was found", info.name) });
        }
        let offered = adapter.limits();
        let binding = offered.max_storage_buffer_binding_size;
        if binding < options.min_binding_bytes {
            return Err(Error::MissingLimit { limit: "maxStorageBufferBindingSize", needed: options.min_binding_bytes, offered: binding });
        }
        if offered.max_storage_buffers_per_shader_stage < STORAGE_BUFFERS {
            return Err(Error::MissingLimit {
                limit: "maxStorageBuffersPerShaderStage",
                needed: u64::from(STORAGE_BUFFERS),
                offered: u64::from(offered.max_storage_buffers_per_shader_stage),
            });
        }
        // The lowest limits wgpu knows, raised to what the kernels need (storage buffers
        // per kernel) and to the adapter's own buffer sizes (weights are large).
        let mut limits = wgpu::Limits::downlevel_defaults();
        limits.max_storage_buffers_per_shader_stage = STORAGE_BUFFERS;
        limits.max_storage_buffer_binding_size = offered.max_storage_buffer_binding_size;
        limits.max_buffer_size = offered.max_buffer_size;
        // The f16 path where offered (the K-quant kernels multiply in f16; `Kernels::input`).
        let f16 = !options.avoid_f16 && adapter.features().contains(wgpu::Features::SHADER_F16);
        // Timestamps need the read-back to wait on the device: natively only.
        let profile = options.profile && !cfg!(target_arch = "wasm32") && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let mut features = wgpu::Features::empty();
        if profile {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("docmem"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice { message: e.to_string() })?;
        let lost = Arc::new(Mutex::new(None));
        let sink = lost.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut first) = sink.lock() {
                first.get_or_insert_with(|| e.to_string());
            }
        }));
        // In a browser wgpu's handles are neither Send nor Sync, and nothing crosses threads;
        // natively they are, and the Arc lets a shared device cross threads.
        #[allow(clippy::arc_with_non_send_sync)]
        let profiler = profile.then(|| Arc::new(Profiler::new(&device, &queue)));
        Ok(Gpu {
            device,
            queue,
            info,
            limits,
            offered,
            adapter_features: adapter.features(),
            f16,
            gpu_kernels: options.gpu_kernels,
            lost,
            pool: Arc::default(),
            bind_groups: Arc::default(),
            profiler,
            kernels: Arc::default(),
            submission: Arc::default(),
            counters: Arc::default(),
        })
    }

    /// Work recorded on this device so far (all its clones): the difference of two readings
    /// is what happened between them.
    pub fn work_counts(&self) -> WorkCounts {
        self.counters.read()
    }

    /// [`Gpu::new`], waiting for it (native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking(options: &GpuOptions) -> Result<Gpu, Error> {
        pollster::block_on(Self::new(options))
    }

    /// Whether this is a GPU, as far as the adapter says: not a CPU adapter (llvmpipe), and
    /// with subgroups, which SwiftShader in a browser (whose adapter has no name or type
    /// there) lacks and GPUs offer (no kernel uses them: the matrix kernels sum in a fixed
    /// order). Kernel shapes that pay on a GPU but cost a software adapter (split attention,
    /// many threads on a matrix row) go by it.
    pub fn is_gpu(&self) -> bool {
        !self.is_software() && self.adapter_features.contains(wgpu::Features::SUBGROUP)
    }

    /// The offset a uniform binding must start at a multiple of (the recorder's parameter
    /// slots are this apart).
    pub(crate) fn uniform_alignment(&self) -> usize {
        (self.limits.min_uniform_buffer_offset_alignment as usize).max(16)
    }

    /// Whether the kernel shapes picked are a GPU's (split attention, a matrix row a
    /// workgroup): on GPUs, or where [`GpuOptions::gpu_kernels`] asks for them.
    pub fn runs_gpu_kernels(&self) -> bool {
        self.is_gpu() || self.gpu_kernels
    }

    /// What the adapter is and offers, for a benchmark's report: a driver's compiler is
    /// part of what a figure measures.
    pub fn adapter_report(&self) -> AdapterReport {
        let (i, l, f) = (&self.info, &self.offered, self.adapter_features);
        AdapterReport {
            name: i.name.clone(),
            backend: format!("{:?}", i.backend),
            device_type: format!("{:?}", i.device_type),
            vendor: i.vendor,
            device: i.device,
            driver: i.driver.clone(),
            driver_info: i.driver_info.clone(),
            shader_f16: f.contains(wgpu::Features::SHADER_F16),
            subgroups: f.contains(wgpu::Features::SUBGROUP),
            subgroup_sizes: (i.subgroup_min_size, i.subgroup_max_size),
            timestamp_query: f.contains(wgpu::Features::TIMESTAMP_QUERY),
            max_buffer_size: l.max_buffer_size,
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            uses_f16_path: self.f16,
            uses_gpu_shapes: self.runs_gpu_kernels(),
        }
    }

    /// The adapter's name and driver, e.g. `llvmpipe (LLVM 15.0.6, 256 bits), Vulkan`.
    /// Browsers do not tell the adapter's name: then only the API is named.
    pub fn describe(&self) -> String {
        match self.info.name.as_str() {
            "" => format!("{:?}", self.info.backend),
            name => format!("{name}, {:?}", self.info.backend),
        }
    }

    /// Whether the adapter is a software one (llvmpipe, SwiftShader; a browser's fallback
    /// adapter): correct, but slower than the CPU backend on the same cores.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The device's kernels, compiled on the first call (a few seconds on a software
    /// adapter) and shared by every clone after.
    pub fn kernels(&self) -> Arc<super::Kernels> {
        // In a browser wgpu's handles are neither Send nor Sync, and nothing crosses threads.
        #[allow(clippy::arc_with_non_send_sync)]
        self.kernels.get_or_init(|| Arc::new(super::Kernels::new(self))).clone()
    }

    /// Whether the f16 path is on: the adapter offers `shader-f16`, the device was created
    /// with it, and the K-quant kernels multiply in f16 ([`super::Kernels::input`]).
    pub fn has_f16(&self) -> bool {
        self.f16
    }

    /// The largest buffer binding granted, in bytes.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size
    }

    /// Buffers the pool has created so far (decoding stops creating them after its first
    /// steps).
    pub fn buffers_created(&self) -> usize {
        self.pool.created()
    }

    /// Bind groups created so far (decoding stops creating them after its first steps).
    pub fn bind_groups_created(&self) -> usize {
        self.bind_groups.created()
    }

    /// Whether kernels are being timed ([`GpuOptions::profile`] asked for it, the adapter
    /// offers timestamp queries, and [`Gpu::set_profiling`] has not turned it off).
    pub fn is_profiling(&self) -> bool {
        self.profiler.as_deref().is_some_and(Profiler::is_enabled)
    }

    /// Whether kernels can be timed ([`GpuOptions::profile`] and timestamp queries).
    pub fn can_profile(&self) -> bool {
        self.profiler.is_some()
    }

    /// Time kernels from now on, or stop (a benchmark times throughput without the
    /// timestamps' read-backs, then a profiled run). No effect unless [`Gpu::can_profile`].
    pub fn set_profiling(&self, on: bool) {
        if let Some(p) = &self.profiler {
            p.set_enabled(on);
        }
    }

    /// GPU time per kernel since the last [`Gpu::reset_kernel_times`], the longest first,
    /// and the dispatches that ran untimed (past a submission's query set); `None` when not
    /// [able to profile](Gpu::can_profile).
    pub fn kernel_times(&self) -> Option<(Vec<KernelTime>, usize)> {
        self.profiler.as_deref().map(Profiler::times)
    }

    /// Start the kernel times afresh.
    pub fn reset_kernel_times(&self) {
        if let Some(p) = &self.profiler {
            p.reset();
        }
    }

    /// The first error the device has reported, if any (as an error to return).
    pub(crate) fn check(&self) -> Result<(), Error> {
        match self.lost.lock().ok().and_then(|first| first.clone()) {
            Some(message) => Err(Error::GpuDevice { message }),
            None => Ok(()),
        }
    }
}
