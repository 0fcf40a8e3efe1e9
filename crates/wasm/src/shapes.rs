//! What JavaScript receives: the runtime's results in the npm package's own shapes, so that
//! its worker passes them on as they come.
//!
//! Two translations happen here and nowhere else. Names are camelCase, by serde
//! (`rename_all`), not by hand on the JavaScript side. Spans are in UTF-16 code units, as
//! JavaScript strings index them (`text.slice(span.start, span.end)`), beside the byte
//! spans the engine keeps (`byteSpan`): the library's spans are UTF-8 byte offsets, and a
//! retrieved piece's (`hits`) are characters (code points). The conversion needs the
//! document's text, which the library holds, so it is done here once per result rather
//! than by keeping a second copy of every text in the worker.
//!
//! A value crosses as a JavaScript object (`JSON.parse` of serde_json's text: one walk of
//! the data, and no second serializer in the wasm binary). Their TypeScript types are the
//! npm package's (`js/index.d.ts`: `Citation`, `Answer`, `DocumentInfo`, `Memory`).

use docmem_core::answer::AnswerPart;
use docmem_core::clues::{Clue, Scope, ScopeSource};
use docmem_core::library::{DocumentEntry, JournalStore, Library};
use docmem_core::retrieve::ListRank;
use docmem_core::route::{CollectionScore, JudgeKind};
use docmem_core::{DocId, Document, DocumentMemory, ErrorCode, Provenance, Span};
use docmem_runtime::lm::Finish;
use docmem_runtime::pipeline::qa::{Answer, Source};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::error_with;

/// `value` as a JavaScript object.
pub(crate) fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, JsValue> {
    let text = serde_json::to_string(value).map_err(|e| error_with(ErrorCode::Internal, format!("cannot encode result: {e}")))?;
    js_sys::JSON::parse(&text)
}

/// What an offset counts.
#[derive(Clone, Copy)]
enum Unit {
    /// UTF-8 bytes (the library's spans).
    Byte,
    /// Characters, i.e. code points (a retrieved piece's span).
    Char,
}

/// The UTF-16 index of each of `offsets` (in `unit`s) into `text`, found in one walk: an
/// offset inside a character counts from that character's start, one past the end is the
/// text's length.
fn utf16_positions(text: &str, offsets: &[usize], unit: Unit) -> Vec<usize> {
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    order.sort_unstable_by_key(|&i| offsets[i]);
    let mut out = vec![0; offsets.len()];
    let mut chars = text.char_indices().enumerate().peekable();
    let mut units = 0;
    for i in order {
        // Pass every character that ends at or before the offset.
        while let Some(&(c, (b, ch))) = chars.peek() {
            let end = match unit {
                Unit::Byte => b + ch.len_utf8(),
                Unit::Char => c + 1,
            };
            if end > offsets[i] {
                break;
            }
            units += ch.len_utf16();
            chars.next();
        }
        out[i] = units;
    }
    out
}

/// A span of a document's text in UTF-16 units.
#[derive(Serialize)]
pub(crate) struct TextSpan {
    start: usize,
    end: usize,
}

/// Each byte span of `spans` as a UTF-16 one.
fn utf16_spans(text: &str, spans: &[Span]) -> Vec<TextSpan> {
    let offsets: Vec<usize> = spans.iter().flat_map(|s| [s.start, s.end]).collect();
    utf16_positions(text, &offsets, Unit::Byte).chunks(2).map(|p| TextSpan { start: p[0], end: p[1] }).collect()
}

#[derive(Serialize)]
struct DocumentRef {
    id: String,
    title: String,
}

/// A passage found for a question.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Passage {
    n: usize,
    document: DocumentRef,
    /// `None` (null) when the document's text could not be read (removed meanwhile): then
    /// only `byteSpan` places it, and `hits` is empty.
    span: Option<TextSpan>,
    byte_span: Span,
    text: String,
    page: Option<u32>,
    hits: Vec<[usize; 2]>,
    core: String,
    outline: Option<String>,
    ranks: Vec<ListRank>,
    score: f64,
}

