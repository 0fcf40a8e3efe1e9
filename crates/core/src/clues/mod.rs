//! Clue-guided retrieval for vague and global questions (MemoRAG).
//!
//! A question such as "how did the town make its money?" shares few words with the
//! sentence that answers it ("Copper was mined in the hills"), so neither its embedding
//! nor BM25 finds that sentence reliably. MemoRAG's answer: let a model that has read a
//! compact *global memory* of the whole library write **clues**, texts that are likely to
//! sit near the evidence, and search with each of them beside the question:
//! - [`global`]: the global memory, every document's outline and core contents, compressed
//!   by a gist pass over windows when it does not fit the model's context (MemoRAG-lite);
//! - [`prompt`]: the clue-writing prompt in English and Chinese and the parser of its reply
//!   (text spans, surrogate questions, a draft answer);
//! - [`filter`]: clues deduplicated and length-filtered in units that work for scripts
//!   without spaces (a CJK character counts as a word);
//! - [`fuse`]: every clue searched through the three layers, and all ranked lists, the
//!   question's included, fused with weighted RRF; each result says which clues found it;
//! - [`scope`]: adaptive mode's question classifier (global or local), the model with a
//!   cheap keyword fallback.
//!
//! # When clues are used ([`CluesMode`])
//! `off`: plain three-layer retrieval. `on`: clue-guided retrieval for every question.
//! `auto`: the question is classified; a *global* question ("what is this collection
//! about?") is answered from the outline layer and the global memory, since no single
//! passage holds its answer; a *local* one goes through clue-guided retrieval.

pub mod filter;
pub mod fuse;
pub mod global;
pub mod prompt;
pub mod scope;

use alloc::string::String;
use core::fmt;
use core::str::FromStr;

pub use filter::{filter_clues, text_units, ClueFilter};
pub use fuse::{fuse_clue_lists, ClueWeights, CluedChunk, DEFAULT_CLUE_SHARE};
pub use global::{build_global_memory, DocumentNotes, GlobalMemory, GlobalMemorySettings};
pub use prompt::{clue_request, parse_clues, write_clues, CLUE_MAX_TOKENS};
pub use scope::{classify_scope, heuristic_scope, Scope, ScopeSource};

/// When clue-guided retrieval is used (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum CluesMode {
    /// Classify each question: global ones from the outline layer and the global memory,
    /// local ones through clues.
    Auto,
    /// Clues for every question.
    On,
    /// Never (plain retrieval).
    #[default]
    Off,
}

impl CluesMode {
    /// The name used in settings and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CluesMode::Auto => "auto",
            CluesMode::On => "on",
            CluesMode::Off => "off",
        }
    }
}

impl FromStr for CluesMode {
    type Err = UnknownCluesMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(CluesMode::Auto),
            "on" | "always" => Ok(CluesMode::On),
            "off" | "never" => Ok(CluesMode::Off),
            other => Err(UnknownCluesMode(other.into())),
        }
    }
}

/// A clues setting that is not `auto`, `on` (`always`) or `off` (`never`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownCluesMode(pub String);

impl fmt::Display for UnknownCluesMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' is not a clues mode: give auto, on or off", self.0)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for UnknownCluesMode {}

/// What a clue is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ClueKind {
    /// The user's question itself (always the first query).
    Question,
    /// Text likely to appear in the evidence.
    Span,
    /// A more precise question in place of a vague one.
    Surrogate,
    /// A draft answer.
    Draft,
}

/// One query of clue-guided retrieval.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Clue {
    /// What it is.
    pub kind: ClueKind,
    /// Its text.
    pub text: String,
}

impl Clue {
    /// A clue of `kind`.
    pub fn new(kind: ClueKind, text: impl Into<String>) -> Self {
        Clue { kind, text: text.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse::<CluesMode>(), Ok(CluesMode::Auto));
        assert_eq!("always".parse::<CluesMode>(), Ok(CluesMode::On));
        assert_eq!(" never ".parse::<CluesMode>(), Ok(CluesMode::Off));
        assert!("maybe".parse::<CluesMode>().unwrap_err().to_string().contains("'maybe'"));
    }
}
