//! BM25 over the same texts as the vectors: one more ranked list for RRF.
//!
//! Terms come from [`crate::text::lexical_terms`] (lower-cased words; CJK character
//! bigrams). Scoring is Okapi BM25 with Lucene's idf, ln(1 + (N − df + 0.5) / (df + 0.5)),
//! which stays positive for common terms; k1 = 1.2 and b = 0.75 by default. Query terms are
//! de-duplicated. Deletes remove a document's postings at once, so statistics stay exact.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::codec::{Reader, Writer};
use super::{Hit, TopK};
use crate::text::lexical_terms;
use crate::Error;

/// BM25 parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalization.
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// A document's statistics in portable form: id, length in terms, (term, frequency) pairs.
type DocStats = (u32, u32, Vec<(String, u32)>);

#[derive(Clone, Debug)]
struct DocSlot {
    id: u32,
    len: u32,
    /// (term, frequency) pairs; empty once deleted.
    terms: Vec<(u32, u32)>,
    live: bool,
}

/// An inverted index with BM25 scoring.
///
/// It takes one of two forms. One that texts are added to ([`Growing`]) keeps each
/// document's terms beside the postings, so a delete takes its postings out at once. One
/// read back from storage ([`Frozen`]) is what a library's sealed parts are: a sorted
/// term dictionary and postings in flat arrays, read with a few large copies instead of an
/// allocation per term and per document (at a library's open, building the growing form
/// was the largest cost), and searched by binary search on the dictionary. A frozen index
/// takes deletes as tombstones, counted out of every statistic, so a score is the same in
/// either form; an add turns it back into the growing form.
#[derive(Clone, Debug)]
pub struct Bm25Index {
    params: Bm25Params,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    Growing(Growing),
    Frozen(Frozen),
}

/// The form texts are added to.
#[derive(Clone, Debug, Default)]
struct Growing {
    term_ids: HashMap<String, u32>,
    term_names: Vec<String>,
    postings: Vec<Vec<(u32, u32)>>,
    docs: Vec<DocSlot>,
    slot_of: HashMap<u32, u32>,
    total_len: u64,
}

/// The stored form (see [`Bm25Index`]). Slots are documents in id order.
#[derive(Clone, Debug, Default)]
struct Frozen {
    /// Document ids, strictly increasing (a slot is a position here).
    ids: Vec<u32>,
    /// Each document's length in terms.
    lens: Vec<u32>,
    /// False once deleted.
    live: Vec<bool>,
    live_count: usize,
    total_len: u64,
    /// The terms, sorted, end to end; `term_ends[t]` is where term `t` ends.
    term_text: String,
    term_ends: Vec<u32>,
    /// Term `t`'s postings are `post_ends[t - 1]..post_ends[t]` of the two columns.
    post_ends: Vec<u32>,
    post_slots: Vec<u32>,
    post_tfs: Vec<u32>,
}

/// One term's postings in either form.
enum Postings<'a> {
    /// All live: deletes took theirs out.
    Pairs(&'a [(u32, u32)]),
    /// Tombstoned slots are skipped.
    Columns { slots: &'a [u32], tfs: &'a [u32], live: &'a [bool] },
}

impl Postings<'_> {
    /// Live documents holding the term.
    fn df(&self) -> usize {
        match self {
            Postings::Pairs(p) => p.len(),
            Postings::Columns { slots, live, .. } => slots.iter().filter(|&&s| live[s as usize]).count(),
        }
    }

    fn for_each(&self, mut f: impl FnMut(u32, u32)) {
        match self {
            Postings::Pairs(p) => p.iter().for_each(|&(s, tf)| f(s, tf)),
            Postings::Columns { slots, tfs, live } => {
                for (&s, &tf) in slots.iter().zip(tfs.iter()) {
                    if live[s as usize] {
                        f(s, tf);
                    }
                }
            }
        }
    }
}

impl Frozen {
    fn term(&self, t: usize) -> &str {
        let start = if t == 0 { 0 } else { self.term_ends[t - 1] as usize };
        &self.term_text[start..self.term_ends[t] as usize]
    }