/// `sources` as passages, their spans counted in `library`'s texts: every offset into one
/// document found in one walk of its text. Without the library (or a source's document),
/// a passage has no UTF-16 span (see [`Passage::span`]).
pub(crate) fn passages(library: Option<&Library<JournalStore>>, sources: &[Source]) -> Vec<Passage> {
    // Per document: its byte offsets (spans) and character offsets (hits), in source order.
    let mut docs: Vec<(DocId, Vec<usize>, Vec<usize>)> = Vec::new();
    for s in sources {
        let at = match docs.iter().position(|d| d.0 == s.doc_id) {
            Some(at) => at,
            None => {
                docs.push((s.doc_id, Vec::new(), Vec::new()));
                docs.len() - 1
            }
        };
        docs[at].1.extend([s.span.start, s.span.end]);
        docs[at].2.extend(s.hits.iter().flat_map(|&(a, b)| [a, b]));
    }
    // Mapped to UTF-16, each list then read from its front as the sources come.
    type Positions = (std::vec::IntoIter<usize>, std::vec::IntoIter<usize>);
    let mut mapped: Vec<(DocId, Option<Positions>)> = docs
        .into_iter()
        .map(|(id, bytes, chars)| {
            let text = library.and_then(|l| l.get(id).ok()).map(|(d, _)| d.text.as_str());
            let positions =
                text.map(|t| (utf16_positions(t, &bytes, Unit::Byte).into_iter(), utf16_positions(t, &chars, Unit::Char).into_iter()));
            (id, positions)
        })
        .collect();
    sources
        .iter()
        .map(|s| {
            let positions = mapped.iter_mut().find(|d| d.0 == s.doc_id).and_then(|d| d.1.as_mut());
            let (span, hits) = match positions {
                Some((bytes, chars)) => {
                    let span = TextSpan { start: bytes.next().unwrap_or(0), end: bytes.next().unwrap_or(0) };
                    let hits = s.hits.iter().map(|_| [chars.next().unwrap_or(0), chars.next().unwrap_or(0)]).collect();
                    (Some(span), hits)
                }
                None => (None, Vec::new()),
            };
            Passage {
                n: s.n,
                document: DocumentRef { id: s.doc_id.to_string(), title: s.title.clone() },
                span,
                byte_span: s.span,
                text: s.text.clone(),
                page: s.page,
                hits,
                core: s.core.clone(),
                outline: s.outline.clone(),
                ranks: s.ranks.clone(),
                score: s.score,
            }
        })
        .collect()
}

#[derive(Serialize)]
struct Seconds {
    retrieve: f64,
    prefill: f64,
    decode: f64,
}

#[derive(Serialize)]
struct ScopeView<'a> {
    scope: &'a Scope,
    by: &'a ScopeSource,
}

#[derive(Serialize)]
struct FoundBy {
    query: usize,
    rank: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CluesView<'a> {
    scope: Option<ScopeView<'a>>,
    queries: &'a [Clue],
    found_by: Vec<Vec<FoundBy>>,
    overview: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SegmentView<'a> {
    step: usize,
    collection: &'a str,
    chosen_by: &'a str,
    sub_query: &'a str,
    passages: usize,
    satisfied: bool,
    reflection: &'a str,
    judged_by: &'a JudgeKind,
}

#[derive(Serialize)]
struct RouteView<'a> {
    collection: Option<&'a str>,
    segments: Vec<SegmentView<'a>>,
    scores: &'a [CollectionScore],
}

/// An answer as the package gives it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AnswerView<'a> {
    answer: &'a str,
    /// The answer as text and citations, drawn and never parsed.
    parts: &'a [AnswerPart],
    not_in_documents: bool,
    /// The passages the answer cites.
    citations: Vec<&'a Passage>,
    citations_from: &'a str,
    sources: &'a [Passage],
    finish: Finish,
    draft: Option<&'a str>,
    seconds: Seconds,
    reused_tokens: usize,
    prompt_tokens: usize,
    /// Pieces of text streamed (one per generated token).
    tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    clues: Option<CluesView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    route: Option<RouteView<'a>>,
}

