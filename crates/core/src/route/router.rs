//! The routing state machine: answering as segments on a bounded step budget.
//!
//! Each segment is *choose a collection → write a sub-query → retrieve → judge*; a
//! satisfied judge ends the run (the answer is written from that segment's passages),
//! an unsatisfied one starts the next segment with the judge's reflection in hand, until
//! the budget ([`RouteSettings::max_steps`]) is spent. Every step goes into the trace
//! ([`Segment`]), which comes back with the answer.
//!
//! Who chooses ([`Controller`]): the symbolic memory (rules, descriptors, episodes, plus
//! a bonus for collections the cold-start explorer has not yet seen enough of), the
//! descriptors alone (the static ablation), or a seeded random order (routing without
//! the memory controller). The run does not change the memory: it returns a
//! [`MemoryUpdate`] that the caller applies once the answer is out.

use alloc::string::String;
use alloc::vec::Vec;

use super::judge::{judge, JudgeKind, Verdict};
use super::memory::{CollectionScore, MemoryUpdate, Outcome, SymbolicMemory};
use crate::clues::text_units;
use crate::local_future::{boxed, LocalBoxFuture};
use crate::retrieve::RetrievedChunk;
use crate::text_model::TextModel;
use crate::Error;

/// A retrieved passage: the chunk and its text.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Found {
    /// The chunk.
    pub chunk: RetrievedChunk,
    /// Its text.
    pub text: String,
}

/// One collection's passages for a query, best first: what the router and the explorer
/// search with. A future, because the embedder behind it may have to be awaited (a GPU
/// encoder in a browser answers through the page's event loop); any synchronous
/// `FnMut(collection, query) -> Result<Vec<Found>, Error>` is one.
pub trait CollectionSearch {
    /// `collection`'s passages for `query`, best first.
    fn search<'a>(&'a mut self, collection: &'a str, query: &'a str) -> LocalBoxFuture<'a, Result<Vec<Found>, Error>>;
}

impl<F: FnMut(&str, &str) -> Result<Vec<Found>, Error>> CollectionSearch for F {
    fn search<'a>(&'a mut self, collection: &'a str, query: &'a str) -> LocalBoxFuture<'a, Result<Vec<Found>, Error>> {
        let found = self(collection, query);
        boxed(async move { found })
    }
}

/// Who chooses the collection of each segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Controller {
    /// The symbolic memory, learning as it goes.
    #[default]
    Memory,
    /// The descriptors only (made from the memories; nothing learned).
    Static,
    /// A seeded random order (no memory controller).
    Random,
}

/// Where to search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteTarget {
    /// The router chooses.
    Auto,
    /// This collection only.
    Collection(String),
}

impl RouteTarget {
    /// The target a `route` setting names: `auto` lets the router choose (which is why no
    /// collection may be called that), anything else is a collection's name.
    pub fn from_setting(setting: &str) -> Self {
        match setting.trim() {
            "auto" => RouteTarget::Auto,
            name => RouteTarget::Collection(name.into()),
        }
    }
}

/// Router settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteSettings {
    /// Most segments (default 3).
    pub max_steps: usize,
    /// A collection with fewer judged searches than this is cold (default 3).
    pub t_min: u32,
    /// Score bonus of a cold collection, scaled by how cold it is (default 0.25).
    pub explore_bonus: f64,
    /// Who chooses.
    pub controller: Controller,
    /// Who judges.
    pub judge: JudgeKind,
    /// Whether the model writes the first sub-query (later ones it always writes when
    /// there is a model; default false: the question itself is the first sub-query,
    /// which a small model's rewrite more often loses than sharpens).
    pub rewrite_first: bool,
    /// Seed of the random controller.
    pub seed: u64,
}

impl Default for RouteSettings {
    fn default() -> Self {
        RouteSettings {
            max_steps: 3,
            t_min: 3,
            explore_bonus: 0.25,
            controller: Controller::Memory,
            judge: JudgeKind::Model,
            rewrite_first: false,
            seed: 0,
        }
    }
}

