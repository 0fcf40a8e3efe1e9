//! The core's one error type.
//!
//! Every fallible function of the core returns [`Error`], so a caller's `?` needs one
//! conversion however deep the failure began (an index refusing a vector under a search
//! under a library), and a binding maps one type onto the stable [`ErrorCode`] vocabulary.
//! The variant is the error's kind: each says precisely what went wrong, in the words its
//! message gives a user, and they are grouped below by the part of the core that raises
//! them. Errors from below the core (a model's backend, a hosted API) arrive as the
//! message-carrying variants (`EmbedderFailed`, `ModelFailed`, `ScorerFailed`, `Remote`),
//! since the core cannot name the runtime's types.

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;

use crate::document::DocId;
use crate::error_code::{ErrorCode, HasErrorCode};
#[cfg(feature = "serde")]
use crate::library::{store::ARCHIVE_VERSION, LIBRARY_FORMAT_VERSION, MAX_COLLECTION_NAME_BYTES, REPLACED_MEMORY_FORMAT_VERSION};
use crate::memory::MEMORY_FORMAT_VERSION;

/// A result whose error is the core's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Why a call into the core failed. Nothing a library stores is changed by a call that
/// fails.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    // Arguments.
    /// A chunker name that is none of the chunkers.
    UnknownChunker {
        /// The name given.
        name: String,
    },
    /// A chunk size of zero.
    ZeroSize,
    /// A chunk overlap not smaller than the chunk size.
    OverlapTooLarge {
        /// The overlap asked for.
        overlap: usize,
        /// The size asked for.
        size: usize,
    },
    /// The semantic chunker was asked for with no embedder.
    NeedsEmbedder,
    /// A retrieval layer name that is not `outline`, `core` or `chunk`.
    UnknownLayer {
        /// The name given.
        name: String,
    },
    /// A layer weight that is not a finite number ≥ 0.
    BadLayerWeight {
        /// The layer it was given to.
        layer: String,
        /// The text given.
        weight: String,
    },
    /// No retrieval layer has a weight above 0.
    NoLayerWeighted,
    /// A collection name that is empty, too long, or holds control characters.
    BadCollectionName {
        /// The name given (cut to 80 characters).
        name: String,
    },
    /// A document window would hold fewer tokens than the smallest window
    /// ([`crate::reader::MIN_WINDOW_TOKENS`]): the reader's context is too small for its
    /// prompt, or `max_window_tokens` was set below it.
    WindowLimit {
        /// Tokens a window could hold.
        tokens: usize,
        /// The smallest window, in tokens.
        minimum: usize,
    },

    // Models, through the core's traits.
    /// The embedder's backend (model, device) failed; the message says how.
    EmbedderFailed {
        /// What the backend said.
        message: String,
    },
    /// The embedder returned a different number of vectors than texts given.
    EmbedderWrongCount {
        /// Texts given.
        expected: usize,
        /// Vectors returned.
        got: usize,
    },
    /// The embedder returned a vector of the wrong dimension.
    EmbedderWrongDimension {
        /// The embedder's dimension.
        expected: usize,
        /// The vector's length.
        got: usize,
    },
    /// The reader (or another text model) failed; the message says how.
    ModelFailed {
        /// What it said.
        message: String,
    },
    /// The scorer's backend failed; the message says how.
    ScorerFailed {
        /// What it said.
        message: String,
    },
    /// A continuation had no tokens, so no probability could be read.
    EmptyContinuation,
    /// The scorer returned a different number of results than requests.
    ScorerWrongCount {
        /// Requests made.
        expected: usize,
        /// Results returned.
        got: usize,
    },
    /// A hosted model (the edge worker, an OpenAI-compatible host), in any role, failed,
    /// could not be reached, or cannot return what its role needs; the message says how.
    Remote {
        /// What went wrong, in the host's words where it gave some.
        message: String,
    },
    /// The progress callback asked to stop.
    Cancelled,

    // Memories.
    /// A memory written by a format version this build does not read.
    MemoryVersion {
        /// The version found.
        found: u32,
    },
    /// The memory belongs to another document.
    WrongDocument,
    /// The scenario spans do not tile the text exactly on char boundaries.
    SpansDoNotTile,
    /// A chunk span is out of range, reversed, or off a char boundary.
    BadSpan {
        /// The scenario's index.
        scenario: usize,
    },
    /// A scenario names an outline item that does not exist.
    OutlineItemOutOfRange {
        /// The scenario's index.
        scenario: usize,
    },

    // Indexes.
    /// A vector or query of the wrong length.
    DimensionMismatch {
        /// The index's dimension.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A vector holding NaN or infinity.
    NonFinite {
        /// The item's id (or `u32::MAX` for a query).
        id: u32,
    },
    /// An id already in the index.
    DuplicateId {
        /// The id.
        id: u32,
    },
    /// The index holds more items than ids can number.
    IndexFull,
    /// A serialized index ends before its structure does.
    Truncated,
    /// Bytes that are not a docmem index.
    BadMagic,
    /// A docmem index of another kind (a BM25 file read as vectors).
    WrongIndexKind {
        /// The kind expected.
        expected: [u8; 4],
        /// The kind found.
        found: [u8; 4],
    },
    /// An index written by a newer format version.
    IndexVersion {
        /// The version found.
        found: u16,
    },
    /// An index whose checksum does not match: its bytes were corrupted.
    ChecksumMismatch,
    /// An index field holding a value that cannot be right.
    InvalidField {
        /// Which field.
        what: &'static str,
    },
    /// Bytes left over after an index's structure ended.
    TrailingBytes,

    // Libraries and their storage.
    /// The storage failed to read, write or list; the message names the key and the cause.
    Storage {
        /// The key (or "" for a listing).
        key: String,
        /// What the storage said.
        message: String,
    },
    /// The storage is full (a browser's quota, a full disk).
    StorageFull {
        /// The key being written.
        key: String,
    },
    /// This handle may only read (it shares the library with other readers).
    ReadOnly {
        /// The key it was asked to change.
        key: String,
    },
    /// A library written by a format version this build does not read.
    LibraryVersion {
        /// The version found.
        found: u32,
    },
    /// The library was built with another embedder, so its vectors do not compare.
    EmbedderMismatch {
        /// The library's embedder and dimension.
        library: String,
        /// The embedder given.
        given: String,
    },
    /// A library key is missing or does not decode.
    CorruptLibrary {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// No document with this id.
    NoSuchDocument {
        /// The id asked for.
        id: DocId,
    },
    /// No document is in a collection of this name.
    NoSuchCollection {
        /// The name asked for.
        name: String,
    },
    /// A replacement memory the caller gave does not fit its document; `why` is the
    /// memory's fault (one of the memory variants).
    BadMemory {
        /// What is wrong with it.
        why: Box<Error>,
    },
    /// Bytes that are not an exported docmem library.
    NotAnArchive,
    /// An exported library written by a newer archive version.
    ArchiveVersion {
        /// The version found.
        found: u32,
    },
    /// An exported library that ends inside an entry, or holds a key that is not valid.
    MalformedArchive {
        /// Which entry (from 0).
        entry: u32,
    },

    // Routing.
    /// The library has no collection to route to.
    NoCollections,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownChunker { name } => write!(f, "unknown chunker '{name}' (expected fixed, sentence, recursive or semantic)"),
            Error::ZeroSize => write!(f, "chunk size must be at least 1"),
            Error::OverlapTooLarge { overlap, size } => write!(f, "overlap ({overlap}) must be smaller than the chunk size ({size})"),
            Error::NeedsEmbedder => write!(f, "the semantic chunker needs an embedder"),
            Error::UnknownLayer { name } => write!(f, "'{name}' is not one of outline, core, chunk"),
            Error::BadLayerWeight { layer, weight } => write!(f, "the weight '{weight}' of {layer} is not a number ≥ 0"),
            Error::NoLayerWeighted => write!(f, "no layer has a weight above 0"),
            #[cfg(feature = "serde")]
            Error::BadCollectionName { name } => {
                write!(f, "'{name}' cannot name a collection: give 1 to {MAX_COLLECTION_NAME_BYTES} bytes with no control characters, other than 'auto'")
            }
            #[cfg(not(feature = "serde"))]
            Error::BadCollectionName { name } => write!(f, "'{name}' cannot name a collection"),
            Error::WindowLimit { tokens, minimum } => write!(
                f,
                "a document window would hold {tokens} tokens, under the smallest window ({minimum} tokens): use a reader with a longer context, or a larger max_window_tokens"
            ),
            Error::EmbedderFailed { message } => write!(f, "embedding failed: {message}"),
            Error::EmbedderWrongCount { expected, got } => write!(f, "embedder returned {got} vectors for {expected} texts"),
            Error::EmbedderWrongDimension { expected, got } => {
                write!(f, "embedder returned a vector of length {got}, expected {expected}")
            }
            Error::ModelFailed { message } => write!(f, "reader model failed: {message}"),
            Error::ScorerFailed { message } => write!(f, "scoring failed: {message}"),
            Error::EmptyContinuation => write!(f, "cannot score an empty continuation"),
            Error::ScorerWrongCount { expected, got } => write!(f, "scorer returned {got} results for {expected} requests"),
            Error::Remote { message } => write!(f, "{message}"),
            Error::Cancelled => write!(f, "cancelled"),
            Error::MemoryVersion { found } => {
                write!(f, "memory format version {found} is not supported (this build reads {MEMORY_FORMAT_VERSION})")
            }
            Error::WrongDocument => write!(f, "the memory belongs to a different document"),
            Error::SpansDoNotTile => write!(f, "the memory's chunk spans do not tile the document text"),
            Error::BadSpan { scenario } => write!(f, "scenario {scenario} has a span outside the document text"),
            Error::OutlineItemOutOfRange { scenario } => write!(f, "scenario {scenario} names an outline item that does not exist"),
            Error::DimensionMismatch { expected, got } => write!(f, "vector has {got} dimensions, the index has {expected}"),
            Error::NonFinite { id } if *id == u32::MAX => write!(f, "the query vector contains NaN or infinity"),
            Error::NonFinite { id } => write!(f, "vector {id} contains NaN or infinity"),
            Error::DuplicateId { id } => write!(f, "id {id} is already in the index"),
            Error::IndexFull => write!(f, "the index is full (2^32 items)"),
            Error::Truncated => write!(f, "cannot read index: the data is truncated"),
            Error::BadMagic => write!(f, "cannot read index: not a docmem index (bad magic bytes)"),
            Error::WrongIndexKind { expected, found } => write!(
                f,
                "cannot read index: expected a {} index, found {}",
                String::from_utf8_lossy(expected),
                String::from_utf8_lossy(found)
            ),
            Error::IndexVersion { found } => write!(f, "cannot read index: index format version {found} is newer than this build reads"),
            Error::ChecksumMismatch => write!(f, "cannot read index: checksum mismatch: the data is corrupted"),
            Error::InvalidField { what } => write!(f, "cannot read index: invalid {what}"),
            Error::TrailingBytes => write!(f, "cannot read index: unexpected bytes after the end of the index"),
            Error::Storage { key, message } if key.is_empty() => write!(f, "library storage: {message}"),
            Error::Storage { key, message } => write!(f, "library storage, '{key}': {message}"),
            Error::StorageFull { key } => write!(f, "library storage is full (writing '{key}')"),
            Error::ReadOnly { key } => write!(f, "library storage, '{key}': the library is open read-only here"),
            #[cfg(feature = "serde")]
            Error::LibraryVersion { found } => write!(
                f,
                "library format version {found} is not supported (this build reads {LIBRARY_FORMAT_VERSION} and {REPLACED_MEMORY_FORMAT_VERSION})"
            ),
            #[cfg(not(feature = "serde"))]
            Error::LibraryVersion { found } => write!(f, "library format version {found} is not supported"),
            Error::EmbedderMismatch { library, given } => write!(
                f,
                "the library was built with the embedder {library}, not {given}; search it with that embedder or start a new library"
            ),
            Error::CorruptLibrary { key, message } => write!(f, "library key '{key}' is damaged: {message}"),
            Error::NoSuchDocument { id } => write!(f, "no document {id} in the library"),
            Error::NoSuchCollection { name } => write!(f, "no document is in a collection named '{name}'"),
            Error::BadMemory { why } => write!(f, "the new memory does not fit its document: {why}"),
            Error::NotAnArchive => write!(f, "not an exported docmem library"),
            #[cfg(feature = "serde")]
            Error::ArchiveVersion { found } => {
                write!(f, "the library was exported by a newer docmem (archive version {found}, this one reads {ARCHIVE_VERSION})")
            }
            #[cfg(not(feature = "serde"))]
            Error::ArchiveVersion { found } => write!(f, "the library was exported by a newer docmem (archive version {found})"),
            Error::MalformedArchive { entry } => write!(f, "the exported library is damaged (entry {entry})"),
            Error::NoCollections => write!(f, "the library is empty: there is no collection to route to"),
        }
    }
}