/// `answer` as the package gives it, with `tokens` pieces streamed and its sources as
/// `passages` (from [`passages`]).
pub(crate) fn answer(answer: &Answer, passages: &[Passage], tokens: usize) -> Result<JsValue, JsValue> {
    let clues = answer.clues.as_ref().map(|c| CluesView {
        scope: c.scope.as_ref().map(|(scope, by)| ScopeView { scope, by }),
        queries: &c.queries,
        found_by: c.found_by.iter().map(|list| list.iter().map(|&(query, rank)| FoundBy { query, rank }).collect()).collect(),
        overview: c.overview,
    });
    let route = answer.route.as_ref().map(|r| RouteView {
        collection: r.collection.as_deref(),
        segments: r
            .segments
            .iter()
            .map(|g| SegmentView {
                step: g.step,
                collection: &g.collection,
                chosen_by: &g.chosen_by,
                sub_query: &g.sub_query,
                passages: g.passages,
                satisfied: g.verdict.satisfied,
                reflection: &g.verdict.reflection,
                judged_by: &g.verdict.by,
            })
            .collect(),
        scores: &r.scores,
    });
    to_js(&AnswerView {
        answer: &answer.answer,
        parts: &answer.parts,
        not_in_documents: answer.not_in_documents,
        citations: passages.iter().filter(|p| answer.cited.contains(&p.n)).collect(),
        citations_from: answer.citations_from,
        sources: passages,
        finish: answer.finish,
        draft: answer.draft.as_deref(),
        seconds: Seconds { retrieve: answer.retrieve_seconds, prefill: answer.prefill_seconds, decode: answer.decode_seconds },
        reused_tokens: answer.reused_tokens,
        prompt_tokens: answer.prompt_tokens,
        tokens,
        clues,
        route,
    })
}

/// A document as the library lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DocumentInfo<'a> {
    id: String,
    title: &'a str,
    language: &'a str,
    bytes: usize,
    chunks: usize,
    /// The reader model or chunker that wrote the memory.
    reader: &'a str,
    fallback: Option<&'a str>,
    collection: &'a str,
    /// How many times a reader's memory replaced the one it was added with.
    memory_version: u64,
}

impl<'a> From<&'a DocumentEntry> for DocumentInfo<'a> {
    fn from(d: &'a DocumentEntry) -> Self {
        DocumentInfo {
            id: d.id.to_string(),
            title: &d.title,
            language: &d.language,
            bytes: d.bytes,
            chunks: d.scenarios,
            reader: &d.reader,
            fallback: d.fallback.as_deref(),
            collection: &d.collection,
            memory_version: d.memory_version,
        }
    }
}

/// The library's entry for `id`, if it holds it.
pub(crate) fn document_info(library: &Library<JournalStore>, id: DocId) -> Option<DocumentInfo<'_>> {
    library.documents().iter().find(|d| d.id == id).map(DocumentInfo::from)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScenarioView<'a> {
    span: TextSpan,
    byte_span: Span,
    core: &'a str,
    outline_item: Option<u32>,
}

/// A document's memory with its text, the scenarios' spans in UTF-16 units.
#[derive(Serialize)]
pub(crate) struct MemoryView<'a> {
    id: String,
    title: &'a str,
    text: &'a str,
    outline: &'a [String],
    scenarios: Vec<ScenarioView<'a>>,
    provenance: &'a Provenance,
}

/// `memory` of `document` as the package gives it.
pub(crate) fn memory<'a>(document: &'a Document, memory: &'a DocumentMemory) -> MemoryView<'a> {
    let spans: Vec<Span> = memory.scenarios.iter().map(|s| s.span).collect();
    let scenarios = utf16_spans(&document.text, &spans)
        .into_iter()
        .zip(&memory.scenarios)
        .map(|(span, s)| ScenarioView { span, byte_span: s.span, core: &s.core, outline_item: s.outline_item })
        .collect();
    MemoryView {
        id: document.id.to_string(),
        title: &document.title,
        text: &document.text,
        outline: &memory.outline,
        scenarios,
        provenance: &memory.provenance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_utf16_units() {
        // "é" is 2 bytes and 1 unit; "𝄞" is 4 bytes, 1 character and 2 units.
        let text = "aé𝄞b";
        assert_eq!(utf16_positions(text, &[0, 1, 3, 7, 8, 99], Unit::Byte), vec![0, 1, 2, 4, 5, 5]);
        // An offset inside a character counts from its start.
        assert_eq!(utf16_positions(text, &[2, 5], Unit::Byte), vec![1, 2]);
        assert_eq!(utf16_positions(text, &[4, 0, 2, 3, 1], Unit::Char), vec![5, 0, 2, 4, 1]);
        assert_eq!(utf16_positions("", &[0, 3], Unit::Char), vec![0, 0]);
    }
}