/// One segment of a run.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Segment {
    /// Its number, from 1.
    pub step: usize,
    /// The collection searched.
    pub collection: String,
    /// Why that one: "fixed", "rule copper+smelter (0.67)", "descriptor copper, ore",
    /// "episodes", "explore (1 of 3)", "prior", "random".
    pub chosen_by: String,
    /// The sub-query searched.
    pub sub_query: String,
    /// Passages retrieved.
    pub passages: usize,
    /// The judge's verdict.
    pub verdict: Verdict,
}

/// A finished run.
#[derive(Clone, Debug, PartialEq)]
pub struct Routed {
    /// The trace.
    pub segments: Vec<Segment>,
    /// How the memory ranked the collections for the question (before the first segment).
    pub scores: Vec<CollectionScore>,
    /// The collection whose passages answer (the satisfied segment's; `None` when no
    /// segment was satisfied and the passages are every segment's, interleaved).
    pub collection: Option<String>,
    /// The passages to answer from, best first.
    pub passages: Vec<Found>,
    /// What to learn, once the answer is delivered.
    pub update: MemoryUpdate,
}

/// A deterministic shuffle of `items` from `seed` (xorshift; Fisher–Yates).
fn shuffled<'a>(items: &[&'a str], seed: u64) -> Vec<&'a str> {
    let mut v = items.to_vec();
    let mut s = seed | 1;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

