//! Answering from retrieved memories: the prompt, and reading citations back.
//!
//! The answerer sees numbered memories, each with its document, outline item, core
//! content and chunk text, and is told to answer only from them, to cite them as `[n]`,
//! and to say exactly [`NOT_IN_DOCUMENTS`] when they do not hold the answer. A small
//! model does not always obey; [`cited`] only keeps citation numbers that exist, and
//! [`says_not_in_documents`] recognises the refusal in either language, so the caller
//! can show it as a refusal and not as an answer with no sources.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The answer the model must give when the memories do not answer the question.
pub const NOT_IN_DOCUMENTS: &str = "not in the documents";
/// The same in Chinese.
pub const NOT_IN_DOCUMENTS_ZH: &str = "文档中没有答案";

/// One numbered memory shown to the answerer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory<'a> {
    /// Document title.
    pub title: &'a str,
    /// The scenario's outline item, if any.
    pub outline: Option<&'a str>,
    /// The scenario's core content (may be empty).
    pub core: &'a str,
    /// The chunk's text.
    pub text: &'a str,
}

/// The instructions that open every answer prompt (in Chinese when `chinese`), ending in
/// a blank line: the start all answer prompts share, which an answerer keeps run.
pub fn instructions(chinese: bool) -> &'static str {
    if chinese {
        "请只根据下面编号的文档记忆回答问题。先给出答案，用问题所需的最少字词，然后用 [编号] 注明所依据的记忆，例如 [1]。\
         如果这些记忆中没有答案，只回答：文档中没有答案。不要编造。\n\n"
    } else {
        "Answer the question using only the numbered passages below. \
         Start with the answer itself, in as few words as the question needs, in the passage's own words where you can, \
         and cite the passage by number, like [1]; add at most one short sentence of support. \
         If the passages do not contain the answer, reply only: Not in the documents. Do not make anything up.\n\n"
    }
}

