//! The MemReader prompts: what the reader is asked to write about a document.
//!
//! MemReader checkpoints were fine-tuned on a Chinese instruction; the 1.5B and 3B ones
//! reason in a `<think>` block before the memory, the 7B one writes the memory directly.
//! So there are four texts: Chinese and English, each with and without the reasoning step.
//! The Chinese ones are written to the output contract the MoM paper and its released
//! checkpoints use (`<think>`, `<outline>`, `<scenario><chunk>first chars[MASK]last
//! chars</chunk>core content</scenario>`); the verbatim training prompt was not
//! reachable from this project, so a user with the original text can pass it instead
//! ([`ReaderPrompt::Custom`], `{document}` marks where the document goes). The English
//! ones say the same thing in English, item for item.
//!
//! Readers that are not MemReader checkpoints are shown the document as numbered
//! sentences ([`crate::reader::NumberedText`]) and name chunks by number, either in the
//! same tags (`<chunk>FIRST-LAST</chunk>`, the numbered variants) or one line a group
//! (`FIRST-LAST | title | core`, the lines variants: about half the written tokens, see
//! [`crate::reader::line_reply`]).
//!
//! [`ReaderPrompt::Auto`] picks by the document's language (Chinese for `zh`, English
//! otherwise) and by the model's name (no reasoning step for a 7B reader, as its training
//! had none; the numbered tag variants for a reader that is not a MemReader: the lines
//! variants are for readers that follow them, which the default 1.5B does not, see
//! [`crate::reader::line_reply`]). The text is sent as the user turn of the model's chat
//! template.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::line_reply::parse_line_reply;
use super::model::Opening;
use super::numbered::NumberedText;
use crate::parse::{parse_memreader_output, ParsedMemory};
use crate::span::Span;
use core::fmt;
use core::str::FromStr;

/// Tokens a reply has to open its format in ([`ReaderPrompt::opening`]): room for a
/// preamble such as "Here is the document memory:" or a code fence.
pub const OPENING_TOKENS: usize = 48;

/// Which instruction the reader gets.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum ReaderPrompt {
    /// Chosen per document: [`choose_prompt`].
    #[default]
    Auto,
    /// Chinese, with the `<think>` reasoning block (MemReader 1.5B / 3B).
    ChineseThink,
    /// Chinese, memory only (MemReader 7B).
    Chinese,
    /// English, with the reasoning block.
    EnglishThink,
    /// English, memory only.
    English,
    /// English, the document shown as numbered sentences and chunks named by number
    /// ([`crate::reader::NumberedText`]): for readers that are not MemReader checkpoints.
    EnglishNumbered,
    /// Chinese, numbered sentences (as [`ReaderPrompt::EnglishNumbered`]).
    ChineseNumbered,
    /// English, numbered sentences, and the memory written one line a group
    /// (`FIRST-LAST | title | core`, [`crate::reader::line_reply`]): for a reader that
    /// follows it, the same memory as [`ReaderPrompt::EnglishNumbered`] in about half the
    /// written tokens (the default 1.5B does not).
    EnglishLines,
    /// Chinese, one line a group (as [`ReaderPrompt::EnglishLines`]).
    ChineseLines,
    /// A user's own text; `{document}` is replaced by the document.
    Custom(String),
}

/// A prompt name that is not one of the variants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPrompt(pub String);

impl fmt::Display for UnknownPrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown reader prompt '{}' (expected auto, zh-think, zh, en-think, en, en-numbered, zh-numbered, en-lines or zh-lines)",
            self.0
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for UnknownPrompt {}

impl FromStr for ReaderPrompt {
    type Err = UnknownPrompt;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => ReaderPrompt::Auto,
            "zh-think" => ReaderPrompt::ChineseThink,
            "zh" => ReaderPrompt::Chinese,
            "en-think" => ReaderPrompt::EnglishThink,
            "en" => ReaderPrompt::English,
            "en-numbered" => ReaderPrompt::EnglishNumbered,
            "zh-numbered" => ReaderPrompt::ChineseNumbered,
            "en-lines" => ReaderPrompt::EnglishLines,
            "zh-lines" => ReaderPrompt::ChineseLines,
            other => return Err(UnknownPrompt(other.into())),
        })
    }
}

