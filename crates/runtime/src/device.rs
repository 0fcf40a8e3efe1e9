//! [`Device`]: where local models run, chosen once by one rule ([`choose`]) for the CLI,
//! the wasm layer and the npm package alike.
//!
//! The rule, for `auto`: a WebGPU adapter that is a hardware GPU and computes every
//! kernel as the CPU does ([`crate::gpu::checks`]) runs the models; otherwise the CPU
//! does, and the reason is said in words. A software adapter (llvmpipe, SwiftShader, a
//! browser's fallback) is correct but slower than the CPU backend on the same cores, so
//! `auto` passes it over without spending seconds on its checks; `gpu` takes it (tests,
//! and any machine without a GPU) once its checks pass, and fails with
//! `WEBGPU_UNAVAILABLE` where there is no adapter or a check fails: a driver that computes
//! wrongly is never trusted with a model. `cpu` takes the CPU without looking. A hardware
//! adapter without subgroups is taken too (the kernels for software adapters run there);
//! the kernel shapes are the backend's choice ([`crate::gpu::Gpu::is_gpu`]), not this
//! rule's.
//!
//! The device chosen is a value: its [`crate::gpu::Gpu`] (the device, its compiled
//! kernels, its buffer pool) is handed to every model that loads onto it, so the kernels
//! the checks compiled are not compiled again, and an embedder and an answerer share it.

use core::fmt;
use core::str::FromStr;

use crate::Error;

/// Where a person asked the models to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DevicePreference {
    /// A hardware GPU that passes the kernel checks, else the CPU.
    #[default]
    Auto,
    /// The CPU (SIMD kernels; in a browser, wasm).
    Cpu,
    /// A WebGPU adapter, software ones included, or an error saying why not.
    Gpu,
}

impl FromStr for DevicePreference {
    type Err = Error;
    /// `auto`, `cpu`, or `gpu` (also `webgpu`, the npm package's word).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "auto" => Ok(DevicePreference::Auto),
            "cpu" => Ok(DevicePreference::Cpu),
            "gpu" | "webgpu" => Ok(DevicePreference::Gpu),
            other => Err(Error::BadDevice { given: other.to_string() }),
        }
    }
}

/// Where local models run.
#[derive(Clone)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // one per page or process
pub enum Device {
    /// The CPU backend.
    Cpu,
    /// A WebGPU adapter whose kernels passed the checks.
    #[cfg(feature = "gpu")]
    Gpu(crate::gpu::Gpu),
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("Cpu"),
            #[cfg(feature = "gpu")]
            Device::Gpu(gpu) => f.debug_tuple("Gpu").field(&gpu.describe()).finish(),
        }
    }
}

/// What [`choose`] chose, and why.
#[derive(Clone, Debug)]
pub struct Chosen {
    /// The device.
    pub device: Device,
    /// Why, in words ("WebGPU on llvmpipe …, Vulkan is a software adapter: the CPU runs
    /// the models faster").
    pub reason: String,
    /// The adapter found, whether or not it was taken (`None`: none was found or looked
    /// for).
    pub adapter: Option<String>,
    /// Whether that adapter is a software one.
    pub software: bool,
    /// Kernel checks the adapter passed (0 when none ran: `cpu`, no adapter, or a software
    /// one under `auto`).
    pub checks: usize,
}

impl Chosen {
    fn cpu(reason: impl Into<String>) -> Self {
        Chosen { device: Device::Cpu, reason: reason.into(), adapter: None, software: false, checks: 0 }
    }

    /// Whether the models run on a WebGPU adapter (a software one included, where `gpu`
    /// was asked for).
    pub fn on_gpu(&self) -> bool {
        !matches!(self.device, Device::Cpu)
    }
}

/// Choose where local models run, as `preference` says (see the module docs), looking
/// for an adapter natively (Vulkan, Metal, D3D12) or through the browser's WebGPU.
pub async fn choose(preference: DevicePreference) -> Result<Chosen, Error> {
    if preference == DevicePreference::Cpu {
        return Ok(Chosen::cpu("the CPU backend was asked for"));
    }
    #[cfg(feature = "gpu")]
    {
        let found = crate::gpu::Gpu::new(&crate::gpu::GpuOptions { allow_cpu_adapter: true, ..Default::default() }).await;
        decide(preference, found).await
    }
    #[cfg(not(feature = "gpu"))]
    decide(preference).await
}