/// The user turn for `question` over `memories` (numbered from 1), in Chinese when
/// `chinese`.
pub fn answer_prompt(question: &str, memories: &[Memory<'_>], chinese: bool) -> String {
    let mut s = String::from(instructions(chinese));
    for (i, m) in memories.iter().enumerate() {
        s.push_str(&format!("[{}] {}", i + 1, m.title));
        if let Some(o) = m.outline.filter(|o| !o.trim().is_empty()) {
            s.push_str(&format!(" — {}", o.trim()));
        }
        s.push('\n');
        if !m.core.trim().is_empty() {
            s.push_str(if chinese { "要点：" } else { "Key point: " });
            s.push_str(m.core.trim());
            s.push('\n');
        }
        s.push_str(if chinese { "原文：" } else { "Text: " });
        s.push_str(m.text.trim());
        s.push_str("\n\n");
    }
    s.push_str(if chinese { "问题：" } else { "Question: " });
    s.push_str(question.trim());
    s
}

/// [`answer_prompt`] with the question also stated before the passages, so that the
/// model reads each passage knowing what it looks for (the question still ends the turn,
/// where the answerability probe reads the model's state). Measured, not used: with it
/// the 1.5B refused 7 of 15 answerable dev questions that it answered in the usual layout
/// (docs/evaluation.md); `docmem eval answers --question-first` records its states.
pub fn answer_prompt_question_first(question: &str, memories: &[Memory<'_>], chinese: bool) -> String {
    let label = if chinese { "问题：" } else { "Question: " };
    after_instructions(answer_prompt(question, memories, chinese), label, question)
}

/// [`answer_prompt`] with an overview of the whole library (its global memory: every
/// document's outline and key points) before the numbered memories: the prompt of a
/// *global* question ("what are these documents about?"), which no single passage answers.
pub fn answer_prompt_with_overview(question: &str, overview: &str, memories: &[Memory<'_>], chinese: bool) -> String {
    let heading = if chinese {
        "文档库概览（每篇文档的大纲和要点）：\n"
    } else {
        "Overview of the library (each document's outline and key points):\n"
    };
    after_instructions(answer_prompt(question, memories, chinese), heading, overview)
}

/// `prompt` with `heading`, the trimmed `text` and a blank line inserted right after its
/// instructions (which end at the first blank line).
fn after_instructions(prompt: String, heading: &str, text: &str) -> String {
    let at = prompt.find("\n\n").map_or(0, |i| i + 2);
    let mut s = String::with_capacity(prompt.len() + heading.len() + text.len() + 2);
    s.push_str(&prompt[..at]);
    s.push_str(heading);
    s.push_str(text.trim());
    s.push_str("\n\n");
    s.push_str(&prompt[at..]);
    s
}

/// Each citation marker in `answer`: its byte range (brackets included) and the numbers
/// it holds. A marker is `[n]`, `[n, m]` or `[n，m]`: digits, commas and spaces only.
fn citation_markers(answer: &str) -> Vec<(core::ops::Range<usize>, Vec<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(open) = answer[at..].find('[').map(|i| i + at) {
        let Some(close) = answer[open + 1..].find(']').map(|i| i + open + 1) else { break };
        let inside = &answer[open + 1..close];
        if !inside.is_empty() && inside.chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ' || c == '，') {
            let numbers = inside.split([',', ' ', '，']).filter_map(|p| p.parse::<usize>().ok()).collect();
            out.push((open..close + 1, numbers));
            at = close + 1;
        } else {
            at = open + 1;
        }
    }
    out
}

/// The memory numbers (from 1, each once, in order of first mention) cited in `answer`
/// as `[n]`, `[n, m]` or `[n][m]`, keeping only 1..=`count`.
pub fn cited(answer: &str, count: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for n in citation_markers(answer).into_iter().flat_map(|(_, numbers)| numbers) {
        if (1..=count).contains(&n) && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// One piece of an answer as it is shown: its text, or a citation of numbered passages.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum AnswerPart {
    /// Text as written.
    Text(String),
    /// A citation: the passages' numbers, from 1.
    Cite(Vec<usize>),
}

/// Add `text` to `parts`, joining it to text already last.
fn push_text(parts: &mut Vec<AnswerPart>, text: &str) {
    if text.is_empty() {
        return;
    }
    match parts.last_mut() {
        Some(AnswerPart::Text(t)) => t.push_str(text),
        _ => parts.push(AnswerPart::Text(text.into())),
    }
}

/// `answer` as a page shows it: its text, and each citation marker as a citation of
/// those of its numbers that name one of the `count` passages ("[1, 7]" of three passages
/// cites 1, as [`cited`] reads it). Other brackets ("[sic]", "[7]" of three) stay text.
pub fn answer_parts(answer: &str, count: usize) -> Vec<AnswerPart> {
    let mut parts = Vec::new();
    let mut at = 0;
    for (range, numbers) in citation_markers(answer) {
        let numbers: Vec<usize> = numbers.into_iter().filter(|n| (1..=count).contains(n)).collect();
        if numbers.is_empty() {
            continue;
        }
        push_text(&mut parts, &answer[at..range.start]);
        parts.push(AnswerPart::Cite(numbers));
        at = range.end;
    }
    push_text(&mut parts, &answer[at..]);
    parts
}

/// `answer` without its citation markers and the white space before each (a line break
/// right before a marker included; the rest kept): the text when its citations are shown
/// elsewhere.
pub fn without_markers(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut at = 0;
    for (range, _) in citation_markers(answer) {
        out.push_str(answer[at..range.start].trim_end());
        at = range.end;
    }
    out.push_str(&answer[at..]);
    out
}

/// An answer's text arriving a piece at a time, read as [`answer_parts`] reads the whole:
/// text is given out as it comes, except from a `[` that may still become a citation,
/// which is held until its bracket closes or it cannot be one.
#[derive(Clone, Debug)]
pub struct PartStream {
    count: usize,
    held: String,
}

impl PartStream {
    /// A stream of an answer to `count` numbered passages.
    pub fn new(count: usize) -> Self {
        PartStream { count, held: String::new() }
    }

    /// The parts `piece` completes.
    pub fn push(&mut self, piece: &str) -> Vec<AnswerPart> {
        self.held.push_str(piece);
        let open =
            self.held.rfind('[').filter(|&i| self.held[i + 1..].chars().all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '，')));
        let ready: String = self.held.drain(..open.unwrap_or(self.held.len())).collect();
        answer_parts(&ready, self.count)
    }

    /// The parts still held, the answer ended.
    pub fn finish(&mut self) -> Vec<AnswerPart> {
        let rest = core::mem::take(&mut self.held);
        answer_parts(&rest, self.count)
    }
}

/// `answer` without its citation markers (what exact match and F1 compare: "Richard I
/// [2]" is the answer "Richard I").
pub fn without_citations(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut at = 0;
    for (range, _) in citation_markers(answer) {
        out.push_str(&answer[at..range.start]);
        at = range.end;
    }
    out.push_str(&answer[at..]);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when the answer is the refusal (in English or Chinese), possibly with
/// punctuation or a short preamble.
pub fn says_not_in_documents(answer: &str) -> bool {
    let lower = answer.trim().to_lowercase();
    lower.contains(NOT_IN_DOCUMENTS) || lower.contains(NOT_IN_DOCUMENTS_ZH) || lower.contains("not in the document")
}

/// Sources an answer draws on when the model cited none: each source whose text holds at
/// least half of the answer's content terms ([`crate::text::lexical_terms`], so Chinese
/// works too), best first, at most three. A small answerer often leaves out `[n]`; this
/// keeps a citation honest (it points where the answer's words are) rather than absent.
pub fn attribute(answer: &str, sources: &[&str]) -> Vec<usize> {
    let terms: Vec<String> = crate::text::lexical_terms(answer).into_iter().filter(|t| t.chars().count() >= 2).collect();
    if terms.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, usize)> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let have = crate::text::lexical_terms(s);
            (i + 1, terms.iter().filter(|t| have.contains(t)).count())
        })
        .filter(|&(_, n)| n * 2 >= terms.len())
        .collect();
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().take(3).map(|(i, _)| i).collect()
}

