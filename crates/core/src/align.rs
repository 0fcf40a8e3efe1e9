//! Chunk alignment: map each `prefix[MASK]suffix` the reader wrote onto a span of the source.
//!
//! The reader never copies its chunks out; it names them by their first and last
//! characters. Turning those names back into spans decides what a citation points at, so
//! the aligner is conservative: it never invents text, and a chunk it cannot place is
//! reported as failed rather than guessed.
//!
//! How:
//! 1. Both the document and the patterns are compared in a *normalized view*: white-space
//!    runs folded to one space, full-width forms to half-width, curly quotes to straight,
//!    letters lower-cased. Small models rewrite exactly these; each normalized character
//!    remembers the source bytes it came from, so matches map back to exact spans.
//! 2. Chunks come in document order, so a cursor moves forward monotonically. The prefix is
//!    searched exactly from the cursor to the end; failing that, fuzzily (Sellers'
//!    approximate substring match, edit distance with a free start) within
//!    [`AlignParams::search_window_chars`] after the cursor. The suffix is searched the same
//!    way after the prefix, within [`AlignParams::max_chunk_chars`]. A fuzzy match below
//!    [`AlignParams::min_similarity`] (1 − distance / pattern length) is rejected.
//! 3. Repair so the spans tile the document: overlaps are trimmed from the later chunk, a gap
//!    attaches to the chunk before it (the leading gap to the first chunk), and the core of a
//!    chunk that failed to align joins the chunk that now holds its text.
//! 4. MoM's merge rule: a chunk shorter than [`AlignParams::merge_below_chars`] characters
//!    merges into the previous one when the result has at most
//!    [`AlignParams::merge_max_chars`] characters.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::memory::Scenario;
use crate::parse::{ChunkPattern, ParsedMemory};
use crate::span::Span;
use crate::text::fold_width;

/// Alignment settings. The defaults follow the MoM paper where it gives numbers (50/250).
#[derive(Clone, Debug, PartialEq)]
pub struct AlignParams {
    /// Lowest accepted similarity of a fuzzy match, 1 − edit distance / pattern length.
    pub min_similarity: f32,
    /// Patterns shorter than this (normalized characters) must match exactly.
    pub min_fuzzy_chars: usize,
    /// How far past the cursor a fuzzy prefix search looks (characters).
    pub search_window_chars: usize,
    /// How far past the prefix the suffix may end (characters).
    pub max_chunk_chars: usize,
    /// How far before the cursor a fuzzy prefix may start (the reader sometimes overlaps
    /// chunks by a few characters).
    pub backtrack_chars: usize,
    /// Chunks shorter than this many characters merge into the previous one...
    pub merge_below_chars: usize,
    /// ...when the merged chunk has at most this many characters.
    pub merge_max_chars: usize,
    /// Most characters of a [MASK] prefix (its first ones) and suffix (its last ones)
    /// matched against the document. The reader is asked for a few words; a longer end
    /// places the chunk no better, and fuzzy matching costs its length × the search window,
    /// so this bounds the alignment work a misbehaving reader can cause.
    pub max_pattern_chars: usize,
    /// Most character comparisons one document's alignment may make (the searches' window
    /// × pattern lengths, summed). A reply with thousands of unplaceable chunks stops here:
    /// the chunks not yet searched count as failed and the stats say the limit was reached,
    /// so extraction falls back naming it ([`crate::reader::fallback_reason`]).
    pub max_work: u64,
}

impl Default for AlignParams {
    fn default() -> Self {
        AlignParams {
            min_similarity: 0.8,
            min_fuzzy_chars: 5,
            search_window_chars: 4000,
            max_chunk_chars: 8000,
            backtrack_chars: 32,
            merge_below_chars: 50,
            merge_max_chars: 250,
            max_pattern_chars: 64,
            max_work: DEFAULT_ALIGN_WORK,
        }
    }
}

/// Character comparisons one document's alignment may make by default: about a fifth of a
/// second, several times what a well-behaved reply of the longest window takes.
pub const DEFAULT_ALIGN_WORK: u64 = 200_000_000;