/// The rule, given the adapter found (or why there is none): `auto` takes it when it is a
/// hardware GPU whose kernels pass the checks, `gpu` whenever they pass.
#[cfg(feature = "gpu")]
pub async fn decide(preference: DevicePreference, found: Result<crate::gpu::Gpu, Error>) -> Result<Chosen, Error> {
    if preference == DevicePreference::Cpu {
        return Ok(Chosen::cpu("the CPU backend was asked for"));
    }
    let required = preference == DevicePreference::Gpu;
    let gpu = match found {
        Ok(gpu) => gpu,
        Err(e) if required => return Err(e),
        Err(Error::NoAdapter { message }) => return Ok(Chosen::cpu(format!("no WebGPU adapter ({message})"))),
        Err(e) => return Ok(Chosen::cpu(format!("no WebGPU adapter ({e})"))),
    };
    let (adapter, software) = (gpu.describe(), gpu.is_software());
    if software && !required {
        // Passed over whatever its checks would say: not worth their seconds.
        let reason = format!("WebGPU on {adapter} is a software adapter: the CPU runs the models faster");
        return Ok(Chosen { device: Device::Cpu, reason, adapter: Some(adapter), software, checks: 0 });
    }
    let checks = match crate::gpu::checks::run_all(&gpu).await {
        Ok(n) => n,
        // Whatever went wrong (a wrong result, a lost device), the adapter is unusable.
        Err(e) if required => return Err(Error::NoAdapter { message: format!("{adapter} failed its kernel checks: {e}") }),
        Err(e) => {
            let mut c = Chosen::cpu(format!("WebGPU on {adapter} failed its kernel checks: {e}"));
            (c.adapter, c.software) = (Some(adapter), software);
            return Ok(c);
        }
    };
    let reason = format!("{adapter}{}: {checks} kernel checks pass", if software { " (a software adapter)" } else { "" });
    Ok(Chosen { device: Device::Gpu(gpu), reason, adapter: Some(adapter), software, checks })
}

/// The rule in a build without the GPU backend: the CPU, or an error when a GPU was
/// required.
#[cfg(not(feature = "gpu"))]
pub async fn decide(preference: DevicePreference) -> Result<Chosen, Error> {
    match preference {
        DevicePreference::Gpu => Err(Error::NoAdapter { message: "this build has no GPU backend".into() }),
        DevicePreference::Cpu => Ok(Chosen::cpu("the CPU backend was asked for")),
        DevicePreference::Auto => Ok(Chosen::cpu("this build has no GPU backend")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preference_is_read_by_name_and_a_wrong_one_is_refused_naming_it() {
        assert_eq!("auto".parse::<DevicePreference>().unwrap(), DevicePreference::Auto);
        assert_eq!("webgpu".parse::<DevicePreference>().unwrap(), DevicePreference::Gpu);
        let e = "tpu".parse::<DevicePreference>().unwrap_err();
        assert_eq!(e.code(), docmem_core::ErrorCode::BadArgument);
        assert!(e.to_string().contains("'tpu'"), "{e}");
        let c = crate::block_on(choose(DevicePreference::Cpu)).unwrap();
        assert!(!c.on_gpu() && c.adapter.is_none() && c.checks == 0, "{c:?}");
    }

    #[cfg(feature = "gpu")]
    #[test]
    fn no_adapter_is_the_cpu_for_auto_and_an_error_for_gpu() {
        let none = || Err(Error::NoAdapter { message: "navigator.gpu is missing".into() });
        let c = crate::block_on(decide(DevicePreference::Auto, none())).unwrap();
        assert!(!c.on_gpu() && c.reason.contains("navigator.gpu is missing"), "{c:?}");
        assert!(matches!(crate::block_on(decide(DevicePreference::Gpu, none())), Err(Error::NoAdapter { .. })));
    }

    /// On a machine whose adapter is a software one (llvmpipe here and in CI) `auto`
    /// passes it over after its checks and `gpu` takes it; a hardware GPU is taken by
    /// both.
    #[cfg(feature = "gpu")]
    #[test]
    fn auto_passes_over_a_software_adapter_that_gpu_takes_after_its_checks() {
        let required = crate::block_on(choose(DevicePreference::Gpu)).unwrap();
        assert!(required.on_gpu() && required.checks > 10, "{required:?}");
        assert!(required.reason.contains("kernel checks pass"), "{}", required.reason);
        let auto = crate::block_on(choose(DevicePreference::Auto)).unwrap();
        assert_eq!(auto.on_gpu(), !required.software, "{auto:?}");
        if required.software {
            assert!(auto.reason.contains("software adapter") && auto.reason.contains("the CPU runs the models faster"), "{}", auto.reason);
            assert_eq!((auto.adapter, auto.checks), (required.adapter, 0), "passed over without its checks");
        }
    }
}