impl ReaderPrompt {
    /// The short name (`zh-think`, `en`, ...; `custom` for a user's text).
    pub fn name(&self) -> &'static str {
        match self {
            ReaderPrompt::Auto => "auto",
            ReaderPrompt::ChineseThink => "zh-think",
            ReaderPrompt::Chinese => "zh",
            ReaderPrompt::EnglishThink => "en-think",
            ReaderPrompt::English => "en",
            ReaderPrompt::EnglishNumbered => "en-numbered",
            ReaderPrompt::ChineseNumbered => "zh-numbered",
            ReaderPrompt::EnglishLines => "en-lines",
            ReaderPrompt::ChineseLines => "zh-lines",
            ReaderPrompt::Custom(_) => "custom",
        }
    }

    /// Whether the reader is asked to reason in `<think>` first.
    pub fn thinks(&self) -> bool {
        match self {
            ReaderPrompt::ChineseThink | ReaderPrompt::EnglishThink => true,
            ReaderPrompt::Custom(t) => t.contains("<think>"),
            _ => false,
        }
    }

    /// Whether the reader is shown numbered units and names chunks by number.
    pub fn numbered(&self) -> bool {
        matches!(
            self,
            ReaderPrompt::EnglishNumbered | ReaderPrompt::ChineseNumbered | ReaderPrompt::EnglishLines | ReaderPrompt::ChineseLines
        )
    }

    /// Whether the instruction is in Chinese.
    pub fn is_chinese(&self) -> bool {
        matches!(self, ReaderPrompt::Chinese | ReaderPrompt::ChineseThink | ReaderPrompt::ChineseNumbered | ReaderPrompt::ChineseLines)
    }

    /// Whether the memory is asked for one line a group ([`crate::reader::line_reply`]).
    pub fn writes_lines(&self) -> bool {
        matches!(self, ReaderPrompt::EnglishLines | ReaderPrompt::ChineseLines)
    }

    /// Parse a reply to this prompt.
    pub fn parse(&self, reply: &str) -> ParsedMemory {
        if self.writes_lines() {
            parse_line_reply(reply)
        } else {
            parse_memreader_output(reply)
        }
    }

    /// How a reply to this prompt opens: its first tag within [`OPENING_TOKENS`] (after
    /// at most a short preamble). A reader that instead echoes the document or writes
    /// prose has failed this window already (135M readers often do), and stopping it
    /// then saves the rest of the token budget for the fallback. A user's own prompt
    /// promises no format, so nothing is expected of it.
    pub fn opening(&self) -> Option<Opening> {
        match self {
            ReaderPrompt::Custom(_) => None,
            // The first line's range, in the dashes and bars the parser reads; an echo of the
            // numbered document (`[1] The…`) is not it.
            p if p.writes_lines() => Some(Opening {
                markers: &["1-", "1 -", "1–", "1 –", "1—", "1～", "1~", "1至", "1到", "1 |", "1|", "1 ｜", "1｜", "[1]-", "[1] -", "[1]–"],
                within_tokens: OPENING_TOKENS,
            }),
            // The parser takes the outline anywhere, so a numbered reply may open with either.
            p if p.numbered() => Some(Opening { markers: &["<scenario>", "<outline>"], within_tokens: OPENING_TOKENS }),
            p if p.thinks() => Some(Opening { markers: &["<think>"], within_tokens: OPENING_TOKENS }),
            _ => Some(Opening { markers: &["<outline>", "<scenario>"], within_tokens: OPENING_TOKENS }),
        }
    }

    /// The user turn for `document`. [`ReaderPrompt::Auto`] renders as English with
    /// reasoning; resolve it with [`choose_prompt`] first. The numbered variants show
    /// `NumberedText::new(document)`.
    pub fn render(&self, document: &str) -> String {
        self.render_with_units(document).0
    }

    /// [`ReaderPrompt::render`], and for a numbered variant the units it showed (the
    /// spans `<chunk>FIRST-LAST</chunk>` refers to; empty for the other variants).
    pub fn render_with_units(&self, document: &str) -> (String, Vec<Span>) {
        let template = match self {
            ReaderPrompt::ChineseThink => assemble(&ZH, true),
            ReaderPrompt::Chinese => assemble(&ZH, false),
            ReaderPrompt::EnglishThink | ReaderPrompt::Auto => assemble(&EN, true),
            ReaderPrompt::English => assemble(&EN, false),
            ReaderPrompt::EnglishNumbered => EN_NUMBERED.into(),
            ReaderPrompt::ChineseNumbered => ZH_NUMBERED.into(),
            ReaderPrompt::EnglishLines => EN_LINES.into(),
            ReaderPrompt::ChineseLines => ZH_LINES.into(),
            ReaderPrompt::Custom(t) => t.clone(),
        };
        if self.numbered() {
            let view = NumberedText::new(document);
            let last = view.len().to_string();
            let text = template.replacen("{last}", &last, 1).replacen("{document}", &view.render(document), 1);
            return (text, view.units().to_vec());
        }
        let text = if template.contains("{document}") {
            template.replacen("{document}", document, 1)
        } else {
            let mut s = template;
            s.push_str("\n\n");
            s.push_str(document);
            s
        };
        (text, Vec::new())
    }
}

