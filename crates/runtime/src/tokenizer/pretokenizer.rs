//! `tokenizer.ggml.pre` names → the word-splitting regexes llama.cpp applies before BPE.
//!
//! llama.cpp stores only a name and keeps the regexes in its source (`llama-vocab.cpp`);
//! they are the HF `tokenizer.json` regexes, sometimes rewritten without case-insensitive
//! groups. We apply each regex as an HF `Split` with `Isolated` behaviour, in order, then a
//! byte-level mapping without its own regex: exactly llama.cpp's sequence of splits.

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

use super::lib_err;
use crate::Error;

/// GPT-2's word regex.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's regex (digits in threes).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's regex (single digits).
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GPT-4o's regex (o200k: words split where lower case turns to upper, contractions kept
/// on their word, digits in threes), as llama.cpp rewrites it: `[^a-z]` and `[^A-Z]` behind
/// a letter look-ahead in place of the Unicode case classes, and the case-insensitive
/// contractions spelled out. Applied as llama.cpp applies this form, so a letter with no
/// ASCII case (é, 中) counts as either.
const GPT4O: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A pre-tokenizer family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreTokenizerKind {
    /// GPT-2 (`gpt-2`, `default`, and other plain GPT-2 splitters).
    Gpt2,
    /// Single digits, then GPT-2 (`smollm`, `starcoder`, `refact`, …).
    Smollm,
    /// Llama 3 (`llama-bpe`, `llama3`).
    Llama3,
    /// Qwen2 (`qwen2`, `deepseek-r1-qwen`, `stablelm2`, `megrez`).
    Qwen2,
    /// GPT-4o's o200k (`gpt-4o`: Phi-4-mini; `llama4`).
    Gpt4o,
}

impl PreTokenizerKind {
    /// Names accepted, for error messages.
    pub const NAMES: &'static [&'static str] = &[
        "default",
        "gpt-2",
        "smollm",
        "starcoder",
        "refact",
        "codeshell",
        "llama-bpe",
        "llama3",
        "llama-v3",
        "qwen2",
        "deepseek-r1-qwen",
        "stablelm2",
        "megrez",
        "gpt-4o",
        "llama4",
    ];

    /// The family for a `tokenizer.ggml.pre` name.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "default" | "gpt-2" | "gpt2" | "mpt" | "olmo" | "jais" => Self::Gpt2,
            "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" | "exaone" | "minerva-7b" => Self::Smollm,
            "llama-bpe" | "llama3" | "llama-v3" | "falcon3" => Self::Llama3,
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "megrez" => Self::Qwen2,
            "gpt-4o" | "llama4" => Self::Gpt4o,
            _ => return None,
        })
    }

    /// The regexes, applied in order.
    fn regexes(self) -> &'static [&'static str] {
        match self {
            Self::Gpt2 => &[GPT2],
            Self::Smollm => &[r"\p{N}", GPT2],
            Self::Llama3 => &[LLAMA3],
            Self::Qwen2 => &[QWEN2],
            Self::Gpt4o => &[GPT4O],
        }
    }

    /// llama.cpp looks whole words up in the vocabulary before merging (`ignore_merges`).
    pub(super) fn ignores_merges(self) -> bool {
        matches!(self, Self::Llama3)
    }

    /// Whether prompts start with BOS unless the file says otherwise.
    pub(super) fn adds_bos(self) -> bool {
        matches!(self, Self::Llama3)
    }

    pub(super) fn build(self) -> Result<PreTokenizerWrapper, Error> {
        let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
        for re in self.regexes() {
            let split = Split::new(SplitPattern::Regex((*re).to_owned()), SplitDelimiterBehavior::Isolated, false).map_err(lib_err)?;
            steps.push(split.into());
        }
        steps.push(ByteLevel::new(false, false, false).into());
        Ok(PreTokenizerWrapper::Sequence(Sequence::new(steps)))
    }
}

/// GPT-2's byte ↔ printable-character table, inverted: a byte-level token string back to
/// the bytes it stands for. Characters outside the table are kept as their UTF-8.
pub(super) fn byte_level_to_bytes(token: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    for c in token.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    // Printable bytes map to themselves.
    if (0x21..=0x7E).contains(&cp) || (0xA1..=0xAC).contains(&cp) || (0xAE..=0xFF).contains(&cp) {
        return Some(cp as u8);
    }
    // The rest were shifted to U+0100.. in byte order.
    if (0x100..0x100 + 68).contains(&cp) {
        let mut n = 0u32;
        for b in 0u32..=255 {
            let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
            if !printable {
                if n == cp - 0x100 {
                    return Some(b as u8);
                }
                n += 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_inverse() {
        assert_eq!(byte_level_to_bytes("Ġthe"), b" the");
        assert_eq!(byte_level_to_bytes("Ċ"), b"\n");
        assert_eq!(byte_level_to_bytes("ĉ"), b"\t");
        // "é" is two bytes, each its own printable char in the table.
        assert_eq!(byte_level_to_bytes("Ã©"), "é".as_bytes());
        assert_eq!(char_to_byte('Ā'), Some(0));
        assert_eq!(char_to_byte('ġ'), Some(0x7F));
    }

    /// GPT-4o's splits: a word ends where lower case turns to upper, a run of capitals
    /// takes the lower case after it, contractions stay on their word, digits go in
    /// threes. (The golden of a synthetic Phi-4-mini checks the same against llama.cpp.)
    #[test]
    fn gpt4o_splits_words_at_case_changes() {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let split = |kind: PreTokenizerKind, text: &str| {
            let mut s = PreTokenizedString::from(text);
            kind.build().unwrap().pre_tokenize(&mut s).unwrap();
            let pieces = s.get_splits(OffsetReferential::Original, OffsetType::Byte);
            pieces.iter().map(|(_, (a, b), _)| text[*a..*b].to_owned()).collect::<Vec<_>>()
        };
        let text = "helloWorld HTTPServer O'NEIL'S x=1234567";
        assert_eq!(split(PreTokenizerKind::Gpt4o, text), ["hello", "World", " HTTPServer", " O", "'NEIL'S", " x", "=", "123", "456", "7"]);
        assert_eq!(split(PreTokenizerKind::Qwen2, text)[..2], ["helloWorld", " HTTPServer"]);
    }

    #[test]
    fn every_name_resolves() {
        for name in PreTokenizerKind::NAMES {
            assert!(PreTokenizerKind::from_name(name).is_some(), "{name}");
        }
        assert_eq!(PreTokenizerKind::from_name("tekken"), None);
    }
}
