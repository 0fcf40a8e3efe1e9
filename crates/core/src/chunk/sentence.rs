//! Sentence-aware chunks sized in tokens, with overlap: LlamaIndex's `SentenceSplitter`.
//!
//! The text is split by the first of these that yields more than one piece, recursively
//! until every piece fits `chunk_size` tokens: paragraphs (`"\n\n\n"`), sentences, clauses
//! (after `, . ; 。 ？ ！`), then words, then characters. Pieces from the first three are
//! "sentences". Pieces are then packed greedily into chunks of at most `chunk_size` tokens;
//! when a chunk closes, the next one starts with as many trailing pieces of it as fit in
//! `chunk_overlap` tokens. A non-sentence piece never extends a chunk past the size. Token
//! counts are summed per piece, as LlamaIndex does. Chunks are trimmed of outer white space,
//! so they do not tile: neighbours overlap by design.

use alloc::vec::Vec;

use super::sentence_split::split_sentences_in;
use super::{split_after, split_keep_separator, TokenCounter};
use crate::span::Span;

/// Settings, with LlamaIndex's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentenceParams {
    /// Most tokens per chunk (default 1024).
    pub chunk_size: usize,
    /// Tokens of overlap between neighbours (default 200).
    pub chunk_overlap: usize,
    /// The paragraph separator (default three newlines).
    pub paragraph_separator: &'static str,
}

impl Default for SentenceParams {
    fn default() -> Self {
        SentenceParams { chunk_size: 1024, chunk_overlap: 200, paragraph_separator: "\n\n\n" }
    }
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    span: Span,
    is_sentence: bool,
    tokens: usize,
}

fn is_clause_end(c: char) -> bool {
    matches!(c, ',' | '.' | ';' | '。' | '？' | '！')
}

fn pieces_of(text: &str, span: Span, params: &SentenceParams) -> (Vec<Span>, bool) {
    let sentence_fns: [&dyn Fn(Span) -> Vec<Span>; 3] =
        [&|s| split_keep_separator(text, s, params.paragraph_separator), &|s| split_sentences_in(text, s), &|s| {
            split_after(text, s, is_clause_end)
        }];
    for f in sentence_fns {
        let parts = f(span);
        if parts.len() > 1 {
            return (parts, true);
        }
    }
    let words = split_keep_separator(text, span, " ");
    if words.len() > 1 {
        return (words, false);
    }
    (split_keep_separator(text, span, ""), false)
}

fn split(text: &str, span: Span, params: &SentenceParams, counter: &dyn TokenCounter, out: &mut Vec<Piece>) {
    let Some(s) = span.slice(text) else { return };
    let tokens = counter.count_tokens(s);
    if tokens <= params.chunk_size {
        out.push(Piece { span, is_sentence: true, tokens });
        return;
    }
    let (parts, is_sentence) = pieces_of(text, span, params);
    if parts.len() <= 1 {
        // A single character over the budget: it must still go somewhere.
        out.push(Piece { span, is_sentence, tokens });
        return;
    }
    for p in parts {
        let t = p.slice(text).map_or(0, |s| counter.count_tokens(s));
        if t <= params.chunk_size {
            out.push(Piece { span: p, is_sentence, tokens: t });
        } else {
            split(text, p, params, counter, out);
        }
    }
}

/// Sentence-aware chunks of `text` (see the module docs).
pub fn sentence_chunks(text: &str, params: &SentenceParams, counter: &dyn TokenCounter) -> Vec<Span> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let mut pieces = Vec::new();
    split(text, Span::new(0, text.len()), params, counter, &mut pieces);

    let mut chunks: Vec<Span> = Vec::new();
    let mut cur: Vec<Piece> = Vec::new();
    let mut cur_tokens = 0usize;
    let mut new_chunk = true;
    let close = |cur: &mut Vec<Piece>, cur_tokens: &mut usize, chunks: &mut Vec<Span>| {
        if let (Some(first), Some(last)) = (cur.first(), cur.last()) {
            chunks.push(Span::new(first.span.start, last.span.end));
        }
        let last_chunk = core::mem::take(cur);
        *cur_tokens = 0;
        for p in last_chunk.iter().rev() {
            if *cur_tokens + p.tokens > params.chunk_overlap {
                break;
            }
            *cur_tokens += p.tokens;
            cur.insert(0, *p);
        }
    };
    let mut i = 0;
    while i < pieces.len() {
        let p = pieces[i];
        if cur_tokens + p.tokens > params.chunk_size && !new_chunk {
            close(&mut cur, &mut cur_tokens, &mut chunks);
            new_chunk = true;
        } else if p.is_sentence || cur_tokens + p.tokens <= params.chunk_size || new_chunk {
            cur_tokens += p.tokens;
            cur.push(p);
            new_chunk = false;
            i += 1;
        } else {
            close(&mut cur, &mut cur_tokens, &mut chunks);
            new_chunk = true;
        }
    }
    if !new_chunk {
        if let (Some(first), Some(last)) = (cur.first(), cur.last()) {
            chunks.push(Span::new(first.span.start, last.span.end));
        }
    }
    chunks.into_iter().map(|s| s.trim(text)).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::ApproxTokenCounter;

    struct Words;
    impl TokenCounter for Words {
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    fn chunk(t: &str, size: usize, overlap: usize) -> Vec<&str> {
        let p = SentenceParams { chunk_size: size, chunk_overlap: overlap, ..SentenceParams::default() };
        sentence_chunks(t, &p, &Words).iter().map(|s| s.slice(t).unwrap()).collect()
    }

    #[test]
    fn packs_sentences_without_overlap() {
        let t = "One two three. Four five six. Seven eight nine. Ten.";
        assert_eq!(chunk(t, 6, 0), ["One two three. Four five six.", "Seven eight nine. Ten."]);
        assert_eq!(chunk(t, 100, 0), [t]);
    }

    #[test]
    fn overlap_repeats_trailing_sentences() {
        let t = "One two three. Four five six. Seven eight nine. Ten.";
        assert_eq!(chunk(t, 6, 3), ["One two three. Four five six.", "Four five six. Seven eight nine.", "Seven eight nine. Ten."]);
    }

    #[test]
    fn long_sentence_falls_back_to_words() {
        let t = "a b c d e f g h i j";
        let c = chunk(t, 4, 0);
        assert_eq!(c, ["a b c d", "e f g h", "i j"]);
    }

    #[test]
    fn chinese_and_default_counter() {
        let t = "今天天气很好。我们去公园吧！好吗？";
        // 7 + 7 + 3 tokens: the first two do not fit together in 10, the last two do.
        let p = SentenceParams { chunk_size: 10, chunk_overlap: 0, ..SentenceParams::default() };
        let c: Vec<_> = sentence_chunks(t, &p, &ApproxTokenCounter).iter().map(|s| s.slice(t).unwrap()).collect();
        assert_eq!(c, ["今天天气很好。", "我们去公园吧！好吗？"]);
        assert!(sentence_chunks("  ", &p, &ApproxTokenCounter).is_empty());
    }
}
