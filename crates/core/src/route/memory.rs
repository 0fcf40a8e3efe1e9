//! The router's symbolic memory (SEGMEM-RAG): what was learned about where to search.
//!
//! Three kinds of entry, all plain text and counters, so that a person can read why a
//! question went where it went:
//! - **procedural rules**: a query pattern (a few terms) → a collection, induced when two
//!   successful searches of one collection share at least two terms; each carries its
//!   support and failures;
//! - **semantic descriptors**: per collection, a summary and keywords made from its
//!   memories ([`super::descriptors`]), terms learned from sub-queries it answered, and
//!   success / failure counters;
//! - **episodic entries**: sub-query, collection, outcome, the judge's reflection.
//!
//! [`SymbolicMemory::scores`] recalls all three by token overlap ([`super::terms`]) and
//! ranks the collections for a query. [`SymbolicMemory::apply`] learns from a
//! [`MemoryUpdate`], which the router returns instead of writing, so that learning happens
//! after the answer is delivered and never on its critical path. Sizes are bounded:
//! at most [`MAX_EPISODES`] episodes (oldest dropped), [`MAX_RULES`] rules (weakest
//! dropped), [`MAX_LEARNED_TERMS`] learned terms per collection.

use alloc::string::String;
use alloc::vec::Vec;

use super::terms::{jaccard, shared, term_set};

/// The layout version of a saved memory.
pub const SYMBOLIC_MEMORY_VERSION: u32 = 1;
/// Most episodes kept.
pub const MAX_EPISODES: usize = 512;
/// Most rules kept.
pub const MAX_RULES: usize = 256;
/// Most learned terms per collection.
pub const MAX_LEARNED_TERMS: usize = 128;
/// Most terms in a rule's pattern.
pub const MAX_PATTERN_TERMS: usize = 4;

/// Weights of the evidence in a collection's score (see [`SymbolicMemory::scores`]).
const RULE_WEIGHT: f64 = 1.5;
const DESCRIPTOR_WEIGHT: f64 = 1.0;
const EPISODE_WEIGHT: f64 = 1.0;
const PRIOR_WEIGHT: f64 = 0.5;
/// Episodes less similar than this to a query are not recalled.
const EPISODE_MIN_SIMILARITY: f64 = 0.2;

/// A collection's semantic descriptor.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Descriptor {
    /// The collection.
    pub collection: String,
    /// What it holds, in a sentence.
    pub summary: String,
    /// Its distinctive terms (sorted), from its memories.
    pub keywords: Vec<String>,
    /// Terms of sub-queries it answered (sorted).
    #[cfg_attr(feature = "serde", serde(default))]
    pub learned: Vec<String>,
    /// Searches judged satisfied.
    pub successes: u32,
    /// Searches judged not satisfied.
    pub failures: u32,
    /// Of those, the cold-start explorer's probes.
    pub probes: u32,
    /// What the summary and keywords were made from (the caller's fingerprint of the
    /// collection's documents), so they are remade when the documents change.
    #[cfg_attr(feature = "serde", serde(default))]
    pub fingerprint: String,
}

impl Descriptor {
    /// Searches of this collection judged so far.
    pub fn interactions(&self) -> u32 {
        self.successes + self.failures
    }
}

/// A procedural rule: queries holding every term of `pattern` go to `collection`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Rule {
    /// Its terms (sorted).
    pub pattern: Vec<String>,
    /// Where such queries are answered.
    pub collection: String,
    /// Successes under this rule.
    pub support: u32,
    /// Failures under it.
    pub failures: u32,
}

impl Rule {
    /// (support + 1) / (support + failures + 2): how often the rule was right, smoothed.
    pub fn confidence(&self) -> f64 {
        (self.support as f64 + 1.0) / ((self.support + self.failures) as f64 + 2.0)
    }
}

/// An episodic entry.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Episode {
    /// When, in the memory's own clock (one tick per outcome).
    pub at: u64,
    /// The sub-query searched.
    pub sub_query: String,
    /// The collection searched.
    pub collection: String,
    /// Whether the judge was satisfied.
    pub success: bool,
    /// The judge's one-sentence reflection.
    pub reflection: String,
    /// True for a cold-start probe.
    #[cfg_attr(feature = "serde", serde(default))]
    pub probe: bool,
}

/// One judged search, to be learned from.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Outcome {
    /// The sub-query searched.
    pub sub_query: String,
    /// The collection searched.
    pub collection: String,
    /// Whether the judge was satisfied.
    pub success: bool,
    /// The judge's reflection.
    pub reflection: String,
    /// True for a cold-start probe.
    pub probe: bool,
}

