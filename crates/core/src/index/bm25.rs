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
#[derive(Clone, Debug, Default)]
pub struct Bm25Index {
    params: Bm25Params,
    term_ids: HashMap<String, u32>,
    term_names: Vec<String>,
    postings: Vec<Vec<(u32, u32)>>,
    docs: Vec<DocSlot>,
    slot_of: HashMap<u32, u32>,
    total_len: u64,
}

const KIND: [u8; 4] = *b"BM25";

impl Bm25Index {
    /// An empty index.
    pub fn new(params: Bm25Params) -> Self {
        Bm25Index { params, ..Default::default() }
    }

    /// Number of live documents.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// True when `id` is indexed.
    pub fn contains(&self, id: u32) -> bool {
        self.slot_of.contains_key(&id)
    }

    /// Index `text` under a new id.
    pub fn add(&mut self, id: u32, text: &str) -> Result<(), Error> {
        if self.slot_of.contains_key(&id) {
            return Err(Error::DuplicateId { id });
        }
        let terms = lexical_terms(text);
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for t in &terms {
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
        Ok(())
    }

    /// Delete a document; false when the id was not there.
    pub fn remove(&mut self, id: u32) -> bool {
        let Some(slot) = self.slot_of.remove(&id) else { return false };
        let doc = &mut self.docs[slot as usize];
        for &(tid, _) in &doc.terms {
            self.postings[tid as usize].retain(|&(s, _)| s != slot);
        }
        doc.terms.clear();
        doc.live = false;
        self.total_len -= u64::from(doc.len);
        if self.docs.len() > 1024 && self.docs.len() > 2 * self.slot_of.len() {
            *self = Self::rebuilt(self.params, self.live_docs());
        }
        true
    }

    fn live_docs(&self) -> Vec<DocStats> {
        self.docs
            .iter()
            .filter(|d| d.live)
            .map(|d| (d.id, d.len, d.terms.iter().map(|&(t, f)| (self.term_names[t as usize].clone(), f)).collect()))
            .collect()
    }

    fn rebuilt(params: Bm25Params, docs: Vec<DocStats>) -> Self {
        let mut idx = Bm25Index::new(params);
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
        let n: usize = parts.iter().map(|p| p.slot_of.len()).sum();
        if n == 0 {
            return;
        }
        let n = n as f32;
        let total_len: u64 = parts.iter().map(|p| p.total_len).sum();
        let avgdl = (total_len as f32 / n).max(1e-6);
        let mut terms = lexical_terms(query);
        terms.sort_unstable();
        terms.dedup();
        // Each query term's id in each part (or none), and its summed frequency.
        let ids: Vec<(Vec<Option<u32>>, f32)> = terms
            .iter()
            .map(|t| {
                let per_part: Vec<Option<u32>> = parts.iter().map(|p| p.term_ids.get(t.as_str()).copied()).collect();
                let df: usize = per_part.iter().zip(parts).filter_map(|(tid, p)| tid.map(|tid| p.postings[tid as usize].len())).sum();
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
            for (per_part, df) in &ids {
                let Some(tid) = per_part[pi] else { continue };
                let idf = libm::logf(1.0 + (n - df + 0.5) / (df + 0.5));
                for &(slot, tf) in &part.postings[tid as usize] {
                    let len = part.docs[slot as usize].len as f32;
                    let tf = tf as f32;
                    let s = idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len / avgdl));
                    *scores.entry(slot).or_insert(0.0) += s;
                }
            }
            for (&slot, &score) in &scores {
                top.push(Hit { id: part.docs[slot as usize].id, score });
            }
        }
        top.into_sorted(out);
    }

    /// One index holding the live documents of `parts` (a merge of segments).
    pub fn merged(parts: &[&Bm25Index]) -> Self {
        let params = parts.first().map_or_else(Bm25Params::default, |p| p.params);
        Self::rebuilt(params, parts.iter().flat_map(|p| p.live_docs()).collect())
    }

    /// Serialize the live documents' term statistics.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.f32(self.params.k1);
        w.f32(self.params.b);
        w.u64(self.term_names.len() as u64);
        for t in &self.term_names {
            w.str(t);
        }
        let live: Vec<&DocSlot> = self.docs.iter().filter(|d| d.live).collect();
        w.u64(live.len() as u64);
        for d in live {
            w.u32(d.id);
            w.u32(d.len);
            w.u64(d.terms.len() as u64);
            for &(t, f) in &d.terms {
                w.u32(t);
                w.u32(f);
            }
        }
        w.finish(KIND, 1)
    }

    /// Deserialize, checking term references and ids. The postings are built straight
    /// from the stored term numbers: a library's parts are read this way at every open.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let (_, mut r) = Reader::open(bytes, KIND, 1)?;
        let params = Bm25Params { k1: r.f32()?, b: r.f32()? };
        if !params.k1.is_finite() || !params.b.is_finite() {
            return Err(Error::InvalidField { what: "BM25 parameters" });
        }
        let mut idx = Bm25Index::new(params);
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
            terms.sort_unstable();
            // A term stored twice (under two numbers) counts once, its frequencies summed.
            terms.dedup_by(|next, kept| {
                let same = next.0 == kept.0;
                if same {
                    kept.1 = kept.1.saturating_add(next.1);
                }
                same
            });
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
        r.finish()?;
        Ok(idx)
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
