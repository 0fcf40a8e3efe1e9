//! Decoder models: hyper-parameters and weights, independent of the backend that runs them.

mod config;
mod facts;
pub mod hf;
pub mod hf_export;
mod identity;
pub mod tensors;
mod weights;

pub use config::{Arch, Gate, ModelConfig, SlidingWindow};
pub use facts::{ModelFacts, WASM_HEAP_BYTES, WASM_MODEL_BYTES};
pub use hf::{HfCheckpoint, LoadQuant};
pub use identity::ModelIdentity;
pub(crate) use weights::embed_tokens;
#[cfg(feature = "gpu")]
pub(crate) use weights::tensor_info;
pub use weights::{Block, Weights};
