//! Retrieval pieces: a memory's long chunk searched and returned as sentence-bounded
//! pieces.
//!
//! MoM's atomic chunks are meant to be small, one scenario each, and MemReader writes them
//! so. A general instruction model of 1.5B parameters does not always: on the shared SQuAD
//! articles Qwen2.5-Coder-1.5B grouped whole sections, and one chunk in twenty (48 of
//! 903) ran past 1,000 characters, the longest past 4,000. Such a chunk is half invisible
//! to retrieval, as the embedder reads only its first 256 tokens or so, and it costs a
//! reader's whole context budget when it ranks first, with what lies past the cut lost.
//!
//! So the index ([`crate::retrieve::MemoryIndex::with_piece_chars`]) searches a chunk
//! longer than a limit as pieces: consecutive sentences of about equal length, each at
//! most the limit (a single longer sentence stays whole), tiling the chunk. A piece keeps
//! its scenario: the scenario's core and outline item stand for all of its pieces, so the
//! summary layers rank the scenario and the chunk layer picks the piece. The memory
//! itself is left as the reader wrote it.

use alloc::vec;
use alloc::vec::Vec;

use crate::chunk::sentence_split::split_sentences_in;
use crate::span::Span;

/// The piece limit new libraries get, in characters: the best of 200 to 800 on the shared
/// SQuAD sample's dev split (recall at a 1,000-character budget; the figures are in
/// `docs/evaluation-retrieval.md`). Smaller pieces helped down to 200.
pub const DEFAULT_PIECE_CHARS: usize = 200;

/// `text[span]` cut at sentence ends into pieces of at most `max_chars` characters where
/// the sentences allow, of about equal length, tiling `span`. A span within the limit, a
/// limit of 0 or a span that is not a slice of `text` comes back whole.
pub fn pieces(text: &str, span: Span, max_chars: usize) -> Vec<Span> {
    let Some(slice) = span.slice(text) else { return vec![span] };
    let total = slice.chars().count();
    if max_chars == 0 || total <= max_chars {
        return vec![span];
    }
    let sentences = split_sentences_in(text, span);
    let lengths: Vec<usize> = sentences.iter().map(|s| s.slice(text).map_or(0, |t| t.chars().count())).collect();
    // Aim at equal pieces: as many as the limit needs, each about total / count.
    let target = total.div_ceil(total.div_ceil(max_chars));
    let mut out = Vec::new();
    let (mut start, mut len) = (span.start, 0usize);
    for (s, &n) in sentences.iter().zip(&lengths) {
        if len > 0 && (len + n > max_chars || len >= target) {
            out.push(Span::new(start, s.start));
            (start, len) = (s.start, 0);
        }
        len += n;
    }
    out.push(Span::new(start, span.end));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::string::String;

    fn text_of(n: usize, sentence: &str) -> String {
        (0..n).map(|i| format!("{sentence} {i}. ")).collect()
    }

    #[test]
    fn a_short_chunk_or_no_limit_stays_whole() {
        let t = "One sentence. Two sentences.";
        let all = Span::new(0, t.len());
        assert_eq!(pieces(t, all, 100), vec![all]);
        assert_eq!(pieces(t, all, 0), vec![all]);
        assert_eq!(pieces(t, Span::new(0, t.len() + 5), 3), vec![Span::new(0, t.len() + 5)], "not a slice: untouched");
    }

    #[test]
    fn a_long_chunk_is_cut_at_sentence_ends_into_even_pieces_that_tile_it() {
        // 20 sentences of 28 or 29 characters (570): a limit of 200 needs 3 pieces.
        let t = format!("Heading\n\n{}", text_of(20, "The press printed a page"));
        let span = Span::new(9, t.len());
        let p = pieces(&t, span, 200);
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[0].start, span.start);
        assert_eq!(p.last().map(|s| s.end), Some(span.end));
        for w in p.windows(2) {
            assert_eq!(w[0].end, w[1].start, "pieces tile the chunk");
        }
        let sentence_starts: Vec<usize> = split_sentences_in(&t, span).iter().map(|s| s.start).collect();
        for s in &p {
            let n = s.slice(&t).map_or(0, |x| x.chars().count());
            assert!((120..=200).contains(&n), "about equal and within the limit: {n}");
            assert!(sentence_starts.contains(&s.start), "a piece begins a sentence");
        }
    }

    #[test]
    fn a_sentence_longer_than_the_limit_stays_whole() {
        let long = "word ".repeat(60);
        let t = format!("Short one. {}end. Short two.", long);
        let p = pieces(&t, Span::new(0, t.len()), 100);
        assert!(p.iter().any(|s| s.slice(&t).is_some_and(|x| x.contains(&long))), "{p:?}");
        assert_eq!(p.first().map(|s| s.start), Some(0));
        assert_eq!(p.last().map(|s| s.end), Some(t.len()));
    }

    #[test]
    fn characters_not_bytes_are_counted() {
        // 30 sentences of 10 CJK characters: 300 characters, 900 bytes; a limit of 400
        // characters keeps it whole.
        let t: String = (0..30).map(|_| "印刷术改变了欧洲文。").collect();
        assert_eq!(pieces(&t, Span::new(0, t.len()), 400).len(), 1);
        assert_eq!(pieces(&t, Span::new(0, t.len()), 100).len(), 3);
    }
}
