//! What can go wrong talking to a hosted model.

use std::fmt;

use docmem_core::{ErrorCode, HasErrorCode};

/// A hosted model could not be used. The message names the host's own words where it
/// gave some (its JSON error's `code` and `message`), never the text that was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteError {
    /// The host could not be reached (no connection, a TLS failure, a dropped stream).
    Transport {
        /// What the HTTP client said.
        message: String,
    },
    /// The host answered with an error status.
    Status {
        /// The HTTP status.
        status: u16,
        /// The error's stable `code` when the reply carried one (the edge worker's codes:
        /// `unauthorized`, `rate_limited`, `model_not_allowed`, …).
        code: Option<String>,
        /// The error's message, or the start of the reply.
        message: String,
    },
    /// The reply is not what the API promises (not JSON, a field missing or mistyped).
    BadReply {
        /// What was wrong with it.
        message: String,
    },
    /// The host cannot do what this role needs (scoring needs the prompt's token
    /// log-probabilities, which some servers do not return).
    Unsupported {
        /// What it cannot do, and what to use instead.
        message: String,
    },
    /// The caller asked to stop.
    Cancelled,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Transport { message } => write!(f, "the hosted model could not be reached: {message}"),
            RemoteError::Status { status, code: Some(code), message } => write!(f, "the hosted model refused ({status} {code}): {message}"),
            RemoteError::Status { status, code: None, message } => write!(f, "the hosted model refused ({status}): {message}"),
            RemoteError::BadReply { message } => write!(f, "the hosted model's reply is not valid: {message}"),
            RemoteError::Unsupported { message } => write!(f, "the hosted model cannot do this: {message}"),
            RemoteError::Cancelled => write!(f, "cancelled"),
        }
    }
}

impl std::error::Error for RemoteError {}

impl HasErrorCode for RemoteError {
    fn code(&self) -> ErrorCode {
        match self {
            RemoteError::Cancelled => ErrorCode::Aborted,
            _ => ErrorCode::RemoteFailed,
        }
    }
}

impl From<RemoteError> for docmem_core::reader::ModelError {
    fn from(e: RemoteError) -> Self {
        match e {
            RemoteError::Cancelled => docmem_core::reader::ModelError::Cancelled,
            e => docmem_core::reader::ModelError::Remote { message: e.to_string() },
        }
    }
}

impl From<RemoteError> for docmem_core::ScoreError {
    fn from(e: RemoteError) -> Self {
        docmem_core::ScoreError::Remote { message: e.to_string() }
    }
}

impl From<RemoteError> for docmem_core::embed::EmbedError {
    fn from(e: RemoteError) -> Self {
        docmem_core::embed::EmbedError::Remote { message: e.to_string() }
    }
}
