//! The models `docmem ask` and `docmem ingest` are given: `remote:NAME` through a host, or
//! a file loaded here where `--backend auto|cpu|gpu` says, held as one runtime
//! [`ModelHandle`] whichever it is (the commands ask it for roles, never for a backend).
//!
//! Where a local model runs is the runtime's one rule (`docmem_runtime::device`), the
//! app's too: `auto` (the default) takes a hardware GPU only when its adapter passes every
//! kernel check (`docmem gpu-check` runs the same); otherwise the CPU, and the reason is
//! said on stderr. `gpu` insists, taking a software adapter such as llvmpipe when there is
//! no GPU (to test the GPU path on any machine), once its kernels pass the checks.

use std::path::Path;
use std::rc::Rc;

use docmem_runtime::device::{self, DevicePreference};
use docmem_runtime::handle::ModelHandle;
use docmem_runtime::lm::{Lm, LmContext, LoadOptions};
use docmem_runtime::remote::RemoteModel;

use crate::remote::{HttpTransport, RemoteArgs};
use crate::CliError;

/// A model as the CLI holds it: on the CPU, on the GPU or hosted, in every role.
pub type Model = ModelHandle<Rc<HttpTransport>>;

/// The model named by `--{role} PATH`: `remote:NAME` through `remote`'s host, else a file
/// loaded here (on `threads` CPU threads, 0: one per core) where `backend` says, known by
/// its file name. `missing` says what to do when the file is not there.
pub fn open(
    path: &Path,
    role: &str,
    remote: &RemoteArgs,
    threads: usize,
    backend: DevicePreference,
    missing: impl FnOnce() -> String,
) -> Result<Model, CliError> {
    if let Some(name) = crate::remote::remote_name(path) {
        let transport = remote.transport(role, name, what_leaves(role))?;
        return Ok(Model::hosted(RemoteModel::new(transport, name).with_context(remote.remote_context)));
    }
    if !path.exists() {
        return Err(CliError::BadArgument { message: missing() });
    }
    load(path, threads, backend).map(|m| m.renamed(crate::input::file_label(path)))
}

/// What a hosted model in `role` is sent (said before anything leaves the device).
fn what_leaves(role: &str) -> &'static str {
    match role {
        "answerer" => "the question and the passages retrieved for it",
        _ => "the documents' text",
    }
}

/// Load the model at `path` and put it where `backend` says, by the runtime's one rule
/// (`docmem_runtime::device::choose`); the choice and its reason are said on stderr.
fn load(path: &Path, threads: usize, backend: DevicePreference) -> Result<Model, CliError> {
    let cpu = Lm::load(path, &LoadOptions { threads, context: 0, ..LoadOptions::default() })?;
    let name = crate::input::file_label(path);
    let chosen = docmem_runtime::block_on(device::choose(backend))?;
    match chosen.device {
        #[cfg(feature = "gpu")]
        device::Device::Gpu(gpu) => {
            eprintln!("[backend: gpu, {}]", chosen.reason);
            Ok(Model::on_gpu(LmContext::new(cpu.map_backend(|c| docmem_runtime::gpu::GpuTransformer::from_cpu(gpu, c))?), name))
        }
        _ => {
            if backend != DevicePreference::Cpu {
                eprintln!("[backend: cpu ({})]", chosen.reason);
            }
            Ok(Model::on_cpu(LmContext::new(cpu), name))
        }
    }
}
