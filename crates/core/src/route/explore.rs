//! The cold-start explorer: a collection the router has judged fewer than T_min searches
//! of gets probe sub-queries, and their outcomes seed its descriptor.
//!
//! Probes are drawn from the memory: first sub-queries that other collections answered
//! (recent episodes; a probe that fails here teaches the router where *not* to send such
//! questions, one that succeeds that this collection answers them too), then the
//! collection's own outline items (what it says it holds; their successes add terms to
//! its descriptor). The explorer returns a [`MemoryUpdate`] like a routed answer does, so
//! it runs off the critical path: after an answer is delivered, a few probes at a time
//! ([`ExploreSettings::max_probes`]).

use alloc::string::String;
use alloc::vec::Vec;

use super::judge::{judge, JudgeKind};
use super::memory::{MemoryUpdate, Outcome, SymbolicMemory};
use super::router::CollectionSearch;
use crate::text_model::TextModel;
use crate::Error;

/// Explorer settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExploreSettings {
    /// Collections with fewer judged searches than this are probed (default 3).
    pub t_min: u32,
    /// Most probes in one call, over all collections (default 2).
    pub max_probes: usize,
    /// Who judges the probes.
    pub judge: JudgeKind,
}

impl Default for ExploreSettings {
    fn default() -> Self {
        ExploreSettings { t_min: 3, max_probes: 2, judge: JudgeKind::Model }
    }
}

/// Probe sub-queries for `collection`, at most `n`: recent sub-queries other collections
/// answered and this one was not yet asked, then its outline items not yet probed.
pub fn probe_queries(memory: &SymbolicMemory, collection: &str, outline_items: &[String], n: usize) -> Vec<String> {
    let asked = |q: &str| memory.episodes.iter().any(|e| e.collection == collection && e.sub_query == q);
    let mut out: Vec<String> = Vec::new();
    for e in memory.episodes.iter().rev() {
        if out.len() >= n {
            return out;
        }
        if e.success && !e.probe && e.collection != collection && !asked(&e.sub_query) && !out.contains(&e.sub_query) {
            out.push(e.sub_query.clone());
        }
    }
    for item in outline_items {
        let item = item.trim();
        if out.len() >= n {
            break;
        }
        if !item.is_empty() && !asked(item) && !out.iter().any(|o| o == item) {
            out.push(item.into());
        }
    }
    out
}

/// Probe the cold collections among `collections` (name, outline items), coldest first,
/// with at most `settings.max_probes` searches in all; `search` as for
/// [`super::router::route`].
pub async fn explore(
    collections: &[(&str, &[String])],
    memory: &SymbolicMemory,
    mut model: Option<&mut dyn TextModel>,
    settings: &ExploreSettings,
    search: &mut dyn CollectionSearch,
) -> Result<MemoryUpdate, Error> {
    let mut cold: Vec<(u32, &str, &[String])> =
        collections.iter().map(|&(c, items)| (memory.interactions(c), c, items)).filter(|(n, _, _)| *n < settings.t_min).collect();
    cold.sort_by_key(|(n, _, _)| *n);
    let mut update = MemoryUpdate::default();
    let mut budget = settings.max_probes;
    for (interactions, c, items) in cold {
        if budget == 0 {
            break;
        }
        let want = ((settings.t_min - interactions) as usize).min(budget);
        for probe in probe_queries(memory, c, items, want) {
            let found = search.search(c, &probe).await?;
            let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
            let verdict = judge(model.as_deref_mut(), settings.judge, &probe, &texts).await?;
            update.outcomes.push(Outcome {
                sub_query: probe,
                collection: c.into(),
                success: verdict.satisfied,
                reflection: verdict.reflection,
                probe: true,
            });
            budget -= 1;
        }
    }
    Ok(update)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::retrieve::RetrievedChunk;
    use crate::route::Found;
    use crate::span::Span;
    use crate::Document;
    use alloc::vec;

    fn search(c: &str, _q: &str) -> Result<Vec<Found>, crate::Error> {
        let text: String = if c == "new" { "Copper ore from the hills.".into() } else { "Bread prices rose.".into() };
        let chunk = RetrievedChunk { doc_id: Document::new(c, "x").id, scenario: 0, span: Span::new(0, 1), score: 1.0, ranks: Vec::new() };
        Ok(vec![Found { chunk, text }])
    }

    #[test]
    fn probes_come_from_other_collections_then_outline_items() {
        let mut m = SymbolicMemory::new();
        m.apply(&MemoryUpdate {
            outcomes: vec![Outcome {
                sub_query: "bread prices".into(),
                collection: "old".into(),
                success: true,
                reflection: String::new(),
                probe: false,
            }],
        });
        let items = vec!["Copper ore".to_string(), "".into(), "Smelting".into()];
        assert_eq!(probe_queries(&m, "new", &items, 2), vec!["bread prices".to_string(), "Copper ore".into()]);
        let settings = ExploreSettings { judge: JudgeKind::Overlap, max_probes: 5, t_min: 3 };
        let update = poll_once(explore(&[("new", &items[..]), ("old", &[][..])], &m, None, &settings, &mut search)).unwrap().unwrap();
        let seen: Vec<(&str, &str, bool)> =
            update.outcomes.iter().map(|o| (o.collection.as_str(), o.sub_query.as_str(), o.success)).collect();
        // "new" (0 interactions) is probed first: the bread query fails there, its own
        // outline items succeed; "old" has no outline items and no other collection's
        // successes to borrow, so it gets none.
        assert_eq!(seen, vec![("new", "bread prices", false), ("new", "Copper ore", true), ("new", "Smelting", false)]);
        assert!(update.outcomes.iter().all(|o| o.probe));
        m.apply(&update);
        assert_eq!(m.descriptor("new").map(|d| (d.successes, d.failures, d.probes)), Some((1, 2, 3)));
        // Warm now: nothing more to probe.
        let again = poll_once(explore(&[("new", &items[..])], &m, None, &settings, &mut search)).unwrap().unwrap();
        assert!(again.outcomes.is_empty());
    }
}