    fn postings_of(&self, t: usize) -> Postings<'_> {
        let start = if t == 0 { 0 } else { self.post_ends[t - 1] as usize };
        let end = self.post_ends[t] as usize;
        Postings::Columns { slots: &self.post_slots[start..end], tfs: &self.post_tfs[start..end], live: &self.live }
    }

    fn find_term(&self, term: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.term_ends.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.term(mid).cmp(term) {
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
                core::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    fn slot(&self, id: u32) -> Option<usize> {
        self.ids.binary_search(&id).ok().filter(|&s| self.live[s])
    }

    /// Built from documents' statistics (any order; ids distinct).
    fn from_docs(mut docs: Vec<DocStats>) -> Self {
        docs.sort_unstable_by_key(|d| d.0);
        let mut by_term: alloc::collections::BTreeMap<&str, Vec<(u32, u32)>> = alloc::collections::BTreeMap::new();
        for (slot, (_, _, terms)) in docs.iter().enumerate() {
            for (t, tf) in terms {
                by_term.entry(t.as_str()).or_default().push((slot as u32, *tf));
            }
        }
        let mut f = Frozen {
            ids: docs.iter().map(|d| d.0).collect(),
            lens: docs.iter().map(|d| d.1).collect(),
            live: alloc::vec![true; docs.len()],
            live_count: docs.len(),
            total_len: docs.iter().map(|d| u64::from(d.1)).sum(),
            ..Frozen::default()
        };
        for (term, mut postings) in by_term {
            // A term listed twice for one document counts once, its frequencies summed.
            sum_repeats(&mut postings);
            f.term_text.push_str(term);
            f.term_ends.push(f.term_text.len() as u32);
            f.post_slots.extend(postings.iter().map(|p| p.0));
            f.post_tfs.extend(postings.iter().map(|p| p.1));
            f.post_ends.push(f.post_slots.len() as u32);
        }
        f
    }

    fn live_docs(&self) -> Vec<DocStats> {
        let mut terms: Vec<Vec<(String, u32)>> = alloc::vec![Vec::new(); self.ids.len()];
        for t in 0..self.term_ends.len() {
            let name = self.term(t);
            self.postings_of(t).for_each(|slot, tf| terms[slot as usize].push((String::from(name), tf)));
        }
        self.ids
            .iter()
            .zip(&self.lens)
            .zip(terms)
            .enumerate()
            .filter(|(slot, _)| self.live[*slot])
            .map(|(_, ((&id, &len), terms))| (id, len, terms))
            .collect()
    }

    fn write(&self, w: &mut Writer) {
        w.u32s(&self.ids);
        w.u32s(&self.lens);
        w.str(&self.term_text);
        w.u32s(&self.term_ends);
        w.u32s(&self.post_ends);
        w.u32s(&self.post_slots);
        w.u32s(&self.post_tfs);
    }

    /// Read [`Frozen::write`], checking everything a search relies on.
    fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let bad = |what| Error::InvalidField { what };
        let ids = r.u32s()?;
        let lens = r.u32s()?;
        let term_text = String::from(r.str()?);
        let term_ends = r.u32s()?;
        let post_ends = r.u32s()?;
        let post_slots = r.u32s()?;
        let post_tfs = r.u32s()?;
        if lens.len() != ids.len() || ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad("BM25 documents"));
        }
        if post_ends.len() != term_ends.len() || post_tfs.len() != post_slots.len() {
            return Err(bad("BM25 postings"));
        }
        let f = Frozen {
            live: alloc::vec![true; ids.len()],
            live_count: ids.len(),
            total_len: lens.iter().map(|&l| u64::from(l)).sum(),
            ids,
            lens,
            term_text,
            term_ends,
            post_ends,
            post_slots,
            post_tfs,
        };
        // Terms: non-empty, on character boundaries, strictly increasing (binary search).
        let mut start = 0usize;
        for t in 0..f.term_ends.len() {
            let end = f.term_ends[t] as usize;
            if end <= start || end > f.term_text.len() || !f.term_text.is_char_boundary(end) {
                return Err(bad("BM25 terms"));
            }
            if t > 0 && f.term(t - 1) >= f.term(t) {
                return Err(bad("BM25 term order"));
            }
            start = end;
        }
        if start != f.term_text.len() {
            return Err(bad("BM25 terms"));
        }
        // Postings: each term's slots strictly increasing and in range.
        let mut start = 0usize;
        for &end in &f.post_ends {
            let end = end as usize;
            if end < start || end > f.post_slots.len() {
                return Err(bad("BM25 postings"));
            }
            let slots = &f.post_slots[start..end];
            if slots.windows(2).any(|w| w[0] >= w[1]) || slots.last().is_some_and(|&s| s as usize >= f.ids.len()) {
                return Err(bad("BM25 postings"));
            }
            start = end;
        }
        if start != f.post_slots.len() {
            return Err(bad("BM25 postings"));
        }
        Ok(f)
    }
}

