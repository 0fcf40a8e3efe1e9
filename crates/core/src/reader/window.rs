//! Long documents: reading windows that fit the reader's context, and stitching their
//! memories back into one memory whose chunks tile the whole document.
//!
//! A window is a run of whole sentences of at most `max_tokens`; the next window starts
//! `overlap_tokens` back (again on a sentence start), so no sentence is read only at the
//! edge of a window. Each window's memory is aligned against the window's own text, so
//! its spans tile the window. Where two windows overlap, the cut is placed at a chunk
//! boundary the *later* window chose (the one nearest the middle of the overlap, where
//! both windows saw context on both sides), else at one the earlier window chose, else at
//! the middle; the earlier window keeps everything before the cut and the later one
//! everything after, each scenario clipped to its side. Clipped spans still tile.
//! Outlines are joined in order; items the later window repeats at its start (the
//! overlap read twice; at most three, among the earlier window's last three) are merged
//! with the earlier window's items.

use alloc::string::String;
use alloc::vec::Vec;

use crate::chunk::sentence_split::split_sentences;
use crate::chunk::TokenCounter;
use crate::memory::Scenario;
use crate::span::Span;

/// Windows over `text`: spans of at most about `max_tokens` tokens each (a single
/// sentence longer than that is cut on a char boundary), consecutive windows overlapping
/// by about `overlap_tokens`. They cover the text in order; one window when it all fits.
pub fn plan_windows(text: &str, max_tokens: usize, overlap_tokens: usize, counter: &dyn TokenCounter) -> Vec<Span> {
    if text.is_empty() {
        return Vec::new();
    }
    let max_tokens = max_tokens.max(1);
    if counter.count_tokens(text) <= max_tokens {
        return alloc::vec![Span::new(0, text.len())];
    }
    // Sentences, with over-long ones cut into pieces that fit.
    let mut pieces: Vec<(Span, usize)> = Vec::new();
    for s in split_sentences(text) {
        let Some(slice) = s.slice(text) else { continue };
        let n = counter.count_tokens(slice);
        if n <= max_tokens {
            pieces.push((s, n));
            continue;
        }
        let parts = n.div_ceil(max_tokens);
        let step = (s.len() / parts).max(1);
        let mut start = s.start;
        while start < s.end {
            let mut end = (start + step).min(s.end);
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let n = counter.count_tokens(&text[start..end]);
            pieces.push((Span::new(start, end), n));
            start = end;
        }
    }
    let mut windows = Vec::new();
    let mut first = 0;
    while first < pieces.len() {
        let mut last = first;
        let mut tokens = pieces[first].1;
        while last + 1 < pieces.len() && tokens + pieces[last + 1].1 <= max_tokens {
            last += 1;
            tokens += pieces[last].1;
        }
        windows.push(Span::new(pieces[first].0.start, pieces[last].0.end));
        if last + 1 >= pieces.len() {
            break;
        }
        // Step back over whole pieces worth `overlap_tokens`, but always move forward.
        let mut next = last + 1;
        let mut back = 0;
        while next > first + 1 && back + pieces[next - 1].1 <= overlap_tokens {
            next -= 1;
            back += pieces[next].1;
        }
        first = next;
    }
    windows
}

/// One window's memory: its span of the document, its outline, and its scenarios with
/// spans relative to the window's text (tiling it), as alignment gave them.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowMemory {
    /// Where the window lies in the document.
    pub window: Span,
    /// The window's outline items.
    pub outline: Vec<String>,
    /// Scenarios, spans relative to `window.start`.
    pub scenarios: Vec<Scenario>,
}

/// The stitched memory: outline and scenarios in document coordinates.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stitched {
    /// Outline items in order.
    pub outline: Vec<String>,
    /// Scenarios tiling the covered text.
    pub scenarios: Vec<Scenario>,
}

fn same_item(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>();
    norm(a) == norm(b)
}

