//! The one-line-a-group reply: `FIRST-LAST | title | core`, one line for each group of
//! numbered sentences.
//!
//! Why this format: on a CPU a memory's time is mostly the tokens the reader writes (a
//! 20 KB article: 3,900 tokens written in 560 s against 5,300 read in 140 s). In the tag
//! format every group costs about 18 tokens of `<scenario>`, `<chunk>` and closing tags
//! before a word of content, its title is written again in a separate `<outline>` block
//! at the end (where small readers lose count, so titles and groups stop matching), and
//! "keep every fact" made the 1.5B copy whole sentences as cores. A line carries the
//! range, the group's title and a one-sentence core with a few tokens of separators, so
//! the same groups cost about half the tokens, the title belongs to its group by
//! construction, and a reply cut short keeps every line it finished.
//!
//! It is a choice (`--prompt en-lines`), not the default: the default reader,
//! Qwen2.5-Coder-1.5B, does not follow it. Asked for `FIRST-LAST | title | core` on a
//! 20 KB article it copied the document's sentences one per line with drifting numbers
//! (its memory fell back after 577 s); asked for titles alone it echoed sentences as
//! titles. Readers that write the tag format well are the ones this saves tokens for.
//!
//! The parser is lenient where small models vary: bullets and bracketed numbers
//! (`- [4]-[6] | …`), a full-width bar, a missing title (`4-6 | core`, the core's first
//! words then stand as its outline item, named in a warning), a `:` instead of the first
//! bar, code fences and preambles (counted as text outside the format). A reply that went
//! back to the tag format is parsed as one.

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::parse::{parse_memreader_output, unit_range, ChunkPattern, ParseWarning, ParsedMemory, ParsedScenario};

/// Words of the core that stand as an untitled group's outline item.
const TITLE_WORDS_FROM_CORE: usize = 8;

/// Parse a one-line-a-group reply. Never fails: lines that are not groups are counted in
/// [`ParseWarning::TextOutsideBlocks`].
pub fn parse_line_reply(src: &str) -> ParsedMemory {
    if has_tags(src) {
        return parse_memreader_output(src);
    }
    let mut out = ParsedMemory::default();
    let mut outside = 0usize;
    for line in src.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("```") {
            continue;
        }
        let Some((first, last, title, core)) = group_line(line) else {
            outside += line.len();
            continue;
        };
        let index = out.scenarios.len();
        if core.is_empty() {
            out.warnings.push(ParseWarning::EmptyCore { index });
        }
        let title = if title.is_empty() {
            out.warnings.push(ParseWarning::UntitledGroup { index });
            core.split_whitespace().take(TITLE_WORDS_FROM_CORE).collect::<Vec<_>>().join(" ")
        } else {
            title.to_string()
        };
        out.outline.push(title);
        out.scenarios.push(ParsedScenario { chunk: ChunkPattern::Units { first, last }, core: core.to_string() });
    }
    if outside > 0 {
        out.warnings.push(ParseWarning::TextOutsideBlocks { bytes: outside });
    }
    out
}

/// Whether the reply is written in the tag format after all.
fn has_tags(src: &str) -> bool {
    let lower = src.to_ascii_lowercase();
    lower.contains("<scenario") || lower.contains("<chunk")
}

/// `FIRST-LAST | title | core` (or `FIRST-LAST | core`, or `FIRST-LAST: core`), after any
/// bullet: the range, the title (may be empty) and the core (may be empty).
fn group_line(line: &str) -> Option<(u32, u32, &str, &str)> {
    let mut s = line;
    for bullet in ["- ", "* ", "• "] {
        if let Some(rest) = s.strip_prefix(bullet) {
            s = rest.trim_start();
        }
    }
    let s = s.trim_start_matches("**");
    let bar = |c: char| c == '|' || c == '｜';
    let (range, rest) = match split_at_char(s, s.find(bar)) {
        Some(parts) => parts,
        None => split_at_char(s, s.find([':', '：']))?,
    };
    // A range is numbers and a dash; white space inside one number (`[3] 1990`) is not.
    let range = range.trim().trim_matches('*');
    if range.split(|c: char| !c.is_ascii_digit()).filter(|d| !d.is_empty()).count() > 2 || has_spaced_digits(range) {
        return None;
    }
    let (first, last) = unit_range(range)?;
    let rest = rest.trim();
    let (title, core) = match split_at_char(rest, rest.find(bar)) {
        Some((title, core)) => (title.trim(), core.trim()),
        None => ("", rest),
    };
    Some((first, last, title.trim_matches('*').trim(), core))
}

