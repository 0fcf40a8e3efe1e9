//! Byte spans into a document's text.
//!
//! Every chunk docmem stores is a span of the original text, never a copy that could drift
//! from it: citations point at real characters. Spans are byte offsets (cheap to slice) that
//! always fall on UTF-8 character boundaries.

/// A half-open byte range `start..end` into a document's text, on char boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Span {
    /// First byte of the span.
    pub start: usize,
    /// One past the last byte of the span.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end` (bytes).
    pub const fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// Length in bytes.
    pub const fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// True when the span covers no byte.
    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// The text of this span, or `None` when it is out of range or off a char boundary.
    pub fn slice<'a>(&self, text: &'a str) -> Option<&'a str> {
        text.get(self.start..self.end)
    }

    /// Shrink the span so it neither starts nor ends with white space.
    pub fn trim(&self, text: &str) -> Span {
        let Some(s) = self.slice(text) else { return *self };
        let lead = s.len() - s.trim_start().len();
        let trail = s.len() - s.trim_end().len();
        if lead == s.len() {
            return Span::new(self.start, self.start);
        }
        Span::new(self.start + lead, self.end - trail)
    }

    /// Number of characters in this span of `text` (0 when the span is invalid).
    pub fn char_len(&self, text: &str) -> usize {
        self.slice(text).map_or(0, |s| s.chars().count())
    }
}

/// Check that `spans` tile `text` exactly: they start at 0, each starts where the previous
/// ended, the last ends at `text.len()`, and every boundary is a char boundary.
pub fn spans_tile(text: &str, spans: &[Span]) -> bool {
    if text.is_empty() {
        return spans.iter().all(|s| s.is_empty());
    }
    let mut cursor = 0;
    for s in spans {
        if s.start != cursor || s.end <= s.start || !text.is_char_boundary(s.end) {
            return false;
        }
        cursor = s.end;
    }
    cursor == text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_and_tile() {
        let t = "  ab  cd ";
        assert_eq!(Span::new(0, 5).trim(t), Span::new(2, 4));
        assert_eq!(Span::new(0, 2).trim(t), Span::new(0, 0));
        assert!(spans_tile(t, &[Span::new(0, 4), Span::new(4, 9)]));
        assert!(!spans_tile(t, &[Span::new(0, 4), Span::new(5, 9)]));
        assert!(!spans_tile("é", &[Span::new(0, 1), Span::new(1, 2)]));
    }
}