fn snap(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Where to cut between an earlier and a later window that overlap on `overlap`.
fn cut_point(text: &str, earlier: &WindowMemory, later: &WindowMemory, overlap: Span) -> usize {
    let mid = overlap.start + overlap.len() / 2;
    let nearest =
        |starts: &mut dyn Iterator<Item = usize>| starts.filter(|&b| b > overlap.start && b < overlap.end).min_by_key(|&b| b.abs_diff(mid));
    let later_bounds = &mut later.scenarios.iter().map(|s| s.span.start + later.window.start);
    let earlier_bounds = &mut earlier.scenarios.iter().map(|s| s.span.start + earlier.window.start);
    nearest(later_bounds).or_else(|| nearest(earlier_bounds)).unwrap_or_else(|| snap(text, mid))
}

/// Join window memories (in document order) into one. `text` is the whole document.
pub fn stitch(text: &str, windows: &[WindowMemory]) -> Stitched {
    let mut out = Stitched::default();
    let mut from = windows.first().map_or(0, |w| w.window.start);
    for (i, w) in windows.iter().enumerate() {
        let to = match windows.get(i + 1) {
            Some(next) if next.window.start < w.window.end => cut_point(text, w, next, Span::new(next.window.start, w.window.end)),
            _ => w.window.end,
        };
        // Outline: skip leading items that repeat the previous window's last ones.
        let mut map: Vec<Option<u32>> = Vec::with_capacity(w.outline.len());
        // At most the first few items can be the overlap read again.
        let mut skipping = true;
        for (k, item) in w.outline.iter().enumerate() {
            if skipping && k < 3 {
                if let Some(pos) = out.outline.iter().rposition(|o| same_item(o, item)) {
                    if pos + 3 >= out.outline.len() {
                        map.push(Some(pos as u32));
                        continue;
                    }
                }
            }
            skipping = false;
            out.outline.push(item.clone());
            map.push(Some((out.outline.len() - 1) as u32));
        }
        for s in &w.scenarios {
            let start = (s.span.start + w.window.start).max(from);
            let end = (s.span.end + w.window.start).min(to);
            if start >= end {
                continue;
            }
            let outline_item = s.outline_item.and_then(|k| map.get(k as usize).copied().flatten());
            out.scenarios.push(Scenario { span: Span::new(start, end), core: s.core.clone(), outline_item });
        }
        from = to;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::ApproxTokenCounter;
    use crate::span::spans_tile;
    use alloc::format;
    use alloc::string::ToString;
    use alloc::vec;

    fn doc(n: usize) -> String {
        (0..n).map(|i| format!("Sentence number {i} says something short. ")).collect()
    }

    #[test]
    fn a_short_text_is_one_window() {
        let t = doc(3);
        assert_eq!(plan_windows(&t, 1000, 100, &ApproxTokenCounter), vec![Span::new(0, t.len())]);
        assert!(plan_windows("", 10, 2, &ApproxTokenCounter).is_empty());
    }

    #[test]
    fn windows_fit_overlap_and_cover_in_order() {
        let t = doc(200);
        let c = ApproxTokenCounter;
        let w = plan_windows(&t, 300, 60, &c);
        assert!(w.len() > 3);
        assert_eq!(w[0].start, 0);
        assert_eq!(w.last().unwrap().end, t.len());
        for pair in w.windows(2) {
            assert!(pair[1].start > pair[0].start, "progress");
            assert!(pair[1].start < pair[0].end, "overlap");
            let overlap = c.count_tokens(&t[pair[1].start..pair[0].end]);
            assert!(overlap <= 60 && overlap > 20, "overlap {overlap}");
        }
        for s in &w {
            assert!(c.count_tokens(s.slice(&t).unwrap()) <= 300);
        }
    }

    #[test]
    fn an_overlong_sentence_is_cut_on_char_boundaries() {
        let t = "字".repeat(900);
        let w = plan_windows(&t, 200, 20, &ApproxTokenCounter);
        assert!(w.len() >= 5);
        assert!(w.iter().all(|s| s.slice(&t).is_some()));
        assert_eq!(w.last().unwrap().end, t.len());
    }

    fn window_memory(text: &str, window: Span, cuts: &[usize], outline: &[&str]) -> WindowMemory {
        // Scenarios tiling the window, cut at the given absolute offsets.
        let mut bounds = vec![window.start];
        bounds.extend(cuts.iter().copied().filter(|&c| c > window.start && c < window.end));
        bounds.push(window.end);
        let scenarios = bounds
            .windows(2)
            .enumerate()
            .map(|(i, b)| Scenario {
                span: Span::new(b[0] - window.start, b[1] - window.start),
                core: format!("core {}", &text[b[0]..b[1]].trim()[..4]),
                outline_item: Some((i.min(outline.len().saturating_sub(1))) as u32),
            })
            .collect();
        WindowMemory { window, outline: outline.iter().map(|s| s.to_string()).collect(), scenarios }
    }

    #[test]
    fn stitched_spans_tile_the_document_and_cut_at_a_later_window_boundary() {
        let t = doc(40);
        let c = ApproxTokenCounter;
        let w = plan_windows(&t, 120, 40, &c);
        assert!(w.len() >= 3);
        let sentences: Vec<usize> = split_sentences(&t).iter().map(|s| s.start).collect();
        let memories: Vec<WindowMemory> = w
            .iter()
            .enumerate()
            .map(|(i, &win)| {
                // Each window cuts every third sentence, with its own phase.
                let cuts: Vec<usize> = sentences.iter().copied().skip(i % 3).step_by(3).collect();
                window_memory(&t, win, &cuts, &["Intro", "Middle part", "End"])
            })
            .collect();
        let s = stitch(&t, &memories);
        let spans: Vec<Span> = s.scenarios.iter().map(|x| x.span).collect();
        assert!(spans_tile(&t, &spans));
        // Every cut between windows is a boundary the later window chose.
        // The stitched boundaries inside an overlap are the earlier window's up to the cut
        // and the later window's from it.
        for pair in memories.windows(2) {
            let bounds = |m: &WindowMemory| m.scenarios.iter().map(|x| x.span.start + m.window.start).collect::<Vec<_>>();
            let (earlier, later) = (bounds(&pair[0]), bounds(&pair[1]));
            let inside: Vec<usize> =
                spans.iter().map(|x| x.start).filter(|&b| b > pair[1].window.start && b < pair[0].window.end).collect();
            let ok = later
                .iter()
                .any(|&cut| inside.contains(&cut) && inside.iter().all(|b| if *b < cut { earlier.contains(b) } else { later.contains(b) }));
            assert!(ok, "boundaries {inside:?}, earlier {earlier:?}, later {later:?}");
        }
        // Outline items repeated at a window's start merge into the earlier ones.
        assert!(s.outline.len() < 3 * memories.len());
        assert!(s.scenarios.iter().all(|x| x.outline_item.is_some_and(|k| (k as usize) < s.outline.len())));
    }

    #[test]
    fn without_boundaries_in_the_overlap_the_cut_is_the_middle() {
        let t = "a".repeat(100);
        let m1 = WindowMemory {
            window: Span::new(0, 60),
            outline: vec![],
            scenarios: vec![Scenario { span: Span::new(0, 60), core: "x".into(), outline_item: None }],
        };
        let m2 = WindowMemory {
            window: Span::new(40, 100),
            outline: vec![],
            scenarios: vec![Scenario { span: Span::new(0, 60), core: "y".into(), outline_item: None }],
        };
        let s = stitch(&t, &[m1, m2]);
        assert_eq!(s.scenarios.iter().map(|x| x.span).collect::<Vec<_>>(), vec![Span::new(0, 50), Span::new(50, 100)]);
    }
}