/// What a routed answer (or an exploration) learned, applied with
/// [`SymbolicMemory::apply`] once the answer is delivered.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemoryUpdate {
    /// The judged searches, in order.
    pub outcomes: Vec<Outcome>,
}

/// One collection's score for a query, with its parts (see [`SymbolicMemory::scores`]).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CollectionScore {
    /// The collection.
    pub collection: String,
    /// The weighted sum of the parts.
    pub score: f64,
    /// Confidence of the best rule that matched (0: none).
    pub rule: f64,
    /// Share of the query's terms among the descriptor's keywords and learned terms, each
    /// term weighted by ln(1 + candidates / candidates whose descriptor knows it).
    pub descriptor: f64,
    /// Similar episodes' outcomes, weighted by similarity, in [−1, 1].
    pub episodes: f64,
    /// Smoothed success rate − 0.5.
    pub prior: f64,
    /// Searches judged so far.
    pub interactions: u32,
    /// The terms that matched (the rule's pattern, or the descriptor's shared terms).
    pub matched: Vec<String>,
}

/// The symbolic memory (see the module docs).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SymbolicMemory {
    /// [`SYMBOLIC_MEMORY_VERSION`] when written.
    pub version: u32,
    /// Outcomes learned so far (the episodes' clock).
    pub clock: u64,
    /// Procedural rules.
    pub rules: Vec<Rule>,
    /// One descriptor per collection.
    pub descriptors: Vec<Descriptor>,
    /// Episodes, oldest first.
    pub episodes: Vec<Episode>,
}

impl Default for SymbolicMemory {
    fn default() -> Self {
        SymbolicMemory { version: SYMBOLIC_MEMORY_VERSION, clock: 0, rules: Vec::new(), descriptors: Vec::new(), episodes: Vec::new() }
    }
}

fn merge_terms(into: &mut Vec<String>, terms: &[String], cap: usize) {
    for t in terms {
        if let Err(i) = into.binary_search(t) {
            if into.len() >= cap {
                break;
            }
            into.insert(i, t.clone());
        }
    }
}

impl SymbolicMemory {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// The descriptor of `collection`.
    pub fn descriptor(&self, collection: &str) -> Option<&Descriptor> {
        self.descriptors.iter().find(|d| d.collection == collection)
    }

    /// The descriptor of `collection`, made empty if there is none.
    pub fn descriptor_mut(&mut self, collection: &str) -> &mut Descriptor {
        let i = match self.descriptors.iter().position(|d| d.collection == collection) {
            Some(i) => i,
            None => {
                self.descriptors.push(Descriptor { collection: collection.into(), ..Descriptor::default() });
                self.descriptors.len() - 1
            }
        };
        &mut self.descriptors[i]
    }

    /// Set the summary and keywords of a collection's descriptor (made from its
    /// memories), keeping its counters and learned terms.
    pub fn describe(&mut self, collection: &str, summary: String, mut keywords: Vec<String>) {
        keywords.sort_unstable();
        keywords.dedup();
        let d = self.descriptor_mut(collection);
        d.summary = summary;
        d.keywords = keywords;
    }

    /// Forget the rules and descriptors of collections not in `live` (removed from the
    /// library); episodes stay, as history.
    pub fn retain_collections(&mut self, live: &[&str]) {
        self.descriptors.retain(|d| live.contains(&d.collection.as_str()));
        self.rules.retain(|r| live.contains(&r.collection.as_str()));
    }

    /// Searches of `collection` judged so far.
    pub fn interactions(&self, collection: &str) -> u32 {
        self.descriptor(collection).map_or(0, Descriptor::interactions)
    }

