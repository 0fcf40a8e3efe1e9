//! Fixed-size chunks: the MoM paper's "Original" baseline.

use alloc::vec::Vec;

use crate::span::Span;

/// Windows of `size` characters, boundaries ignored; the last may be shorter. `size` 0 is
/// treated as 1.
pub fn fixed_chunks(text: &str, size: usize) -> Vec<Span> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == size {
            out.push(Span::new(start, i));
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        out.push(Span::new(start, text.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::spans_tile;

    #[test]
    fn windows_of_chars() {
        let t = "abcdéfgh";
        let c = fixed_chunks(t, 3);
        assert!(spans_tile(t, &c));
        let texts: Vec<_> = c.iter().map(|s| s.slice(t).unwrap()).collect();
        assert_eq!(texts, ["abc", "déf", "gh"]);
        assert!(fixed_chunks("", 3).is_empty());
        assert_eq!(fixed_chunks("ab", 0).len(), 2);
    }
}