fn text_seed(text: &str, seed: u64) -> u64 {
    // FNV-1a: a stable per-question order for the random controller.
    text.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The collections in the controller's order, each with why it is there.
fn ranking(
    memory: &SymbolicMemory,
    query: &str,
    candidates: &[&str],
    settings: &RouteSettings,
) -> (Vec<CollectionScore>, Vec<(String, String)>) {
    let mut scores = memory.scores(query, candidates);
    match settings.controller {
        Controller::Random => {
            let order = shuffled(candidates, text_seed(query, settings.seed));
            (scores, order.into_iter().map(|c| (c.into(), "random".into())).collect())
        }
        Controller::Static => {
            scores.sort_by(|a, b| b.descriptor.total_cmp(&a.descriptor));
            let order = scores
                .iter()
                .map(|s| {
                    let why = if s.descriptor > 0.0 { alloc::format!("descriptor {}", s.matched.join(", ")) } else { "order".into() };
                    (s.collection.clone(), why)
                })
                .collect();
            (scores, order)
        }
        Controller::Memory => {
            let t_min = settings.t_min.max(1);
            let bonus = |s: &CollectionScore| {
                if s.interactions < t_min {
                    settings.explore_bonus * (t_min - s.interactions) as f64 / t_min as f64
                } else {
                    0.0
                }
            };
            let mut order: Vec<(f64, &CollectionScore)> = scores.iter().map(|s| (s.score + bonus(s), s)).collect();
            order.sort_by(|a, b| b.0.total_cmp(&a.0));
            let order = order
                .into_iter()
                .map(|(_, s)| {
                    let parts = [(1.5 * s.rule, 0), (s.descriptor, 1), (s.episodes, 2), (bonus(s), 3), (0.5 * s.prior, 4)];
                    let top = parts.iter().copied().fold((f64::NEG_INFINITY, 4), |a, x| if x.0 > a.0 { x } else { a });
                    let why = match top {
                        (v, _) if v <= 0.0 => "order".into(),
                        (_, 0) => alloc::format!("rule {} ({:.2})", s.matched.join("+"), s.rule),
                        (_, 1) => alloc::format!("descriptor {}", s.matched.join(", ")),
                        (_, 2) => alloc::format!("episodes ({:+.2})", s.episodes),
                        (_, 3) => alloc::format!("explore ({} of {t_min})", s.interactions),
                        _ => alloc::format!("prior ({:+.2})", s.prior),
                    };
                    (s.collection.clone(), why)
                })
                .collect();
            (scores, order)
        }
    }
}

fn sub_query_request(question: &str, collection: &str, summary: &str, previous: Option<&Segment>) -> String {
    let mut s = alloc::format!("Question: {}\nCollection to search: \"{collection}\"", question.trim());
    if !summary.trim().is_empty() {
        s.push_str(&alloc::format!(" ({})", summary.trim()));
    }
    s.push('\n');
    if let Some(p) = previous {
        s.push_str(&alloc::format!(
            "An earlier search for \"{}\" in \"{}\" was not enough: {}\n",
            p.sub_query,
            p.collection,
            p.verdict.reflection
        ));
    }
    s.push_str("Write one short search query (a few keywords or a short question) that would find the passage answering the question in this collection. Write only the query.\n");
    s
}

/// The first usable line of a sub-query reply, without a label or quotes; `None` when
/// there is none, or it is too long to be a query (over 40 units).
fn read_sub_query(reply: &str) -> Option<String> {
    let line = reply.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = match line.find([':', '：']) {
        // Past the colon, which is three bytes when full-width.
        Some(i) if line[..i].to_lowercase().contains("query") || line[..i].contains("查询") => {
            &line[i + line[i..].chars().next().map_or(1, char::len_utf8)..]
        }
        _ => line,
    };
    let line = line.trim().trim_matches(|c: char| c == '"' || c == '“' || c == '”' || c == '*' || c == '`').trim();
    (!line.is_empty() && text_units(line) <= 40).then(|| line.into())
}

/// Interleave the lists (first of each, then second of each…), dropping repeats, up to
/// the longest list's length.
fn interleave(lists: Vec<Vec<Found>>) -> Vec<Found> {
    let n = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut out: Vec<Found> = Vec::new();
    for r in 0..n {
        for l in &lists {
            if let Some(f) = l.get(r) {
                if out.len() < n && !out.iter().any(|o| o.chunk.doc_id == f.chunk.doc_id && o.chunk.span == f.chunk.span) {
                    out.push(f.clone());
                }
            }
        }
    }
    out
}

/// Route `question` over `collections` (see the module docs). `search(collection, query)`
/// returns the passages of one collection, best first; the sub-query writer is shown each
/// collection's descriptor summary from `memory`.
pub async fn route(
    question: &str,
    collections: &[&str],
    memory: &SymbolicMemory,
    mut model: Option<&mut dyn TextModel>,
    target: &RouteTarget,
    settings: &RouteSettings,
    search: &mut dyn CollectionSearch,
) -> Result<Routed, Error> {
    if collections.is_empty() {
        return Err(Error::NoCollections);
    }
    if let RouteTarget::Collection(c) = target {
        if !collections.contains(&c.as_str()) {
            return Err(Error::NoSuchCollection { name: c.clone() });
        }
    }
    let (scores, _) = ranking(memory, question, collections, settings);
    let mut segments: Vec<Segment> = Vec::new();
    let mut lists: Vec<Vec<Found>> = Vec::new();
    let mut update = MemoryUpdate::default();
    for step in 1..=settings.max_steps.max(1) {
        // Choose.
        let (collection, chosen_by) = match target {
            RouteTarget::Collection(c) => (c.clone(), String::from("fixed")),
            RouteTarget::Auto => {
                let tried: Vec<&str> = segments.iter().map(|s| s.collection.as_str()).collect();
                let untried: Vec<&str> = collections.iter().copied().filter(|c| !tried.contains(c)).collect();
                if untried.is_empty() {
                    break;
                }
                let query = match segments.last() {
                    Some(p) => alloc::format!("{question} {}", p.sub_query),
                    None => question.into(),
                };
                let (_, order) = ranking(memory, &query, &untried, settings);
                match order.into_iter().next() {
                    Some(first) => first,
                    None => break,
                }
            }
        };
        // Write the sub-query.
        let summary = memory.descriptor(&collection).map_or("", |d| d.summary.as_str());
        let wants_rewrite = step > 1 || settings.rewrite_first;
        let sub_query = match (&mut model, wants_rewrite) {
            (Some(m), true) => {
                let request = sub_query_request(question, &collection, summary, segments.last());
                let reply = m.complete("", &request, 32).await?;
                read_sub_query(&reply).unwrap_or_else(|| question.trim().into())
            }
            _ => question.trim().into(),
        };
        // The same search again would only repeat its verdict (a fixed collection whose
        // rewrite failed): the budget ends here.
        if segments.iter().any(|s| s.collection == collection && s.sub_query == sub_query) {
            break;
        }
        // Retrieve and judge.
        let found = search.search(&collection, &sub_query).await?;
        let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
        let verdict = judge(model.as_deref_mut(), settings.judge, &sub_query, &texts).await?;
        update.outcomes.push(Outcome {
            sub_query: sub_query.clone(),
            collection: collection.clone(),
            success: verdict.satisfied,
            reflection: verdict.reflection.clone(),
            probe: false,
        });
        let satisfied = verdict.satisfied;
        segments.push(Segment { step, collection: collection.clone(), chosen_by, sub_query, passages: found.len(), verdict });
        if satisfied {
            return Ok(Routed { segments, scores, collection: Some(collection), passages: found, update });
        }
        lists.push(found);
    }
    Ok(Routed { segments, scores, collection: None, passages: interleave(lists), update })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::span::Span;
    use crate::text_model::testing::Scripted;
    use crate::Document;
    use alloc::vec;

    /// Two collections: "mining" knows copper, "harbor" knows ice.
    fn search(collection: &str, query: &str) -> Result<Vec<Found>, Error> {
        let d = Document::new(collection, "x").id;
        let text = match collection {
            "mining" => "Copper ore was mined in the hills and smelted in town.",
            "harbor" => "Ice closed the harbor every winter.",
            _ => return Err(Error::NoSuchCollection { name: collection.into() }),
        };
        let chunk = RetrievedChunk { doc_id: d, scenario: 0, span: Span::new(0, text.len()), score: 1.0, ranks: Vec::new() };
        let _ = query;
        Ok(vec![Found { chunk, text: text.into() }])
    }

    fn memory() -> SymbolicMemory {
        let mut m = SymbolicMemory::new();
        m.describe("mining", "Mining in the hills".into(), vec!["copper".into(), "ore".into()]);
        m.describe("harbor", "The port".into(), vec!["harbor".into(), "ice".into()]);
        m
    }

    fn overlap() -> RouteSettings {
        RouteSettings { judge: JudgeKind::Overlap, ..RouteSettings::default() }
    }

    #[test]
    fn the_descriptor_routes_and_the_judge_ends_the_run() {
        let routed =
            poll_once(route("copper ore mined", &["harbor", "mining"], &memory(), None, &RouteTarget::Auto, &overlap(), &mut search))
                .unwrap()
                .unwrap();
        assert_eq!(routed.segments.len(), 1);
        assert_eq!(routed.segments[0].collection, "mining");
        assert!(routed.segments[0].chosen_by.starts_with("descriptor copper"), "{}", routed.segments[0].chosen_by);
        assert_eq!(routed.collection.as_deref(), Some("mining"));
        assert_eq!(routed.update.outcomes.len(), 1);
        assert!(routed.update.outcomes[0].success);
    }

    #[test]
    fn an_unsatisfied_segment_moves_on_with_the_reflection() {
        // The descriptors point at harbor; its passage fails the model judge, whose
        // reflection the next sub-query prompt carries.
        let mut m = Scripted::new(|p| {
            if p.contains("Reply YES or NO") {
                if p.contains("Copper") { "YES. It says copper was smelted." } else { "NO. Nothing about smelting." }.into()
            } else {
                "Query: copper smelting town".into()
            }
        });
        let settings = RouteSettings::default();
        let mut mem = memory();
        mem.describe("harbor", String::new(), vec!["harbor".into(), "ice".into(), "smelted".into(), "where".into()]);
        let routed =
            poll_once(route("where was it smelted", &["mining", "harbor"], &mem, Some(&mut m), &RouteTarget::Auto, &settings, &mut search))
                .unwrap()
                .unwrap();
        let trace: Vec<(&str, &str, bool)> =
            routed.segments.iter().map(|s| (s.collection.as_str(), s.sub_query.as_str(), s.verdict.satisfied)).collect();
        assert_eq!(trace, vec![("harbor", "where was it smelted", false), ("mining", "copper smelting town", true)]);
        assert!(m.prompts.iter().any(|p| p.contains("was not enough: Nothing about smelting.")));
        assert_eq!(routed.update.outcomes.iter().map(|o| o.success).collect::<Vec<_>>(), vec![false, true]);
    }

    #[test]
    fn sub_query_replies_with_full_width_colons_do_not_panic() {
        assert_eq!(read_sub_query("查询：铜矿 开采"), Some("铜矿 开采".into()));
        assert_eq!(read_sub_query("Query：copper"), Some("copper".into()));
        assert_eq!(read_sub_query("Search query: \"copper ore\"\nmore"), Some("copper ore".into()));
        assert_eq!(read_sub_query("注意：x"), Some("注意：x".into()));
        assert_eq!(read_sub_query("  \n"), None);
    }

    #[test]
    fn budget_fixed_target_and_errors() {
        let s = RouteSettings { max_steps: 2, ..overlap() };
        let routed =
            poll_once(route("bread prices", &["harbor", "mining"], &memory(), None, &RouteTarget::Auto, &s, &mut search)).unwrap().unwrap();
        assert_eq!(routed.segments.len(), 2);
        assert_eq!(routed.collection, None);
        assert_eq!(routed.passages.len(), 1);
        let fixed = RouteTarget::Collection("harbor".into());
        let routed = poll_once(route("copper", &["harbor", "mining"], &memory(), None, &fixed, &s, &mut search)).unwrap().unwrap();
        // No model to rewrite the sub-query: the one search is not repeated.
        assert_eq!(routed.segments.len(), 1);
        assert!(routed.segments.iter().all(|s| s.collection == "harbor" && s.chosen_by == "fixed"));
        let err = poll_once(route("q", &["harbor"], &memory(), None, &RouteTarget::Collection("x".into()), &s, &mut search)).unwrap();
        assert_eq!(err, Err(Error::NoSuchCollection { name: "x".into() }));
        assert_eq!(poll_once(route("q", &[], &memory(), None, &RouteTarget::Auto, &s, &mut search)).unwrap(), Err(Error::NoCollections));
        let err = poll_once(route("q", &["nowhere"], &memory(), None, &RouteTarget::Auto, &s, &mut search)).unwrap();
        assert_eq!(err, Err(Error::NoSuchCollection { name: "nowhere".into() }), "a search's own error comes back as it was");
    }

    #[test]
    fn random_controller_is_seeded_and_learning_changes_the_choice() {
        let s = RouteSettings { controller: Controller::Random, ..overlap() };
        let a = poll_once(route("copper", &["harbor", "mining"], &memory(), None, &RouteTarget::Auto, &s, &mut search)).unwrap().unwrap();
        let b = poll_once(route("copper", &["harbor", "mining"], &memory(), None, &RouteTarget::Auto, &s, &mut search)).unwrap().unwrap();
        assert_eq!(a.segments, b.segments);
        assert!(a.segments.iter().all(|s| s.chosen_by == "random"));
        // Memory: a query no descriptor knows goes first where episodes say it worked.
        let mut mem = memory();
        let s = overlap();
        let first =
            poll_once(route("smelted town", &["harbor", "mining"], &mem, None, &RouteTarget::Auto, &s, &mut search)).unwrap().unwrap();
        assert_eq!(first.segments.iter().map(|s| s.collection.as_str()).collect::<Vec<_>>(), vec!["harbor", "mining"]);
        mem.apply(&first.update);
        let again =
            poll_once(route("smelted town", &["harbor", "mining"], &mem, None, &RouteTarget::Auto, &s, &mut search)).unwrap().unwrap();
        assert_eq!(again.segments[0].collection, "mining");
        // The success taught mining's descriptor the query's terms (and left an episode).
        assert_eq!(again.segments[0].chosen_by, "descriptor smelted, town");
        assert!(again.scores[0].episodes > 0.0 && again.scores[1].episodes < 0.0);
    }
}
