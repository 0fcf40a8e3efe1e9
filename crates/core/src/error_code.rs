//! Stable error codes: one small, closed vocabulary for every binding.
//!
//! Each crate's one error type keeps its own variants and messages (they say exactly what
//! went wrong); [`HasErrorCode`] maps them onto [`ErrorCode`], the category a caller
//! branches on. The npm package's errors carry it as `code` (`"BAD_DOCUMENT"`,
//! `"QUOTA_EXCEEDED"`, …), so JavaScript never has to read a Rust message to decide what
//! happened. Each mapping lives beside its error type, not in the bindings, which only
//! translate.

/// What kind of failure an error is. The names are part of the public API: they never
/// change meaning, and new ones may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A setting or argument the caller gave is not valid (an unknown chunker, a zero size).
    BadArgument,
    /// The document cannot be taken: empty, unreadable or of an unsupported kind.
    BadDocument,
    /// The question is empty.
    BadQuestion,
    /// The library (or an imported one) is damaged, from a newer version, or was built
    /// with another embedder.
    BadLibrary,
    /// No such document.
    NotFound,
    /// The caller cancelled.
    Aborted,
    /// The storage is full (a browser's quota, a full disk).
    QuotaExceeded,
    /// The storage failed otherwise.
    StorageFailed,
    /// A model's files were refused (missing, malformed, unsupported).
    ModelLoadFailed,
    /// A loaded model failed while running (its context is full, its backend failed).
    ModelFailed,
    /// No WebGPU device could be had (no adapter, or one without the limits the model
    /// needs); the CPU backend can run instead.
    WebgpuUnavailable,
    /// The object is in use by a call still running (an ingest waiting on the GPU): await
    /// that call first.
    Busy,
    /// A hosted model (through the edge worker, or any OpenAI-compatible host the user
    /// chose) failed or could not be reached; a local model can run instead.
    RemoteFailed,
    /// Anything else; the message says what.
    Internal,
}

impl ErrorCode {
    /// The code as the bindings spell it (`SCREAMING_SNAKE_CASE`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadArgument => "BAD_ARGUMENT",
            ErrorCode::BadDocument => "BAD_DOCUMENT",
            ErrorCode::BadQuestion => "BAD_QUESTION",
            ErrorCode::BadLibrary => "BAD_LIBRARY",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::QuotaExceeded => "QUOTA_EXCEEDED",
            ErrorCode::StorageFailed => "STORAGE_FAILED",
            ErrorCode::ModelLoadFailed => "MODEL_LOAD_FAILED",
            ErrorCode::ModelFailed => "MODEL_FAILED",
            ErrorCode::WebgpuUnavailable => "WEBGPU_UNAVAILABLE",
            ErrorCode::Busy => "BUSY",
            ErrorCode::RemoteFailed => "REMOTE_FAILED",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

/// An error that knows its [`ErrorCode`].
pub trait HasErrorCode {
    /// The error's category.
    fn code(&self) -> ErrorCode;
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorCode; 14] = [
        ErrorCode::BadArgument,
        ErrorCode::BadDocument,
        ErrorCode::BadQuestion,
        ErrorCode::BadLibrary,
        ErrorCode::NotFound,
        ErrorCode::Aborted,
        ErrorCode::QuotaExceeded,
        ErrorCode::StorageFailed,
        ErrorCode::ModelLoadFailed,
        ErrorCode::ModelFailed,
        ErrorCode::WebgpuUnavailable,
        ErrorCode::Busy,
        ErrorCode::RemoteFailed,
        ErrorCode::Internal,
    ];

    #[test]
    fn every_code_is_one_the_npm_package_knows() {
        // The worker turns a code missing from `codes` into INTERNAL, so each must be there
        // (and in the TypeScript union).
        let errors_js = include_str!("../../../js/errors.js");
        let types = include_str!("../../../js/index.d.ts");
        for code in ALL {
            let s = code.as_str();
            assert!(errors_js.contains(&alloc::format!("{s}: '{s}'")), "{s} is not in js/errors.js");
            assert!(types.contains(&alloc::format!("'{s}'")), "{s} is not in js/index.d.ts");
        }
    }
}