/// What alignment found, for provenance and for deciding on a fallback.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AlignmentStats {
    /// Chunks the reader wrote.
    pub chunks: u32,
    /// Chunks whose prefix and suffix both matched exactly (in the normalized view).
    pub exact: u32,
    /// Chunks placed with at least one fuzzy match.
    pub fuzzy: u32,
    /// Chunks that could not be placed.
    pub failed: u32,
    /// Fraction of the document's bytes covered by placed chunks before repair.
    pub coverage_before_repair: f32,
    /// Chunks merged into their predecessor by the short-chunk rule.
    pub merged_short: u32,
    /// Whether alignment stopped at [`AlignParams::max_work`] (the chunks not searched
    /// count as failed).
    #[cfg_attr(feature = "serde", serde(default))]
    pub stopped_at_work_limit: bool,
    /// Cores dropped for being another chunk's sentence copied word for word
    /// ([`crate::reader::misplaced_core`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub misplaced_cores: u32,
}

/// The aligned scenarios (tiling the document) and the statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedMemory {
    /// Scenarios in order; empty when no chunk could be placed.
    pub scenarios: Vec<Scenario>,
    /// What happened.
    pub stats: AlignmentStats,
}

/// A normalized view of a text: one entry per normalized char, with its source byte range.
struct NormText {
    chars: Vec<char>,
    starts: Vec<usize>,
    ends: Vec<usize>,
}

fn fold_char(c: char) -> char {
    let c = fold_width(c);
    let c = match c {
        '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201F}' | '\u{2033}' => '"',
        '\u{2013}' | '\u{2014}' | '\u{2212}' => '-',
        _ => c,
    };
    if c.is_ascii() {
        c.to_ascii_lowercase()
    } else {
        let mut lower = c.to_lowercase();
        match (lower.next(), lower.next()) {
            (Some(l), None) => l,
            _ => c,
        }
    }
}

impl NormText {
    fn new(text: &str) -> Self {
        let mut n = NormText { chars: Vec::with_capacity(text.len()), starts: Vec::new(), ends: Vec::new() };
        for (i, c) in text.char_indices() {
            let end = i + c.len_utf8();
            if c.is_whitespace() {
                if n.chars.last() == Some(&' ') {
                    if let Some(e) = n.ends.last_mut() {
                        *e = end;
                    }
                    continue;
                }
                n.chars.push(' ');
            } else {
                n.chars.push(fold_char(c));
            }
            n.starts.push(i);
            n.ends.push(end);
        }
        n
    }
}

fn normalize_pattern(p: &str) -> Vec<char> {
    let mut out: Vec<char> = Vec::new();
    for c in p.trim().chars() {
        if c.is_whitespace() {
            if out.last() != Some(&' ') {
                out.push(' ');
            }
        } else {
            out.push(fold_char(c));
        }
    }
    out
}

/// First exact occurrence of `needle` in `hay[from..to]`, as a start index.
fn find_exact(hay: &[char], needle: &[char], from: usize, to: usize) -> Option<usize> {
    let to = to.min(hay.len());
    if needle.is_empty() || from >= to || needle.len() > to - from {
        return None;
    }
    let last = to - needle.len();
    (from..=last).find(|&i| hay[i] == needle[0] && hay[i..i + needle.len()] == *needle)
}

/// Sellers' approximate substring match of `pat` in `hay[from..to]`: the substring with the
/// lowest edit distance (earliest end on ties). Returns (start, end, distance).
fn find_fuzzy(hay: &[char], pat: &[char], from: usize, to: usize) -> Option<(usize, usize, usize)> {
    let to = to.min(hay.len());
    let m = pat.len();
    if m == 0 || from >= to {
        return None;
    }
    let mut dist: Vec<usize> = (0..=m).collect();
    let mut start: Vec<usize> = vec![from; m + 1];
    let mut best: Option<(usize, usize, usize)> = None;
    for (j, &h) in hay.iter().enumerate().take(to).skip(from) {
        let (mut diag, mut diag_start) = (dist[0], start[0]);
        dist[0] = 0;
        start[0] = j + 1;
        for i in 1..=m {
            let sub = diag + usize::from(pat[i - 1] != h);
            let skip_text = dist[i] + 1; // hay[j] is not in the pattern
            let skip_pat = dist[i - 1] + 1; // pat[i-1] is missing from the text
            let (d, s) = if sub <= skip_text && sub <= skip_pat {
                (sub, diag_start)
            } else if skip_pat <= skip_text {
                (skip_pat, start[i - 1])
            } else {
                (skip_text, start[i])
            };
            diag = dist[i];
            diag_start = start[i];
            dist[i] = d;
            start[i] = s;
        }
        if best.is_none_or(|(_, _, bd)| dist[m] < bd) {
            best = Some((start[m], j + 1, dist[m]));
            if dist[m] == 0 {
                break;
            }
        }
    }
    best
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MatchKind {
    Exact,
    Fuzzy,
}

struct Matcher<'a> {
    norm: &'a NormText,
    params: &'a AlignParams,
    /// Comparisons spent so far (see [`AlignParams::max_work`]).
    spent: core::cell::Cell<u64>,
    /// Set once a search was refused for lack of work left.
    exhausted: core::cell::Cell<bool>,
}

