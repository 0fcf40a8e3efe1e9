//! Adaptive mode's classifier: is a question *global* (about the documents as a whole:
//! a summary, their themes, "what is this about") or *local* (about something inside
//! them)?
//!
//! The model decides when there is one and its reply names a class; otherwise, and
//! whenever the reply names neither, a keyword test decides (cheap, and right on the
//! usual phrasings in English and Chinese; a question it misses is treated as local,
//! which costs clue-guided retrieval, never a wrong refusal).

use crate::text_model::TextModel;
use crate::Error;

/// The two kinds of question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Scope {
    /// About the documents as a whole.
    Global,
    /// About something in them.
    Local,
}

/// Who classified a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ScopeSource {
    /// The model's reply.
    Model,
    /// The keyword fallback.
    Keywords,
}

const GLOBAL_EN: [&str; 20] = [
    "summar",
    "overview",
    "main idea",
    "main point",
    "main theme",
    "main topic",
    "key point",
    "key takeaway",
    "themes",
    "what topics",
    "what is this about",
    "what are these about",
    "what is it about",
    "what are they about",
    "what is the document about",
    "what are the documents about",
    "what do the documents",
    "what does the document",
    "in a nutshell",
    "tl;dr",
];

const GLOBAL_ZH: [&str; 11] = ["总结", "概括", "概述", "综述", "主要内容", "主题", "讲了什么", "讲的是什么", "关于什么", "大意", "要点"];

/// The keyword test (see the module docs).
pub fn heuristic_scope(question: &str) -> Scope {
    let q = question.to_lowercase();
    if GLOBAL_EN.iter().any(|k| q.contains(k)) || GLOBAL_ZH.iter().any(|k| q.contains(k)) {
        Scope::Global
    } else {
        Scope::Local
    }
}

fn request(question: &str) -> alloc::string::String {
    alloc::format!(
        "Is the question about the documents as a whole (a summary, their main themes or topics, what they are about) or about a specific fact, person, event or detail in them? Reply with one word: GLOBAL or LOCAL.\n\nQuestion: What are these documents about?\nReply: GLOBAL\n\nQuestion: Who ruled the city in 1200?\nReply: LOCAL\n\nQuestion: Summarize the main themes.\nReply: GLOBAL\n\nQuestion: How does the engine convert heat into work?\nReply: LOCAL\n\nQuestion: {}\nReply:",
        question.trim()
    )
}

/// Read a class from a reply: the first of GLOBAL / LOCAL (or 全局 / 局部) it names.
fn read_reply(reply: &str) -> Option<Scope> {
    let r = reply.to_lowercase();
    let global = ["global", "全局", "整体"].iter().filter_map(|k| r.find(k)).min();
    let local = ["local", "局部", "具体"].iter().filter_map(|k| r.find(k)).min();
    match (global, local) {
        (Some(g), Some(l)) => Some(if g < l { Scope::Global } else { Scope::Local }),
        (Some(_), None) => Some(Scope::Global),
        (None, Some(_)) => Some(Scope::Local),
        (None, None) => None,
    }
}

/// Classify `question` with `model` if given, else (or when its reply names no class)
/// with the keyword test.
pub async fn classify_scope(model: Option<&mut (dyn TextModel + '_)>, question: &str) -> Result<(Scope, ScopeSource), Error> {
    if let Some(model) = model {
        let reply = model.complete("", &request(question), 4).await?;
        if let Some(scope) = read_reply(&reply) {
            return Ok((scope, ScopeSource::Model));
        }
    }
    Ok((heuristic_scope(question), ScopeSource::Keywords))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::text_model::testing::Scripted;

    #[test]
    fn keywords_in_both_languages() {
        assert_eq!(heuristic_scope("Can you summarize these documents?"), Scope::Global);
        assert_eq!(heuristic_scope("What are the main themes?"), Scope::Global);
        assert_eq!(heuristic_scope("这些文档讲了什么？"), Scope::Global);
        assert_eq!(heuristic_scope("Who brought printing to England?"), Scope::Local);
        assert_eq!(heuristic_scope("卡克斯顿哪一年回到英国？"), Scope::Local);
    }

    #[test]
    fn the_model_decides_and_the_keywords_catch_a_useless_reply() {
        let mut m = Scripted::new(|_| " Global.".into());
        assert_eq!(poll_once(classify_scope(Some(&mut m), "Who printed it?")).unwrap(), Ok((Scope::Global, ScopeSource::Model)));
        let mut m = Scripted::new(|_| "LOCAL, not global".into());
        assert_eq!(poll_once(classify_scope(Some(&mut m), "Summarize")).unwrap(), Ok((Scope::Local, ScopeSource::Model)));
        let mut m = Scripted::new(|_| "I think so".into());
        assert_eq!(poll_once(classify_scope(Some(&mut m), "Give an overview")).unwrap(), Ok((Scope::Global, ScopeSource::Keywords)));
        assert_eq!(poll_once(classify_scope(None, "Who printed it?")).unwrap(), Ok((Scope::Local, ScopeSource::Keywords)));
    }
}