/// Resolve [`ReaderPrompt::Auto`] for a document in `language` (BCP-47, as
/// [`crate::text::detect_language`] gives) read by the model named `model` (a file or
/// hosted-model name). Other settings come back unchanged.
pub fn choose_prompt(setting: &ReaderPrompt, language: &str, model: &str) -> ReaderPrompt {
    if *setting != ReaderPrompt::Auto {
        return setting.clone();
    }
    let lower = model.to_ascii_lowercase();
    let chinese = language == "zh" || language.starts_with("zh-");
    // Only MemReader checkpoints were trained to name chunks by their ends around [MASK];
    // other models are shown numbered sentences (see `numbered.rs` for why).
    if !lower.contains("memreader") {
        return if chinese { ReaderPrompt::ChineseNumbered } else { ReaderPrompt::EnglishNumbered };
    }
    // MemReader-7B was trained without the reasoning block; smaller readers with it.
    let thinks = !(lower.contains("7b") || lower.contains("-7-") || lower.contains("7-b"));
    match (chinese, thinks) {
        (true, true) => ReaderPrompt::ChineseThink,
        (true, false) => ReaderPrompt::Chinese,
        (false, true) => ReaderPrompt::EnglishThink,
        (false, false) => ReaderPrompt::English,
    }
}

/// The instruction, in pieces: an opening, the first requirement (reason first, or do
/// not), the requirements both variants share, and the document's place.
struct Parts {
    opening: &'static str,
    think: &'static str,
    no_think: &'static str,
    rest: &'static str,
}

const ZH: Parts = Parts {
    opening: "你是一位擅长阅读的领域专家。请像专家一样通读下面的文档，为它构建文档记忆。\n\n要求：\n",
    think: "1. 先在<think></think>中写出你的阅读思路：文档属于什么领域、讲了哪些内容、按什么逻辑组织。\n",
    no_think: "1. 不要写出思考过程，直接输出记忆。\n",
    rest: "2. 在<outline></outline>中按文档顺序写出逻辑大纲，每行一个要点。
3. 按大纲把原文切分成语义完整的原子片段，每个片段写成一个<scenario></scenario>：其中<chunk></chunk>只写该片段原文开头的几个字、[MASK]、结尾的几个字（如<chunk>开头的几个字[MASK]结尾的几个字</chunk>），照抄原文，不要改写；<chunk>之后写出该片段的核心内容，简洁而完整。
4. 片段按原文顺序排列，首尾相接，覆盖全文，不重叠，不遗漏。
5. 使用与文档相同的语言。

文档：
{document}",
};

const EN: Parts = Parts {
    opening: "You are a domain expert who reads carefully. Read the document below as an expert would and build its document memory.\n\nRequirements:\n",
    think: "1. First, in <think></think>, write how you read it: what field the document belongs to, what it covers, and how it is organised.\n",
    no_think: "1. Do not write out your reasoning; write the memory directly.\n",
    rest: "2. In <outline></outline>, write the document's logical outline in document order, one point per line.
3. Following the outline, cut the original text into semantically complete atomic chunks, and write each as one <scenario></scenario>: inside <chunk></chunk> put only the first few words of the chunk's original text, [MASK], and its last few words (like <chunk>first few words[MASK]last few words</chunk>), copied exactly, not rewritten; after the </chunk>, write the chunk's core content, concise and complete.
4. Chunks follow the original order, each starting where the previous one ends, covering the whole text with no overlap and nothing left out.
5. Write in the document's language.

Document:
{document}",
};

