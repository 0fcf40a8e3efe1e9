//! Why an embedder could not be loaded or run.

use std::fmt;

use crate::safetensors::SafetensorsError;

/// Why an embedder could not be loaded or run.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmbedderError {
    /// A file the model needs could not be read.
    MissingFile {
        /// The path.
        path: String,
        /// What the OS said.
        reason: String,
    },
    /// A configuration file is not valid JSON or lacks a field.
    BadConfig {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The model is of a kind this embedder does not run.
    Unsupported {
        /// What is not supported (architecture, activation, pooling).
        what: String,
    },
    /// The weights file is malformed, or a tensor is missing or disagrees with the config.
    Weights(SafetensorsError),
    /// The tokenizer could not be built or failed on a text.
    Tokenizer {
        /// What the tokenizer said.
        reason: String,
    },
    /// The tokenizer can produce ids the model has no embedding for.
    VocabularyMismatch {
        /// Ids the tokenizer can produce.
        tokenizer: usize,
        /// Rows of the model's embedding table.
        model: usize,
    },
    /// The GPU failed, or refused the work (a device lost, out of memory, a text longer
    /// than the GPU encoder takes, a synchronous call where only an asynchronous one can
    /// wait for the GPU); the CPU encoder can be used instead.
    Gpu {
        /// What went wrong.
        message: String,
    },
}

impl docmem_core::HasErrorCode for EmbedderError {
    fn code(&self) -> docmem_core::ErrorCode {
        match self {
            // The GPU fails while a loaded model runs, mostly.
            EmbedderError::Gpu { .. } => docmem_core::ErrorCode::ModelFailed,
            _ => docmem_core::ErrorCode::ModelLoadFailed,
        }
    }
}

impl fmt::Display for EmbedderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedderError::MissingFile { path, reason } => write!(f, "cannot read {path}: {reason}"),
            EmbedderError::BadConfig { file, reason } => write!(f, "{file}: {reason}"),
            EmbedderError::Unsupported { what } => write!(f, "unsupported embedding model: {what}"),
            EmbedderError::Weights(e) => write!(f, "model.safetensors: {e}"),
            EmbedderError::Tokenizer { reason } => write!(f, "tokenizer: {reason}"),
            EmbedderError::VocabularyMismatch { tokenizer, model } => {
                write!(f, "tokenizer.json has {tokenizer} tokens but the model embeds {model}: they are not one model's files")
            }
            EmbedderError::Gpu { message } => write!(f, "the GPU encoder: {message}"),
        }
    }
}

/// The chain goes on below the wrapped error: this one's message already includes it.
impl std::error::Error for EmbedderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmbedderError::Weights(e) => e.source(),
            _ => None,
        }
    }
}

impl From<SafetensorsError> for EmbedderError {
    fn from(e: SafetensorsError) -> Self {
        EmbedderError::Weights(e)
    }
}

impl From<EmbedderError> for docmem_core::embed::EmbedError {
    fn from(e: EmbedderError) -> Self {
        docmem_core::embed::EmbedError::Backend { message: e.to_string() }
    }
}
