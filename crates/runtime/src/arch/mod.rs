//! Each architecture's forward pass, written once over the operations a backend provides:
//! the CPU and WebGPU backends implement the operations, these modules say in what order
//! they run. One file per architecture family.

pub(crate) mod bert;
pub(crate) mod decoder;