/// The numbered-sentence instruction. `{last}` is the last unit's number.
///
/// The groups come first and the outline (one title per group) last, unlike MoM's
/// format: a 1.5B reader asked for the outline first sometimes kept listing names in it
/// until the token limit, leaving no `<scenario>` (3 of 7 windows of one article). Written
/// last, a runaway outline costs only titles; the parser takes an outline block anywhere.
const EN_NUMBERED: &str = "You are a domain expert who reads carefully. Read the document below as an expert would and build its document memory. The document is shown as numbered sentences; a blank line separates paragraphs.

Write exactly this format, nothing else. First, for each group of consecutive sentences that forms one complete unit of meaning (usually a paragraph, or a heading with the text under it):
<scenario>
<chunk>FIRST-LAST</chunk>
the core content of that group in your own words: concise, but keep every name, number, date and fact
</scenario>
then, after the last group:
<outline>
a short title in words for each group above, in the same order, one per line (titles, never sentence numbers)
</outline>

FIRST and LAST are sentence numbers. The groups follow the document's order: the first starts at 1, each starts right after the previous one ends, and the last ends at {last}. Use the same language as the document.

Example, for a five-sentence text about tea:
<scenario>
<chunk>1-3</chunk>
Dutch traders brought tea from Java to Europe in the early 1600s.
</scenario>
<scenario>
<chunk>4-5</chunk>
By 1700 London coffee houses sold tea.
</scenario>
<outline>
How tea reached Europe
Tea in London
</outline>

Document:
{document}";

/// The numbered-sentence instruction in Chinese (groups first, outline last, as in English).
const ZH_NUMBERED: &str = "你是一位擅长阅读的领域专家。请像专家一样通读下面的文档，为它构建文档记忆。文档按句编号，段落之间有空行。

严格按以下格式输出，不要写其他内容。先把连续的、构成一个完整意义单元的句子（通常是一个段落，或一个标题及其下的文字）分为一组，每组写成：
<scenario>
<chunk>起始编号-结束编号</chunk>
用你自己的话写出该组的核心内容：简洁，但保留所有人名、数字、日期和事实
</scenario>
最后一组之后写：
<outline>
为上面的每一组写一个简短的文字标题，顺序相同，每行一个（写标题，不要写句子编号）
</outline>

各组按文档顺序排列：第一组从1开始，每组紧接上一组结束处开始，最后一组到{last}结束。使用与文档相同的语言。

示例（一段五句的关于茶的文字）：
<scenario>
<chunk>1-3</chunk>
十七世纪初，荷兰商人把茶从爪哇带到欧洲。
</scenario>
<scenario>
<chunk>4-5</chunk>
到1700年，伦敦的咖啡馆已经出售茶。
</scenario>
<outline>
茶如何传入欧洲
茶在伦敦
</outline>

文档：
{document}";

/// The numbered-sentence instruction, one line a group: the range, a title and a
/// one-sentence core in the reader's own words (see `line_reply.rs` for why).
const EN_LINES: &str = "You are a domain expert who reads carefully. Read the document below as an expert would and build its document memory. The document is shown as numbered sentences; a blank line separates paragraphs.

Split the document into groups of consecutive sentences, each one complete unit of meaning (usually a paragraph, or a heading with the text under it). Write one line per group and nothing else:
FIRST-LAST | title | core
FIRST and LAST are the group's first and last sentence numbers. The title names the group's topic in a few words. The core is one sentence in your own words, at most 25 words, that states the group's main point with its key names, numbers and dates; do not copy a sentence. The groups follow the document's order: the first starts at 1, each starts right after the previous one ends, and the last ends at {last}. Use the same language as the document.

Example, for a five-sentence text about tea:
1-3 | How tea reached Europe | Dutch traders brought tea from Java to Europe in the early 1600s.
4-5 | Tea in London | By 1700 London coffee houses sold tea.

