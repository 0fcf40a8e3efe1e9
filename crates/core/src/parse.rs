//! The MemReader output parser.
//!
//! A MemReader writes, in the MoM format:
//!
//! ```text
//! <think>…reasoning…</think>          (optional; the 7B reader writes none)
//! <outline>one item per line</outline>
//! <scenario><chunk>first chars[MASK]last chars</chunk>core content</scenario>   (repeated)
//! ```
//!
//! Small models break this format in every way a sampler can: the `<think>` opener is in the
//! prompt and not the output, closing tags go missing, generation stops mid-scenario, prose
//! wraps the blocks, brackets come full-width (`［MASK］`, `＜chunk＞`). The parser accepts all
//! of it: it tokenizes the tags first (case-insensitive, half- or full-width angle brackets,
//! spaces inside), then walks them with a small state machine, so each way of going wrong
//! has exactly one place where it is handled and named in a [`ParseWarning`]. It never
//! panics (a fuzz target and its regression corpus keep it so).
//!
//! What it decides:
//! - a scenario whose `<chunk>` was never closed is dropped (its extent is unknown); a
//!   scenario whose core was cut off is kept (the chunk is complete);
//! - text before a lone `</think>` is the reasoning (chat templates often put `<think>` in the
//!   prompt);
//! - a `<chunk>` outside any `<scenario>` opens one;
//! - a chunk without `[MASK]` is verbatim; with several masks, the text before the first is
//!   the prefix and after the last the suffix;
//! - outline lines lose list markers (`-`, `*`, `•`, `1.`, `1、`, `(1)`, `①`).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// What a chunk element said about its span of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ChunkPattern {
    /// `prefix[MASK]suffix`: the chunk starts with `prefix` and ends with `suffix`.
    Masked {
        /// The first characters of the chunk.
        prefix: String,
        /// The last characters of the chunk.
        suffix: String,
    },
    /// The chunk's whole text, written out.
    Verbatim(String),
    /// Units `first..=last` of the numbered view the reader was shown
    /// ([`crate::reader::NumberedText`]), 1-based.
    Units {
        /// The first unit's number.
        first: u32,
        /// The last unit's number.
        last: u32,
    },
}

/// One `<scenario>`: its chunk pattern and core content.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ParsedScenario {
    /// Where the chunk is in the source.
    pub chunk: ChunkPattern,
    /// The core content (trimmed; may be empty).
    pub core: String,
}

/// Something the parser noticed and worked around.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum ParseWarning {
    /// No `<think>` block (normal for readers that do not reason).
    NoThink,
    /// `</think>` without `<think>`: the text before it was taken as the reasoning.
    ThinkOpenedInPrompt,
    /// `<think>` never closed; it ended at the next block.
    UnclosedThink,
    /// No `<outline>` block.
    NoOutline,
    /// `<outline>` never closed; it ended at the next block.
    UnclosedOutline,
    /// A second `<outline>` block; its items were appended.
    RepeatedOutline,
    /// Non-blank text outside every block.
    TextOutsideBlocks {
        /// How many bytes of it.
        bytes: usize,
    },
    /// A closing tag with nothing open, ignored.
    StrayClosingTag {
        /// The tag's name.
        tag: String,
    },
    /// A `<chunk>` outside a `<scenario>`: a scenario was opened for it.
    ChunkOutsideScenario,
    /// A `<scenario>` without a `<chunk>`: dropped.
    ScenarioWithoutChunk,
    /// A `<scenario>` not closed before the next one began.
    UnclosedScenario {
        /// Index of the scenario in the output.
        index: usize,
    },
    /// Generation stopped inside a scenario. `kept` says whether its chunk was complete
    /// (then it is kept with the core written so far).
    TruncatedScenario {
        /// Index the scenario had (or would have had).
        index: usize,
        /// Whether it was kept.
        kept: bool,
    },
    /// A chunk without `[MASK]`: taken as verbatim text.
    ChunkWithoutMask {
        /// Index of the scenario.
        index: usize,
    },
    /// A chunk with more than one `[MASK]`.
    MultipleMasks {
        /// Index of the scenario.
        index: usize,
    },
    /// A chunk with no text at all: the scenario was dropped.
    EmptyChunk,
    /// A scenario with an empty core.
    EmptyCore {
        /// Index of the scenario.
        index: usize,
    },
    /// A one-line group without a title: the core's first words stand as its outline item.
    UntitledGroup {
        /// Index of the scenario.
        index: usize,
    },
    /// The outline has a different number of items than there are scenarios.
    OutlineScenarioMismatch {
        /// Outline items.
        outline: usize,
        /// Scenarios.
        scenarios: usize,
    },
}

