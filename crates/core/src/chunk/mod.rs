//! The baseline chunkers the MoM paper compares document memories against.
//!
//! Every chunker returns [`Span`]s of the source, never copies, so a baseline chunk can be
//! cited exactly like a memory's chunk. Each follows the published behaviour of the tool
//! people know it from (LlamaIndex's `SentenceSplitter`, LangChain's
//! `RecursiveCharacterTextSplitter` and `SemanticChunker`), with one deliberate difference
//! everywhere: no character of the source is ever dropped by a split, because spans must stay
//! exact (LlamaIndex's secondary regex, for instance, silently drops lone punctuation).

use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;

use crate::span::Span;
use crate::text::is_cjk;
use crate::Error;

pub mod fixed;
pub mod recursive;
pub mod semantic;
pub mod sentence;
pub mod sentence_split;

pub use fixed::fixed_chunks;
pub use recursive::{recursive_chunks, RecursiveParams};
pub use semantic::{semantic_chunks, SemanticParams};
pub use sentence::{sentence_chunks, SentenceParams};
pub use sentence_split::split_sentences;

/// The chunkers by name, as the CLI and the evaluation name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ChunkerKind {
    /// Fixed-size windows of N characters ("Original" in the MoM paper).
    Fixed,
    /// Sentence-aware, token-sized chunks with overlap (LlamaIndex `SentenceSplitter`).
    Sentence,
    /// Recursive character splitting (LangChain `RecursiveCharacterTextSplitter`).
    Recursive,
    /// Breaks where adjacent sentence embeddings drift apart (`SemanticChunker`).
    Semantic,
}

impl ChunkerKind {
    /// Every chunker, in a stable order.
    pub const ALL: [ChunkerKind; 4] = [ChunkerKind::Fixed, ChunkerKind::Sentence, ChunkerKind::Recursive, ChunkerKind::Semantic];

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ChunkerKind::Fixed => "fixed",
            ChunkerKind::Sentence => "sentence",
            ChunkerKind::Recursive => "recursive",
            ChunkerKind::Semantic => "semantic",
        }
    }
}

impl fmt::Display for ChunkerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ChunkerKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChunkerKind::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(s)).ok_or_else(|| Error::UnknownChunker { name: s.into() })
    }
}

/// One chunker's settings, for callers that pick the chunker at run time (CLI, wasm).
/// `None` means the chunker's own default (fixed: 1000 characters; sentence: 1024 tokens,
/// 200 overlap; recursive: 4000 characters, 200 overlap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Size: characters (fixed, recursive) or tokens (sentence). Ignored by semantic.
    pub size: Option<usize>,
    /// Overlap: tokens (sentence) or characters (recursive). Ignored by fixed and semantic.
    pub overlap: Option<usize>,
}

/// Chunk sizes for retrieval passages where the caller gave none: the sentence chunker's
/// own defaults are 1024-token windows, which suit summarization; retrieval (and a
/// library's chunk layer) wants passages of about 128 tokens. Every front end (CLI, wasm)
/// makes a library's baseline chunks with these.
pub fn passage_sizes(kind: ChunkerKind, size: Option<usize>, overlap: Option<usize>) -> (Option<usize>, Option<usize>) {
    match kind {
        ChunkerKind::Sentence => (size.or(Some(128)), overlap.or(Some(16))),
        _ => (size, overlap),
    }
}

/// Run the chunker `kind` over `text` with `options`; the semantic chunker uses `embedder`.
///
/// A paged text (a PDF's, pages separated by [`crate::document::PAGE_BREAK`]) is chunked a
/// page at a time, so no chunk spans two pages and a citation names one page.
pub fn chunk_with(
    kind: ChunkerKind,
    text: &str,
    options: ChunkOptions,
    mut embedder: Option<&mut dyn crate::embed::Embedder>,
) -> Result<Vec<Span>, Error> {
    if !text.contains(crate::document::PAGE_BREAK) {
        return chunk_page(kind, text, options, embedder);
    }
    let mut spans = Vec::new();
    let mut at = 0;
    for page in text.split(crate::document::PAGE_BREAK) {
        if !page.trim().is_empty() {
            let inner = chunk_page(kind, page, options, embedder.as_deref_mut())?;
            spans.extend(inner.into_iter().map(|s| Span::new(s.start + at, s.end + at)));
        }
        at += page.len() + crate::document::PAGE_BREAK.len_utf8();
    }
    Ok(spans)
}

