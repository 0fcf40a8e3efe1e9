//! [`WasmDevice`]: where the page's local models run, chosen by the runtime's one rule
//! (`docmem_runtime::device`), and handed to every model that loads onto WebGPU so that
//! they share one device and the kernels its checks compiled.

use docmem_runtime::device::{Chosen, DevicePreference};
use wasm_bindgen::prelude::*;

use crate::{boundary, coded};

/// Where local models run: WebGPU (an adapter whose kernels passed the checks) or the CPU.
#[wasm_bindgen(js_name = Device)]
pub struct WasmDevice {
    chosen: Chosen,
}

/// wgpu reaches WebGPU only from a page or a dedicated worker, and panics elsewhere (Node,
/// shared and service workers): there is no adapter to be had there, and why.
#[cfg(feature = "gpu")]
fn webgpu_reachable() -> Result<(), String> {
    let global = js_sys::global();
    let get = |o: &JsValue, k: &str| js_sys::Reflect::get(o, &JsValue::from_str(k)).unwrap_or(JsValue::UNDEFINED);
    let gpu = get(&get(&global, "navigator"), "gpu");
    if gpu.is_undefined() || gpu.is_null() {
        return Err("navigator.gpu is missing".into());
    }
    let scope = get(&get(&global, "constructor"), "name").as_string().unwrap_or_default();
    if scope != "Window" && scope != "DedicatedWorkerGlobalScope" {
        return Err(format!("WebGPU is reachable only from a page or a dedicated worker, not from {scope:?}"));
    }
    Ok(())
}

#[wasm_bindgen(js_class = Device)]
impl WasmDevice {
    /// Choose where local models run. `preference`: `auto` (WebGPU when the adapter is a
    /// hardware one whose kernels all pass their checks against the CPU, else the CPU),
    /// `cpu`, or `webgpu` (any adapter whose checks pass, software ones included, or a
    /// `WEBGPU_UNAVAILABLE` error naming why not). `reason` says why, in words.
    pub async fn choose(
        #[wasm_bindgen(unchecked_param_type = "'auto' | 'cpu' | 'webgpu'")] preference: JsValue,
    ) -> Result<WasmDevice, JsValue> {
        boundary::ready()?;
        let preference: DevicePreference = boundary::string(&preference, "preference")?.parse().map_err(coded)?;
        #[cfg(feature = "gpu")]
        let chosen = {
            use docmem_runtime::gpu::{Gpu, GpuOptions};
            let found = match webgpu_reachable() {
                Err(message) => Err(docmem_runtime::Error::NoAdapter { message }),
                Ok(()) if preference == DevicePreference::Cpu => Err(docmem_runtime::Error::NoAdapter { message: "not looked for".into() }),
                // wgpu's own words for a browser without an adapter list every native API
                // it was built without: said plainly instead.
                Ok(()) => match Gpu::new(&GpuOptions { allow_cpu_adapter: true, ..GpuOptions::default() }).await {
                    Err(docmem_runtime::Error::NoAdapter { .. }) => {
                        Err(docmem_runtime::Error::NoAdapter { message: "the browser offers none".into() })
                    }
                    found => found,
                },
            };
            docmem_runtime::device::decide(preference, found).await
        };
        #[cfg(not(feature = "gpu"))]
        let chosen = docmem_runtime::device::decide(preference).await;
        Ok(WasmDevice { chosen: chosen.map_err(coded)? })
    }

    /// `webgpu` or `cpu`.
    #[wasm_bindgen(getter)]
    pub fn kind(&self) -> String {
        if self.chosen.on_gpu() { "webgpu" } else { "cpu" }.to_string()
    }

    /// Why this device, in words.
    #[wasm_bindgen(getter)]
    pub fn reason(&self) -> String {
        self.chosen.reason.clone()
    }

    /// The WebGPU adapter found, whether or not it was taken (undefined: none).
    #[wasm_bindgen(getter)]
    pub fn adapter(&self) -> Option<String> {
        self.chosen.adapter.clone()
    }

    /// Whether that adapter is a software one (SwiftShader).
    #[wasm_bindgen(getter)]
    pub fn software(&self) -> bool {
        self.chosen.software
    }

    /// Kernel checks the adapter passed (0 when none ran).
    #[wasm_bindgen(getter)]
    pub fn checks(&self) -> u32 {
        self.chosen.checks as u32
    }
}

impl WasmDevice {
    /// The runtime's choice: the device, and why.
    pub(crate) fn chosen(&self) -> &Chosen {
        &self.chosen
    }
}