impl Matcher<'_> {
    /// Spends the comparisons a search of `pattern` over `from..to` may make, or refuses
    /// (and remembers it) when they would pass the limit.
    fn afford(&self, pattern: usize, from: usize, to: usize) -> bool {
        let cost = (to.saturating_sub(from) as u64).saturating_mul(pattern.max(1) as u64);
        let total = self.spent.get().saturating_add(cost);
        // Once one search was refused, every later one is too: the chunks after it count
        // as failed, not only the expensive ones.
        if self.exhausted.get() || total > self.params.max_work {
            self.exhausted.set(true);
            return false;
        }
        self.spent.set(total);
        true
    }

    /// [`find_exact`] paid for what it scans: the search is refused unless its whole range
    /// could be paid, then charged up to where it stopped (a match near the cursor is cheap).
    fn exact(&self, pat: &[char], from: usize, to: usize) -> Option<usize> {
        let before = self.spent.get();
        if !self.afford(pat.len(), from, to) {
            return None;
        }
        let found = find_exact(&self.norm.chars, pat, from, to);
        let scanned = found.map_or(to, |s| s + 1).min(to);
        self.spent.set(before.saturating_add((scanned.saturating_sub(from) as u64).saturating_mul(pat.len().max(1) as u64)));
        found
    }

    /// Find `pat` starting the search at `from`; exact anywhere up to `exact_to`, fuzzy
    /// within `fuzzy_from..fuzzy_to`. Returns normalized (start, end).
    fn locate(&self, pat: &[char], from: usize, exact_to: usize, fuzzy_from: usize, fuzzy_to: usize) -> Option<(usize, usize, MatchKind)> {
        if let Some(s) = self.exact(pat, from, exact_to) {
            return Some((s, s + pat.len(), MatchKind::Exact));
        }
        if pat.len() < self.params.min_fuzzy_chars || !self.afford(pat.len(), fuzzy_from, fuzzy_to) {
            return None;
        }
        let (s, e, d) = find_fuzzy(&self.norm.chars, pat, fuzzy_from, fuzzy_to)?;
        let similarity = 1.0 - d as f32 / pat.len() as f32;
        (similarity >= self.params.min_similarity && e > s).then_some((s, e, MatchKind::Fuzzy))
    }

    /// Place one chunk; returns normalized (start, end) and whether any match was fuzzy.
    fn place(&self, prefix: &[char], suffix: &[char], cursor: usize) -> Option<(usize, usize, MatchKind)> {
        let n = self.norm.chars.len();
        let p = self.params;
        let (ps, pe, pk) = if prefix.is_empty() {
            (cursor, cursor, MatchKind::Exact)
        } else {
            self.locate(
                prefix,
                cursor,
                n,
                cursor.saturating_sub(p.backtrack_chars),
                cursor.saturating_add(p.search_window_chars).saturating_add(prefix.len()),
            )?
        };
        if suffix.is_empty() {
            return Some((ps, pe, pk));
        }
        // The suffix may overlap the prefix (very short chunks) but must end at or after it.
        let window_end = pe.saturating_add(p.max_chunk_chars).min(n);
        let exact = {
            let mut from = ps;
            let mut found = None;
            while let Some(s) = self.exact(suffix, from, window_end) {
                if s + suffix.len() >= pe {
                    found = Some(s + suffix.len());
                    break;
                }
                from = s + 1;
            }
            found
        };
        match exact {
            Some(e) => Some((ps, e, pk)),
            None => {
                if suffix.len() < p.min_fuzzy_chars || !self.afford(suffix.len(), ps, window_end) {
                    return None;
                }
                let (s, e, d) = find_fuzzy(&self.norm.chars, suffix, ps, window_end)?;
                let similarity = 1.0 - d as f32 / suffix.len() as f32;
                (similarity >= p.min_similarity && e >= pe && e > s).then_some((ps, e, MatchKind::Fuzzy))
            }
        }
    }
}