/// [`chunk_with`] for text without page breaks.
fn chunk_page<'e>(
    kind: ChunkerKind,
    text: &str,
    options: ChunkOptions,
    embedder: Option<&mut (dyn crate::embed::Embedder + 'e)>,
) -> Result<Vec<Span>, Error> {
    if options.size == Some(0) {
        return Err(Error::ZeroSize);
    }
    let check = |size: usize, overlap: usize| if overlap >= size { Err(Error::OverlapTooLarge { overlap, size }) } else { Ok(()) };
    match kind {
        ChunkerKind::Fixed => Ok(fixed_chunks(text, options.size.unwrap_or(1000))),
        ChunkerKind::Sentence => {
            let d = SentenceParams::default();
            let p = SentenceParams {
                chunk_size: options.size.unwrap_or(d.chunk_size),
                chunk_overlap: options.overlap.unwrap_or(d.chunk_overlap),
                ..d
            };
            check(p.chunk_size, p.chunk_overlap)?;
            Ok(sentence_chunks(text, &p, &ApproxTokenCounter))
        }
        ChunkerKind::Recursive => {
            let d = RecursiveParams::default();
            let p = RecursiveParams {
                chunk_size: options.size.unwrap_or(d.chunk_size),
                chunk_overlap: options.overlap.unwrap_or(d.chunk_overlap),
                ..d
            };
            check(p.chunk_size, p.chunk_overlap)?;
            Ok(recursive_chunks(text, &p))
        }
        ChunkerKind::Semantic => {
            let e = embedder.ok_or(Error::NeedsEmbedder)?;
            semantic_chunks(text, e, &SemanticParams::default())
        }
    }
}

/// Counts tokens for the token-sized chunkers. The runtime implements it with the model's
/// real tokenizer; [`ApproxTokenCounter`] serves where no tokenizer is loaded.
pub trait TokenCounter {
    /// Number of tokens in `text`.
    fn count_tokens(&self, text: &str) -> usize;
}

/// A tokenizer-free estimate of BPE token counts: a word of up to 6 characters is one
/// token and each further 6 characters add one, each punctuation mark and each CJK
/// character is one token, white space is free. Within about 20% of GPT-style BPE on
/// English prose; deterministic and cheap.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApproxTokenCounter;

impl TokenCounter for ApproxTokenCounter {
    fn count_tokens(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut word = 0usize;
        for c in text.chars() {
            if is_cjk(c) {
                tokens += word.div_ceil(6) + 1;
                word = 0;
            } else if c.is_alphanumeric() {
                word += 1;
            } else {
                tokens += word.div_ceil(6);
                word = 0;
                if !c.is_whitespace() {
                    tokens += 1;
                }
            }
        }
        tokens + word.div_ceil(6)
    }
}

/// Spans covering `text` split after each occurrence of a char for which `is_end` holds;
/// the pieces are contiguous and together cover `span` exactly.
pub(crate) fn split_after(text: &str, span: Span, is_end: impl Fn(char) -> bool) -> Vec<Span> {
    let mut out = Vec::new();
    let mut start = span.start;
    let Some(s) = span.slice(text) else { return out };
    for (i, c) in s.char_indices() {
        if is_end(c) {
            let end = span.start + i + c.len_utf8();
            out.push(Span::new(start, end));
            start = end;
        }
    }
    if start < span.end {
        out.push(Span::new(start, span.end));
    }
    out
}

