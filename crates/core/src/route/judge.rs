//! The feedback evaluator: do the retrieved passages satisfy the sub-query?
//!
//! SEGMEM-RAG learns from self-evaluated retrieval: after each search the model judges the
//! passages, yes or no, with a one-sentence reflection that the next segment (and the
//! episodic memory) reads. Without a model, or when its reply says neither yes nor no,
//! the judge falls back to term coverage: satisfied when one passage holds at least
//! [`OVERLAP_SATISFIED`] of the sub-query's content terms. That fallback is also the
//! cheap judge of the evaluation's ablations (`--judge overlap`).

use alloc::string::String;
use alloc::vec::Vec;

use super::terms::{coverage, term_set};
use crate::text_model::TextModel;
use crate::Error;

/// Share of the sub-query's terms one passage must hold for the overlap judge.
pub const OVERLAP_SATISFIED: f64 = 0.6;
/// Passages shown to the model judge, and characters of each.
pub const JUDGE_PASSAGES: usize = 3;
const JUDGE_PASSAGE_CHARS: usize = 500;

/// Which judge runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum JudgeKind {
    /// The model, with the overlap test as its fallback.
    #[default]
    Model,
    /// The overlap test only.
    Overlap,
}

/// A judgement.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Verdict {
    /// Whether the passages satisfy the sub-query.
    pub satisfied: bool,
    /// Why, in a sentence.
    pub reflection: String,
    /// Who judged: the model, or the overlap test.
    pub by: JudgeKind,
}

/// The overlap judge.
pub fn overlap_verdict(sub_query: &str, passages: &[&str]) -> Verdict {
    let q = term_set(sub_query);
    let (best, at) =
        passages
            .iter()
            .enumerate()
            .map(|(i, p)| (coverage(&q, &term_set(p)), i))
            .fold((0.0, 0), |acc, x| if x.0 > acc.0 { x } else { acc });
    let held = libm::round(best * q.len() as f64) as usize;
    let reflection = if passages.is_empty() {
        "no passage was found".into()
    } else {
        alloc::format!("passage {} holds {held} of the query's {} terms", at + 1, q.len())
    };
    Verdict { satisfied: !q.is_empty() && best >= OVERLAP_SATISFIED, reflection, by: JudgeKind::Overlap }
}

fn cut(s: &str, chars: usize) -> &str {
    s.char_indices().nth(chars).map_or(s, |(i, _)| &s[..i])
}

fn judge_prompt(sub_query: &str, passages: &[&str]) -> (String, String) {
    let mut context = String::from("Passages:\n");
    for (i, p) in passages.iter().take(JUDGE_PASSAGES).enumerate() {
        context.push_str(&alloc::format!("[{}] {}\n", i + 1, cut(p.trim(), JUDGE_PASSAGE_CHARS)));
    }
    let request = alloc::format!(
        "\nQuery: {}\nDo these passages contain the information the query asks for? Reply YES or NO, then one sentence saying what is there or what is missing.\n",
        sub_query.trim()
    );
    (context, request)
}

/// Read YES / NO (or 是 / 否) from the start of a reply, and the sentence after it.
fn read_verdict(reply: &str) -> Option<(bool, String)> {
    let r = reply.trim().trim_start_matches(['*', '"', '\'']).trim();
    let lower = r.to_lowercase();
    let (satisfied, rest) = if lower.starts_with("yes") {
        (true, &r[3..])
    } else if lower.starts_with("no") {
        (false, &r[2..])
    } else if r.starts_with('是') || r.starts_with('否') {
        (r.starts_with('是'), &r[3..])
    } else {
        return None;
    };
    let sentence: String = rest
        .trim_start_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace() || c == '，' || c == '。')
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .into();
    Some((satisfied, sentence))
}

/// Judge `passages` (best first) against `sub_query` with `model` when given and `kind`
/// is [`JudgeKind::Model`], else (or when the reply says neither yes nor no) with the
/// overlap test.
pub async fn judge(
    model: Option<&mut (dyn TextModel + '_)>,
    kind: JudgeKind,
    sub_query: &str,
    passages: &[&str],
) -> Result<Verdict, Error> {
    if passages.is_empty() {
        return Ok(Verdict { satisfied: false, reflection: "no passage was found".into(), by: JudgeKind::Overlap });
    }
    if let (Some(model), JudgeKind::Model) = (model, kind) {
        let (context, request) = judge_prompt(sub_query, passages);
        let reply = model.complete(&context, &request, 48).await?;
        if let Some((satisfied, sentence)) = read_verdict(&reply) {
            let reflection = if sentence.is_empty() {
                String::from(if satisfied { "the passages answer it" } else { "the passages do not answer it" })
            } else {
                sentence
            };
            return Ok(Verdict { satisfied, reflection, by: JudgeKind::Model });
        }
    }
    Ok(overlap_verdict(sub_query, passages))
}

/// The passages' texts as the judge takes them.
pub fn texts<T: AsRef<str>>(passages: &[T]) -> Vec<&str> {
    passages.iter().map(AsRef::as_ref).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::text_model::testing::Scripted;

    #[test]
    fn overlap_judge() {
        let v = overlap_verdict("copper mines town", &["The harbor froze.", "Copper was mined near the town mines."]);
        assert!(v.satisfied);
        assert_eq!(v.reflection, "passage 2 holds 3 of the query's 3 terms");
        assert!(!overlap_verdict("copper mines town", &["The harbor froze."]).satisfied);
    }

    #[test]
    fn model_verdicts_and_fallback() {
        let mut m = Scripted::new(|_| "YES. Passage 2 says copper was mined.\nmore".into());
        let v = poll_once(judge(Some(&mut m), JudgeKind::Model, "copper", &["a", "b"])).unwrap().unwrap();
        assert_eq!(v, Verdict { satisfied: true, reflection: "Passage 2 says copper was mined.".into(), by: JudgeKind::Model });
        assert!(m.prompts[0].contains("[2] b") && m.prompts[0].contains("Query: copper"));
        let mut m = Scripted::new(|_| "否，没有提到价格。".into());
        let v = poll_once(judge(Some(&mut m), JudgeKind::Model, "价格", &["a"])).unwrap().unwrap();
        assert_eq!((v.satisfied, v.reflection.as_str()), (false, "没有提到价格。"));
        let mut m = Scripted::new(|_| "Maybe".into());
        let v = poll_once(judge(Some(&mut m), JudgeKind::Model, "copper", &["copper here"])).unwrap().unwrap();
        assert_eq!((v.satisfied, v.by), (true, JudgeKind::Overlap));
        let mut m = Scripted::new(|_| "YES".into());
        let v = poll_once(judge(Some(&mut m), JudgeKind::Overlap, "copper", &["tin"])).unwrap().unwrap();
        assert!(!v.satisfied && m.prompts.is_empty());
        let v = poll_once(judge(None, JudgeKind::Model, "copper", &[])).unwrap().unwrap();
        assert!(!v.satisfied);
    }
}
