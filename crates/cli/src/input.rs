//! Reading documents from files.

use std::path::Path;

use docmem_core::Document;

use crate::CliError;

/// The file extensions [`read_document`] reads.
pub const READABLE: [&str; 6] = ["txt", "md", "markdown", "html", "htm", "pdf"];

/// Whether `path` has an extension [`read_document`] reads.
pub fn is_readable(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    ext.is_some_and(|e| READABLE.contains(&e.as_str()))
}

/// The largest file read, by type, checked on its size before a byte is read: plain text
/// cannot hold more text than its bytes, so the engine's limit on a document's text
/// (16 MiB) is the limit; HTML and PDF carry markup, fonts and images around their text,
/// and get four times that (a PDF's compressed streams are bounded again as they are
/// measured, in docmem_runtime::pipeline::pdf).
pub fn max_file_bytes(ext: Option<&str>) -> u64 {
    let text = docmem_runtime::pipeline::ingest::DEFAULT_MAX_DOCUMENT_BYTES as u64;
    match ext {
        Some("pdf" | "html" | "htm") => 4 * text,
        _ => text,
    }
}

/// Read a `.txt`, `.md`, `.html` or `.pdf` file (the text of the last two extracted) as a
/// document titled by its file name.
pub fn read_document(path: &Path) -> Result<Document, CliError> {
    if !is_readable(path) {
        return Err(CliError::UnsupportedFile { path: path.to_path_buf() });
    }
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let read_err = |source| CliError::Read { path: path.to_path_buf(), source };
    let size = std::fs::metadata(path).map_err(read_err)?.len();
    let limit = max_file_bytes(ext.as_deref());
    if size > limit {
        return Err(CliError::FileTooLarge { path: path.to_path_buf(), bytes: size, limit });
    }
    let bytes = std::fs::read(path).map_err(read_err)?;
    let text = match ext.as_deref() {
        Some("pdf") => {
            docmem_runtime::pipeline::pdf::pdf_text(&bytes).map_err(|source| CliError::Pdf { path: path.to_path_buf(), source })?
        }
        Some("html" | "htm") => {
            docmem_core::html::html_to_text(&String::from_utf8(bytes).map_err(|_| CliError::NotUtf8 { path: path.to_path_buf() })?)
        }
        _ => String::from_utf8(bytes).map_err(|_| CliError::NotUtf8 { path: path.to_path_buf() })?,
    };
    // Refused here, before any model work, rather than by ingest midway through a batch.
    if text.trim().is_empty() {
        return Err(CliError::EmptyFile { path: path.to_path_buf() });
    }
    let title = file_label(path);
    Ok(Document::new(title, text))
}

/// A file's name (the whole path when it has none): document titles and model names.
pub fn file_label(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// `n` and a noun, plural unless `n` is 1: "1 chunk", "5 chunks".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
