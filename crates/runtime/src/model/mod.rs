//! Decoder models: hyper-parameters and weights, independent of the backend that runs them.

mod config;
mod weights;

pub use config::{Arch, ModelConfig, ModelError};
pub use weights::{Layer, Weights};
