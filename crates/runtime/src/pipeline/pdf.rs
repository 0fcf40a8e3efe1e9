//! Text from PDF files, for ingest (`pdf` feature).
//!
//! Why pdf-extract: it is the maintained pure-Rust text extractor (over lopdf), it decodes
//! the fonts' encodings and ToUnicode maps that real PDFs need, and it builds cold in
//! about 80 s of CPU here. It can panic on malformed files, and documents are user input,
//! so every call runs under `catch_unwind` and a panic becomes [`Error::UnreadablePdf`].
//!
//! What `catch_unwind` cannot catch is an allocation that fails: lopdf inflates every
//! compressed stream whole, so a few kilobytes of deflate that inflate to gigabytes (a
//! "zip bomb") would abort the process. Before the extractor sees a file, its Flate
//! streams are inflated here into a small wrapping buffer that only counts the bytes, and
//! a file whose streams come to more than [`MAX_INFLATED_BYTES`] is refused.

use std::panic::{catch_unwind, AssertUnwindSafe};

use docmem_core::document::PAGE_BREAK;

use crate::Error;

/// The most bytes all of a PDF's Flate streams may inflate to: far more than the text of
/// any document docmem takes (16 MiB), with room for the fonts and images around it.
pub const MAX_INFLATED_BYTES: u64 = 256 << 20;

/// What `data`, a zlib stream, inflates to, counted up to just past `cap` (`None`: it is
/// not zlib). The output goes round a 32 KiB buffer (deflate's window), so counting a
/// bomb costs no memory.
fn inflated_len(data: &[u8], cap: u64) -> Option<u64> {
    use miniz_oxide::inflate::core::inflate_flags::TINFL_FLAG_PARSE_ZLIB_HEADER;
    use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;
    let mut d = DecompressorOxide::new();
    let mut window = vec![0u8; 1 << 15];
    let (mut at_in, mut at_out, mut total) = (0usize, 0usize, 0u64);
    loop {
        let (status, read, wrote) = decompress(&mut d, &data[at_in..], &mut window, at_out, TINFL_FLAG_PARSE_ZLIB_HEADER);
        at_in += read;
        at_out = (at_out + wrote) & (window.len() - 1);
        total += wrote as u64;
        if total > cap {
            return Some(total);
        }
        match status {
            TINFLStatus::HasMoreOutput => continue,
            TINFLStatus::Done | TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => return Some(total),
            _ if total == 0 => return None,
            _ => return Some(total),
        }
    }
}

/// Whether the Flate streams of `bytes` inflate to at most `limit` bytes in all. Streams
/// are found as the extractor's parser finds them, between `stream` and `endstream`; one
/// that is not zlib (another filter) counts nothing.
fn inflates_within(bytes: &[u8], limit: u64) -> bool {
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut total = 0u64;
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], b"stream") {
        let keyword = at + i;
        let mut start = keyword + b"stream".len();
        at = start;
        if bytes[..keyword].ends_with(b"end") {
            continue; // the end of one ("endstream"), not a start
        }
        match bytes.get(start..start + 2) {
            Some([b'\r', b'\n']) => start += 2,
            Some([b'\n', _]) | Some([b'\r', _]) => start += 1,
            _ => continue,
        }
        let end = find(&bytes[start..], b"endstream").map_or(bytes.len(), |j| start + j);
        if let Some(n) = inflated_len(&bytes[start..end], limit - total) {
            total += n;
            if total > limit {
                return false;
            }
        }
        at = end;
    }
    true
}

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
pub fn pdf_text(bytes: &[u8]) -> Result<String, Error> {
    pdf_text_within(bytes, MAX_INFLATED_BYTES)
}

/// [`pdf_text`] with another limit on what the file's streams may inflate to (the fuzz
/// harness holds every case to a quarter of a GiB of memory in all, so it asks for less).
pub fn pdf_text_within(bytes: &[u8], max_inflated: u64) -> Result<String, Error> {
    if !bytes.starts_with(b"%PDF-") {
        return Err(Error::NotPdf);
    }
    if !inflates_within(bytes, max_inflated) {
        return Err(Error::PdfTooLarge { limit: max_inflated });
    }
    // The extractor prints nothing we need; a panic inside it is caught and reported.
    let result = catch_unwind(AssertUnwindSafe(|| pdf_extract::extract_text_from_mem_by_pages(bytes)));
    let pages = match result {
        Ok(Ok(pages)) => pages,
        Ok(Err(e)) => {
            let why = e.to_string();
            return Err(if why.to_ascii_lowercase().contains("encrypt") {
                Error::EncryptedPdf
            } else {
                Error::UnreadablePdf { message: why }
            });
        }
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "the extractor failed".to_owned());
            return Err(Error::UnreadablePdf { message: why });
        }
    };
    // Pages are joined by a form feed on its own line: the document's pages are counted
    // by them (`docmem_core::document::PAGE_BREAK`). Within a page, runs of blank lines
    // collapse to one. A blank page keeps its break, so later page numbers stay right.
    let pages: Vec<String> = pages.iter().map(|p| tidy_page(&p.replace(PAGE_BREAK, "\n"))).collect();
    let last = pages.iter().rposition(|p| !p.is_empty()).map_or(0, |i| i + 1);
    let out = pages[..last].join(&format!("\n{PAGE_BREAK}\n"));
    if out.trim().is_empty() {
        return Err(Error::NoText);
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
        assert!(matches!(pdf_text(b"hello"), Err(Error::NotPdf)));
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

    /// A PDF whose one stream is `inflated` zero bytes, deflated (a few KB per 10 MB).
    fn bomb(inflated: usize) -> Vec<u8> {
        let zeros = vec![0u8; inflated];
        let packed = miniz_oxide::deflate::compress_to_vec_zlib(&zeros, 10);
        let mut pdf = format!("%PDF-1.4\n1 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n", packed.len()).into_bytes();
        pdf.extend_from_slice(&packed);
        pdf.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
        pdf
    }

    #[test]
    fn a_decompression_bomb_is_refused_before_the_extractor_inflates_it() {
        let big = bomb(MAX_INFLATED_BYTES as usize + (1 << 20));
        assert!(big.len() < (1 << 20), "{} bytes of PDF", big.len());
        assert!(matches!(pdf_text(&big), Err(Error::PdfTooLarge { limit: MAX_INFLATED_BYTES })));
        // Under the limit it goes on to the extractor (which finds no pages here).
        assert!(!matches!(pdf_text(&bomb(1 << 20)), Err(Error::PdfTooLarge { .. })));
        // The count is exact: 1 MiB inflated is within 1 MiB, not within a byte less.
        assert!(inflates_within(&bomb(1 << 20), 1 << 20) && !inflates_within(&bomb(1 << 20), (1 << 20) - 1));
        // The real fixture (plain streams) passes.
        assert!(inflates_within(&fixture(), MAX_INFLATED_BYTES));
    }
}
