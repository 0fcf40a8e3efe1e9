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
        source: docmem_runtime::pipeline::pdf::PdfError,
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
    /// Indexing or search failed.
    Retrieve(docmem_core::retrieve::RetrieveError),
    /// A chunker could not run.
    Chunk(docmem_core::chunk::ChunkError),
    /// Writing output failed.
    Output(std::io::Error),
    /// A language model could not load or run.
    Lm(docmem_runtime::lm::LmError),
    /// The sentence embedder could not load or run.
    Embed(docmem_runtime::embed::EmbedderError),
    /// A library could not be opened, read or changed.
    Library(docmem_core::library::LibraryError),
    /// The reader model failed while reading a document.
    Reader(docmem_core::reader::ModelError),
    /// A check ran and found differences (such as parity with llama.cpp).
    CheckFailed {
        /// What differs.
        message: String,
    },
    /// A hosted model (`remote:NAME` through --remote) failed or could not be reached.
    Remote(docmem_runtime::remote::RemoteError),
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
            CliError::Retrieve(e) => write!(f, "{e}"),
            CliError::Chunk(e) => write!(f, "{e}"),
            CliError::Output(e) => write!(f, "cannot write output: {e}"),
            CliError::Lm(e) => write!(f, "{e}"),
            CliError::Embed(e) => write!(f, "{e}"),
            CliError::Library(e) => write!(f, "{e}"),
            CliError::Reader(e) => write!(f, "{e}"),
            CliError::CheckFailed { message } => write!(f, "{message}"),
            CliError::Remote(e) => write!(f, "{e}"),
        }
    }
}

/// The chain goes on below the wrapped error: this one's message already includes it.
impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Retrieve(e) => e.source(),
            CliError::Chunk(e) => e.source(),
            CliError::Output(e) => e.source(),
            CliError::Lm(e) => e.source(),
            CliError::Embed(e) => e.source(),
            CliError::Library(e) => e.source(),
            CliError::Reader(e) => e.source(),
            CliError::Remote(e) => e.source(),
            CliError::Read { source, .. } => source.source(),
            CliError::Pdf { source, .. } => source.source(),
            _ => None,
        }
    }
}

impl From<docmem_core::retrieve::RetrieveError> for CliError {
    fn from(e: docmem_core::retrieve::RetrieveError) -> Self {
        CliError::Retrieve(e)
    }
}

impl From<docmem_core::chunk::ChunkError> for CliError {
    fn from(e: docmem_core::chunk::ChunkError) -> Self {
        match e {
            docmem_core::chunk::ChunkError::ZeroSize | docmem_core::chunk::ChunkError::OverlapTooLarge { .. } => {
                CliError::BadArgument { message: format!("--size/--overlap: {e}") }
            }
            e => CliError::Chunk(e),
        }
    }
}

impl From<docmem_runtime::lm::LmError> for CliError {
    fn from(e: docmem_runtime::lm::LmError) -> Self {
        use docmem_runtime::lm::LmError;
        match e {
            // A missing or malformed model file is the user's input.
            LmError::Source(_) | LmError::Gguf(_) | LmError::Model(_) | LmError::ContextFull { .. } | LmError::EmptyPrompt => {
                CliError::BadArgument { message: format!("--model: {e}") }
            }
            LmError::Golden { .. } => CliError::BadArgument { message: format!("--golden: {e}") },
            e => CliError::Lm(e),
        }
    }
}

impl From<docmem_runtime::embed::EmbedderError> for CliError {
    fn from(e: docmem_runtime::embed::EmbedderError) -> Self {
        use docmem_runtime::embed::EmbedderError;
        match e {
            // A missing or malformed model directory is the user's input.
            EmbedderError::MissingFile { .. }
            | EmbedderError::BadConfig { .. }
            | EmbedderError::Unsupported { .. }
            | EmbedderError::Weights(_)
            | EmbedderError::VocabularyMismatch { .. } => CliError::BadArgument { message: format!("embedding model: {e}") },
            e => CliError::Embed(e),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}

impl From<docmem_core::library::LibraryError> for CliError {
    fn from(e: docmem_core::library::LibraryError) -> Self {
        use docmem_core::library::LibraryError;
        match e {
            // Pointing at a library built with another embedder is the user's input.
            LibraryError::EmbedderMismatch { .. } | LibraryError::UnsupportedVersion { .. } => {
                CliError::BadArgument { message: format!("--library: {e}") }
            }
            e => CliError::Library(e),
        }
    }
}

impl From<docmem_core::library::StoreError> for CliError {
    fn from(e: docmem_core::library::StoreError) -> Self {
        CliError::Library(e.into())
    }
}

impl From<docmem_core::reader::ModelError> for CliError {
    fn from(e: docmem_core::reader::ModelError) -> Self {
        CliError::Reader(e)
    }
}

impl From<docmem_runtime::pipeline::qa::QaError> for CliError {
    fn from(e: docmem_runtime::pipeline::qa::QaError) -> Self {
        use docmem_runtime::pipeline::qa::QaError;
        match e {
            QaError::Library(e) => e.into(),
            QaError::Lm(e) => e.into(),
            QaError::EmptyQuestion => CliError::BadArgument { message: "the question is empty".into() },
            e => CliError::BadArgument { message: e.to_string() },
        }
    }
}

impl From<docmem_runtime::pipeline::ingest::IngestError> for CliError {
    fn from(e: docmem_runtime::pipeline::ingest::IngestError) -> Self {
        use docmem_runtime::pipeline::ingest::IngestError;
        match e {
            IngestError::Reader(e) => e.into(),
            IngestError::Chunk(e) => e.into(),
            IngestError::Library(e) => e.into(),
            e => CliError::BadArgument { message: e.to_string() },
        }
    }
}
