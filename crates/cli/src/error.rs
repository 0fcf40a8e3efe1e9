//! The CLI's error type.

use std::fmt;
use std::path::PathBuf;

/// What went wrong in a `docmem` command.
#[derive(Debug)]
#[non_exhaustive]
pub enum CliError {
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not UTF-8 text.
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// A PDF whose text could not be extracted.
    Pdf {
        /// The file.
        path: PathBuf,
        /// Why.
        source: docmem_runtime::Error,
    },
    /// A file with no text (empty, white space only, or a PDF without a text layer).
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// A file type docmem does not read.
    UnsupportedFile {
        /// The file.
        path: PathBuf,
    },
    /// A file larger than docmem reads for its type (checked before it is read).
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        bytes: u64,
        /// The limit for its type.
        limit: u64,
    },
    /// An argument has a value that cannot work.
    BadArgument {
        /// Which argument and why.
        message: String,
    },
    /// Writing output failed.
    Output(std::io::Error),
    /// The runtime failed (a model, a library, a hosted model); its message says what.
    Runtime(docmem_runtime::Error),
    /// A check ran and found differences (such as parity with llama.cpp).
    CheckFailed {
        /// What differs.
        message: String,
    },
}

impl CliError {
    /// 2 for bad input, 1 for failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Read { .. }
            | CliError::NotUtf8 { .. }
            | CliError::Pdf { .. }
            | CliError::UnsupportedFile { .. }
            | CliError::FileTooLarge { .. }
            | CliError::EmptyFile { .. }
            | CliError::BadArgument { .. } => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Read { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            CliError::NotUtf8 { path } => write!(f, "{} is not UTF-8 text", path.display()),
            CliError::EmptyFile { path } => write!(f, "{}: no text in the file", path.display()),
            CliError::FileTooLarge { path, bytes, limit } => write!(
                f,
                "{}: {:.1} MiB, over docmem's limit of {} MiB for this kind of file (split it into smaller files)",
                path.display(),
                *bytes as f64 / 1048576.0,
                limit >> 20
            ),
            CliError::UnsupportedFile { path } => {
                write!(f, "{}: unsupported file type (docmem reads .txt, .md, .html and .pdf)", path.display())
            }
            CliError::Pdf { path, source } => write!(f, "{}: {source}", path.display()),
            CliError::BadArgument { message } => write!(f, "{message}"),
            CliError::Output(e) => write!(f, "cannot write output: {e}"),
            CliError::Runtime(e) => write!(f, "{e}"),
            CliError::CheckFailed { message } => write!(f, "{message}"),
        }
    }
}

/// The chain goes on below the wrapped error: this one's message already includes it.
impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Output(e) => e.source(),
            CliError::Runtime(e) => e.source(),
            CliError::Read { source, .. } => source.source(),
            CliError::Pdf { source, .. } => source.source(),
            _ => None,
        }
    }
}

impl CliError {
    /// An embedding model that could not load: its files are the user's input.
    pub fn embedding_model(e: docmem_runtime::Error) -> Self {
        match docmem_core::HasErrorCode::code(&e) {
            docmem_core::ErrorCode::ModelLoadFailed => CliError::BadArgument { message: format!("embedding model: {e}") },
            _ => e.into(),
        }
    }
}

impl From<docmem_runtime::Error> for CliError {
    /// What the user can fix with an argument becomes [`CliError::BadArgument`] naming the
    /// argument (exit code 2); the rest is the runtime's failure.
    fn from(e: docmem_runtime::Error) -> Self {
        use docmem_core::Error as Core;
        use docmem_runtime::Error as Runtime;
        let bad = |argument: &str, e: &Runtime| CliError::BadArgument { message: format!("{argument}: {e}") };
        match &e {
            Runtime::Core(Core::ZeroSize | Core::OverlapTooLarge { .. }) => bad("--size/--overlap", &e),
            // A library built with another embedder, or by a newer docmem.
            Runtime::Core(Core::EmbedderMismatch { .. } | Core::LibraryVersion { .. }) => bad("--library", &e),
            Runtime::MissingFile { .. }
            | Runtime::BadConfig { .. }
            | Runtime::UnsupportedEmbedder { .. }
            | Runtime::VocabularyMismatch { .. } => bad("embedding model", &e),
            Runtime::Golden { .. } => bad("--golden", &e),
            Runtime::EmptyQuestion
            | Runtime::EmptyDocument { .. }
            | Runtime::DocumentTooLarge { .. }
            | Runtime::NoGlobalMemory
            | Runtime::Cancelled => CliError::BadArgument { message: e.to_string() },
            // A missing or malformed model file, or a prompt that does not fit it.
            Runtime::ContextFull { .. } | Runtime::EmptyPrompt => bad("--model", &e),
            _ if docmem_core::HasErrorCode::code(&e) == docmem_core::ErrorCode::ModelLoadFailed => bad("--model", &e),
            _ => CliError::Runtime(e),
        }
    }
}

impl From<docmem_core::Error> for CliError {
    fn from(e: docmem_core::Error) -> Self {
        docmem_runtime::Error::from(e).into()
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}