/// A core error's message already says all there is; only [`Error::BadMemory`] has a
/// cause of its own.
impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::BadMemory { why } => Some(why.as_ref()),
            _ => None,
        }
    }
}

impl Error {
    /// The error's category in the bindings' stable vocabulary ([`ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::UnknownChunker { .. }
            | Error::ZeroSize
            | Error::OverlapTooLarge { .. }
            | Error::NeedsEmbedder
            | Error::UnknownLayer { .. }
            | Error::BadLayerWeight { .. }
            | Error::NoLayerWeighted
            | Error::BadCollectionName { .. }
            | Error::WindowLimit { .. }
            | Error::BadMemory { .. } => ErrorCode::BadArgument,
            Error::EmbedderFailed { .. }
            | Error::EmbedderWrongCount { .. }
            | Error::EmbedderWrongDimension { .. }
            | Error::ModelFailed { .. }
            | Error::ScorerFailed { .. }
            | Error::EmptyContinuation
            | Error::ScorerWrongCount { .. } => ErrorCode::ModelFailed,
            Error::Remote { .. } => ErrorCode::RemoteFailed,
            Error::Cancelled => ErrorCode::Aborted,
            // A memory that does not fit its document, an index that refused a vector or
            // is full, an index file that does not decode: faults of ours or of the model,
            // not of the caller's input.
            Error::MemoryVersion { .. }
            | Error::WrongDocument
            | Error::SpansDoNotTile
            | Error::BadSpan { .. }
            | Error::OutlineItemOutOfRange { .. }
            | Error::DimensionMismatch { .. }
            | Error::NonFinite { .. }
            | Error::DuplicateId { .. }
            | Error::IndexFull
            | Error::Truncated
            | Error::BadMagic
            | Error::WrongIndexKind { .. }
            | Error::IndexVersion { .. }
            | Error::ChecksumMismatch
            | Error::InvalidField { .. }
            | Error::TrailingBytes => ErrorCode::Internal,
            Error::Storage { .. } | Error::ReadOnly { .. } => ErrorCode::StorageFailed,
            Error::StorageFull { .. } => ErrorCode::QuotaExceeded,
            Error::LibraryVersion { .. }
            | Error::EmbedderMismatch { .. }
            | Error::CorruptLibrary { .. }
            | Error::NotAnArchive
            | Error::ArchiveVersion { .. }
            | Error::MalformedArchive { .. } => ErrorCode::BadLibrary,
            Error::NoSuchDocument { .. } | Error::NoSuchCollection { .. } | Error::NoCollections => ErrorCode::NotFound,
        }
    }
}

