//! The runtime's one error type.
//!
//! Every fallible function of the runtime returns [`Error`], whatever failed beneath it: a
//! model file, a tokenizer, a GPU, a hosted API, or the core (a library, a memory, an
//! index), which arrives whole as [`Error::Core`]. The variant is the error's kind; the
//! variants are grouped by the part of the runtime that raises them, and each message says
//! what went wrong in a user's words. [`HasErrorCode`] gives the bindings' stable category.
//! A cause from outside docmem (an I/O error) is chained by `source()`; a wrapped core
//! error's message is already this one's, so the chain goes on below it.

use std::fmt;

use docmem_core::{ErrorCode, HasErrorCode};

use crate::gguf::GgmlType;

/// A result whose error is the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call into the runtime failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The core failed: a library, index or memory, a chunker, or a model seen through the
    /// core's traits.
    Core(docmem_core::Error),
    /// The caller (or a callback it gave) asked to stop.
    Cancelled,
    /// A failure inside one of a model's files, which names the file (a model directory
    /// holds several).
    InFile {
        /// The file, as the model directory names it (`model.safetensors`).
        file: String,
        /// What went wrong in it.
        error: Box<Error>,
    },

    // Reading model files.
    /// A file could not be read.
    Io {
        /// What was being read.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A read past the end of a file or buffer.
    OutOfRange {
        /// Where the read began.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The source's length.
        source_len: u64,
    },
    /// Not a GGUF file.
    BadMagic,
    /// A GGUF version other than 2 and 3.
    GgufVersion {
        /// The version found.
        version: u32,
    },
    /// The file ends inside the GGUF header.
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A GGUF count or size too large to be real.
    Implausible {
        /// What it counts.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// A GGUF metadata value of an unknown type.
    UnknownValueType {
        /// The key.
        key: String,
        /// The type id found.
        type_id: u32,
    },
    /// A GGUF string that is not UTF-8.
    NotUtf8 {
        /// What it names.
        what: &'static str,
    },
    /// A GGUF metadata key given twice.
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// A tensor given twice.
    DuplicateTensor {
        /// Its name.
        name: String,
    },
    /// A tensor of a type docmem does not run.
    UnsupportedTensorType {
        /// Its name.
        tensor: String,
        /// Its GGML type id.
        type_id: u32,
    },
    /// A tensor whose shape is invalid.
    BadShape {
        /// Its name.
        tensor: String,
    },
    /// A tensor that is misaligned or runs past the end of the file.
    BadOffset {
        /// Its name.
        tensor: String,
    },
    /// A `general.alignment` that is not a power of two.
    BadAlignment {
        /// The value.
        alignment: u64,
    },
    /// Quantized bytes that are not a whole number of blocks.
    PartialBlock {
        /// The quantization.
        ggml_type: GgmlType,
        /// Bytes given.
        bytes: usize,
    },
    /// A safetensors header that does not fit its file.
    HeaderSize {
        /// The size the file declares.
        declared: u64,
        /// The file's size.
        file: u64,
    },
    /// A safetensors header that is not valid.
    SafetensorsHeader {
        /// What is wrong.
        reason: String,
    },
    /// A safetensors tensor of a dtype other than F32, F16 and BF16.
    UnsupportedDtype {
        /// The tensor.
        name: String,
        /// Its dtype.
        dtype: String,
    },
    /// A safetensors tensor whose entry is not valid.
    BadTensor {
        /// The tensor.
        name: String,
        /// What is wrong.
        reason: String,
    },

    // Models.
    /// A model architecture docmem does not run.
    UnsupportedArch {
        /// The architecture's name.
        arch: String,
    },
    /// A model parameter that is missing or invalid.
    BadParam {
        /// Its key.
        key: String,
    },
    /// A tensor the model needs is not in its file.
    MissingTensor {
        /// Its name.
        name: String,
    },
    /// A tensor of the wrong shape.
    TensorShape {
        /// Its name.
        name: String,
        /// The shape found.
        found: Vec<u64>,
        /// The shape needed.
        expected: Vec<u64>,
    },
    /// A Hugging Face `config.json` that is not valid; the reason says why.
    ModelConfig {
        /// What is wrong.
        reason: String,
    },
    /// The prompt and output would not fit the context window.
    ContextFull {
        /// Tokens needed.
        needed: usize,
        /// The window.
        limit: usize,
    },
    /// The prompt has no tokens.
    EmptyPrompt,
    /// A parity golden file lacks a field or has one of the wrong type.
    Golden {
        /// The field.
        what: String,
    },
    /// A synthetic model spec that is not `MODEL:QUANT`.
    BadSpec {
        /// The spec given.
        spec: String,
    },
    /// A synthetic model name that is not known.
    UnknownModel {
        /// The name given.
        name: String,
        /// The names known.
        known: Vec<&'static str>,
    },
    /// A quantization name that is not known.
    UnknownQuant {
        /// The name given.
        name: String,
        /// The names known.
        known: Vec<&'static str>,
    },

    // Tokenizers and chat templates.
    /// Tokenizer metadata that is missing or of the wrong type.
    TokenizerMetadata {
        /// Its key.
        key: &'static str,
    },
    /// A `tokenizer.ggml.model` other than gpt2 and llama.
    UnsupportedTokenizer {
        /// The model named.
        model: String,
    },
    /// A `tokenizer.ggml.pre` docmem does not know.
    UnsupportedPreTokenizer {
        /// The name given.
        pre: String,
    },
    /// A merge that is not two tokens separated by a space.
    BadMerge {
        /// The merge.
        line: String,
    },
    /// The tokenizer failed.
    TokenizerLibrary {
        /// What it said.
        message: String,
    },
    /// A token id outside the vocabulary.
    UnknownTokenId {
        /// The id.
        id: u32,
    },
    /// A `tokenizer.json` that cannot be read.
    TokenizerJson {
        /// What is wrong.
        message: String,
    },
    /// Tokenizer metadata with another count of entries than the vocabulary has tokens.
    TokenizerLengthMismatch {
        /// Its key.
        key: &'static str,
        /// Tokens in the vocabulary.
        tokens: usize,
        /// Entries found.
        found: usize,
    },
    /// A token id past the vocabulary limit.
    VocabularyTooLarge {
        /// The id.
        id: u64,
    },
    /// The chat template failed to render.
    Template {
        /// What it said.
        message: String,
    },
    /// The chat template took more steps than its limit.
    TemplateStepLimit {
        /// The limit.
        steps: u64,
    },
    /// The chat template would make more output than its limit.
    TemplateMemoryLimit {
        /// The limit.
        bytes: u64,
    },
    /// The chat template would read more than its limit.
    TemplateScanLimit {
        /// The limit.
        bytes: u64,
    },

    // Embedders.
    /// An embedding model's file is missing or unreadable.
    MissingFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// An embedding model's configuration file is not valid.
    BadConfig {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// An embedding model docmem does not run.
    UnsupportedEmbedder {
        /// What is unsupported.
        what: String,
    },
    /// An embedding model's tokenizer could not be built.
    EmbedderTokenizer {
        /// Why.
        reason: String,
    },
    /// An embedding model's tokenizer and weights are not one model's.
    VocabularyMismatch {
        /// Tokens the tokenizer has.
        tokenizer: usize,
        /// Rows the model embeds.
        model: usize,
    },
    /// The GPU encoder failed.
    EmbedderGpu {
        /// What it said.
        message: String,
    },

    // The GPU.
    /// A device preference that is not `auto`, `cpu` or `gpu`.
    BadDevice {
        /// What was given.
        given: String,
    },
    /// No GPU adapter could be had.
    NoAdapter {
        /// What the browser or driver said.
        message: String,
    },
    /// The adapter's limit is under what a model needs.
    MissingLimit {
        /// The limit's name.
        limit: &'static str,
        /// What is needed.
        needed: u64,
        /// What the adapter offers.
        offered: u64,
    },
    /// The adapter refused to give a device.
    RequestDevice {
        /// What it said.
        message: String,
    },
    /// The device failed (lost, out of memory, a validation error).
    GpuDevice {
        /// What it said.
        message: String,
    },
    /// A result could not be read back from the GPU.
    Readback {
        /// What it said.
        message: String,
    },
    /// A buffer of another size than a kernel needs.
    GpuShape {
        /// The buffer.
        what: &'static str,
        /// Elements needed.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// A kernel setting out of range.
    BadGpuSetting {
        /// The setting.
        what: &'static str,
        /// Its value.
        value: f32,
    },
    /// A device feature a kernel needs is not enabled.
    MissingFeature {
        /// The feature.
        feature: &'static str,
    },
    /// A kernel's result differs from the CPU reference beyond its tolerance.
    WrongResult {
        /// The check.
        check: String,
        /// The first element that differs.
        index: usize,
        /// The GPU's value.
        gpu: f32,
        /// The CPU's value.
        cpu: f32,
        /// The tolerance.
        tolerance: f32,
    },

    // Hosted models.
    /// The host could not be reached (network, CORS, DNS).
    RemoteTransport {
        /// What went wrong.
        message: String,
    },
    /// The host answered with an error status.
    RemoteStatus {
        /// The HTTP status.
        status: u16,
        /// The host's error code, where it gave one.
        code: Option<String>,
        /// The host's message.
        message: String,
    },
    /// The host's reply is not what the API promises.
    RemoteBadReply {
        /// What is wrong.
        message: String,
    },
    /// The host cannot do what the role needs (log-probabilities, say).
    RemoteUnsupported {
        /// What it cannot do.
        message: String,
    },

    // Documents and questions.
    /// A document with no text (nothing but white space).
    EmptyDocument {
        /// Its title.
        title: String,
    },
    /// A document longer than the ingest limit (`IngestLimits::max_document_bytes`).
    DocumentTooLarge {
        /// Its title.
        title: String,
        /// Bytes of text it has (UTF-8).
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The question is empty.
    EmptyQuestion,
    /// Clues need the library's global memory, and none was given.
    NoGlobalMemory,
    /// A call still running holds what this call needs (a library or an embedder held
    /// across the event loop): await it first.
    Busy {
        /// What is held: "the library", "the embedder".
        what: &'static str,
    },
    /// Not a PDF file.
    NotPdf,
    /// An encrypted PDF.
    EncryptedPdf,
    /// A PDF the extractor could not read.
    UnreadablePdf {
        /// Why.
        message: String,
    },
    /// A PDF with no text layer (scanned pages).
    NoText,
    /// A PDF whose streams inflate past the limit.
    PdfTooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Core(e) => write!(f, "{e}"),
            Error::Cancelled => write!(f, "cancelled"),
            Error::InFile { file, error } => write!(f, "{file}: {error}"),
            Error::Io { what, source } => write!(f, "cannot read {what}: {source}"),
            Error::OutOfRange { offset, len, source_len } => {
                write!(f, "read of {len} bytes at offset {offset} runs past the end ({source_len} bytes)")
            }
            Error::BadMagic => write!(f, "not a GGUF file (it does not start with 'GGUF')"),
            Error::GgufVersion { version } => write!(f, "GGUF version {version} is not supported (2 and 3 are)"),
            Error::Truncated { what } => write!(f, "the file ends inside the header ({what})"),
            Error::Implausible { what, value } => write!(f, "implausible {what}: {value}"),
            Error::UnknownValueType { key, type_id } => write!(f, "metadata '{key}' has unknown value type {type_id}"),
            Error::NotUtf8 { what } => write!(f, "{what} is not UTF-8"),
            Error::DuplicateKey { key } => write!(f, "metadata key '{key}' appears twice"),
            Error::DuplicateTensor { name } => write!(f, "tensor '{name}' appears twice"),
            Error::UnsupportedTensorType { tensor, type_id } => write!(
                f,
                "tensor '{tensor}' has type {} (id {type_id}); docmem runs F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K",
                crate::gguf::unsupported_type_name(*type_id)
            ),
            Error::BadShape { tensor } => write!(f, "tensor '{tensor}' has an invalid shape"),
            Error::BadOffset { tensor } => write!(f, "tensor '{tensor}' is misaligned or runs past the end of the file"),
            Error::BadAlignment { alignment } => write!(f, "general.alignment {alignment} is not a power of two"),
            Error::PartialBlock { ggml_type, bytes } => {
                write!(f, "{bytes} bytes is not a whole number of {ggml_type} blocks ({} bytes each)", ggml_type.block_bytes())
            }
            Error::HeaderSize { declared, file } => write!(
                f,
                "safetensors header of {declared} bytes does not fit a {file}-byte file (or exceeds {} bytes)",
                crate::safetensors::MAX_HEADER
            ),
            Error::SafetensorsHeader { reason } => write!(f, "bad safetensors header: {reason}"),
            Error::UnsupportedDtype { name, dtype } => write!(f, "tensor '{name}' has dtype {dtype}; only F32, F16 and BF16 are supported"),
            Error::BadTensor { name, reason } => write!(f, "tensor '{name}': {reason}"),
            Error::UnsupportedArch { arch } => write!(f, "architecture '{arch}' is not supported (llama, including Llama 3, qwen2 and qwen3 are)"),
            Error::BadParam { key } => write!(f, "model parameter '{key}' is missing or invalid"),
            Error::MissingTensor { name } => write!(f, "tensor '{name}' is missing"),
            Error::TensorShape { name, found, expected } => write!(f, "tensor '{name}' has shape {found:?}, expected {expected:?}"),
            Error::ModelConfig { reason } => write!(f, "{reason}"),
            Error::ContextFull { needed, limit } => write!(f, "{needed} tokens do not fit the context window of {limit}"),
            Error::EmptyPrompt => write!(f, "the prompt is empty"),
            Error::Golden { what } => write!(f, "golden file: '{what}' is missing or malformed"),
            Error::BadSpec { spec } => write!(f, "synthetic model '{spec}': expected MODEL:QUANT, such as qwen2-1.5b:q4_k_m"),
            Error::UnknownModel { name, known } => write!(f, "synthetic model '{name}' is not known (known: {})", known.join(", ")),
            Error::UnknownQuant { name, known } => write!(f, "quantization '{name}' is not known (known: {})", known.join(", ")),
            Error::TokenizerMetadata { key } => write!(f, "tokenizer metadata '{key}' is missing or has the wrong type"),
            Error::UnsupportedTokenizer { model } => write!(f, "tokenizer.ggml.model '{model}' is not supported (gpt2 and llama are)"),
            Error::UnsupportedPreTokenizer { pre } => write!(
                f,
                "tokenizer.ggml.pre '{pre}' is not supported (known: {})",
                crate::tokenizer::PreTokenizerKind::NAMES.join(", ")
            ),
            Error::BadMerge { line } => write!(f, "merge {line:?} is not two tokens separated by a space"),
            Error::TokenizerLibrary { message } => write!(f, "tokenizer: {message}"),
            Error::UnknownTokenId { id } => write!(f, "token id {id} is outside the vocabulary"),
            Error::TokenizerJson { message } => write!(f, "tokenizer.json: {message}"),
            Error::TokenizerLengthMismatch { key, tokens, found } => {
                write!(f, "tokenizer metadata '{key}' has {found} entries for {tokens} tokens")
            }
            Error::VocabularyTooLarge { id } => {
                write!(f, "token id {id} is past the vocabulary limit of {} ids", crate::tokenizer::MAX_VOCABULARY)
            }
            Error::Template { message } => write!(f, "chat template: {message}"),
            Error::TemplateStepLimit { steps } => {
                write!(f, "chat template: rendering took more than {steps} steps (the template step limit), so it was stopped")
            }
            Error::TemplateMemoryLimit { bytes } => {
                write!(f, "chat template: rendering would make more than {bytes} bytes (the template memory limit), so it was stopped")
            }
            Error::TemplateScanLimit { bytes } => {
                write!(f, "chat template: rendering would read more than {bytes} bytes (the template scan limit), so it was stopped")
            }
            Error::MissingFile { path, reason } => write!(f, "cannot read {path}: {reason}"),
            Error::BadConfig { file, reason } => write!(f, "{file}: {reason}"),
            Error::UnsupportedEmbedder { what } => write!(f, "unsupported embedding model: {what}"),
            Error::EmbedderTokenizer { reason } => write!(f, "tokenizer: {reason}"),
            Error::VocabularyMismatch { tokenizer, model } => {
                write!(f, "tokenizer.json has {tokenizer} tokens but the model embeds {model}: they are not one model's files")
            }
            Error::EmbedderGpu { message } => write!(f, "the GPU encoder: {message}"),
            Error::BadDevice { given } => write!(f, "'{given}' is not a device: auto, cpu or gpu"),
            Error::NoAdapter { message } => write!(f, "no GPU adapter: {message}"),
            Error::MissingLimit { limit, needed, offered } => write!(f, "the GPU adapter's {limit} is {offered}, and {needed} is needed"),
            Error::RequestDevice { message } => write!(f, "the GPU adapter refused the device: {message}"),
            Error::GpuDevice { message } => write!(f, "GPU device error: {message}"),
            Error::Readback { message } => write!(f, "could not read a result back from the GPU: {message}"),
            Error::GpuShape { what, expected, got } => write!(f, "{what} has {got} elements where {expected} are needed"),
            Error::BadGpuSetting { what, value } => write!(f, "the GPU kernel's {what} cannot be {value}"),
            Error::MissingFeature { feature } => write!(f, "the GPU device has no {feature} enabled"),
            Error::WrongResult { check, index, gpu, cpu, tolerance } => {
                write!(f, "{check}: element {index}: GPU {gpu} vs CPU {cpu} (tolerance {tolerance})")
            }
            Error::RemoteTransport { message } => write!(f, "the hosted model could not be reached: {message}"),
            Error::RemoteStatus { status, code: Some(code), message } => write!(f, "the hosted model refused ({status} {code}): {message}"),
            Error::RemoteStatus { status, code: None, message } => write!(f, "the hosted model refused ({status}): {message}"),
            Error::RemoteBadReply { message } => write!(f, "the hosted model's reply is not valid: {message}"),
            Error::RemoteUnsupported { message } => write!(f, "the hosted model cannot do this: {message}"),
            Error::EmptyDocument { title } => write!(f, "'{title}' has no text"),
            Error::DocumentTooLarge { title, bytes, limit } => {
                write!(f, "'{title}' has {bytes} bytes of text, over the document size limit (max_document_bytes) of {limit}")
            }
            Error::EmptyQuestion => write!(f, "the question is empty"),
            Error::NoGlobalMemory => write!(f, "clues need the library's global memory, and none was given"),
            Error::Busy { what } => write!(f, "{what} is in use by a call still running: await it first"),
            Error::NotPdf => write!(f, "not a PDF file (no %PDF- header)"),
            Error::EncryptedPdf => write!(f, "the PDF is encrypted"),
            Error::UnreadablePdf { message } => write!(f, "the PDF could not be read: {message}"),
            Error::NoText => write!(f, "the PDF holds no text (scanned pages are images; docmem does no OCR)"),
            Error::PdfTooLarge { limit } => {
                write!(f, "the PDF's compressed streams inflate to more than {} MiB, docmem's limit for a PDF", limit >> 20)
            }
        }
    }
}

/// An I/O failure chains its operating-system error; a wrapped core error's message is
/// already this one's, so the chain goes on below it.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Core(e) => std::error::Error::source(e),
            Error::InFile { error, .. } => std::error::Error::source(error.as_ref()),
            _ => None,
        }
    }
}