/// The parse of one MemReader output.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ParsedMemory {
    /// The reasoning block, if any.
    pub think: Option<String>,
    /// Outline items in order, list markers removed.
    pub outline: Vec<String>,
    /// Scenarios in order.
    pub scenarios: Vec<ParsedScenario>,
    /// What was off, in the order it was met.
    pub warnings: Vec<ParseWarning>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TagName {
    Think,
    Outline,
    Scenario,
    Chunk,
}

impl TagName {
    fn as_str(self) -> &'static str {
        match self {
            TagName::Think => "think",
            TagName::Outline => "outline",
            TagName::Scenario => "scenario",
            TagName::Chunk => "chunk",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Tag {
    name: TagName,
    closing: bool,
    start: usize,
    end: usize,
}

/// Find every recognised tag, in order.
fn tokenize_tags(s: &str) -> Vec<Tag> {
    let mut tags = Vec::new();
    let mut iter = s.char_indices().peekable();
    while let Some((start, c)) = iter.next() {
        if c != '<' && c != '＜' {
            continue;
        }
        let rest = &s[start + c.len_utf8()..];
        if let Some((name, closing, len)) = read_tag_body(rest) {
            let end = start + c.len_utf8() + len;
            tags.push(Tag { name, closing, start, end });
            while iter.peek().is_some_and(|&(i, _)| i < end) {
                iter.next();
            }
        }
    }
    tags
}

/// Parse `[ws] [/] [ws] name [ws] (> | ＞)` at the start of `rest`; returns the tag and the
/// bytes consumed.
fn read_tag_body(rest: &str) -> Option<(TagName, bool, usize)> {
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while let Some(c) = rest[*i..].chars().next() {
            if c == ' ' || c == '\t' {
                *i += 1;
            } else {
                break;
            }
        }
    };
    skip_ws(&mut i);
    let closing = rest[i..].starts_with('/');
    if closing {
        i += 1;
        skip_ws(&mut i);
    }
    let name_len = rest[i..].bytes().take_while(|b| b.is_ascii_alphabetic()).count();
    if name_len == 0 || name_len > 8 {
        return None;
    }
    let word = &rest[i..i + name_len];
    let name = [TagName::Think, TagName::Outline, TagName::Scenario, TagName::Chunk]
        .into_iter()
        .find(|n| n.as_str().eq_ignore_ascii_case(word))?;
    i += name_len;
    skip_ws(&mut i);
    let close = rest[i..].chars().next()?;
    if close == '>' || close == '＞' {
        Some((name, closing, i + close.len_utf8()))
    } else {
        None
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Top,
    Think {
        from: usize,
    },
    Outline {
        from: usize,
    },
    /// Inside `<scenario>`, before its `<chunk>`.
    Scenario,
    Chunk {
        from: usize,
    },
    /// After `</chunk>`: the core is being written.
    Core {
        from: usize,
    },
}

struct Walker<'a> {
    src: &'a str,
    out: ParsedMemory,
    chunk: Option<String>,
    outline_blocks: usize,
    outside_bytes: usize,
}

impl<'a> Walker<'a> {
    fn outline_text(&mut self, text: &str) {
        self.outline_blocks += 1;
        if self.outline_blocks > 1 {
            self.out.warnings.push(ParseWarning::RepeatedOutline);
        }
        self.out.outline.extend(text.lines().filter_map(clean_outline_line));
    }

