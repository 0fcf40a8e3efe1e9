//! Small text utilities shared by the parser, the aligner, the chunkers and BM25.
//!
//! Why here and not in a crate: the core is `no_std`, and the few Unicode facts it needs
//! (CJK ranges, full-width forms, white space) are cheap to state directly.

use alloc::string::String;
use alloc::vec::Vec;

/// True for characters of the CJK scripts that are written without spaces between words
/// (Han, Hiragana, Katakana, Hangul syllables, and their extension blocks).
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F)
}

/// Fold a full-width ASCII variant (U+FF01..U+FF5E) and the ideographic space to its
/// half-width form; other characters pass through.
pub fn fold_width(c: char) -> char {
    match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        0x3000 => ' ',
        _ => c,
    }
}

/// Sentence-ending punctuation of Chinese and Japanese text (no space follows it).
pub fn is_cjk_sentence_end(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '；' | '!' | '?' | '…')
}

/// A guess of the document's language as a BCP-47 tag: `"zh"` when at least a fifth of its
/// letters are CJK, `"en"` when it has Latin letters, `"und"` otherwise. The MemReader prompt
/// variant is chosen from it; users can override it.
pub fn detect_language(text: &str) -> &'static str {
    let (mut cjk, mut latin) = (0usize, 0usize);
    for c in text.chars().take(20_000) {
        if is_cjk(c) {
            cjk += 1;
        } else if c.is_alphabetic() {
            latin += 1;
        }
    }
    if cjk > 0 && cjk * 5 >= cjk + latin {
        "zh"
    } else if latin > 0 {
        "en"
    } else {
        "und"
    }
}

/// Lexical terms for BM25 and token-overlap similarity: lower-cased alphanumeric words for
/// scripts with spaces, and overlapping character bigrams for CJK runs (a lone CJK character
/// is kept as a unigram), the usual choice when no word segmenter is available.
pub fn lexical_terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk_run: Vec<char> = Vec::new();
    let flush_cjk = |run: &mut Vec<char>, out: &mut Vec<String>| {
        if run.len() == 1 {
            out.push(run.iter().collect());
        } else {
            for w in run.windows(2) {
                out.push(w.iter().collect());
            }
        }
        run.clear();
    };
    for c in text.chars().map(fold_width) {
        if is_cjk(c) {
            if !word.is_empty() {
                out.push(core::mem::take(&mut word));
            }
            cjk_run.push(c);
        } else if c.is_alphanumeric() {
            if !cjk_run.is_empty() {
                flush_cjk(&mut cjk_run, &mut out);
            }
            word.extend(c.to_lowercase());
        } else {
            if !word.is_empty() {
                out.push(core::mem::take(&mut word));
            }
            if !cjk_run.is_empty() {
                flush_cjk(&mut cjk_run, &mut out);
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    if !cjk_run.is_empty() {
        flush_cjk(&mut cjk_run, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn terms_latin_and_cjk() {
        assert_eq!(lexical_terms("Hello, World 42"), vec!["hello", "world", "42"]);
        assert_eq!(lexical_terms("文档记忆abc"), vec!["文档", "档记", "记忆", "abc"]);
        assert_eq!(lexical_terms("中 x"), vec!["中", "x"]);
        assert_eq!(lexical_terms("ＡＢＣ１"), vec!["abc1"]);
    }

    #[test]
    fn languages() {
        assert_eq!(detect_language("The quick brown fox"), "en");
        assert_eq!(detect_language("文档记忆是一种方法"), "zh");
        assert_eq!(detect_language("123 !!"), "und");
    }
}