/// `s` before and after the character at byte `at` (a separator), when there is one.
fn split_at_char(s: &str, at: Option<usize>) -> Option<(&str, &str)> {
    let at = at?;
    let width = s[at..].chars().next()?.len_utf8();
    Some((&s[..at], &s[at + width..]))
}

/// Whether two digits are separated by white space only (`3 1990`): two numbers, not one.
fn has_spaced_digits(s: &str) -> bool {
    let chars: alloc::vec::Vec<char> = s.chars().filter(|c| !matches!(c, '[' | ']' | '【' | '】' | '［' | '］')).collect();
    chars.windows(3).any(|w| w[0].is_ascii_digit() && w[1].is_whitespace() && w[2].is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn ranges(p: &ParsedMemory) -> Vec<(u32, u32)> {
        p.scenarios
            .iter()
            .map(|s| match s.chunk {
                ChunkPattern::Units { first, last } => (first, last),
                _ => panic!("not a unit range: {:?}", s.chunk),
            })
            .collect()
    }

    #[test]
    fn each_line_is_a_group_with_its_title_and_core() {
        let p = parse_line_reply(
            "1-3 | How tea reached Europe | Dutch traders brought tea from Java in the early 1600s.\n4-5 | Tea in London | By 1700 coffee houses sold tea.\n",
        );
        assert_eq!(ranges(&p), vec![(1, 3), (4, 5)]);
        assert_eq!(p.outline, vec!["How tea reached Europe", "Tea in London"]);
        assert_eq!(p.scenarios[1].core, "By 1700 coffee houses sold tea.");
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    #[test]
    fn the_ways_small_readers_vary_the_line_are_read() {
        let p = parse_line_reply(
            "Here is the memory:\n```\n- [1]-[2] | Origins | Tea came | by sea.\n3 ｜ One line ｜ A single sentence.\n4–6: Core without a title, which is long enough to be cut short here\n**7-8** | **Bold** | Core.\n```",
        );
        assert_eq!(ranges(&p), vec![(1, 2), (3, 3), (4, 6), (7, 8)]);
        assert_eq!(p.scenarios[0].core, "Tea came | by sea.", "a bar inside the core stays");
        assert_eq!(p.outline[2], "Core without a title, which is long enough", "an untitled group is named by its core's first words");
        assert_eq!(p.outline[3], "Bold");
        assert_eq!(
            p.warnings,
            vec![ParseWarning::UntitledGroup { index: 2 }, ParseWarning::TextOutsideBlocks { bytes: "Here is the memory:".len() }]
        );
    }

    #[test]
    fn a_reply_cut_short_keeps_every_line_and_prose_is_not_a_group() {
        let p = parse_line_reply("1-2 | A | First.\n3-4 | B | Sec");
        assert_eq!(ranges(&p), vec![(1, 2), (3, 4)]);
        assert_eq!(p.scenarios[1].core, "Sec");
        let prose = parse_line_reply("In 1440 Gutenberg | built a press.\nThe 3 ships: sailed.\n[3] 1990: a year.\n1 2 3 | counted");
        assert!(prose.scenarios.is_empty(), "{prose:?}");
        let empty = parse_line_reply("5-6 | Title |");
        assert_eq!(empty.warnings, vec![ParseWarning::EmptyCore { index: 0 }]);
    }

    #[test]
    fn a_reply_in_the_tag_format_is_parsed_as_one() {
        let p = parse_line_reply("<scenario><chunk>1-3</chunk>A</scenario>\n<outline>\nTitle A\n</outline>");
        assert_eq!(ranges(&p), vec![(1, 3)]);
        assert_eq!(p.outline, vec!["Title A"]);
    }
}