    fn finish_scenario(&mut self, core: &str) {
        let Some(chunk) = self.chunk.take() else { return };
        let index = self.out.scenarios.len();
        let Some(pattern) = chunk_pattern(&chunk, index, &mut self.out.warnings) else {
            self.out.warnings.push(ParseWarning::EmptyChunk);
            return;
        };
        let core = core.trim().to_string();
        if core.is_empty() {
            self.out.warnings.push(ParseWarning::EmptyCore { index });
        }
        self.out.scenarios.push(ParsedScenario { chunk: pattern, core });
    }

    fn outside(&mut self, text: &str) {
        self.outside_bytes += text.trim().len();
    }
}

/// Parse a MemReader's raw output. Never fails: whatever could not be understood is named
/// in [`ParsedMemory::warnings`].
pub fn parse_memreader_output(src: &str) -> ParsedMemory {
    let tags = tokenize_tags(src);
    let mut w = Walker { src, out: ParsedMemory::default(), chunk: None, outline_blocks: 0, outside_bytes: 0 };
    let mut state = State::Top;
    let mut pos = 0usize; // end of the last tag consumed
    let mut saw_think = false;

    let mut i = 0;
    while i < tags.len() {
        let tag = tags[i];
        let between = &src[pos..tag.start];
        let mut reprocess = false;
        state = match (state, tag.name, tag.closing) {
            (State::Top, TagName::Think, false) => {
                w.outside(between);
                saw_think = true;
                State::Think { from: tag.end }
            }
            (State::Top, TagName::Think, true) => {
                if saw_think || w.outline_blocks > 0 || !w.out.scenarios.is_empty() {
                    w.out.warnings.push(ParseWarning::StrayClosingTag { tag: "think".into() });
                    w.outside(between);
                } else {
                    saw_think = true;
                    w.out.think = Some(src[..tag.start].trim().to_string());
                    w.out.warnings.push(ParseWarning::ThinkOpenedInPrompt);
                    w.outside_bytes = 0;
                }
                State::Top
            }
            (State::Top, TagName::Outline, false) => {
                w.outside(between);
                State::Outline { from: tag.end }
            }
            (State::Top, TagName::Scenario, false) => {
                w.outside(between);
                State::Scenario
            }
            (State::Top, TagName::Chunk, false) => {
                w.outside(between);
                w.out.warnings.push(ParseWarning::ChunkOutsideScenario);
                State::Chunk { from: tag.end }
            }
            (State::Top, name, true) => {
                w.outside(between);
                w.out.warnings.push(ParseWarning::StrayClosingTag { tag: name.as_str().into() });
                State::Top
            }
            (State::Think { from }, TagName::Think, true) => {
                w.out.think = Some(src[from..tag.start].trim().to_string());
                State::Top
            }
            (State::Think { from }, TagName::Think, false) => {
                // A nested opener inside reasoning is just text.
                State::Think { from }
            }
            (State::Think { from }, _, _) => {
                w.out.think = Some(src[from..tag.start].trim().to_string());
                w.out.warnings.push(ParseWarning::UnclosedThink);
                reprocess = true;
                State::Top
            }
            (State::Outline { from }, TagName::Outline, true) => {
                w.outline_text(&src[from..tag.start]);
                State::Top
            }
            (State::Outline { from }, TagName::Think, _) | (State::Outline { from }, TagName::Outline, false) => State::Outline { from },
            (State::Outline { from }, _, _) => {
                w.outline_text(&src[from..tag.start]);
                w.out.warnings.push(ParseWarning::UnclosedOutline);
                reprocess = true;
                State::Top
            }
            (State::Scenario, TagName::Chunk, false) => State::Chunk { from: tag.end },
            (State::Scenario, TagName::Scenario, true) => {
                w.out.warnings.push(ParseWarning::ScenarioWithoutChunk);
                State::Top
            }
            (State::Scenario, TagName::Scenario, false) => {
                w.out.warnings.push(ParseWarning::ScenarioWithoutChunk);
                State::Scenario
            }
            (State::Scenario, _, _) => {
                w.out.warnings.push(ParseWarning::ScenarioWithoutChunk);
                reprocess = true;
                State::Top
            }
            (State::Chunk { from }, TagName::Chunk, true) => {
                w.chunk = Some(src[from..tag.start].to_string());
                State::Core { from: tag.end }
            }
            (State::Chunk { from }, TagName::Scenario, true) => {
                // `</chunk>` forgotten: the chunk ran to `</scenario>` and the core is empty.
                w.chunk = Some(src[from..tag.start].to_string());
                w.finish_scenario("");
                State::Top
            }
            (State::Chunk { from }, TagName::Chunk, false) => {
                // A second opener: the first chunk ran to here.
                w.chunk = Some(src[from..tag.start].to_string());
                w.finish_scenario("");
                State::Chunk { from: tag.end }
            }
            (State::Chunk { .. }, _, _) => {
                let index = w.out.scenarios.len();
                w.out.warnings.push(ParseWarning::TruncatedScenario { index, kept: false });
                reprocess = true;
                State::Top
            }
            (State::Core { from }, TagName::Scenario, true) => {
                w.finish_scenario(&src[from..tag.start]);
                State::Top
            }
            (State::Core { from }, TagName::Scenario, false) | (State::Core { from }, TagName::Chunk, false) => {
                let index = w.out.scenarios.len();
                w.out.warnings.push(ParseWarning::UnclosedScenario { index });
                w.finish_scenario(&src[from..tag.start]);
                reprocess = true;
                State::Top
            }
            (State::Core { from }, _, _) => {
                // A stray tag inside a core: keep it as core text.
                State::Core { from }
            }
        };
        if reprocess {
            // Re-read this tag from the top state; the gap before it was already counted.
            pos = tag.start;
            continue;
        }
        pos = tag.end;
        i += 1;
    }

    // End of input: close whatever is open.
    let tail = &src[pos..];
    match state {
        State::Top => w.outside(tail),
        State::Think { from } => {
            w.out.think = Some(src[from..].trim().to_string());
            w.out.warnings.push(ParseWarning::UnclosedThink);
        }
        State::Outline { from } => {
            w.outline_text(&src[from..]);
            w.out.warnings.push(ParseWarning::UnclosedOutline);
        }
        State::Scenario => w.out.warnings.push(ParseWarning::ScenarioWithoutChunk),
        State::Chunk { .. } => {
            let index = w.out.scenarios.len();
            w.out.warnings.push(ParseWarning::TruncatedScenario { index, kept: false });
        }
        State::Core { from } => {
            let index = w.out.scenarios.len();
            w.out.warnings.push(ParseWarning::TruncatedScenario { index, kept: true });
            w.finish_scenario(&src[from..]);
        }
    }

    let outside = w.outside_bytes;
    let src_len = w.src.len();
    let mut out = w.out;
    if outside > 0 {
        out.warnings.push(ParseWarning::TextOutsideBlocks { bytes: outside.min(src_len) });
    }
    if out.think.is_none() {
        out.warnings.insert(0, ParseWarning::NoThink);
    }
    if out.outline.is_empty() && !out.warnings.contains(&ParseWarning::UnclosedOutline) {
        out.warnings.push(ParseWarning::NoOutline);
    }
    if !out.outline.is_empty() && out.outline.len() != out.scenarios.len() {
        out.warnings.push(ParseWarning::OutlineScenarioMismatch { outline: out.outline.len(), scenarios: out.scenarios.len() });
    }
    out
}

/// Byte ranges of every `[MASK]` marker: `[`, `［` or `【`, then `mask` in any case with
/// optional spaces, then `]`, `］` or `】`.
fn mask_positions(s: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (start, c) in s.char_indices() {
        if !matches!(c, '[' | '［' | '【') {
            continue;
        }
        let rest = &s[start + c.len_utf8()..];
        let trimmed = rest.trim_start_matches(' ');
        let lead = rest.len() - trimmed.len();
        if trimmed.len() < 4 || !trimmed.is_char_boundary(4) || !trimmed[..4].eq_ignore_ascii_case("mask") {
            continue;
        }
        let after = &trimmed[4..];
        let after_trim = after.trim_start_matches(' ');
        let gap = after.len() - after_trim.len();
        if let Some(close) = after_trim.chars().next().filter(|c| matches!(c, ']' | '］' | '】')) {
            let end = start + c.len_utf8() + lead + 4 + gap + close.len_utf8();
            if found.last().is_none_or(|&(_, e)| start >= e) {
                found.push((start, end));
            }
        }
    }
    found
}

/// A chunk written as unit numbers: `3-7`, `[3]-[7]`, `3–7`, `3 to 7`, `3至7`, or one
/// number. Brackets and white space are ignored.
pub(crate) fn unit_range(chunk: &str) -> Option<(u32, u32)> {
    let s: String = chunk.chars().filter(|c| !c.is_whitespace() && !matches!(c, '[' | ']' | '【' | '】' | '［' | '］')).collect();
    let s = s.trim_end_matches(['.', '。']);
    let split = s.find(|c: char| !c.is_ascii_digit());
    let Some(at) = split else { return s.parse().ok().map(|n| (n, n)) };
    let first: u32 = s[..at].parse().ok()?;
    let rest = &s[at..];
    let sep = ["-", "–", "—", "~", "～", "至", "到", "to", ","].into_iter().find(|p| rest.starts_with(p))?;
    let last: u32 = rest[sep.len()..].parse().ok()?;
    Some((first, last))
}

fn chunk_pattern(chunk: &str, index: usize, warnings: &mut Vec<ParseWarning>) -> Option<ChunkPattern> {
    if let Some((first, last)) = unit_range(chunk) {
        return Some(ChunkPattern::Units { first, last });
    }
    let masks = mask_positions(chunk);
    match (masks.first(), masks.last()) {
        (Some(&(first, _)), Some(&(_, last_end))) => {
            if masks.len() > 1 {
                warnings.push(ParseWarning::MultipleMasks { index });
            }
            let prefix = chunk[..first].trim_start().to_string();
            let suffix = chunk[last_end..].trim_end().to_string();
            if prefix.trim().is_empty() && suffix.trim().is_empty() {
                return None;
            }
            Some(ChunkPattern::Masked { prefix, suffix })
        }
        _ => {
            let text = chunk.trim();
            if text.is_empty() {
                return None;
            }
            warnings.push(ParseWarning::ChunkWithoutMask { index });
            Some(ChunkPattern::Verbatim(text.to_string()))
        }
    }
}

/// Strip list markers from an outline line; `None` for a blank line.
fn clean_outline_line(line: &str) -> Option<String> {
    let mut s = line.trim();
    loop {
        let before = s;
        // Bullets.
        for bullet in ["- ", "* ", "• ", "· ", "・", "— "] {
            if let Some(rest) = s.strip_prefix(bullet) {
                s = rest.trim_start();
            }
        }
        // Circled numbers ①..⑳.
        if let Some(c) = s.chars().next() {
            if ('\u{2460}'..='\u{2473}').contains(&c) {
                s = s[c.len_utf8()..].trim_start();
            }
        }
        // "1." "1)" "1、" "1．" "(1)" "（1）" "一、" "A."
        let (open, inner) = match s.chars().next() {
            Some(c @ ('(' | '（')) => (c.len_utf8(), &s[c.len_utf8()..]),
            _ => (0, s),
        };
        let digits = inner
            .char_indices()
            .take_while(|&(_, c)| c.is_ascii_digit() || matches!(c, '一' | '二' | '三' | '四' | '五' | '六' | '七' | '八' | '九' | '十'))
            .last()
            .map_or(0, |(i, c)| i + c.len_utf8());
        if digits > 0 && digits <= 9 {
            let after = &inner[digits..];
            if let Some(c) = after.chars().next() {
                let closes = if open > 0 { matches!(c, ')' | '）') } else { matches!(c, '.' | ')' | '、' | '．' | '）' | ':' | '：') };
                if closes {
                    let rest = after[c.len_utf8()..].trim_start();
                    if !rest.is_empty() {
                        s = rest;
                    }
                }
            }
        }
        if s == before {
            break;
        }
    }
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn masked(p: &str, s: &str) -> ChunkPattern {
        ChunkPattern::Masked { prefix: p.into(), suffix: s.into() }
    }

    #[test]
    fn unit_ranges() {
        let out = "<outline>\nA\nB\nC\n</outline>\n<scenario>\n<chunk>1-3</chunk>\nCore A\n</scenario>\n<scenario><chunk>[4] – [6]</chunk>B</scenario><scenario><chunk>7</chunk>C</scenario><scenario><chunk>8至9</chunk>D</scenario>";
        let p = parse_memreader_output(out);
        let chunks: Vec<&ChunkPattern> = p.scenarios.iter().map(|s| &s.chunk).collect();
        assert_eq!(
            chunks,
            [
                &ChunkPattern::Units { first: 1, last: 3 },
                &ChunkPattern::Units { first: 4, last: 6 },
                &ChunkPattern::Units { first: 7, last: 7 },
                &ChunkPattern::Units { first: 8, last: 9 }
            ]
        );
        assert_eq!(p.scenarios[0].core, "Core A");
        // Text that merely starts with a number is not a range.
        assert!(matches!(chunk_pattern("1440 was the year[MASK]in Mainz.", 0, &mut Vec::new()), Some(ChunkPattern::Masked { .. })));
        assert!(matches!(chunk_pattern("3 - x", 0, &mut Vec::new()), Some(ChunkPattern::Verbatim(_))));
    }

    #[test]
    fn an_outline_after_the_scenarios_is_read_too() {
        // The numbered prompts ask for the groups first and the titles last; a reply cut
        // inside the outline keeps every scenario and the titles written so far.
        let out = parse_memreader_output(
            "<scenario><chunk>1-3</chunk>A</scenario>\n<scenario><chunk>4-5</chunk>B</scenario>\n<outline>\nTitle A\nTitle B\n</outline>",
        );
        assert_eq!(out.scenarios.len(), 2);
        assert_eq!(out.outline, vec!["Title A", "Title B"]);
        assert_eq!(out.warnings, vec![ParseWarning::NoThink]);
        let cut = parse_memreader_output(
            "<scenario><chunk>1-3</chunk>A</scenario><scenario><chunk>4-5</chunk>B</scenario><outline>\nTitle A\nTit",
        );
        assert_eq!(cut.scenarios.len(), 2);
        assert_eq!(cut.outline, vec!["Title A", "Tit"]);
    }

    #[test]
    fn well_formed_output() {
        let out = parse_memreader_output(
            "<think>read it</think>\n<outline>\n1. Origins\n2. Growth\n</outline>\n\
             <scenario><chunk>The city[MASK]river.</chunk>Founded on a river.</scenario>\n\
             <scenario><chunk>Trade grew[MASK]1800s.</chunk>Trade boomed.</scenario>",
        );
        assert_eq!(out.think.as_deref(), Some("read it"));
        assert_eq!(out.outline, vec!["Origins", "Growth"]);
        assert_eq!(out.scenarios.len(), 2);
        assert_eq!(out.scenarios[0].chunk, masked("The city", "river."));
        assert_eq!(out.scenarios[1].core, "Trade boomed.");
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn no_think_missing_closers_and_prose() {
        let out = parse_memreader_output(
            "Sure! Here is the memory.\n<outline>- A\n- B\n<scenario><chunk>x[MASK]y</chunk>core one\n\
             <scenario><chunk>z[MASK]w</chunk>core two</scenario> Hope this helps.",
        );
        assert_eq!(out.think, None);
        assert_eq!(out.outline, vec!["A", "B"]);
        assert_eq!(out.scenarios.len(), 2);
        assert_eq!(out.scenarios[0].core, "core one");
        assert!(out.warnings.contains(&ParseWarning::NoThink));
        assert!(out.warnings.contains(&ParseWarning::UnclosedOutline));
        assert!(out.warnings.contains(&ParseWarning::UnclosedScenario { index: 0 }));
        assert!(out.warnings.iter().any(|w| matches!(w, ParseWarning::TextOutsideBlocks { .. })));
    }

    #[test]
    fn truncated_generation() {
        // Cut off inside a core: kept.
        let out = parse_memreader_output("<outline>A</outline><scenario><chunk>a[MASK]b</chunk>half a co");
        assert_eq!(out.scenarios.len(), 1);
        assert_eq!(out.scenarios[0].core, "half a co");
        assert!(out.warnings.contains(&ParseWarning::TruncatedScenario { index: 0, kept: true }));
        // Cut off inside a chunk: dropped.
        let out = parse_memreader_output("<outline>A</outline><scenario><chunk>a[MASK]b</chunk>c</scenario><scenario><chunk>d[MA");
        assert_eq!(out.scenarios.len(), 1);
        assert!(out.warnings.contains(&ParseWarning::TruncatedScenario { index: 1, kept: false }));
    }

    #[test]
    fn chinese_full_width_and_verbatim() {
        let out = parse_memreader_output(
            "</think>\n＜outline＞\n一、背景\n（2）方法\n＜/outline＞\n\
             <scenario><chunk>文档记忆［MASK］方法。</chunk>核心内容</scenario>\
             <SCENARIO><Chunk>完整的句子。</Chunk></scenario>",
        );
        assert_eq!(out.think.as_deref(), Some(""));
        assert!(out.warnings.contains(&ParseWarning::ThinkOpenedInPrompt));
        assert_eq!(out.outline, vec!["背景", "方法"]);
        assert_eq!(out.scenarios[0].chunk, masked("文档记忆", "方法。"));
        assert_eq!(out.scenarios[1].chunk, ChunkPattern::Verbatim("完整的句子。".into()));
        assert!(out.warnings.contains(&ParseWarning::ChunkWithoutMask { index: 1 }));
        assert!(out.warnings.contains(&ParseWarning::EmptyCore { index: 1 }));
    }

    #[test]
    fn counts_mismatch_and_stray_tags() {
        let out = parse_memreader_output("<outline>A\nB\nC</outline></chunk><chunk>p[mask]s</chunk>core</scenario><scenario></scenario>");
        assert_eq!(out.scenarios.len(), 1);
        assert!(out.warnings.contains(&ParseWarning::StrayClosingTag { tag: "chunk".into() }));
        assert!(out.warnings.contains(&ParseWarning::ChunkOutsideScenario));
        assert!(out.warnings.contains(&ParseWarning::ScenarioWithoutChunk));
        assert!(out.warnings.contains(&ParseWarning::OutlineScenarioMismatch { outline: 3, scenarios: 1 }));
    }

    #[test]
    fn multiple_masks_and_empty_chunks() {
        let out = parse_memreader_output("<scenario><chunk>a[MASK]b【MASK】c</chunk>k</scenario><scenario><chunk>  </chunk>k</scenario>");
        assert_eq!(out.scenarios.len(), 1);
        assert_eq!(out.scenarios[0].chunk, masked("a", "c"));
        assert!(out.warnings.contains(&ParseWarning::MultipleMasks { index: 0 }));
        assert!(out.warnings.contains(&ParseWarning::EmptyChunk));
    }

    #[test]
    fn garbage_never_panics() {
        for s in [
            "",
            "<",
            "＜",
            "<chunk",
            "</",
            "<scenario><chunk>[",
            "[MASK]",
            "<chunk>[ mask ]</chunk>",
            "<think><think></outline>",
            "＜／chunk＞",
            "<chunk>é[MASKé</chunk>",
        ] {
            let _ = parse_memreader_output(s);
        }
    }
}