/// Split `span` before each occurrence of `sep` (the separator starts the following piece,
/// as LangChain's and LlamaIndex's `keep_separator` do); empty pieces are dropped.
pub(crate) fn split_keep_separator(text: &str, span: Span, sep: &str) -> Vec<Span> {
    let Some(s) = span.slice(text) else { return Vec::new() };
    if sep.is_empty() {
        return s.char_indices().map(|(i, c)| Span::new(span.start + i, span.start + i + c.len_utf8())).collect();
    }
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in s.match_indices(sep) {
        if i > start {
            out.push(Span::new(span.start + start, span.start + i));
        }
        start = i;
    }
    if start < s.len() {
        out.push(Span::new(span.start + start, span.end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ChunkerKind::ALL {
            assert_eq!(k.name().parse::<ChunkerKind>(), Ok(k));
        }
        assert!("mom".parse::<ChunkerKind>().is_err());
    }

    #[test]
    fn no_chunk_spans_a_page_break() {
        let text = "Caxton set up a press. He printed Chaucer.\n\u{c}\nThe Gutenberg Bible was printed around 1455. It has 1,286 pages.\n\u{c}\n\n\u{c}\nLast page.";
        for kind in [ChunkerKind::Sentence, ChunkerKind::Fixed, ChunkerKind::Recursive] {
            let spans = chunk_with(kind, text, ChunkOptions::default(), None).unwrap();
            assert!(!spans.is_empty());
            for s in &spans {
                let chunk = s.slice(text).unwrap();
                assert!(!chunk.contains('\u{c}'), "{kind:?}: {chunk:?}");
            }
            let pages: Vec<Option<u32>> = spans.iter().map(|s| crate::document::page_at(text, s.start)).collect();
            assert!(pages.contains(&Some(2)) && pages.contains(&Some(4)), "{kind:?}: {pages:?}");
            let gutenberg = spans.iter().find(|s| s.slice(text).unwrap().contains("Gutenberg")).unwrap();
            assert_eq!(crate::document::page_at(text, gutenberg.start), Some(2));
        }
        assert_eq!(chunk_with(ChunkerKind::Sentence, text, ChunkOptions { size: Some(0), overlap: None }, None), Err(Error::ZeroSize));
    }

    #[test]
    fn dispatch_checks_options() {
        let t = "One. Two. Three.";
        assert_eq!(chunk_with(ChunkerKind::Fixed, t, ChunkOptions { size: Some(0), overlap: None }, None), Err(Error::ZeroSize));
        assert_eq!(
            chunk_with(ChunkerKind::Sentence, t, ChunkOptions { size: Some(5), overlap: Some(5) }, None),
            Err(Error::OverlapTooLarge { overlap: 5, size: 5 })
        );
        assert_eq!(chunk_with(ChunkerKind::Semantic, t, ChunkOptions::default(), None), Err(Error::NeedsEmbedder));
        assert_eq!(chunk_with(ChunkerKind::Recursive, t, ChunkOptions::default(), None).unwrap(), [Span::new(0, t.len())]);
    }

    #[test]
    fn approx_tokens() {
        let c = ApproxTokenCounter;
        assert_eq!(c.count_tokens("Hello, world!"), 4);
        assert_eq!(c.count_tokens("internationalization"), 4);
        assert_eq!(c.count_tokens("文档记忆。"), 5);
        assert_eq!(c.count_tokens("   "), 0);
    }

    #[test]
    fn separators_keep_every_byte() {
        let t = "a b  c";
        let parts = split_keep_separator(t, Span::new(0, t.len()), " ");
        let texts: Vec<_> = parts.iter().map(|s| s.slice(t).unwrap()).collect();
        assert_eq!(texts, ["a", " b", " ", " c"]);
        let parts = split_after(t, Span::new(0, t.len()), |c| c == ' ');
        assert_eq!(parts.iter().map(|s| s.len()).sum::<usize>(), t.len());
    }
}