/// Long verbatim chunks are matched by their ends, like masked ones.
const VERBATIM_END_CHARS: usize = 32;

fn pattern_ends(chunk: &ChunkPattern, max_chars: usize) -> (Vec<char>, Vec<char>) {
    match chunk {
        ChunkPattern::Masked { prefix, suffix } => {
            let (mut prefix, mut suffix) = (normalize_pattern(prefix), normalize_pattern(suffix));
            prefix.truncate(max_chars);
            suffix.drain(..suffix.len().saturating_sub(max_chars));
            (prefix, suffix)
        }
        ChunkPattern::Units { .. } => (Vec::new(), Vec::new()),
        ChunkPattern::Verbatim(text) => {
            let all = normalize_pattern(text);
            if all.len() <= 2 * VERBATIM_END_CHARS {
                (all, Vec::new())
            } else {
                (all[..VERBATIM_END_CHARS].to_vec(), all[all.len() - VERBATIM_END_CHARS..].to_vec())
            }
        }
    }
}

/// Which outline item scenario `i` of `n` belongs to: one to one when the counts agree,
/// proportional otherwise (the reader writes both in document order).
fn outline_item_for(i: usize, n_scenarios: usize, n_outline: usize) -> Option<u32> {
    if n_outline == 0 || n_scenarios == 0 {
        return None;
    }
    let item = if n_outline == n_scenarios { i } else { i * n_outline / n_scenarios };
    Some(item.min(n_outline - 1) as u32)
}

fn join_core(into: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !into.is_empty() {
        into.push('\n');
    }
    into.push_str(more);
}

/// Align a parsed memory to `text`. See the module docs for the method.
pub fn align_memory(text: &str, parsed: &ParsedMemory, params: &AlignParams) -> AlignedMemory {
    align_memory_units(text, parsed, &[], params)
}

