//! A rule-based sentence splitter (the role NLTK's punkt plays for LlamaIndex).
//!
//! A sentence ends at `.`, `!` or `?` (after any closing quotes or brackets) when white
//! space follows and the next word does not continue the sentence (it starts with an
//! upper-case letter, a digit, an opening quote or bracket, or a CJK character), unless the
//! word before the period is a known abbreviation or a single capital letter (an initial).
//! In CJK text a sentence ends at `。！？` with no space needed. Like punkt, a blank line
//! alone does not end a sentence (a heading joins the sentence after it); checked against
//! LlamaIndex's splitter in `tests/chunkers_golden.rs`. Sentences keep their trailing white
//! space, so they tile the text.

use alloc::vec::Vec;

use crate::span::Span;
use crate::text::{is_cjk, is_cjk_sentence_end};

const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "no", "fig", "figs", "inc", "ltd", "co", "corp", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "approx", "dept", "est", "vol", "pp", "ed", "eds", "gen",
    "gov", "sen", "rep", "rev", "mt", "ft", "u.s", "u.k", "a.m", "p.m", "cf", "al",
];

fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '}' | '”' | '’' | '」' | '』' | '）' | '》')
}

fn starts_new_sentence(c: char) -> bool {
    c.is_uppercase() || c.is_ascii_digit() || is_cjk(c) || matches!(c, '"' | '\'' | '(' | '[' | '“' | '‘' | '「' | '《' | '*' | '-' | '#')
}

/// The word just before byte `end` (letters, digits and inner dots), lower-cased.
fn word_before(text: &str, end: usize) -> alloc::string::String {
    let before = &text[..end];
    let start = before.char_indices().rev().take_while(|&(_, c)| c.is_alphanumeric() || c == '.').last().map_or(end, |(i, _)| i);
    before[start..].trim_end_matches('.').to_lowercase()
}

/// Sentences of `text` as spans that tile it.
pub fn split_sentences(text: &str) -> Vec<Span> {
    split_sentences_in(text, Span::new(0, text.len()))
}

/// Sentences of `text[span]` as spans that tile `span`.
pub fn split_sentences_in(text: &str, span: Span) -> Vec<Span> {
    let Some(s) = span.slice(text) else { return Vec::new() };
    let base = span.start;
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut ends: Vec<usize> = Vec::new(); // byte offsets (relative) where a sentence ends
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let mut end_here = None;
        if matches!(c, '。' | '！' | '？') {
            let mut j = i + 1;
            while j < chars.len() && (is_closer(chars[j].1) || is_cjk_sentence_end(chars[j].1)) {
                j += 1;
            }
            end_here = Some(j);
        } else if matches!(c, '.' | '!' | '?') {
            let mut j = i + 1;
            while j < chars.len() && (is_closer(chars[j].1) || matches!(chars[j].1, '.' | '!' | '?')) {
                j += 1;
            }
            let mut k = j;
            while k < chars.len() && chars[k].1.is_whitespace() {
                k += 1;
            }
            let spaced = k > j;
            let next_ok = k >= chars.len() || starts_new_sentence(chars[k].1);
            let abbreviation = c == '.' && {
                let w = word_before(s, pos);
                ABBREVIATIONS.contains(&w.as_str()) || (w.chars().count() == 1 && s[..pos].chars().last().is_some_and(|p| p.is_uppercase()))
            };
            if (spaced || k >= chars.len()) && next_ok && !abbreviation {
                end_here = Some(j);
            }
        }
        if let Some(j) = end_here {
            // The sentence takes the white space after it.
            let mut k = j;
            while k < chars.len() && chars[k].1.is_whitespace() {
                k += 1;
            }
            let end = if k < chars.len() { chars[k].0 } else { s.len() };
            if ends.last().is_none_or(|&e| end > e) && end > 0 {
                ends.push(end);
            }
            i = k.max(i + 1);
        } else {
            i += 1;
        }
    }
    if ends.last() != Some(&s.len()) && !s.is_empty() {
        ends.push(s.len());
    }
    let mut out = Vec::with_capacity(ends.len());
    let mut start = 0;
    for e in ends {
        if e > start {
            out.push(Span::new(base + start, base + e));
            start = e;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::spans_tile;

    fn sentences(t: &str) -> Vec<&str> {
        let spans = split_sentences(t);
        assert!(spans_tile(t, &spans), "{spans:?}");
        spans.iter().map(|s| s.slice(t).unwrap()).collect()
    }

    #[test]
    fn english() {
        assert_eq!(
            sentences("Dr. Smith went to Washington. He met J. Doe there! Was it 3 p.m. or later? Yes."),
            ["Dr. Smith went to Washington. ", "He met J. Doe there! ", "Was it 3 p.m. or later? ", "Yes."]
        );
        assert_eq!(sentences("Prices rose 2.5 percent. \"Why?\" she asked."), ["Prices rose 2.5 percent. ", "\"Why?\" she asked."]);
        assert_eq!(sentences("no end here"), ["no end here"]);
        assert_eq!(sentences("Heading\n\nBody text. More."), ["Heading\n\nBody text. ", "More."]);
    }

    #[test]
    fn chinese() {
        assert_eq!(sentences("今天天气很好。我们去公园吧！好吗？"), ["今天天气很好。", "我们去公园吧！", "好吗？"]);
        assert_eq!(sentences("他说：“走吧。”然后走了。"), ["他说：“走吧。”", "然后走了。"]);
    }

    #[test]
    fn empty() {
        assert!(split_sentences("").is_empty());
    }
}
