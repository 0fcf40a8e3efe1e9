//! Token-level similarity, the router's recall measure.
//!
//! SEGMEM-RAG recalls rules, descriptors and episodes by token overlap, not embeddings:
//! cheap, deterministic, explainable ("matched: copper, mining"), and independent of the
//! embedder a library was built with. Terms are [`lexical_terms`]: lower-cased words for
//! scripts with spaces, overlapping character bigrams for CJK; English function words are
//! dropped, since "what", "the" and "of" would make every question look alike.

use alloc::string::String;
use alloc::vec::Vec;

use crate::text::lexical_terms;

const STOPWORDS: [&str; 190] = [
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "almost",
    "along",
    "already",
    "also",
    "although",
    "always",
    "am",
    "among",
    "an",
    "and",
    "another",
    "any",
    "are",
    "around",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "enough",
    "even",
    "ever",
    "every",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "least",
    "less",
    "like",
    "made",
    "make",
    "many",
    "may",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "near",
    "neither",
    "never",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "often",
    "on",
    "once",
    "one",
    "only",
    "onto",
    "or",
    "other",
    "others",
    "otherwise",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "per",
    "perhaps",
    "rather",
    "same",
    "several",
    "shall",
    "she",
    "should",
    "since",
    "so",
    "some",
    "still",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "therefore",
    "these",
    "they",
    "this",
    "those",
    "though",
    "through",
    "throughout",
    "thus",
    "to",
    "together",
    "too",
    "toward",
    "towards",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "used",
    "using",
    "very",
    "via",
    "was",
    "we",
    "well",
    "were",
    "what",
    "whatever",
    "when",
    "whenever",
    "where",
    "whereas",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// The distinct content terms of `text`, sorted (a set, for the measures below).
pub fn term_set(text: &str) -> Vec<String> {
    let mut t: Vec<String> = lexical_terms(text).into_iter().filter(|t| STOPWORDS.binary_search(&t.as_str()).is_err()).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// Terms of both sorted sets.
pub fn shared(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|t| b.binary_search(t).is_ok()).cloned().collect()
}

/// |a ∩ b| / |a ∪ b| of two sorted sets (0 when both are empty).
pub fn jaccard(a: &[String], b: &[String]) -> f64 {
    let inter = a.iter().filter(|t| b.binary_search(t).is_ok()).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// The share of `query`'s terms found in `other` (0 for an empty query): how well a long
/// text (a descriptor) covers a short one.
pub fn coverage(query: &[String], other: &[String]) -> f64 {
    if query.is_empty() {
        return 0.0;
    }
    query.iter().filter(|t| other.binary_search(t).is_ok()).count() as f64 / query.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn measures() {
        let q = term_set("What did the copper mines of the town produce?");
        assert_eq!(q, ["copper", "mines", "produce", "town"]);
        let d = term_set("Mining town: copper, tin and the smelter");
        assert_eq!(shared(&q, &d), ["copper", "town"]);
        assert!((coverage(&q, &d) - 0.5).abs() < 1e-12);
        assert!((jaccard(&q, &d) - 2.0 / 7.0).abs() < 1e-12);
        assert_eq!(term_set("铜矿开采"), ["开采", "矿开", "铜矿"]);
        assert_eq!(coverage(&[], &d), 0.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
    }
}
