//! The numbered-sentence view of a document, for readers that are not MemReader checkpoints.
//!
//! MemReader checkpoints were trained to name a chunk by copying its first and last
//! characters around `[MASK]`. General instruction models of the same size do not do that
//! reliably: Qwen2.5-Coder-1.5B put section headings in `<chunk>` and invented chunk ends,
//! so its memories aligned to 1.5% of the text and fell back. Given the document as
//! numbered sentences and asked for `<chunk>FIRST-LAST</chunk>`, the same model wrote
//! well-formed, tiling ranges on its first try. So for other readers the prompt shows
//! this view, the reader names chunks by sentence numbers ([`crate::parse::ChunkPattern::Units`]),
//! and [`NumberedText::span`] turns a range back into an exact span: nothing to align
//! fuzzily, nothing lost. Outline and core contents stay the model's own words.
//!
//! Units are the sentences of [`crate::chunk::sentences`], with two changes: a blank line
//! always ends a unit (so a heading is its own unit) and the view keeps paragraphs apart
//! with blank lines, so the reader sees the document's structure.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use crate::chunk::sentence_split::split_sentences_in;
use crate::span::Span;

/// A document cut into numbered units (sentences, and headings on their own) that tile it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumberedText {
    units: Vec<Span>,
    /// Whether unit `i` begins a paragraph.
    paragraph_starts: Vec<bool>,
}

/// Paragraph spans that tile `text`: a paragraph runs from the start of its first non-blank
/// line to the start of the next paragraph's (the blank lines between stay with the one
/// before). The text before the first non-blank line joins the first paragraph.
fn paragraphs(text: &str) -> Vec<Span> {
    let mut starts: Vec<usize> = Vec::new();
    let mut after_blank = true;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        if !blank && after_blank {
            starts.push(pos);
        }
        after_blank = blank;
        pos += line.len();
    }
    if starts.is_empty() {
        return Vec::new();
    }
    starts[0] = 0;
    let mut spans: Vec<Span> = starts.windows(2).map(|w| Span::new(w[0], w[1])).collect();
    spans.push(Span::new(*starts.last().unwrap_or(&0), text.len()));
    spans
}

impl NumberedText {
    /// Cut `text` into units.
    pub fn new(text: &str) -> Self {
        let mut units = Vec::new();
        let mut paragraph_starts = Vec::new();
        for para in paragraphs(text) {
            let mut first = true;
            for s in split_sentences_in(text, para) {
                // A unit of white space only (possible at a paragraph's end) joins the one before.
                if s.slice(text).is_some_and(|t| t.trim().is_empty()) {
                    if let Some(last) = units.last_mut() {
                        let last: &mut Span = last;
                        last.end = s.end;
                        continue;
                    }
                }
                units.push(s);
                paragraph_starts.push(first);
                first = false;
            }
        }
        NumberedText { units, paragraph_starts }
    }

    /// How many units there are (the last number).
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether there are none (a blank text).
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// The units' spans, in order; they tile the text.
    pub fn units(&self) -> &[Span] {
        &self.units
    }

    /// The text the reader sees: `[n] unit` per line (white space inside a unit folded to
    /// single spaces), a blank line before each paragraph after the first.
    pub fn render(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 8 * self.units.len());
        for (i, (span, &para)) in self.units.iter().zip(&self.paragraph_starts).enumerate() {
            if para && i > 0 {
                out.push('\n');
            }
            let unit = span.slice(text).unwrap_or("");
            let _ = write!(out, "[{}]", i + 1);
            for word in unit.split_whitespace() {
                out.push(' ');
                out.push_str(word);
            }
            out.push('\n');
        }
        out
    }

    /// The span of units `first..=last` (1-based, as the reader writes them); `None` when
    /// out of range or reversed.
    pub fn span(&self, first: u32, last: u32) -> Option<Span> {
        let (a, b) = (first as usize, last as usize);
        if a == 0 || b < a || b > self.units.len() {
            return None;
        }
        Some(Span::new(self.units[a - 1].start, self.units[b - 1].end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::spans_tile;

    const DOC: &str = "# Title\n\nFirst sentence here. Second one follows.\n\n\n## Part two\nThird sentence. Fourth!\n";

    #[test]
    fn units_tile_and_headings_stand_alone() {
        let n = NumberedText::new(DOC);
        assert!(spans_tile(DOC, n.units()));
        let texts: Vec<&str> = n.units().iter().map(|s| s.slice(DOC).unwrap().trim()).collect();
        assert_eq!(texts, ["# Title", "First sentence here.", "Second one follows.", "## Part two\nThird sentence.", "Fourth!"]);
        assert_eq!(
            n.render(DOC),
            "[1] # Title\n\n[2] First sentence here.\n[3] Second one follows.\n\n[4] ## Part two Third sentence.\n[5] Fourth!\n"
        );
    }

    #[test]
    fn ranges_map_to_exact_spans() {
        let n = NumberedText::new(DOC);
        assert_eq!(n.span(2, 3).and_then(|s| s.slice(DOC)), Some("First sentence here. Second one follows.\n\n\n"));
        assert_eq!(n.span(1, 5), Some(Span::new(0, DOC.len())));
        assert_eq!(n.span(0, 1), None);
        assert_eq!(n.span(3, 2), None);
        assert_eq!(n.span(5, 6), None);
    }

    #[test]
    fn blank_and_leading_space() {
        assert!(NumberedText::new("  \n\n ").is_empty());
        let t = "\n\n  Lead. Then.";
        let n = NumberedText::new(t);
        assert!(spans_tile(t, n.units()));
        assert_eq!(n.len(), 2);
    }
}
