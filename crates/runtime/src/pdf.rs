//! Text from PDF files, for ingest (`pdf` feature).
//!
//! Why pdf-extract: it is the maintained pure-Rust text extractor (over lopdf), it decodes
//! the fonts' encodings and ToUnicode maps that real PDFs need, and it builds cold in
//! about 80 s of CPU here. It can panic on malformed files, and documents are user input,
//! so every call runs under `catch_unwind` and a panic becomes [`PdfError::Unreadable`].

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use docmem_core::document::PAGE_BREAK;

/// A PDF whose text could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PdfError {
    /// The bytes are not a PDF (no `%PDF-` header).
    NotPdf,
    /// The file is encrypted; docmem does not read protected PDFs.
    Encrypted,
    /// The PDF is malformed or uses something the extractor cannot read; the message says
    /// what it reported.
    Unreadable(String),
    /// The PDF holds no text (a scan: its pages are images).
    NoText,
}

impl fmt::Display for PdfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PdfError::NotPdf => write!(f, "not a PDF file (no %PDF- header)"),
            PdfError::Encrypted => write!(f, "the PDF is encrypted"),
            PdfError::Unreadable(why) => write!(f, "the PDF could not be read: {why}"),
            PdfError::NoText => write!(f, "the PDF holds no text (scanned pages are images; docmem does no OCR)"),
        }
    }
}

impl std::error::Error for PdfError {}

/// One page's text: lines trimmed at the end, runs of blank lines made one.
fn tidy_page(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    let mut blank = 0;
    for line in page.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

/// The text of every page, in order, pages separated by a form feed on its own line
/// (`"\n\u{c}\n"`), so a citation can name its page.
pub fn pdf_text(bytes: &[u8]) -> Result<String, PdfError> {
    if !bytes.starts_with(b"%PDF-") {
        return Err(PdfError::NotPdf);
    }
    // The extractor prints nothing we need; a panic inside it is caught and reported.
    let result = catch_unwind(AssertUnwindSafe(|| pdf_extract::extract_text_from_mem_by_pages(bytes)));
    let pages = match result {
        Ok(Ok(pages)) => pages,
        Ok(Err(e)) => {
            let why = e.to_string();
            return Err(if why.to_ascii_lowercase().contains("encrypt") { PdfError::Encrypted } else { PdfError::Unreadable(why) });
        }
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the extractor failed".to_owned());
            return Err(PdfError::Unreadable(why));
        }
    };
    // Pages are joined by a form feed on its own line: the document's pages are counted
    // by them (`docmem_core::document::PAGE_BREAK`). Within a page, runs of blank lines
    // collapse to one. A blank page keeps its break, so later page numbers stay right.
    let pages: Vec<String> = pages.iter().map(|p| tidy_page(&p.replace(PAGE_BREAK, "\n"))).collect();
    let last = pages.iter().rposition(|p| !p.is_empty()).map_or(0, |i| i + 1);
    let out = pages[..last].join(&format!("\n{PAGE_BREAK}\n"));
    if out.trim().is_empty() {
        return Err(PdfError::NoText);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/two-pages.pdf");
        std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn reads_the_text_of_every_page_in_order() {
        let text = pdf_text(&fixture()).unwrap();
        let first = text.find("William Caxton set up a press at Westminster in 1476.").expect(&text);
        let second = text.find("The Gutenberg Bible was printed around 1455.").expect(&text);
        assert!(first < second, "{text}");
        let doc = docmem_core::Document::new("two-pages.pdf", text.clone());
        assert_eq!(doc.page_at(first), Some(1));
        assert_eq!(doc.page_at(second), Some(2), "{text:?}");
    }

    #[test]
    fn broken_files_are_errors_not_panics() {
        let good = fixture();
        assert_eq!(pdf_text(b"hello"), Err(PdfError::NotPdf));
        // Every truncation of a real PDF, and the header alone: an error or some text,
        // never a panic out of the call.
        for cut in (5..good.len()).step_by(37) {
            let _ = pdf_text(&good[..cut]);
        }
        let mut garbled = good.clone();
        for (i, b) in garbled.iter_mut().enumerate().skip(9) {
            if i % 7 == 0 {
                *b = b'#';
            }
        }
        let _ = pdf_text(&garbled);
        assert!(pdf_text(b"%PDF-1.4\n").is_err());
    }
}