Document:
{document}";

/// The one-line-a-group instruction in Chinese.
const ZH_LINES: &str = "你是一位擅长阅读的领域专家。请像专家一样通读下面的文档，为它构建文档记忆。文档按句编号，段落之间有空行。

把连续的、构成一个完整意义单元的句子（通常是一个段落，或一个标题及其下的文字）分为一组。每组写一行，不要写其他内容：
起始编号-结束编号 | 标题 | 核心内容
标题用几个字概括该组的主题。核心内容用你自己的话写一句（不超过50字），说出该组的要点及其中的人名、数字和日期；不要照抄原句。各组按文档顺序排列：第一组从1开始，每组紧接上一组结束处开始，最后一组到{last}结束。使用与文档相同的语言。

示例（一段五句的关于茶的文字）：
1-3 | 茶如何传入欧洲 | 十七世纪初，荷兰商人把茶从爪哇带到欧洲。
4-5 | 茶在伦敦 | 到1700年，伦敦的咖啡馆已经出售茶。

文档：
{document}";

fn assemble(parts: &Parts, think: bool) -> String {
    let mut s = String::from(parts.opening);
    s.push_str(if think { parts.think } else { parts.no_think });
    s.push_str(parts.rest);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_language_and_model_size() {
        let auto = ReaderPrompt::Auto;
        assert_eq!(choose_prompt(&auto, "zh", "MemReader-1.5B-Q4_K_M.gguf"), ReaderPrompt::ChineseThink);
        assert_eq!(choose_prompt(&auto, "zh", "MemReader-7B.gguf"), ReaderPrompt::Chinese);
        assert_eq!(choose_prompt(&auto, "en", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"), ReaderPrompt::EnglishNumbered);
        assert_eq!(choose_prompt(&auto, "zh", "SmolLM2-135M-Instruct.Q4_1.gguf"), ReaderPrompt::ChineseNumbered);
        assert_eq!(choose_prompt(&auto, "und", "memreader-7b"), ReaderPrompt::English);
        assert_eq!(choose_prompt(&ReaderPrompt::Chinese, "en", "x"), ReaderPrompt::Chinese, "a named variant is kept");
    }

    #[test]
    fn each_variant_states_the_output_contract_and_embeds_the_document() {
        for p in [ReaderPrompt::ChineseThink, ReaderPrompt::Chinese, ReaderPrompt::EnglishThink, ReaderPrompt::English] {
            let text = p.render("DOC-BODY");
            assert!(text.ends_with("DOC-BODY"), "{}", p.name());
            for tag in ["<outline>", "<scenario>", "<chunk>", "[MASK]"] {
                assert!(text.contains(tag), "{} lacks {tag}", p.name());
            }
            assert_eq!(text.contains("<think>"), p.thinks(), "{}", p.name());
            assert_eq!(p.name().parse::<ReaderPrompt>().as_ref(), Ok(&p));
        }
        assert!(ReaderPrompt::Chinese.render("x").contains("文档"));
        for p in [ReaderPrompt::EnglishNumbered, ReaderPrompt::ChineseNumbered, ReaderPrompt::EnglishLines, ReaderPrompt::ChineseLines] {
            let text = p.render("One here. Two there.\n\nThree.");
            assert_eq!(text.contains("<scenario>"), !p.writes_lines(), "{}", p.name());
            assert_eq!(text.contains(" | "), p.writes_lines(), "{}", p.name());
            assert!(text.ends_with("[1] One here.\n[2] Two there.\n\n[3] Three.\n"), "{text}");
            assert!(text.contains("到3结束") || text.contains("ends at 3."), "{text}");
            assert!(p.numbered() && !p.thinks());
            assert_eq!(p.name().parse::<ReaderPrompt>().as_ref(), Ok(&p));
        }
        let custom = ReaderPrompt::Custom("Read: {document} -- end".into());
        assert_eq!(custom.render("D"), "Read: D -- end");
        assert_eq!(ReaderPrompt::Custom("no marker".into()).render("D"), "no marker\n\nD");
        assert!("zh-cot".parse::<ReaderPrompt>().is_err());
    }
}