    /// Rank `collections` for `query`, best first (ties keep the given order). A
    /// collection's score is 1.5 × the confidence of its best matching rule (a rule
    /// matches when the query holds all its terms) + 1 × the share of the query's terms in
    /// its descriptor (weighted by how few candidates know each term) + 1 × the outcomes of similar episodes (Jaccard ≥ 0.2, each weighted
    /// by its similarity, probes by half, clipped to ±1) + 0.5 × (smoothed success rate −
    /// 0.5). Rules and episodes outweigh the descriptor because they were observed, not
    /// guessed.
    pub fn scores(&self, query: &str, collections: &[&str]) -> Vec<CollectionScore> {
        let q = term_set(query);
        let episode_terms: Vec<(Vec<String>, &Episode)> = self.episodes.iter().map(|e| (term_set(&e.sub_query), e)).collect();
        // What each candidate's descriptor knows, and how distinctive each query term is
        // among them: a term every collection knows routes nowhere.
        let known: Vec<Option<Vec<String>>> = collections
            .iter()
            .map(|&c| {
                self.descriptor(c).map(|d| {
                    let mut k = d.keywords.clone();
                    merge_terms(&mut k, &d.learned, usize::MAX);
                    k
                })
            })
            .collect();
        let n = collections.len() as f64;
        let weights: Vec<f64> = q
            .iter()
            .map(|t| {
                let df = known.iter().flatten().filter(|k| k.binary_search(t).is_ok()).count();
                if df == 0 {
                    0.0
                } else {
                    libm::log(1.0 + n / df as f64)
                }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let mut out: Vec<CollectionScore> = collections
            .iter()
            .zip(&known)
            .map(|(&c, known)| {
                let mut matched = Vec::new();
                let mut rule = 0.0;
                for r in self.rules.iter().filter(|r| r.collection == c && !r.pattern.is_empty()) {
                    if r.pattern.iter().all(|t| q.binary_search(t).is_ok()) && r.confidence() > rule {
                        rule = r.confidence();
                        matched = r.pattern.clone();
                    }
                }
                let (descriptor, successes, failures) = match (self.descriptor(c), known) {
                    (Some(d), Some(known)) => {
                        if matched.is_empty() {
                            matched = shared(&q, known);
                        }
                        let held: f64 = q.iter().zip(&weights).filter(|(t, _)| known.binary_search(t).is_ok()).map(|(_, w)| w).sum();
                        (if total > 0.0 { held / total } else { 0.0 }, d.successes, d.failures)
                    }
                    _ => (0.0, 0, 0),
                };
                let mut episodes = 0.0;
                for (terms, e) in episode_terms.iter().filter(|(_, e)| e.collection == c) {
                    let sim = jaccard(&q, terms);
                    if sim >= EPISODE_MIN_SIMILARITY {
                        let sign = if e.success { 1.0 } else { -1.0 };
                        episodes += sign * sim * if e.probe { 0.5 } else { 1.0 };
                    }
                }
                let episodes = episodes.clamp(-1.0, 1.0);
                let prior = (successes as f64 + 1.0) / ((successes + failures) as f64 + 2.0) - 0.5;
                let score = RULE_WEIGHT * rule + DESCRIPTOR_WEIGHT * descriptor + EPISODE_WEIGHT * episodes + PRIOR_WEIGHT * prior;
                CollectionScore {
                    collection: c.into(),
                    score,
                    rule,
                    descriptor,
                    episodes,
                    prior,
                    interactions: successes + failures,
                    matched,
                }
            })
            .collect();
        out.sort_by(|a, b| b.score.total_cmp(&a.score));
        out
    }

    /// Learn from `update`: counters, learned terms, episodes, and rules (induced from a
    /// success that shares two or more terms with an earlier success in the same
    /// collection; a failure counts against every rule of that collection that matched).
    pub fn apply(&mut self, update: &MemoryUpdate) {
        for o in &update.outcomes {
            let q = term_set(&o.sub_query);
            {
                let d = self.descriptor_mut(&o.collection);
                if o.success {
                    d.successes += 1;
                    merge_terms(&mut d.learned, &q, MAX_LEARNED_TERMS);
                } else {
                    d.failures += 1;
                }
                if o.probe {
                    d.probes += 1;
                }
            }
            if o.success {
                self.induce_rule(&q, &o.collection);
            } else {
                for r in self.rules.iter_mut().filter(|r| r.collection == o.collection) {
                    if r.pattern.iter().all(|t| q.binary_search(t).is_ok()) {
                        r.failures += 1;
                    }
                }
            }
            self.clock += 1;
            self.episodes.push(Episode {
                at: self.clock,
                sub_query: o.sub_query.clone(),
                collection: o.collection.clone(),
                success: o.success,
                reflection: o.reflection.clone(),
                probe: o.probe,
            });
            if self.episodes.len() > MAX_EPISODES {
                let extra = self.episodes.len() - MAX_EPISODES;
                self.episodes.drain(..extra);
            }
        }
        if self.rules.len() > MAX_RULES {
            // Weakest first out: lowest confidence, then least support.
            self.rules.sort_by(|a, b| b.confidence().total_cmp(&a.confidence()).then(b.support.cmp(&a.support)));
            self.rules.truncate(MAX_RULES);
        }
    }

    fn induce_rule(&mut self, q: &[String], collection: &str) {
        // The most similar earlier success in this collection.
        let mut best: Option<(f64, Vec<String>)> = None;
        for e in self.episodes.iter().rev().filter(|e| e.success && e.collection == collection).take(MAX_EPISODES) {
            let terms = term_set(&e.sub_query);
            let common = shared(q, &terms);
            if common.len() >= 2 {
                let sim = jaccard(q, &terms);
                if best.as_ref().is_none_or(|(s, _)| sim > *s) {
                    best = Some((sim, common));
                }
            }
        }
        let Some((_, mut pattern)) = best else { return };
        // The longest shared terms are the most specific.
        pattern.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
        pattern.truncate(MAX_PATTERN_TERMS);
        pattern.sort_unstable();
        match self.rules.iter_mut().find(|r| r.collection == collection && r.pattern == pattern) {
            Some(r) => r.support += 1,
            None => self.rules.push(Rule { pattern, collection: collection.into(), support: 1, failures: 0 }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn outcome(q: &str, c: &str, success: bool) -> Outcome {
        Outcome { sub_query: q.into(), collection: c.into(), success, reflection: "r".into(), probe: false }
    }

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| String::from(*s)).collect()
    }

    #[test]
    fn descriptors_rank_collections_before_anything_is_learned() {
        let mut m = SymbolicMemory::new();
        m.describe("mining", "Mines".into(), words(&["copper", "ore", "smelter"]));
        m.describe("shipping", "Ports".into(), words(&["harbor", "ice", "ships"]));
        let s = m.scores("Where was the copper ore taken?", &["shipping", "mining"]);
        assert_eq!(s[0].collection, "mining");
        assert_eq!(s[0].matched, ["copper", "ore"]);
        assert_eq!(s[0].interactions, 0);
        // No evidence at all: the given order.
        assert_eq!(m.scores("xyz", &["shipping", "mining"])[0].collection, "shipping");
    }

    #[test]
    fn successes_induce_a_rule_and_failures_weaken_it() {
        let mut m = SymbolicMemory::new();
        m.apply(&MemoryUpdate { outcomes: vec![outcome("copper smelter output 1850", "b", true)] });
        assert!(m.rules.is_empty());
        m.apply(&MemoryUpdate { outcomes: vec![outcome("copper smelter workers", "b", true)] });
        assert_eq!(m.rules, vec![Rule { pattern: words(&["copper", "smelter"]), collection: "b".into(), support: 1, failures: 0 }]);
        // The rule now routes a query the descriptors know nothing about.
        let s = m.scores("copper smelter wages", &["a", "b"]);
        assert_eq!((s[0].collection.as_str(), s[0].matched.clone()), ("b", words(&["copper", "smelter"])));
        assert!((s[0].rule - 2.0 / 3.0).abs() < 1e-12);
        m.apply(&MemoryUpdate { outcomes: vec![outcome("copper smelter prices", "b", false)] });
        assert_eq!(m.rules[0].failures, 1);
        assert_eq!(m.descriptor("b").map(|d| (d.successes, d.failures)), Some((2, 1)));
        assert_eq!(m.episodes.len(), 3);
        assert_eq!(m.episodes[2].at, 3);
    }

    #[test]
    fn episodes_steer_similar_queries_away_from_failures() {
        let mut m = SymbolicMemory::new();
        m.describe("a", String::new(), words(&["bread"]));
        m.describe("b", String::new(), words(&["bread"]));
        m.apply(&MemoryUpdate {
            outcomes: vec![outcome("price of bread in winter", "a", false), outcome("price of bread in winter", "b", true)],
        });
        let s = m.scores("bread price winter", &["a", "b"]);
        assert_eq!(s[0].collection, "b");
        assert!(s[0].episodes > 0.0 && s[1].episodes < 0.0);
        assert_eq!(m.descriptor("b").map(|d| d.learned.clone()), Some(words(&["bread", "price", "winter"])));
    }

    #[test]
    fn sizes_stay_bounded_and_removed_collections_are_forgotten() {
        let mut m = SymbolicMemory::new();
        let outcomes: Vec<Outcome> = (0..MAX_EPISODES + 10).map(|i| outcome(&alloc::format!("term{i} shared common"), "c", true)).collect();
        m.apply(&MemoryUpdate { outcomes });
        assert_eq!(m.episodes.len(), MAX_EPISODES);
        assert_eq!(m.episodes[0].at, 11);
        assert!(m.rules.len() <= MAX_RULES);
        assert!(m.descriptor("c").is_some_and(|d| d.learned.len() <= MAX_LEARNED_TERMS));
        m.retain_collections(&["other"]);
        assert!(m.descriptors.is_empty() && m.rules.is_empty() && !m.episodes.is_empty());
    }
}
