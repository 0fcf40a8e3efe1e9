//! Recursive character splitting: LangChain's `RecursiveCharacterTextSplitter`.
//!
//! Split by the first separator of `["\n\n", "\n", " ", ""]` that occurs in the text
//! (keeping the separator at the start of the following piece); pieces shorter than
//! `chunk_size` characters are merged greedily into chunks, each new chunk starting with the
//! tail of the last that fits in `chunk_overlap`; a piece that is too long is split again
//! with the remaining separators. Chunks are trimmed of outer white space. Defaults are
//! LangChain's: 4000 characters, 200 of overlap.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::split_keep_separator;
use crate::span::Span;

/// Settings, with LangChain's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecursiveParams {
    /// Most characters per chunk (default 4000).
    pub chunk_size: usize,
    /// Characters of overlap (default 200).
    pub chunk_overlap: usize,
    /// Separators, coarsest first; `""` splits into characters.
    pub separators: Vec<&'static str>,
}

impl Default for RecursiveParams {
    fn default() -> Self {
        RecursiveParams { chunk_size: 4000, chunk_overlap: 200, separators: alloc::vec!["\n\n", "\n", " ", ""] }
    }
}

fn chars(text: &str, s: Span) -> usize {
    s.char_len(text)
}

fn merge(text: &str, pieces: &[Span], p: &RecursiveParams, out: &mut Vec<Span>) {
    // The pieces of the chunk being built, with their character counts; pieces leave from
    // the front as the overlap window slides, so a deque keeps that linear.
    let mut cur: VecDeque<(Span, usize)> = VecDeque::new();
    let mut total = 0usize;
    for &d in pieces {
        let len = chars(text, d);
        if total + len > p.chunk_size {
            if let (Some(first), Some(last)) = (cur.front(), cur.back()) {
                let chunk = Span::new(first.0.start, last.0.end).trim(text);
                if !chunk.is_empty() {
                    out.push(chunk);
                }
                while total > p.chunk_overlap || (total + len > p.chunk_size && total > 0) {
                    let Some((_, n)) = cur.pop_front() else { break };
                    total -= n;
                }
            }
        }
        cur.push_back((d, len));
        total += len;
    }
    if let (Some((first, _)), Some((last, _))) = (cur.front(), cur.back()) {
        let chunk = Span::new(first.start, last.end).trim(text);
        if !chunk.is_empty() {
            out.push(chunk);
        }
    }
}

fn split(text: &str, span: Span, separators: &[&'static str], p: &RecursiveParams, out: &mut Vec<Span>) {
    let Some(s) = span.slice(text) else { return };
    let mut separator = *separators.last().unwrap_or(&"");
    let mut rest: &[&'static str] = &[];
    for (i, &sep) in separators.iter().enumerate() {
        if sep.is_empty() {
            separator = sep;
            break;
        }
        if s.contains(sep) {
            separator = sep;
            rest = &separators[i + 1..];
            break;
        }
    }
    let pieces = split_keep_separator(text, span, separator);
    let mut good: Vec<Span> = Vec::new();
    for piece in pieces {
        if chars(text, piece) < p.chunk_size {
            good.push(piece);
        } else {
            if !good.is_empty() {
                merge(text, &good, p, out);
                good.clear();
            }
            if rest.is_empty() {
                let t = piece.trim(text);
                if !t.is_empty() {
                    out.push(t);
                }
            } else {
                split(text, piece, rest, p, out);
            }
        }
    }
    if !good.is_empty() {
        merge(text, &good, p, out);
    }
}

/// Recursive character chunks of `text` (see the module docs).
pub fn recursive_chunks(text: &str, params: &RecursiveParams) -> Vec<Span> {
    let mut out = Vec::new();
    split(text, Span::new(0, text.len()), &params.separators, params, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(t: &str, size: usize, overlap: usize) -> Vec<&str> {
        let p = RecursiveParams { chunk_size: size, chunk_overlap: overlap, ..RecursiveParams::default() };
        recursive_chunks(t, &p).iter().map(|s| s.slice(t).unwrap()).collect()
    }

    #[test]
    fn langchain_documented_behaviour() {
        // LangChain's own unit test (test_iterative_text_splitter), same text and sizes.
        let t = "Hi.\n\nI'm Harrison.\n\nHow? Are? You?\nOkay then f f f f.\nThis is a weird text to write, but gotta test the splittingggg some how.\n\nBye!\n\n-H.";
        assert_eq!(
            chunk(t, 10, 1),
            [
                "Hi.",
                "I'm",
                "Harrison.",
                "How? Are?",
                "You?",
                "Okay then",
                "f f f f.",
                "This is a",
                "weird",
                "text to",
                "write,",
                "but gotta",
                "test the",
                "splitting",
                "gggg",
                "some how.",
                "Bye!",
                "-H."
            ]
        );
    }

    #[test]
    fn overlap_and_fit() {
        assert_eq!(chunk("aaa bbb ccc ddd", 8, 4), ["aaa bbb", "bbb ccc", "ccc ddd"]);
        assert_eq!(chunk("short", 100, 10), ["short"]);
        assert!(chunk("", 10, 0).is_empty());
    }
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    /// Character pieces with an overlap close to the chunk size once made the merge drop
    /// pieces from the front of a `Vec` one at a time: quadratic in the chunk size.
    #[test]
    fn merging_many_one_character_pieces_stays_linear() {
        let text = "x".repeat(400_000);
        let p = RecursiveParams { chunk_size: 20_000, chunk_overlap: 19_999, ..RecursiveParams::default() };
        let start = std::time::Instant::now();
        let chunks = recursive_chunks(&text, &p);
        let took = start.elapsed().as_secs_f64();
        assert!(!chunks.is_empty());
        assert!(chunks.iter().all(|c| c.len() <= 20_000));
        // Linear: 0.03 s here (opt-level 1); the quadratic merge took 2 s.
        assert!(took < 0.5, "{took:.2} s for 400k one-character pieces");
    }
}