impl Body {
    fn live(&self) -> usize {
        match self {
            Body::Growing(g) => g.slot_of.len(),
            Body::Frozen(f) => f.live_count,
        }
    }

    fn total_len(&self) -> u64 {
        match self {
            Body::Growing(g) => g.total_len,
            Body::Frozen(f) => f.total_len,
        }
    }

    fn postings(&self, term: &str) -> Option<Postings<'_>> {
        match self {
            Body::Growing(g) => g.term_ids.get(term).map(|&t| Postings::Pairs(&g.postings[t as usize])),
            Body::Frozen(f) => f.find_term(term).map(|t| f.postings_of(t)),
        }
    }

    /// (id, length) of a slot.
    fn doc(&self, slot: u32) -> (u32, u32) {
        match self {
            Body::Growing(g) => (g.docs[slot as usize].id, g.docs[slot as usize].len),
            Body::Frozen(f) => (f.ids[slot as usize], f.lens[slot as usize]),
        }
    }
}

impl Default for Bm25Index {
    fn default() -> Self {
        Bm25Index::new(Bm25Params::default())
    }
}

const KIND: [u8; 4] = *b"BM25";

/// Sort (key, count) pairs and merge those with one key, their counts summed.
fn sum_repeats(pairs: &mut Vec<(u32, u32)>) {
    pairs.sort_unstable();
    pairs.dedup_by(|next, kept| {
        let same = next.0 == kept.0;
        if same {
            kept.1 = kept.1.saturating_add(next.1);
        }
        same
    });
}
/// Version 2 stores the frozen form; version 1 (each document's terms) is still read.
const VERSION: u16 = 2;

impl Growing {
    fn add(&mut self, id: u32, terms: &[String]) {
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for t in terms {
            let next = self.term_names.len() as u32;
            let tid = *self.term_ids.entry_ref(t.as_str()).or_insert(next);
            if tid == next {
                self.term_names.push(t.clone());
                self.postings.push(Vec::new());
            }
            *counts.entry(tid).or_insert(0) += 1;
        }
        let mut pairs: Vec<(u32, u32)> = counts.into_iter().collect();
        pairs.sort_unstable();
        let slot = self.docs.len() as u32;
        for &(tid, tf) in &pairs {
            self.postings[tid as usize].push((slot, tf));
        }
        self.docs.push(DocSlot { id, len: terms.len() as u32, terms: pairs, live: true });
        self.slot_of.insert(id, slot);
        self.total_len += terms.len() as u64;
    }

    fn live_docs(&self) -> Vec<DocStats> {
        self.docs
            .iter()
            .filter(|d| d.live)
            .map(|d| (d.id, d.len, d.terms.iter().map(|&(t, f)| (self.term_names[t as usize].clone(), f)).collect()))
            .collect()
    }

    fn rebuilt(docs: Vec<DocStats>) -> Self {
        let mut idx = Growing::default();
        for (id, len, terms) in docs {
            let slot = idx.docs.len() as u32;
            let mut pairs = Vec::with_capacity(terms.len());
            for (t, tf) in terms {
                let next = idx.term_names.len() as u32;
                let tid = *idx.term_ids.entry_ref(t.as_str()).or_insert(next);
                if tid == next {
                    idx.term_names.push(t);
                    idx.postings.push(Vec::new());
                }
                idx.postings[tid as usize].push((slot, tf));
                pairs.push((tid, tf));
            }
            pairs.sort_unstable();
            idx.docs.push(DocSlot { id, len, terms: pairs, live: true });
            idx.slot_of.insert(id, slot);
            idx.total_len += u64::from(len);
        }
        idx
    }

