//! Documents and their content-hash ids.
//!
//! A document's id is a hash of its text, so ingesting the same content twice is
//! recognisably the same document (a no-op for the library), whatever its file name.
//!
//! Pages are marked in the text itself, by a form feed ([`PAGE_BREAK`]) between pages, the
//! convention of `pdftotext` and of plain-text printers. Keeping them in the text (rather
//! than as offsets beside it) means every span, export and older build carries them
//! unchanged, and a citation's page is a count of the breaks before it.

use alloc::string::String;
use core::fmt;
use sha2::{Digest, Sha256};

/// A document id: the first 16 bytes of the SHA-256 of the document's UTF-8 text.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocId(pub [u8; 16]);

impl DocId {
    /// The id of a text.
    pub fn of_text(text: &str) -> Self {
        let digest = Sha256::digest(text.as_bytes());
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        DocId(id)
    }

    /// Parse the 32-character lower-case hex form that `Display` writes.
    pub fn from_hex(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 32 {
            return None;
        }
        let mut id = [0u8; 16];
        for (i, pair) in b.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            id[i] = (hi * 16 + lo) as u8;
        }
        Some(DocId(id))
    }
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DocId({self})")
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for DocId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for DocId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <alloc::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        DocId::from_hex(&s).ok_or_else(|| serde::de::Error::custom("a document id is 32 hex digits"))
    }
}

/// A document: its text and what we know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Document {
    /// Content hash of `text`.
    pub id: DocId,
    /// A human title (file name or first heading).
    pub title: String,
    /// The full text; every span in docmem points into it.
    pub text: String,
    /// BCP-47 language tag (`en`, `zh`, `und`), detected unless given.
    pub language: String,
}

/// The character that separates two pages of a document's text (form feed, U+000C).
pub const PAGE_BREAK: char = '\u{c}';

/// The page (from 1) that byte offset `at` of `text` lies on, or `None` when `text` has no
/// page breaks (it was never paged, like a Markdown file). `at` past the end counts every
/// break.
pub fn page_at(text: &str, at: usize) -> Option<u32> {
    if !text.contains(PAGE_BREAK) {
        return None;
    }
    let before = text.as_bytes().get(..at.min(text.len())).unwrap_or_default();
    let breaks = before.iter().filter(|&&b| b == PAGE_BREAK as u8).count();
    Some(u32::try_from(breaks).unwrap_or(u32::MAX).saturating_add(1))
}

impl Document {
    /// The page (from 1) that byte offset `at` lies on; `None` for a text without pages.
    pub fn page_at(&self, at: usize) -> Option<u32> {
        page_at(&self.text, at)
    }

    /// A document with its id computed and its language detected.
    pub fn new(title: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        Document { id: DocId::of_text(&text), title: title.into(), language: String::from(crate::text::detect_language(&text)), text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn id_is_content_hash_and_round_trips() {
        let a = Document::new("a.txt", "same text");
        let b = Document::new("b.txt", "same text");
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, Document::new("c", "other").id);
        // SHA-256("abc") begins ba7816bf8f01cfea414140de5dae2223.
        assert_eq!(DocId::of_text("abc").to_string(), "ba7816bf8f01cfea414140de5dae2223");
        assert_eq!(DocId::from_hex(&a.id.to_string()), Some(a.id));
        assert_eq!(DocId::from_hex("zz"), None);
    }

    #[test]
    fn pages_are_counted_by_form_feeds() {
        let paged = Document::new("a.pdf", "One.\n\u{c}\nTwo.\n\u{c}\nThree.");
        assert_eq!(paged.page_at(0), Some(1));
        assert_eq!(paged.page_at(paged.text.find("Two").unwrap()), Some(2));
        assert_eq!(paged.page_at(paged.text.find("Three").unwrap()), Some(3));
        assert_eq!(paged.page_at(usize::MAX), Some(3));
        assert_eq!(Document::new("a.md", "No pages here.").page_at(3), None);
    }
}
