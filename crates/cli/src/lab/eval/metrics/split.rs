//! Dev and test by article: which questions tune and which are reported.
//!
//! Questions about the same article share its paragraphs, and the answer to one is often
//! beside the answer to another, so a split by question leaks: a choice tuned on dev
//! questions (a probe, a window size) is then tested on the same paragraphs' other
//! questions. The split is therefore made over *groups* of documents, and every question
//! takes its group's side: for SQuAD a group is an article; for HotpotQA it is a set of
//! questions joined by the paragraphs they share (most questions stand alone, a few share a
//! distractor), so no paragraph is on both sides.
//!
//! [`group_splits`] ranks the groups by the 64-bit FNV-1a hash of their key (a title) and
//! walks that ranking, giving a group to dev while dev stays within 30% of the questions:
//! close to three tenths whatever the groups' sizes (a hash threshold on twelve articles
//! could give two dev articles or six), deterministic across platforms and releases, and
//! independent of file order.

use core::fmt;
use core::str::FromStr;

/// Which questions of an evaluation set take part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// About 30% of the questions, whole articles: for development and tuning.
    Dev,
    /// The other articles: for the figures reported.
    Test,
    /// Every question.
    All,
}

/// The share of the questions that dev holds at most (in tenths).
const DEV_TENTHS: usize = 3;

/// The 64-bit FNV-1a hash of `s`'s UTF-8 bytes.
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Each group's side (never [`Split::All`]), in the order of `groups`: `(key, questions)`
/// pairs, a key naming its group (distinct keys; an article's title). Groups are taken in
/// the order of their keys' FNV-1a hashes and a group joins dev when dev's questions stay
/// within 30% of all; when none fits, the first group in that order is dev all the same,
/// so two or more groups always give both sides. A group without questions takes dev when
/// its hash is below 3 modulo 10 (it changes no figure; its documents still stand in the
/// library).
pub fn group_splits(groups: &[(&str, usize)]) -> Vec<Split> {
    let total: usize = groups.iter().map(|&(_, n)| n).sum();
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&i| (fnv1a(groups[i].0), groups[i].0));
    let mut sides = vec![Split::Test; groups.len()];
    let mut dev = 0usize;
    for &i in &order {
        let (key, n) = groups[i];
        if n == 0 {
            if fnv1a(key) % 10 < 3 {
                sides[i] = Split::Dev;
            }
        } else if (dev + n) * 10 <= total * DEV_TENTHS {
            sides[i] = Split::Dev;
            dev += n;
        }
    }
    if dev == 0 && groups.iter().filter(|&&(_, n)| n > 0).count() >= 2 {
        if let Some(&first) = order.iter().find(|&&i| groups[i].1 > 0) {
            sides[first] = Split::Dev;
        }
    }
    sides
}

impl Split {
    /// Whether a question whose group fell on `side` takes part.
    pub fn includes(self, side: Split) -> bool {
        self == Split::All || self == side
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Split::Dev => "dev",
            Split::Test => "test",
            Split::All => "all",
        }
    }
}

/// A split name that is not dev, test or all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownSplit(pub String);

impl fmt::Display for UnknownSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown split '{}' (dev, test or all)", self.0)
    }
}

impl std::error::Error for UnknownSplit {}

impl FromStr for Split {
    type Err = UnknownSplit;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dev" => Ok(Split::Dev),
            "test" => Ok(Split::Test),
            "all" => Ok(Split::All),
            other => Err(UnknownSplit(other.into())),
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        // The published test vector: a change to the hash would silently move articles
        // between the splits.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn dev_takes_whole_groups_up_to_three_tenths_in_hash_order() {
        let groups: Vec<(String, usize)> = (0..12).map(|i| (format!("article {i}"), 200 + 20 * i)).collect();
        let refs: Vec<(&str, usize)> = groups.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        let sides = group_splits(&refs);
        let total: usize = refs.iter().map(|g| g.1).sum();
        let dev: usize = refs.iter().zip(&sides).filter(|(_, s)| **s == Split::Dev).map(|(g, _)| g.1).sum();
        assert!(dev * 10 <= total * 3, "dev holds {dev} of {total}");
        // Near the target: the groups are at most 420 questions, and the walk skips only
        // those that would overflow it.
        assert!(dev * 10 >= total * 2, "dev holds {dev} of {total}");
        // The walk is in hash order: every dev group is taken before (in that order) the
        // first test group that would still have fitted.
        let mut order: Vec<usize> = (0..refs.len()).collect();
        order.sort_by_key(|&i| fnv1a(refs[i].0));
        let mut running = 0;
        for &i in &order {
            if sides[i] == Split::Dev {
                running += refs[i].1;
            } else {
                assert!((running + refs[i].1) * 10 > total * 3, "{} fitted but went to test", refs[i].0);
            }
        }
        // Independent of the order the groups come in.
        let reversed: Vec<(&str, usize)> = refs.iter().rev().copied().collect();
        let back: Vec<Split> = group_splits(&reversed).into_iter().rev().collect();
        assert_eq!(back, sides);
        assert!(!sides.contains(&Split::All));
    }

    #[test]
    fn two_groups_always_give_both_sides() {
        // The heavier group cannot fit in 30%, nor can the lighter one (40%): the first in
        // hash order is dev all the same.
        let sides = group_splits(&[("x", 60), ("y", 40)]);
        assert_eq!(sides.iter().filter(|s| **s == Split::Dev).count(), 1);
        assert_eq!(group_splits(&[("only", 10)]), [Split::Test]);
        assert!(group_splits(&[]).is_empty());
        // A group without questions goes by its hash alone.
        let empty = group_splits(&[("a", 0)]);
        assert_eq!(empty, [if fnv1a("a") % 10 < 3 { Split::Dev } else { Split::Test }]);
    }

    #[test]
    fn names_parse_and_all_includes_both_sides() {
        assert!(Split::All.includes(Split::Dev) && Split::All.includes(Split::Test));
        assert!(Split::Dev.includes(Split::Dev) && !Split::Dev.includes(Split::Test));
        assert_eq!("test".parse::<Split>(), Ok(Split::Test));
        assert_eq!("train".parse::<Split>(), Err(UnknownSplit("train".into())));
        assert_eq!(Split::Dev.to_string(), "dev");
    }
}