impl Error {
    /// The error's category in the bindings' stable vocabulary ([`ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Core(e) => e.code(),
            Error::Cancelled => ErrorCode::Aborted,
            Error::InFile { error, .. } => error.code(),
            // A model's files, refused while loading.
            Error::Io { .. }
            | Error::OutOfRange { .. }
            | Error::BadMagic
            | Error::GgufVersion { .. }
            | Error::Truncated { .. }
            | Error::Implausible { .. }
            | Error::UnknownValueType { .. }
            | Error::NotUtf8 { .. }
            | Error::DuplicateKey { .. }
            | Error::DuplicateTensor { .. }
            | Error::UnsupportedTensorType { .. }
            | Error::BadShape { .. }
            | Error::BadOffset { .. }
            | Error::BadAlignment { .. }
            | Error::PartialBlock { .. }
            | Error::HeaderSize { .. }
            | Error::SafetensorsHeader { .. }
            | Error::UnsupportedDtype { .. }
            | Error::BadTensor { .. }
            | Error::UnsupportedArch { .. }
            | Error::BadParam { .. }
            | Error::MissingTensor { .. }
            | Error::TensorShape { .. }
            | Error::ModelConfig { .. }
            | Error::Golden { .. }
            | Error::TokenizerMetadata { .. }
            | Error::UnsupportedTokenizer { .. }
            | Error::UnsupportedPreTokenizer { .. }
            | Error::BadMerge { .. }
            | Error::TokenizerLibrary { .. }
            | Error::UnknownTokenId { .. }
            | Error::TokenizerJson { .. }
            | Error::TokenizerLengthMismatch { .. }
            | Error::VocabularyTooLarge { .. }
            | Error::MissingFile { .. }
            | Error::BadConfig { .. }
            | Error::UnsupportedEmbedder { .. }
            | Error::EmbedderTokenizer { .. }
            | Error::VocabularyMismatch { .. } => ErrorCode::ModelLoadFailed,
            // A loaded model failing as it runs (the template renders per prompt).
            Error::ContextFull { .. }
            | Error::Template { .. }
            | Error::TemplateStepLimit { .. }
            | Error::TemplateMemoryLimit { .. }
            | Error::TemplateScanLimit { .. }
            | Error::EmbedderGpu { .. }
            | Error::GpuDevice { .. }
            | Error::Readback { .. } => ErrorCode::ModelFailed,
            // No GPU fit to run on: the CPU backend can run instead.
            Error::NoAdapter { .. }
            | Error::MissingLimit { .. }
            | Error::MissingFeature { .. }
            | Error::RequestDevice { .. }
            | Error::WrongResult { .. } => ErrorCode::WebgpuUnavailable,
            Error::GpuShape { .. } | Error::BadGpuSetting { .. } => ErrorCode::Internal,
            Error::RemoteTransport { .. } | Error::RemoteStatus { .. } | Error::RemoteBadReply { .. } | Error::RemoteUnsupported { .. } => {
                ErrorCode::RemoteFailed
            }
            Error::EmptyPrompt
            | Error::BadSpec { .. }
            | Error::UnknownModel { .. }
            | Error::UnknownQuant { .. }
            | Error::NoGlobalMemory
            | Error::BadDevice { .. } => ErrorCode::BadArgument,
            Error::Busy { .. } => ErrorCode::Busy,
            Error::EmptyDocument { .. }
            | Error::DocumentTooLarge { .. }
            | Error::NotPdf
            | Error::EncryptedPdf
            | Error::UnreadablePdf { .. }
            | Error::NoText
            | Error::PdfTooLarge { .. } => ErrorCode::BadDocument,
            Error::EmptyQuestion => ErrorCode::BadQuestion,
        }
    }
}