/// The citations to show for `answer`, whose model cited `cited` (numbers from 1 into
/// `sources`): those, unless none of them holds at least half of the answer's content
/// terms (stopwords left out: [`crate::route::terms::term_set`]) while other sources
/// do; then those sources, best first, at most three, and `true`. A small answerer
/// sometimes gets the fact right and the number wrong ("In 1666. [2]" with 1666 in
/// passage 1); a citation should point where the answer's words are.
pub fn checked_citations(answer: &str, cited: Vec<usize>, sources: &[&str]) -> (Vec<usize>, bool) {
    use crate::route::terms::term_set;
    let terms = term_set(&without_citations(answer));
    let shared = |source: &str| {
        let have = term_set(source);
        terms.iter().filter(|t| have.binary_search(t).is_ok()).count()
    };
    let supports = |n: usize| sources.get(n.wrapping_sub(1)).is_some_and(|s| shared(s) * 2 >= terms.len());
    if terms.is_empty() || cited.iter().any(|&n| supports(n)) {
        return (cited, false);
    }
    let mut better: Vec<(usize, usize)> =
        sources.iter().enumerate().map(|(i, s)| (i + 1, shared(s))).filter(|&(_, n)| n * 2 >= terms.len()).collect();
    if better.is_empty() {
        return (cited, false);
    }
    better.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    (better.into_iter().take(3).map(|(i, _)| i).collect(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_stripped_for_scoring_and_other_brackets_kept() {
        assert_eq!(without_citations("Richard I [2]."), "Richard I .");
        assert_eq!(without_citations("[1][3] In 1455 [2, 4]"), "In 1455");
        assert_eq!(without_citations("the [a] list [x1]"), "the [a] list [x1]");
        assert_eq!(without_citations("[4]"), "");
        assert_eq!(cited("[1][3] In 1455 [2, 4] [9]", 4), [1, 3, 2, 4]);
    }

    #[test]
    fn a_citation_to_a_passage_without_the_answers_words_is_moved_to_one_that_has_them() {
        let sources =
            ["The bell of Saint Paul rang at noon. In 1666 the great fire melted it.", "Venice became the largest printing centre."];
        assert_eq!(checked_citations("In 1666. [2]", vec![2], &sources), (vec![1], true));
        assert_eq!(checked_citations("In 1666 the fire melted it. [1]", vec![1], &sources), (vec![1], false), "a right citation stays");
        assert_eq!(
            checked_citations("Venice, in 1666. [1][2]", vec![1, 2], &sources),
            (vec![1, 2], false),
            "one supporting citation is enough"
        );
        assert_eq!(checked_citations("Paris. [2]", vec![2], &sources), (vec![2], false), "nowhere better to point: the model's stays");
    }

    #[test]
    fn the_question_first_layout_states_the_question_before_the_passages_and_ends_with_it() {
        let m = [Memory { title: "a.txt", outline: None, core: "", text: "Caxton printed." }];
        let p = answer_prompt_question_first("Who printed?", &m, false);
        assert!(p.starts_with(instructions(false)));
        assert!(p[instructions(false).len()..].starts_with("Question: Who printed?\n\n[1] a.txt\n"));
        assert!(p.ends_with("Text: Caxton printed.\n\nQuestion: Who printed?"));
        assert_eq!(p.len(), answer_prompt("Who printed?", &m, false).len() + "Question: Who printed?\n\n".len());
    }

    #[test]
    fn the_overview_sits_between_the_rules_and_the_memories() {
        let m = [Memory { title: "a.txt", outline: None, core: "", text: "Caxton printed." }];
        let p = answer_prompt_with_overview("What is this about?", "# a.txt\n- Printing", &m, false);
        let (rules, overview, memory) = (p.find("Do not make").unwrap(), p.find("# a.txt").unwrap(), p.find("[1] a.txt").unwrap());
        assert!(rules < overview && overview < memory, "{p}");
        assert!(p.ends_with("Question: What is this about?"));
        assert!(answer_prompt_with_overview("这是关于什么的？", "# a", &m, true).contains("文档库概览"));
    }

    #[test]
    fn prompt_numbers_memories_and_states_the_rules() {
        let m = [
            Memory { title: "a.txt", outline: Some("Printing"), core: "Caxton printed.", text: "William Caxton set up a press." },
            Memory { title: "b.txt", outline: None, core: "", text: "Rivers flow." },
        ];
        let p = answer_prompt("Who set up a press?", &m, false);
        assert!(p.contains("[1] a.txt — Printing\nKey point: Caxton printed.\nText: William Caxton set up a press."));
        assert!(p.contains("[2] b.txt\nText: Rivers flow."));
        assert!(p.to_lowercase().contains(NOT_IN_DOCUMENTS) && p.contains("[1]"));
        assert!(p.ends_with("Question: Who set up a press?"));
        let zh = answer_prompt("谁？", &m, true);
        assert!(zh.contains(NOT_IN_DOCUMENTS_ZH) && zh.ends_with("问题：谁？"));
    }

    #[test]
    fn citations_are_read_back_and_bounded() {
        assert_eq!(cited("Caxton [1] did it [2][1], see [3, 1] and [9].", 3), [1, 2, 3]);
        assert_eq!(cited("no brackets", 3), Vec::<usize>::new());
        assert_eq!(cited("[a] [1", 3), Vec::<usize>::new());
        assert_eq!(cited("见[2，1]", 2), [2, 1]);
        assert!(says_not_in_documents("Not in the documents."));
        assert!(says_not_in_documents("文档中没有答案。"));
        assert!(!says_not_in_documents("Caxton [1]."));
    }

    #[test]
    fn uncited_answers_are_attributed_by_their_words() {
        let sources = ["Rivers flow into the sea.", "William Caxton set up a printing press in Westminster.", "Caxton printed books."];
        assert_eq!(attribute("William Caxton, in Westminster", &sources), [2]);
        assert_eq!(attribute("Caxton", &sources), [2, 3]);
        assert!(attribute("Gutenberg in Mainz", &sources).is_empty());
        assert!(attribute("", &sources).is_empty());
    }

    fn text(s: &str) -> AnswerPart {
        AnswerPart::Text(s.into())
    }

    #[test]
    fn an_answer_is_text_and_citations_of_passages_that_exist() {
        use AnswerPart::Cite;
        assert_eq!(answer_parts("In 1455 [2, 4].", 4), [text("In 1455 "), Cite(vec![2, 4]), text(".")]);
        assert_eq!(answer_parts("[1][3] Caxton", 3), [Cite(vec![1]), Cite(vec![3]), text(" Caxton")]);
        // A number past the passages, or a bracket that is no marker, stays text; a marker
        // with one cites the passages that exist.
        assert_eq!(answer_parts("Caxton [7] [sic] [1]", 3), [text("Caxton [7] [sic] "), Cite(vec![1])]);
        assert_eq!(answer_parts("Caxton [1, 7].", 3), [text("Caxton "), Cite(vec![1]), text(".")]);
        assert_eq!(answer_parts("", 3), []);
        assert_eq!(without_markers("Caxton [1].\nIn 1476 [2, 3]"), "Caxton.\nIn 1476");
    }

    #[test]
    fn a_streamed_answer_gives_the_parts_the_whole_does_wherever_it_is_cut() {
        let answer = "William Caxton [1] set up a press [2, 3] in 1476 [9] [note] at Westminster [1]";
        let whole = answer_parts(answer, 3);
        for size in 1..answer.len() {
            let mut stream = PartStream::new(3);
            let mut got = Vec::new();
            let mut at = 0;
            while at < answer.len() {
                let mut end = (at + size).min(answer.len());
                while !answer.is_char_boundary(end) {
                    end += 1;
                }
                for p in stream.push(&answer[at..end]) {
                    push_part(&mut got, p);
                }
                at = end;
            }
            for p in stream.finish() {
                push_part(&mut got, p);
            }
            assert_eq!(got, whole, "pieces of {size} bytes");
        }
        // Text before an unclosed bracket is given out at once; the bracket waits.
        let mut stream = PartStream::new(3);
        assert_eq!(stream.push("Caxton [1"), [text("Caxton ")]);
        assert_eq!(stream.push("] then"), [AnswerPart::Cite(vec![1]), text(" then")]);
    }

    /// Parts in order, adjacent texts joined (as a page shows them).
    fn push_part(parts: &mut Vec<AnswerPart>, p: AnswerPart) {
        match p {
            AnswerPart::Text(t) => push_text(parts, &t),
            cite => parts.push(cite),
        }
    }
}