impl HasErrorCode for Error {
    fn code(&self) -> ErrorCode {
        Error::code(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_the_code_a_binding_branches_on() {
        assert_eq!(Error::StorageFull { key: String::from("manifest") }.code(), ErrorCode::QuotaExceeded);
        let missing = Error::NoSuchDocument { id: crate::Document::new("t", "x").id };
        assert_eq!(missing.code(), ErrorCode::NotFound);
        assert_eq!(Error::NotAnArchive.code(), ErrorCode::BadLibrary);
        assert_eq!(Error::Cancelled.code(), ErrorCode::Aborted);
        assert_eq!(Error::ZeroSize.code(), ErrorCode::BadArgument);
        assert_eq!(Error::Remote { message: String::from("429") }.code(), ErrorCode::RemoteFailed);
    }

    #[test]
    fn a_caller_s_bad_memory_is_a_bad_argument_and_names_its_fault() {
        // The same fault raised by our own aligner is ours (Internal); handed in by a caller
        // as a replacement memory it is theirs, and the chain reaches the fault itself.
        assert_eq!(Error::SpansDoNotTile.code(), ErrorCode::Internal);
        let bad = Error::BadMemory { why: Box::new(Error::SpansDoNotTile) };
        assert_eq!(bad.code(), ErrorCode::BadArgument);
        let source = core::error::Error::source(&bad).map(alloc::string::ToString::to_string);
        assert_eq!(source.as_deref(), Some("the memory's chunk spans do not tile the document text"));
        assert!(alloc::format!("{bad}").ends_with("do not tile the document text"));
    }
}