/// [`align_memory`] for a reader that was shown `text` as numbered units (`units`, from
/// [`crate::reader::NumberedText`]): a [`ChunkPattern::Units`] range is placed exactly on
/// its units (counted as exact); masked and verbatim chunks are aligned as usual. Ranges
/// out of order or out of bounds fail like unplaceable patterns.
pub fn align_memory_units(text: &str, parsed: &ParsedMemory, units: &[Span], params: &AlignParams) -> AlignedMemory {
    let norm = NormText::new(text);
    let matcher = Matcher { norm: &norm, params, spent: Default::default(), exhausted: Default::default() };
    let n_scen = parsed.scenarios.len();
    let mut stats = AlignmentStats { chunks: n_scen as u32, ..AlignmentStats::default() };

    // 1-2: place each chunk (byte spans); `None` for failures. Chunks must start in
    // document order.
    let mut placed: Vec<Option<(usize, usize)>> = Vec::with_capacity(n_scen);
    let mut cursor = 0usize; // in normalized characters
    let mut last_start: Option<usize> = None; // in bytes
    for sc in &parsed.scenarios {
        let found = match sc.chunk {
            ChunkPattern::Units { first, last } => {
                let (a, b) = (first as usize, last as usize);
                (a >= 1 && a <= b && b <= units.len()).then(|| (units[a - 1].start, units[b - 1].end, MatchKind::Exact, None))
            }
            _ => {
                let (prefix, suffix) = pattern_ends(&sc.chunk, params.max_pattern_chars);
                matcher
                    .place(&prefix, &suffix, cursor)
                    .filter(|&(s, e, _)| e > s)
                    .map(|(s, e, kind)| (norm.starts[s], norm.ends[e - 1], kind, Some(e)))
            }
        };
        match found {
            Some((bs, be, kind, next_cursor)) if last_start.is_none_or(|ls| bs > ls) && be > bs => {
                match kind {
                    MatchKind::Exact => stats.exact += 1,
                    MatchKind::Fuzzy => stats.fuzzy += 1,
                }
                placed.push(Some((bs, be)));
                if let Some(c) = next_cursor {
                    cursor = c;
                }
                last_start = Some(bs);
            }
            _ => {
                stats.failed += 1;
                placed.push(None);
            }
        }
    }

    stats.stopped_at_work_limit = matcher.exhausted.get();

    // Coverage before repair: union of placed spans.
    let mut covered = 0usize;
    let mut reach = 0usize;
    for &(s, e) in placed.iter().flatten() {
        let s = s.max(reach);
        if e > s {
            covered += e - s;
        }
        reach = reach.max(e);
    }
    stats.coverage_before_repair = if text.is_empty() { 0.0 } else { covered as f32 / text.len() as f32 };

    // 3: repair into a tiling. Cores of failed chunks join the chunk that holds their text.
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut pending_core = String::new(); // failed cores seen before the first placed chunk
    for (i, (sc, place)) in parsed.scenarios.iter().zip(&placed).enumerate() {
        let outline_item = outline_item_for(i, n_scen, parsed.outline.len());
        match *place {
            None => match scenarios.last_mut() {
                Some(prev) => join_core(&mut prev.core, &sc.core),
                None => join_core(&mut pending_core, &sc.core),
            },
            Some((s, e)) => {
                let mut core = core::mem::take(&mut pending_core);
                join_core(&mut core, &sc.core);
                match scenarios.last_mut() {
                    None => scenarios.push(Scenario { span: Span::new(0, e), core, outline_item }),
                    Some(prev) => {
                        let start = s.max(prev.span.end);
                        if e <= start {
                            // Entirely inside the previous chunk: nothing of its own remains.
                            join_core(&mut prev.core, &core);
                            continue;
                        }
                        prev.span.end = start; // closes any gap
                        scenarios.push(Scenario { span: Span::new(start, e), core, outline_item });
                    }
                }
            }
        }
    }
    if let Some(last) = scenarios.last_mut() {
        last.span.end = text.len();
    }

    // 4: MoM's short-chunk merge rule, in characters.
    let mut merged: Vec<Scenario> = Vec::with_capacity(scenarios.len());
    let mut merged_chars: Vec<usize> = Vec::with_capacity(scenarios.len());
    for sc in scenarios {
        let chars = sc.span.char_len(text);
        if let (Some(prev), Some(prev_chars)) = (merged.last_mut(), merged_chars.last_mut()) {
            if chars < params.merge_below_chars && *prev_chars + chars <= params.merge_max_chars {
                prev.span.end = sc.span.end;
                join_core(&mut prev.core, &sc.core);
                *prev_chars += chars;
                stats.merged_short += 1;
                continue;
            }
        }
        merged.push(sc);
        merged_chars.push(chars);
    }
    AlignedMemory { scenarios: merged, stats }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_memreader_output, ParsedScenario};
    use crate::span::spans_tile;
    use alloc::string::ToString;
    use proptest::prelude::*;

    fn memory(chunks: &[(&str, &str)]) -> ParsedMemory {
        ParsedMemory {
            scenarios: chunks
                .iter()
                .enumerate()
                .map(|(i, (p, s))| ParsedScenario {
                    chunk: ChunkPattern::Masked { prefix: p.to_string(), suffix: s.to_string() },
                    core: alloc::format!("core {i}"),
                })
                .collect(),
            ..ParsedMemory::default()
        }
    }

    fn no_merge() -> AlignParams {
        AlignParams { merge_below_chars: 0, ..AlignParams::default() }
    }

    /// Megabyte-scale [MASK] ends once made fuzzy matching cost their length × the search
    /// window (twenty unplaceable 1.5k-character prefixes on 20 KB: 0.4 s).
    #[test]
    fn long_mask_ends_are_capped_so_alignment_work_stays_bounded() {
        let text: String = (0..2500).map(|i| alloc::format!("w{} ", i * 7 % 1000)).collect();
        let junk = "qz".repeat(1500);
        let chunks: Vec<(&str, &str)> = (0..50).map(|_| (junk.as_str(), junk.as_str())).collect();
        let start = std::time::Instant::now();
        let out = align_memory(&text, &memory(&chunks), &AlignParams::default());
        let took = start.elapsed().as_secs_f64();
        assert!(took < 1.0, "{took:.2} s for fifty 3,000-character unplaceable ends");
        assert!(out.stats.failed > 0);
        // A long end copied from the document still places its chunk where it starts.
        let (a, b) = (text.find("w14 ").unwrap(), text.find("w700 ").unwrap());
        let long_prefix = &text[a..a + 1500];
        let suffix = &text[b - 20..b];
        let out = align_memory(&text, &memory(&[(long_prefix, suffix)]), &no_merge());
        assert_eq!((out.stats.exact, out.stats.failed), (1, 0), "{:?}", out.stats);
        // (The one chunk then grows to tile the document; placed on its own it starts at `a`.)
        assert!(out.stats.coverage_before_repair > 0.0 && out.stats.coverage_before_repair < 1.0);
    }

    #[test]
    fn exact_chunks_tile() {
        let text = "Alpha beta gamma. Delta epsilon zeta. Eta theta iota.";
        let m = memory(&[("Alpha", "gamma."), ("Delta", "zeta."), ("Eta", "iota.")]);
        let a = align_memory(text, &m, &no_merge());
        let spans: Vec<_> = a.scenarios.iter().map(|s| s.span.slice(text).unwrap()).collect();
        assert_eq!(spans, ["Alpha beta gamma. ", "Delta epsilon zeta. ", "Eta theta iota."]);
        assert_eq!((a.stats.exact, a.stats.fuzzy, a.stats.failed), (3, 0, 0));
        assert!(a.stats.coverage_before_repair > 0.95);
    }

    #[test]
    fn whitespace_width_and_case_are_normalized() {
        let text = "First  line\nof text.\n\nＳecond “part” here.";
        let m = memory(&[("first line", "text."), ("second \"part\"", "here.")]);
        let a = align_memory(text, &m, &no_merge());
        assert_eq!(a.stats.exact, 2);
        assert_eq!(a.scenarios[1].span.slice(text), Some("Ｓecond “part” here."));
    }

    #[test]
    fn fuzzy_match_within_threshold_and_rejection_below() {
        let text = "The committee approved the budget in March. Funding arrived in June.";
        let m = memory(&[("The comittee aproved", "in March."), ("Funding arived", "in June.")]);
        let a = align_memory(text, &m, &no_merge());
        assert_eq!((a.stats.exact, a.stats.fuzzy, a.stats.failed), (0, 2, 0));
        assert!(spans_tile(text, &a.scenarios.iter().map(|s| s.span).collect::<Vec<_>>()));
        // A pattern that is not in the text is never forced in.
        let m = memory(&[("The committee", "in March."), ("Completely different words", "nowhere")]);
        let a = align_memory(text, &m, &no_merge());
        assert_eq!(a.stats.failed, 1);
        assert_eq!(a.scenarios.len(), 1);
        assert_eq!(a.scenarios[0].span, Span::new(0, text.len()));
        assert_eq!(a.scenarios[0].core, "core 0\ncore 1", "a failed chunk's core joins the chunk holding its text");
    }

    #[test]
    fn gaps_overlaps_and_merge_rule() {
        let text = "aaaa aaaa aaaa. bbbb bbbb. cccc cccc cccc cccc.";
        // Chunk 2 overlaps chunk 1; there is a gap before chunk 1 and after chunk 2.
        let m = memory(&[("aaaa aaaa", "aaaa."), ("aaaa. bbbb", "bbbb."), ("cccc", "cccc.")]);
        let a = align_memory(text, &m, &no_merge());
        assert!(spans_tile(text, &a.scenarios.iter().map(|s| s.span).collect::<Vec<_>>()));
        // With the default merge rule every chunk here is short: they fold into the first.
        let a = align_memory(text, &m, &AlignParams::default());
        assert_eq!(a.scenarios.len(), 1);
        assert_eq!(a.stats.merged_short, 2);
    }

    #[test]
    fn merge_stops_at_max() {
        let long = "x".repeat(240);
        let text = alloc::format!("{long}. short one. short two.");
        let m = memory(&[("xxxxx", "x."), ("short one", "one."), ("short two", "two.")]);
        let a = align_memory(&text, &m, &AlignParams::default());
        // 242 + 11 > 250, so "short one." stays separate and "short two." merges into it.
        assert_eq!(a.scenarios.len(), 2);
        assert_eq!(a.stats.merged_short, 1);
    }

    #[test]
    fn chinese_document() {
        let text = "文档记忆是一种方法。它把文档分成块。每块有核心内容。";
        let out = parse_memreader_output(
            "<outline>方法\n分块</outline><scenario><chunk>文档记忆［MASK］方法。</chunk>定义</scenario>\
             <scenario><chunk>它把[MASK]核心内容。</chunk>分块</scenario>",
        );
        let a = align_memory(text, &out, &no_merge());
        assert_eq!(a.stats.exact, 2);
        assert_eq!(a.scenarios[0].span.slice(text), Some("文档记忆是一种方法。"));
        assert_eq!(a.scenarios[1].outline_item, Some(1));
    }

    #[test]
    fn unit_ranges_place_exactly_and_bad_ones_fail() {
        let text = "One. Two. Three. Four.";
        let units = crate::reader::NumberedText::new(text);
        let sc = |first, last| ParsedScenario { chunk: ChunkPattern::Units { first, last }, core: alloc::format!("c{first}") };
        let parsed = ParsedMemory { scenarios: vec![sc(1, 2), sc(9, 9), sc(3, 4)], ..ParsedMemory::default() };
        let m = align_memory_units(text, &parsed, units.units(), &no_merge());
        let spans: Vec<&str> = m.scenarios.iter().map(|s| s.span.slice(text).unwrap()).collect();
        assert_eq!(spans, ["One. Two. ", "Three. Four."]);
        assert_eq!((m.stats.exact, m.stats.failed), (2, 1));
        assert_eq!(m.scenarios[0].core, "c1\nc9", "the failed chunk's core joins the chunk before it");
        assert_eq!(m.stats.coverage_before_repair, 1.0);
    }

    #[test]
    fn nothing_placed_gives_no_scenarios() {
        let a = align_memory("some text", &memory(&[("zzzzzz", "qqqqqq")]), &no_merge());
        assert!(a.scenarios.is_empty());
        assert_eq!(a.stats.coverage_before_repair, 0.0);
        let a = align_memory("", &memory(&[("a", "b")]), &no_merge());
        assert!(a.scenarios.is_empty());
    }

    prop_compose! {
        fn doc_and_spans()(words in prop::collection::vec("[a-z]{2,8}", 30..200), cuts in prop::collection::vec(1usize..40, 1..12)) -> (String, Vec<Span>) {
            let text = words.join(" ") + ".";
            // Cut at word boundaries (after a space) so spans begin with a word.
            let starts: Vec<usize> = text.match_indices(' ').map(|(i, _)| i + 1).collect();
            let mut bounds = vec![0];
            let mut acc = 0;
            for c in cuts {
                acc += c;
                if acc < starts.len() { bounds.push(starts[acc]); }
            }
            bounds.dedup();
            bounds.push(text.len());
            let spans = bounds.windows(2).map(|w| Span::new(w[0], w[1])).collect();
            (text, spans)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Render true spans as prefix[MASK]suffix with random lengths and one substitution
        /// inside longer patterns, align, and recover the spans.
        #[test]
        fn recovers_rendered_spans((text, spans) in doc_and_spans(), lens in prop::collection::vec((12usize..30, 12usize..30, any::<bool>()), 12)) {
            let mut scenarios = Vec::new();
            for (i, span) in spans.iter().enumerate() {
                let chunk: Vec<char> = span.slice(&text).unwrap().trim_end().chars().collect();
                let (pl, sl, noisy) = lens[i % lens.len()];
                let pl = pl.min(chunk.len());
                let sl = sl.min(chunk.len());
                let mut prefix: Vec<char> = chunk[..pl].to_vec();
                let suffix: Vec<char> = chunk[chunk.len() - sl..].to_vec();
                if noisy && prefix.len() >= 12 {
                    let k = prefix.len() / 2;
                    prefix[k] = if prefix[k] == 'x' { 'y' } else { 'x' };
                }
                scenarios.push(ParsedScenario {
                    chunk: ChunkPattern::Masked { prefix: prefix.into_iter().collect(), suffix: suffix.into_iter().collect() },
                    core: String::new(),
                });
            }
            let parsed = ParsedMemory { scenarios, ..ParsedMemory::default() };
            let a = align_memory(&text, &parsed, &no_merge());
            let got: Vec<Span> = a.scenarios.iter().map(|s| s.span).collect();
            prop_assert_eq!(a.stats.failed, 0);
            prop_assert_eq!(got, spans);
        }
    }
}
