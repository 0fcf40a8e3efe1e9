//! `--backend auto|cpu|gpu` of `docmem ask` and `docmem ingest`: where a local model runs,
//! and the model there behind the roles those commands need (answerer, text model,
//! reader), whichever backend it is on.
//!
//! `auto` (the default) takes a hardware GPU only when its adapter passes every kernel
//! check (`docmem gpu-check` runs the same), as the app does; otherwise the CPU, and the
//! reason is said on stderr. `gpu` insists, taking a CPU adapter such as llvmpipe when
//! there is no GPU (to test the GPU path on any machine).

use std::path::Path;

use clap::ValueEnum;
use docmem_core::reader::ReaderModel;
use docmem_core::text_model::TextModel;
use docmem_runtime::answerer::Answerer;
use docmem_runtime::lm::{Lm, LmReader, LmText, LoadOptions};

use crate::CliError;

/// Where `ask` and `ingest` run a local model.
#[derive(Clone, Copy, Debug, ValueEnum, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// A hardware GPU whose adapter passes the kernel checks, else the CPU.
    #[default]
    Auto,
    /// The CPU (SIMD kernels, all cores).
    Cpu,
    /// The GPU through WebGPU's native APIs (Vulkan, Metal, D3D12); a CPU adapter such as
    /// llvmpipe when no GPU is found.
    #[cfg(feature = "gpu")]
    Gpu,
}

/// A local model on the backend chosen for it.
#[allow(clippy::large_enum_variant)] // one per run
pub enum LocalLm {
    /// On the CPU.
    Cpu(Lm),
    /// On the GPU.
    #[cfg(feature = "gpu")]
    Gpu(Lm<docmem_runtime::gpu::GpuTransformer>),
}

impl LocalLm {
    /// Load the model at `path` (on `threads` CPU threads, 0: one per core) and put it
    /// where `backend` says; the choice is said on stderr.
    pub fn load(path: &Path, threads: usize, backend: BackendChoice) -> Result<Self, CliError> {
        let cpu = Lm::load(path, &LoadOptions { threads, context: 0, ..LoadOptions::default() })?;
        #[cfg(feature = "gpu")]
        {
            use docmem_runtime::gpu::{Gpu, GpuOptions, GpuTransformer};
            use docmem_runtime::lm::LmError;
            let gpu = match backend {
                BackendChoice::Cpu => None,
                BackendChoice::Gpu => {
                    let options = GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() };
                    Some(Gpu::new_blocking(&options).map_err(LmError::from)?)
                }
                BackendChoice::Auto => match hardware_gpu() {
                    Ok(gpu) => Some(gpu),
                    Err(why) => {
                        eprintln!("[backend: cpu ({why})]");
                        None
                    }
                },
            };
            if let Some(gpu) = gpu {
                eprintln!("[backend: gpu, {}]", gpu.describe());
                return Ok(LocalLm::Gpu(cpu.map_backend(|c| GpuTransformer::from_cpu(gpu, c)).map_err(LmError::from)?));
            }
        }
        #[cfg(not(feature = "gpu"))]
        if backend == BackendChoice::Auto {
            eprintln!("[backend: cpu (this build has no GPU backend)]");
        }
        Ok(LocalLm::Cpu(cpu))
    }

    /// The model as an answerer.
    pub fn answerer(&self) -> &dyn Answerer {
        match self {
            LocalLm::Cpu(lm) => lm,
            #[cfg(feature = "gpu")]
            LocalLm::Gpu(lm) => lm,
        }
    }

    /// The model as a writer of short replies (clues, routing's judgements).
    pub fn text(&self) -> Box<dyn TextModel + '_> {
        match self {
            LocalLm::Cpu(lm) => Box::new(LmText::new(lm)),
            #[cfg(feature = "gpu")]
            LocalLm::Gpu(lm) => Box::new(LmText::new(lm)),
        }
    }

    /// The model as a reader (and scorer) of documents, named `name` in provenance.
    pub fn reader(&self, name: String) -> Box<dyn ReaderModel + '_> {
        match self {
            LocalLm::Cpu(lm) => Box::new(LmReader::new(lm, name)),
            #[cfg(feature = "gpu")]
            LocalLm::Gpu(lm) => Box::new(LmReader::new(lm, name)),
        }
    }
}

/// A hardware GPU whose adapter passes every kernel check, or why there is none.
#[cfg(feature = "gpu")]
fn hardware_gpu() -> Result<docmem_runtime::gpu::Gpu, String> {
    use docmem_runtime::gpu::{checks, Gpu, GpuOptions};
    let gpu =
        Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: false, ..GpuOptions::default() }).map_err(|e| format!("no GPU adapter: {e}"))?;
    if !gpu.is_gpu() {
        return Err(format!("{} is not a GPU", gpu.describe()));
    }
    docmem_runtime::block_on(checks::run_all(&gpu)).map_err(|e| format!("{}: a kernel check failed: {e}", gpu.describe()))?;
    Ok(gpu)
}