    /// Read the version-1 layout (each document's terms).
    fn read_v1(r: &mut Reader<'_>) -> Result<Self, Error> {
        let mut idx = Growing::default();
        let n_terms = r.count(8)?;
        // Stored term number → term id here (a name stored twice maps to one id).
        let mut remap = Vec::with_capacity(n_terms);
        for _ in 0..n_terms {
            let name = r.str()?;
            let next = idx.term_names.len() as u32;
            let tid = *idx.term_ids.entry_ref(name).or_insert(next);
            if tid == next {
                idx.term_names.push(String::from(name));
                idx.postings.push(Vec::new());
            }
            remap.push(tid);
        }
        let n_docs = r.count(16)?;
        for _ in 0..n_docs {
            let id = r.u32()?;
            let len = r.u32()?;
            let n = r.count(8)?;
            let mut terms: Vec<(u32, u32)> = Vec::with_capacity(n);
            for _ in 0..n {
                let t = r.u32()? as usize;
                let f = r.u32()?;
                let Some(&tid) = remap.get(t) else { return Err(Error::InvalidField { what: "BM25 term reference" }) };
                terms.push((tid, f));
            }
            // A term stored twice (under two numbers) counts once, its frequencies summed.
            sum_repeats(&mut terms);
            let slot = idx.docs.len() as u32;
            if idx.slot_of.insert(id, slot).is_some() {
                return Err(Error::InvalidField { what: "BM25 duplicate id" });
            }
            for &(tid, tf) in &terms {
                idx.postings[tid as usize].push((slot, tf));
            }
            idx.docs.push(DocSlot { id, len, terms, live: true });
            idx.total_len += u64::from(len);
        }
        Ok(idx)
    }
}

impl Bm25Index {
    /// An empty index.
    pub fn new(params: Bm25Params) -> Self {
        Bm25Index { params, body: Body::Growing(Growing::default()) }
    }

    /// Number of live documents.
    pub fn len(&self) -> usize {
        self.body.live()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `id` is indexed.
    pub fn contains(&self, id: u32) -> bool {
        match &self.body {
            Body::Growing(g) => g.slot_of.contains_key(&id),
            Body::Frozen(f) => f.slot(id).is_some(),
        }
    }

    /// True in the stored form (see [`Bm25Index`]).
    pub fn is_frozen(&self) -> bool {
        matches!(self.body, Body::Frozen(_))
    }

    /// Index `text` under a new id.
    pub fn add(&mut self, id: u32, text: &str) -> Result<(), Error> {
        if self.contains(id) {
            return Err(Error::DuplicateId { id });
        }
        if let Body::Frozen(f) = &self.body {
            self.body = Body::Growing(Growing::rebuilt(f.live_docs()));
        }
        if let Body::Growing(g) = &mut self.body {
            g.add(id, &lexical_terms(text));
        }
        Ok(())
    }

    /// Delete a document; false when the id was not there.
    pub fn remove(&mut self, id: u32) -> bool {
        match &mut self.body {
            Body::Frozen(f) => {
                let Some(slot) = f.slot(id) else { return false };
                f.live[slot] = false;
                f.live_count -= 1;
                f.total_len -= u64::from(f.lens[slot]);
                true
            }
            Body::Growing(g) => {
                let Some(slot) = g.slot_of.remove(&id) else { return false };
                let doc = &mut g.docs[slot as usize];
                for &(tid, _) in &doc.terms {
                    g.postings[tid as usize].retain(|&(s, _)| s != slot);
                }
                doc.terms.clear();
                doc.live = false;
                g.total_len -= u64::from(doc.len);
                if g.docs.len() > 1024 && g.docs.len() > 2 * g.slot_of.len() {
                    *g = Growing::rebuilt(g.live_docs());
                }
                true
            }
        }
    }

    fn live_docs(&self) -> Vec<DocStats> {
        match &self.body {
            Body::Growing(g) => g.live_docs(),
            Body::Frozen(f) => f.live_docs(),
        }
    }

    /// The `k` best documents for `query`, best first (documents sharing no term are not
    /// returned).
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let mut out = Vec::new();
        self.search_into(query, k, &mut out);
        out
    }

    /// [`Bm25Index::search`] into a reused buffer.
    pub fn search_into(&self, query: &str, k: usize, out: &mut Vec<Hit>) {
        Self::search_parts(&[self], query, k, out);
    }