impl HasErrorCode for Error {
    fn code(&self) -> ErrorCode {
        Error::code(self)
    }
}

impl Error {
    /// This error, as raised inside `file`.
    pub(crate) fn in_file(self, file: &str) -> Error {
        Error::InFile { file: file.to_owned(), error: Box::new(self) }
    }
}

impl From<docmem_core::Error> for Error {
    /// A core error comes up whole, except a model's cancellation, which is the runtime's
    /// own [`Error::Cancelled`] however deep it was raised.
    fn from(e: docmem_core::Error) -> Self {
        match e {
            docmem_core::Error::Cancelled => Error::Cancelled,
            e => Error::Core(e),
        }
    }
}

/// How the core sees a runtime failure beneath one of its model traits (a reader, a
/// scorer, an embedder): a cancellation stays one, a core error goes back as it was, a
/// hosted model's failure is [`docmem_core::Error::Remote`], and anything else is the
/// model's failure, with this error's message.
impl From<Error> for docmem_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(e) => e,
            Error::Cancelled => docmem_core::Error::Cancelled,
            e if e.code() == ErrorCode::RemoteFailed => docmem_core::Error::Remote { message: e.to_string() },
            e => docmem_core::Error::ModelFailed { message: e.to_string() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_failure_chains_its_cause_and_a_core_error_keeps_its_code() {
        let io = Error::Io { what: String::from("model.gguf"), source: std::io::Error::from(std::io::ErrorKind::NotFound) };
        assert_eq!(io.code(), ErrorCode::ModelLoadFailed);
        assert!(std::error::Error::source(&io).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some()));
        let full: Error = docmem_core::Error::StorageFull { key: String::from("manifest") }.into();
        assert_eq!(full.code(), ErrorCode::QuotaExceeded);
        assert_eq!(full.to_string(), "library storage is full (writing 'manifest')");
    }

    #[test]
    fn a_cancellation_is_one_on_both_sides_of_the_core_s_traits() {
        let up: Error = docmem_core::Error::Cancelled.into();
        assert!(matches!(up, Error::Cancelled));
        assert_eq!(docmem_core::Error::from(Error::Cancelled), docmem_core::Error::Cancelled);
        let refused = Error::RemoteStatus { status: 429, code: None, message: String::from("slow down") };
        assert_eq!(docmem_core::Error::from(refused).code(), ErrorCode::RemoteFailed);
        let full = Error::ContextFull { needed: 9000, limit: 8192 };
        assert_eq!(
            docmem_core::Error::from(full),
            docmem_core::Error::ModelFailed { message: String::from("9000 tokens do not fit the context window of 8192") }
        );
    }
}
