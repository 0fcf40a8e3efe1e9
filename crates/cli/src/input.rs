//! Reading documents from files.

use std::path::Path;

use docmem_core::Document;

use crate::CliError;

/// Read a `.txt`, `.md` or `.html` file (its text extracted) as a document titled by its
/// file name.
pub fn read_document(path: &Path) -> Result<Document, CliError> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let html = matches!(ext.as_deref(), Some("html" | "htm"));
    if !html && !matches!(ext.as_deref(), Some("txt" | "md" | "markdown")) {
        return Err(CliError::UnsupportedFile { path: path.to_path_buf() });
    }
    let bytes = std::fs::read(path).map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    let text = String::from_utf8(bytes).map_err(|_| CliError::NotUtf8 { path: path.to_path_buf() })?;
    let text = if html { docmem_core::html::html_to_text(&text) } else { text };
    let title = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(Document::new(title, text))
}
