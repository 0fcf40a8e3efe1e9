//! Document memories: what the MemReader writes about a document, once aligned.
//!
//! A memory is MoM's triple: an outline O (the document's logical structure), core contents C
//! (the key point of each scenario) and atomic chunks A (spans of the original text). Spans
//! tile the document (every byte in exactly one chunk), so a memory can always be checked
//! against its document, and a citation is always a real place in the text.
//!
//! The serde form carries `format_version`; [`DocumentMemory::check`] rejects versions this
//! build does not read, so an old client never misreads a newer library.

use alloc::string::String;
use alloc::vec::Vec;

use crate::align::AlignmentStats;
use crate::document::{DocId, Document};
use crate::span::{spans_tile, Span};
use crate::Error;

/// The memory format version this build writes and reads.
pub const MEMORY_FORMAT_VERSION: u32 = 1;

/// One scenario: an atomic chunk of the source, its core content and its outline item.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Scenario {
    /// The chunk: a span of the document text.
    pub span: Span,
    /// The core content the reader wrote for this chunk (may be empty).
    pub core: String,
    /// Index into [`DocumentMemory::outline`], when the outline has an item for it.
    pub outline_item: Option<u32>,
}

/// How a memory's candidate was sampled.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SamplingRecord {
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Nucleus threshold.
    pub top_p: f32,
    /// Top-k cut (0 = off).
    pub top_k: u32,
    /// RNG seed of this candidate.
    pub seed: u64,
    /// Which candidate of how many this was (0-based) and how many were sampled.
    pub candidate: u32,
    /// Number of candidates sampled.
    pub candidates: u32,
}

/// The scores that chose this memory among its candidates.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemoryScores {
    /// Chunk clarity (mean boundary probability), when computed.
    pub clarity: Option<f64>,
    /// Core completeness, when computed.
    pub completeness: Option<f64>,
    /// The fused RRF score of the two rankings, when there were several candidates.
    pub rrf: Option<f64>,
}

/// Where a memory came from: enough to reproduce or distrust it.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Provenance {
    /// The reader model (file name or hosted model name), or the chunker's name.
    pub reader: String,
    /// Sampling parameters of the chosen candidate.
    pub sampling: SamplingRecord,
    /// Candidate scores.
    pub scores: MemoryScores,
    /// Alignment statistics of the chosen candidate.
    pub alignment: AlignmentStats,
    /// Why a fallback chunker was used instead of the reader's memory, if it was.
    pub fallback: Option<String>,
}

/// A document's memory: outline, scenarios (chunks with cores), provenance.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DocumentMemory {
    /// [`MEMORY_FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// The document this memory describes.
    pub doc_id: DocId,
    /// Outline items in document order.
    pub outline: Vec<String>,
    /// Scenarios in document order; their spans tile the document.
    pub scenarios: Vec<Scenario>,
    /// How it was made.
    pub provenance: Provenance,
}

impl DocumentMemory {
    /// A memory whose scenarios are plain chunks (no cores, no outline): what the baseline
    /// chunkers and the fallback path produce.
    pub fn from_spans(doc: &Document, spans: &[Span], reader: &str) -> Self {
        DocumentMemory {
            format_version: MEMORY_FORMAT_VERSION,
            doc_id: doc.id,
            outline: Vec::new(),
            scenarios: spans.iter().map(|&span| Scenario { span, core: String::new(), outline_item: None }).collect(),
            provenance: Provenance { reader: String::from(reader), ..Provenance::default() },
        }
    }

    /// Whether a reader wrote it: it has an outline item or a core content. A baseline
    /// chunker's passages ([`DocumentMemory::from_spans`]) have neither.
    pub fn has_summaries(&self) -> bool {
        !self.outline.is_empty() || self.scenarios.iter().any(|s| !s.core.trim().is_empty())
    }

    /// Check that this memory can be used with `doc`: a readable version, the right
    /// document, spans that tile its text, outline references in range.
    pub fn check(&self, doc: &Document) -> Result<(), Error> {
        self.check_chunks(doc)?;
        let spans: Vec<Span> = self.scenarios.iter().map(|s| s.span).collect();
        if !spans_tile(&doc.text, &spans) {
            return Err(Error::SpansDoNotTile);
        }
        Ok(())
    }

    /// The weaker check for chunk sets that need not tile (baseline chunkers overlap
    /// neighbours and drop white space): every span is a non-empty range of the text on
    /// char boundaries, plus everything [`DocumentMemory::check`] asks but tiling.
    pub fn check_chunks(&self, doc: &Document) -> Result<(), Error> {
        if self.format_version != MEMORY_FORMAT_VERSION {
            return Err(Error::MemoryVersion { found: self.format_version });
        }
        if self.doc_id != doc.id {
            return Err(Error::WrongDocument);
        }
        for (i, s) in self.scenarios.iter().enumerate() {
            if s.span.is_empty() || s.span.slice(&doc.text).is_none() {
                return Err(Error::BadSpan { scenario: i });
            }
        }
        for (i, s) in self.scenarios.iter().enumerate() {
            if let Some(o) = s.outline_item {
                if o as usize >= self.outline.len() {
                    return Err(Error::OutlineItemOutOfRange { scenario: i });
                }
            }
        }
        Ok(())
    }

    /// The chunk text of scenario `i`.
    pub fn chunk_text<'a>(&self, doc: &'a Document, i: usize) -> Option<&'a str> {
        self.scenarios.get(i)?.span.slice(&doc.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_catches_bad_memories() {
        let doc = Document::new("t", "hello world");
        let mut m = DocumentMemory::from_spans(&doc, &[Span::new(0, 6), Span::new(6, 11)], "fixed");
        assert_eq!(m.check(&doc), Ok(()));
        m.scenarios[1].outline_item = Some(0);
        assert_eq!(m.check(&doc), Err(Error::OutlineItemOutOfRange { scenario: 1 }));
        m.scenarios[1].outline_item = None;
        m.scenarios[1].span.end = 10;
        assert_eq!(m.check(&doc), Err(Error::SpansDoNotTile));
        m.format_version = 99;
        assert_eq!(m.check(&doc), Err(Error::MemoryVersion { found: 99 }));
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_round_trip() {
        let doc = Document::new("t", "hello world");
        let m = DocumentMemory::from_spans(&doc, &[Span::new(0, 11)], "fixed");
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains("\"format_version\":1"));
        let back: DocumentMemory = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }
}
