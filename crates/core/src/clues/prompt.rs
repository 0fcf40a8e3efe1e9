//! The clue-writing prompt, in English and Chinese, and the parser of the reply.
//!
//! The model sees the global memory first (the part repeated for every question, so a
//! model can keep it processed: [`crate::text_model`]) and then the request: write clues,
//! one per line, each behind a label, `SPAN:` for text likely to appear in the evidence,
//! `QUESTION:` for a more precise question, `ANSWER:` for a draft answer (Chinese:
//! `片段：`, `问题：`, `答案：`). The parser takes either language's labels whatever the
//! prompt's, with ASCII or full-width colons, list markers and Markdown bold around them,
//! and skips lines with no label: a small model adds chatter.

use alloc::string::String;
use alloc::vec::Vec;

use super::filter::{filter_clues, ClueFilter};
use super::global::GlobalMemory;
use super::{Clue, ClueKind};
use crate::text_model::TextModel;
use crate::Error;

/// Most tokens of a clue reply.
pub const CLUE_MAX_TOKENS: usize = 160;

/// The context part of the prompt: the global memory under its heading.
pub fn clue_context(global: &GlobalMemory, chinese: bool) -> String {
    let mut s = String::new();
    if chinese {
        s.push_str("下面是一个文档库的全局记忆：每篇文档的大纲和要点。\n\n");
    } else {
        s.push_str("Below is the global memory of a library of documents: each document's outline and key points.\n\n");
    }
    s.push_str(global.text.trim());
    s.push_str("\n\n");
    s
}

/// The request part of the prompt for `question`.
pub fn clue_request(question: &str, chinese: bool) -> String {
    if chinese {
        alloc::format!(
            "根据这份记忆，写出有助于在文档中找到下面问题证据的线索，每行一条，以标签开头：\n\
             片段：很可能逐字出现在回答该问题的段落中的短语或句子（最多 3 条）\n\
             问题：把问题中含糊的地方说清楚的更具体的问题（最多 2 条）\n\
             答案：如果记忆中有线索，给出一个简短的草拟答案（最多 1 条）\n\
             只写线索，不要写其他内容。\n\n问题：{}\n",
            question.trim()
        )
    } else {
        alloc::format!(
            "Using this memory, write clues that would help find the evidence for the question below in the documents, one per line, each starting with its label:\n\
             SPAN: a short phrase or sentence likely to appear word for word in the passage that answers it (up to 3)\n\
             QUESTION: a more precise question that spells out what the question leaves vague (up to 2)\n\
             ANSWER: a short draft answer, if the memory suggests one (at most 1)\n\
             Write only the clues.\n\nQuestion: {}\n",
            question.trim()
        )
    }
}

const LABELS: [(&str, ClueKind); 9] = [
    ("span", ClueKind::Span),
    ("text", ClueKind::Span),
    ("question", ClueKind::Surrogate),
    ("answer", ClueKind::Draft),
    ("draft", ClueKind::Draft),
    ("片段", ClueKind::Span),
    ("线索", ClueKind::Span),
    ("问题", ClueKind::Surrogate),
    ("答案", ClueKind::Draft),
];

/// Clues in a model's reply (see the module docs), in the order written, unfiltered.
pub fn parse_clues(reply: &str) -> Vec<Clue> {
    let mut out = Vec::new();
    for line in reply.lines() {
        // List markers and emphasis before the label: "- ", "1. ", "* ", "**SPAN**:".
        let line = line.trim().trim_start_matches(|c: char| c == '-' || c == '*' || c == '•' || c == '#' || c.is_ascii_digit());
        let line = line.trim_start_matches(['.', ')', '、']).trim().trim_start_matches('*');
        let Some(colon) = line.find([':', '：']) else { continue };
        let label = line[..colon].trim().trim_end_matches('*').trim().to_lowercase();
        let Some(&(_, kind)) = LABELS.iter().find(|(l, _)| label == *l || label.trim_end_matches('s') == *l) else { continue };
        let rest = &line[colon..];
        let text = rest[rest.chars().next().map_or(0, char::len_utf8)..].trim().trim_start_matches('*').trim();
        let text = text.trim_matches(|c: char| c == '"' || c == '“' || c == '”' || c == '「' || c == '」').trim();
        if !text.is_empty() {
            out.push(Clue::new(kind, text));
        }
    }
    out
}

/// Ask `model` for clues to `question` over `global`, parsed and filtered; the question
/// itself is not among them (the caller searches with it first). In Chinese when
/// `chinese`. A reply with no usable clue gives an empty list, not an error.
pub async fn write_clues(
    model: &mut dyn TextModel,
    global: &GlobalMemory,
    question: &str,
    chinese: bool,
    filter: &ClueFilter,
) -> Result<Vec<Clue>, Error> {
    let context = clue_context(global, chinese);
    let request = clue_request(question, chinese);
    let reply = model.complete(&context, &request, CLUE_MAX_TOKENS).await?;
    Ok(filter_clues(question, parse_clues(&reply), filter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_future::poll_once;
    use crate::text_model::testing::Scripted;
    use alloc::vec;

    #[test]
    fn parses_labels_in_both_languages_and_skips_chatter() {
        let reply = "Sure! Here are the clues:\n\
                     SPAN: copper was mined in the hills\n\
                     - **QUESTION**: What industry did the town rely on?\n\
                     2. Answer: \"copper mining\"\n\
                     片段：铜矿在山里开采\n\
                     问题：这个镇的主要产业是什么？\n\
                     Note: these are guesses\n\
                     SPAN:\n";
        assert_eq!(
            parse_clues(reply),
            vec![
                Clue::new(ClueKind::Span, "copper was mined in the hills"),
                Clue::new(ClueKind::Surrogate, "What industry did the town rely on?"),
                Clue::new(ClueKind::Draft, "copper mining"),
                Clue::new(ClueKind::Span, "铜矿在山里开采"),
                Clue::new(ClueKind::Surrogate, "这个镇的主要产业是什么？"),
            ]
        );
    }

    #[test]
    fn the_memory_comes_before_the_question_and_clues_are_filtered() {
        let global = GlobalMemory { text: "# Town\n- Mining: copper ore from the hills".into(), documents: 1, gist: false };
        let mut model = Scripted::new(|_| "SPAN: copper ore\nSPAN: copper ore\nQUESTION: how did the town make its money".into());
        let clues = poll_once(write_clues(&mut model, &global, "How did the town make its money?", false, &ClueFilter::default()))
            .unwrap()
            .unwrap();
        assert_eq!(clues, vec![Clue::new(ClueKind::Span, "copper ore")]);
        let prompt = &model.prompts[0];
        assert!(prompt.find("copper ore from the hills").unwrap() < prompt.find("Question: How did").unwrap());
        let mut zh = Scripted::new(|_| String::new());
        let none = poll_once(write_clues(&mut zh, &global, "这个镇靠什么赚钱？", true, &ClueFilter::default())).unwrap().unwrap();
        assert!(none.is_empty());
        assert!(zh.prompts[0].contains("片段：") && zh.prompts[0].contains("问题：这个镇靠什么赚钱？"));
    }
}