    /// BM25 over several indexes as if they were one: the collection's statistics (number
    /// of documents, mean length, each term's document frequency) are summed over the
    /// parts, so a score does not depend on which part a text landed in. The parts must
    /// share parameters and hold disjoint ids; the first part's parameters apply.
    pub fn search_parts(parts: &[&Bm25Index], query: &str, k: usize, out: &mut Vec<Hit>) {
        out.clear();
        let Some(first) = parts.first() else { return };
        let n: usize = parts.iter().map(|p| p.len()).sum();
        if n == 0 {
            return;
        }
        let n = n as f32;
        let total_len: u64 = parts.iter().map(|p| p.body.total_len()).sum();
        let avgdl = (total_len as f32 / n).max(1e-6);
        let mut terms = lexical_terms(query);
        terms.sort_unstable();
        terms.dedup();
        // Each query term's postings in each part (or none), and its summed frequency.
        let found: Vec<(Vec<Option<Postings<'_>>>, f32)> = terms
            .iter()
            .map(|t| {
                let per_part: Vec<Option<Postings<'_>>> = parts.iter().map(|p| p.body.postings(t)).collect();
                let df: usize = per_part.iter().flatten().map(Postings::df).sum();
                (per_part, df as f32)
            })
            .collect();
        // Summed in the terms' order (sorted above), so a score does not depend on how
        // the index was built or read back.
        let Bm25Params { k1, b } = first.params;
        let mut top = TopK::new(k);
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for (pi, part) in parts.iter().enumerate() {
            scores.clear();
            for (per_part, df) in &found {
                let Some(postings) = &per_part[pi] else { continue };
                let idf = libm::logf(1.0 + (n - df + 0.5) / (df + 0.5));
                postings.for_each(|slot, tf| {
                    let len = part.body.doc(slot).1 as f32;
                    let tf = tf as f32;
                    let s = idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avgdl));
                    *scores.entry(slot).or_insert(0.0) += s;
                });
            }
            for (&slot, &score) in &scores {
                top.push(Hit { id: part.body.doc(slot).0, score });
            }
        }
        top.into_sorted(out);
    }

    /// One index holding the live documents of `parts` (a merge of segments), in the
    /// stored form.
    pub fn merged(parts: &[&Bm25Index]) -> Self {
        let params = parts.first().map_or_else(Bm25Params::default, |p| p.params);
        Bm25Index { params, body: Body::Frozen(Frozen::from_docs(parts.iter().flat_map(|p| p.live_docs()).collect())) }
    }

    /// Serialize the live documents' term statistics, in the stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.f32(self.params.k1);
        w.f32(self.params.b);
        match &self.body {
            Body::Frozen(f) if f.live_count == f.ids.len() => f.write(&mut w),
            _ => Frozen::from_docs(self.live_docs()).write(&mut w),
        }
        w.finish(KIND, VERSION)
    }

    /// Deserialize, checking term references and ids: the stored form stays frozen (a
    /// library's parts are read this way at every open).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let (version, mut r) = Reader::open(bytes, KIND, VERSION)?;
        let params = Bm25Params { k1: r.f32()?, b: r.f32()? };
        if !params.k1.is_finite() || !params.b.is_finite() {
            return Err(Error::InvalidField { what: "BM25 parameters" });
        }
        let body = if version < 2 { Body::Growing(Growing::read_v1(&mut r)?) } else { Body::Frozen(Frozen::read(&mut r)?) };
        r.finish()?;
        Ok(Bm25Index { params, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_bm25_by_hand() {
        let mut idx = Bm25Index::new(Bm25Params::default());
        idx.add(1, "the cat sat on the mat").unwrap();
        idx.add(2, "the dog chased the cat").unwrap();
        idx.add(3, "stock markets fell today").unwrap();
        let hits = idx.search("cat mat", 10);
        assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [1, 2]);
        // By hand: N = 3, avgdl = 5, doc 2 has len 5 and tf(cat) = 1.
        // idf(cat) = ln(1 + (3 - 2 + 0.5) / 2.5) = ln 1.6; score = idf * 2.2 / (1 + 1.2) = ln 1.6.
        assert!((hits[1].score - libm::logf(1.6)).abs() < 1e-6);
        assert!(idx.search("unknown words", 10).is_empty());
        assert_eq!(idx.add(1, "x"), Err(Error::DuplicateId { id: 1 }));
    }

    fn sample() -> Bm25Index {
        let mut idx = Bm25Index::new(Bm25Params::default());
        let texts = ["the cat sat on the mat", "the dog chased the cat", "stock markets fell today", "a cat and a dog", "mat mat mat"];
        for (i, t) in texts.iter().enumerate() {
            idx.add(10 - i as u32, t).unwrap();
        }
        idx
    }

    #[test]
    fn the_stored_form_scores_as_the_growing_one_through_deletes_and_adds() {
        let mut growing = sample();
        let mut frozen = Bm25Index::from_bytes(&growing.to_bytes()).unwrap();
        assert!(frozen.is_frozen() && !growing.is_frozen());
        for q in ["cat mat", "dog", "markets today", "absent"] {
            assert_eq!(frozen.search(q, 10), growing.search(q, 10), "{q}");
        }
        // A delete is a tombstone counted out of every statistic (df, N, mean length).
        for idx in [&mut growing, &mut frozen] {
            assert!(idx.remove(9));
            assert!(!idx.remove(9));
            assert!(!idx.contains(9) && idx.contains(10));
        }
        assert!(frozen.is_frozen());
        assert_eq!(frozen.len(), 4);
        for q in ["cat mat", "dog", "the"] {
            assert_eq!(frozen.search(q, 10), growing.search(q, 10), "{q}");
        }
        // Stored again, the tombstones are gone; merged, the parts are one index.
        let again = Bm25Index::from_bytes(&frozen.to_bytes()).unwrap();
        assert_eq!(again.search("dog cat", 10), growing.search("dog cat", 10));
        let mut other = Bm25Index::new(Bm25Params::default());
        other.add(1, "a dog in the fog").unwrap();
        let merged = Bm25Index::merged(&[&frozen, &other]);
        let mut parts = Vec::new();
        Bm25Index::search_parts(&[&frozen, &other], "dog fog", 10, &mut parts);
        assert_eq!(merged.search("dog fog", 10), parts);
        // An add turns it back into the growing form.
        assert_eq!(frozen.add(10, "again"), Err(Error::DuplicateId { id: 10 }));
        frozen.add(20, "cat cat cat").unwrap();
        growing.add(20, "cat cat cat").unwrap();
        assert!(!frozen.is_frozen());
        assert_eq!(frozen.search("cat", 10), growing.search("cat", 10));
    }

    #[test]
    fn version_one_bytes_are_still_read() {
        // Version 1: the term names, then each document's (term number, frequency) pairs.
        let mut w = Writer::new();
        w.f32(1.2);
        w.f32(0.75);
        w.u64(2);
        w.str("cat");
        w.str("mat");
        w.u64(2);
        for (id, pairs) in [(4u32, &[(0u32, 1u32), (1, 2)][..]), (5, &[(0, 1)][..])] {
            w.u32(id);
            w.u32(pairs.iter().map(|p| p.1).sum());
            w.u64(pairs.len() as u64);
            for &(t, f) in pairs {
                w.u32(t);
                w.u32(f);
            }
        }
        let old = Bm25Index::from_bytes(&w.finish(KIND, 1)).unwrap();
        let mut fresh = Bm25Index::new(Bm25Params::default());
        fresh.add(4, "cat mat mat").unwrap();
        fresh.add(5, "cat").unwrap();
        assert_eq!(old.search("mat cat", 5), fresh.search("mat cat", 5));
    }

    #[test]
    fn damaged_stored_forms_are_errors() {
        let bytes = sample().to_bytes();
        for cut in 0..bytes.len() {
            assert!(Bm25Index::from_bytes(&bytes[..cut]).is_err());
        }
        // Out-of-order terms or postings, with a valid checksum, are refused too.
        let cat = |f: &Frozen| {
            let t = f.find_term("cat").unwrap();
            f.post_ends[t - 1] as usize..f.post_ends[t] as usize
        };
        let swap_terms = |f: &mut Frozen| f.term_ends.swap(0, 1);
        let unsorted = |f: &mut Frozen| {
            let r = cat(f);
            f.post_slots.swap(r.start, r.start + 1);
        };
        let far = |f: &mut Frozen| {
            let r = cat(f);
            f.post_slots[r.end - 1] = 99;
        };
        for damage in [&swap_terms as &dyn Fn(&mut Frozen), &unsorted, &far] {
            let Body::Frozen(mut f) = Bm25Index::from_bytes(&bytes).unwrap().body else { panic!("the stored form") };
            assert_eq!(cat(&f).len(), 3);
            damage(&mut f);
            let mut w = Writer::new();
            w.f32(1.2);
            w.f32(0.75);
            f.write(&mut w);
            assert!(Bm25Index::from_bytes(&w.finish(KIND, VERSION)).is_err());
        }
    }

    #[test]
    fn delete_round_trip_and_cjk() {
        let mut idx = Bm25Index::new(Bm25Params::default());
        idx.add(7, "文档记忆的检索方法").unwrap();
        idx.add(8, "今天天气很好").unwrap();
        assert_eq!(idx.search("记忆检索", 5)[0].id, 7);
        let back = Bm25Index::from_bytes(&idx.to_bytes()).unwrap();
        assert_eq!(back.search("天气", 5), idx.search("天气", 5));
        assert!(idx.remove(8));
        assert!(idx.search("天气", 5).is_empty());
        assert!(!idx.remove(8));
        let bytes = idx.to_bytes();
        for cut in 0..bytes.len() {
            assert!(Bm25Index::from_bytes(&bytes[..cut]).is_err());
        }
    }
}
