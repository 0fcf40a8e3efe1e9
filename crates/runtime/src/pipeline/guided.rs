//! Clue-guided and routed answering over a library: the glue between core's
//! [`docmem_core::clues`] and [`docmem_core::route`], a [`Library`], its embedder and a
//! [`TextModel`], so that the CLI, the npm package and the evaluation answer the same way.
//!
//! [`prepare_guided`] replaces [`crate::pipeline::qa::prepare`] when clues or routing are on; its
//! [`GuidedPrompt`] carries the ordinary [`AnswerPrompt`] (answered with
//! [`crate::pipeline::qa::answer`]) plus the trace: the clues and which of them found each source,
//! the question's scope, the router's segments. Routing and clues are not combined in one
//! question: with routing on, the router's sub-queries take the clues' place.
//!
//! What routing learned comes back as a [`MemoryUpdate`]; [`learn_after_answer`] applies
//! it, lets the cold-start explorer probe a little, and saves the memory, after the
//! answer has been delivered.

use docmem_core::answer::{answer_prompt, answer_prompt_with_overview, Memory};
use docmem_core::clues::global::fit_to_tokens;
use docmem_core::clues::{
    build_global_memory, classify_scope, fuse_clue_lists, write_clues, Clue, ClueFilter, ClueKind, ClueWeights, CluesMode, DocumentNotes,
    GlobalMemory, GlobalMemorySettings, Scope, ScopeSource,
};
use docmem_core::embed_ahead::ahead;
use docmem_core::library::{Library, Store};
use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::retrieve::{Layer, RetrievedChunk, SearchParams};
use docmem_core::route::{
    collection_keywords, explore, plain_summary, route, CollectionScore, CollectionSearch, CollectionTexts, ExploreSettings, Found,
    MemoryUpdate, RouteSettings, RouteTarget, Segment, SymbolicMemory,
};
use docmem_core::text::detect_language;
use docmem_core::text_model::TextModel;
use docmem_core::Embedder;
use serde::Serialize;

use crate::pipeline::qa::{best_similarity, question_floor, sources_from_hits, AnswerPrompt, AskParams, Source};
use crate::Error;

/// What guides retrieval.
#[derive(Clone, Debug, Default)]
pub struct GuideSettings {
    /// When clues are used.
    pub clues: CluesMode,
    /// Routing: `None` searches every collection at once (as without routing).
    pub route: Option<RouteTarget>,
    /// The router's settings.
    pub route_settings: RouteSettings,
    /// The clue filter.
    pub clue_filter: ClueFilter,
    /// The clue lists' weights.
    pub clue_weights: ClueWeights,
}

/// What clue-guided retrieval did for one question.
#[derive(Clone, Debug, Serialize)]
pub struct ClueTrace {
    /// The question's scope (auto mode), and who classified it.
    pub scope: Option<(Scope, ScopeSource)>,
    /// The queries: the question first, then the clues.
    pub queries: Vec<Clue>,
    /// Per source (in order), the queries that found it, best rank first: (query index,
    /// rank in its list).
    pub found_by: Vec<Vec<(usize, u32)>>,
    /// True when the answer prompt carries the global memory (a global question).
    pub overview: bool,
}

/// What the router did for one question.
#[derive(Clone, Debug, Serialize)]
pub struct RouteTrace {
    /// The segments, in order.
    pub segments: Vec<Segment>,
    /// How the memory ranked the collections.
    pub scores: Vec<CollectionScore>,
    /// The collection answered from (`None`: no segment satisfied its judge).
    pub collection: Option<String>,
}

/// An answer prompt and how its evidence was found.
#[derive(Clone, Debug)]
pub struct GuidedPrompt {
    /// The prompt, for [`crate::pipeline::qa::answer`].
    pub prompt: AnswerPrompt,
    /// Clue-guided retrieval's trace, when it ran.
    pub clues: Option<ClueTrace>,
    /// The router's trace, when it ran.
    pub route: Option<RouteTrace>,
    /// What the router learned, to apply after the answer ([`learn_after_answer`]).
    pub update: Option<MemoryUpdate>,
}

/// The global memory of `library` for `model` (named `model_name`): the one saved for this
/// generation of the library, or a new one, saved.
pub async fn global_memory<S: Store>(
    library: &mut Library<S>,
    model: &mut dyn TextModel,
    model_name: &str,
    settings: &GlobalMemorySettings,
) -> Result<GlobalMemory, Error> {
    if let Some(g) = library.cached_global_memory(model_name) {
        return Ok(g);
    }
    let mut notes = Vec::new();
    let mut chinese = 0usize;
    for e in library.documents() {
        let (doc, memory) = library.get(e.id)?;
        notes.push(DocumentNotes { title: &e.title, memory, lead: &doc.text });
        chinese += usize::from(e.language == "zh");
    }
    let chinese = chinese * 2 > notes.len();
    let g = build_global_memory(model, &notes, settings, chinese).await?;
    drop(notes);
    library.save_global_memory(model_name, &g)?;
    Ok(g)
}

fn search_params(params: &AskParams) -> SearchParams {
    SearchParams { k: params.k.max(1), ..SearchParams::default() }
}

fn user_turn(question: &str, sources: &[Source], overview: Option<&str>) -> String {
    let memories: Vec<Memory<'_>> = sources.iter().map(Source::memory).collect();
    let chinese = detect_language(question) == "zh";
    match overview {
        Some(o) => answer_prompt_with_overview(question, o, &memories, chinese),
        None => answer_prompt(question, &memories, chinese),
    }
}

/// Retrieve the evidence for `question` as `settings` say (clues, routing, or neither)
/// and build the answer prompt. `global` is needed when clues are on or auto
/// ([`global_memory`]); `memory` is the router's symbolic memory (read, not changed).
#[allow(clippy::too_many_arguments)]
pub async fn prepare_guided<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    model: &mut dyn TextModel,
    global: Option<&GlobalMemory>,
    memory: &SymbolicMemory,
    question: &str,
    params: &AskParams,
    settings: &GuideSettings,
) -> Result<GuidedPrompt, Error> {
    if question.trim().is_empty() {
        return Err(Error::EmptyQuestion);
    }
    let t = crate::lm::now_seconds();
    let search = search_params(params);
    if let Some(target) = &settings.route {
        let collections = library.collections();
        let mut search_fn = collection_search(library, embedder, &search);
        let routed = route(question, &collections, memory, Some(model), target, &settings.route_settings, &mut search_fn).await?;
        let hits: Vec<RetrievedChunk> = routed.passages.iter().map(|f| f.chunk.clone()).collect();
        let sources = sources_from_hits(library, &hits, params.max_chunk_chars)?;
        let prompt = AnswerPrompt {
            user_turn: user_turn(question, &sources, None),
            sources,
            retrieve_seconds: crate::lm::now_seconds() - t,
            retrieval: best_similarity(&hits),
            retrieval_floor: question_floor(library, question),
            check_answerability: params.check_answerability,
        };
        let trace = RouteTrace { segments: routed.segments, scores: routed.scores, collection: routed.collection };
        return Ok(GuidedPrompt { prompt, clues: None, route: Some(trace), update: Some(routed.update) });
    }
    if settings.clues == CluesMode::Off {
        let prompt = crate::pipeline::qa::prepare_async(library, embedder, question, params).await?;
        return Ok(GuidedPrompt { prompt, clues: None, route: None, update: None });
    }
    let global = global.ok_or(Error::NoGlobalMemory)?;
    let scope = match settings.clues {
        CluesMode::Auto => Some(classify_scope(Some(&mut *model), question).await?),
        _ => None,
    };
    let queries_and_lists = if matches!(scope, Some((Scope::Global, _))) {
        // A global question: the outline layer, and the global memory in the prompt.
        let outline = SearchParams { layer_weights: [(Layer::Outline, 1.0), (Layer::Core, 0.0), (Layer::Chunk, 0.0)], ..search.clone() };
        let mut hits = ahead(&mut *embedder, |e| library.search(question, e, &outline)).await?;
        if hits.is_empty() {
            // No outline (a baseline chunker's library): every layer.
            hits = ahead(&mut *embedder, |e| library.search(question, e, &search)).await?;
        }
        (vec![Clue::new(ClueKind::Question, question.trim())], vec![hits])
    } else {
        let chinese = detect_language(question) == "zh";
        let clues = write_clues(model, global, question, chinese, &settings.clue_filter).await?;
        let mut queries = vec![Clue::new(ClueKind::Question, question.trim())];
        queries.extend(clues);
        let mut lists = Vec::with_capacity(queries.len());
        for q in &queries {
            lists.push(ahead(&mut *embedder, |e| library.search(&q.text, e, &search)).await?);
        }
        (queries, lists)
    };
    let (queries, lists) = queries_and_lists;
    // Only chunks that still have a passage become sources, so found_by stays parallel.
    let fused: Vec<_> = fuse_clue_lists(&queries, &lists, &settings.clue_weights, search.k, search.rrf_k)
        .into_iter()
        .filter(|c| library.passage(&c.chunk).is_some())
        .collect();
    let hits: Vec<RetrievedChunk> = fused.iter().map(|c| c.chunk.clone()).collect();
    let sources = sources_from_hits(library, &hits, params.max_chunk_chars)?;
    let overview = matches!(scope, Some((Scope::Global, _)));
    // The overview shares the answerer's context with the passages and the answer: a
    // quarter of it at most, in whole lines.
    let budget = model.context_tokens() / 4;
    let overview_text = if overview { Some(fit_to_tokens(model, &global.text, budget)?) } else { None };
    let prompt = AnswerPrompt {
        user_turn: user_turn(question, &sources, overview_text.as_deref()),
        sources,
        retrieve_seconds: crate::lm::now_seconds() - t,
        retrieval: best_similarity(&hits),
        retrieval_floor: question_floor(library, question),
        check_answerability: params.check_answerability,
    };
    let trace = ClueTrace { scope, queries, found_by: fused.into_iter().map(|c| c.found_by).collect(), overview };
    Ok(GuidedPrompt { prompt, clues: Some(trace), route: None, update: None })
}

/// One collection's search as the router and the explorer call it: the passages of
/// `collection` for `query`, best first, with their texts, the query's vector awaited
/// ahead of the search where the embedder must be awaited (`embed_ahead`).
pub struct LibrarySearch<'a, S: Store> {
    library: &'a Library<S>,
    embedder: &'a mut dyn Embedder,
    params: &'a SearchParams,
}

/// [`LibrarySearch`] over `library` with `embedder` and `params`.
pub fn collection_search<'a, S: Store>(
    library: &'a Library<S>,
    embedder: &'a mut dyn Embedder,
    params: &'a SearchParams,
) -> LibrarySearch<'a, S> {
    LibrarySearch { library, embedder, params }
}

impl<S: Store> CollectionSearch for LibrarySearch<'_, S> {
    fn search<'a>(&'a mut self, collection: &'a str, query: &'a str) -> LocalBoxFuture<'a, Result<Vec<Found>, docmem_core::Error>> {
        boxed(async move {
            let (library, params) = (self.library, self.params);
            let hits = ahead(&mut *self.embedder, |e| library.search_in(query, e, params, Some(collection))).await?;
            Ok(hits.into_iter().filter_map(|chunk| Some(Found { text: library.passage(&chunk)?.text.to_string(), chunk })).collect())
        })
    }
}

/// A fingerprint of a collection's documents: FNV-1a over their ids (content hashes), in
/// order, and their count.
fn fingerprint<S: Store>(library: &Library<S>, collection: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut n = 0;
    for e in library.collection_documents(collection) {
        n += 1;
        for b in e.id.to_string().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{n}-{h:016x}")
}

/// Make or remake the descriptors of `library`'s collections whose documents changed
/// (keywords from their memories, the plain summary), and forget removed collections.
/// True when anything changed.
pub fn refresh_descriptors<S: Store>(library: &Library<S>, memory: &mut SymbolicMemory) -> Result<bool, Error> {
    let names: Vec<&str> = library.collections();
    let stale: Vec<bool> = names.iter().map(|c| memory.descriptor(c).is_none_or(|d| d.fingerprint != fingerprint(library, c))).collect();
    let before = memory.descriptors.len();
    memory.retain_collections(&names);
    if !stale.iter().any(|s| *s) {
        return Ok(memory.descriptors.len() != before);
    }
    let mut texts = Vec::with_capacity(names.len());
    for c in &names {
        let mut t = CollectionTexts { name: (*c).into(), ..CollectionTexts::default() };
        for e in library.collection_documents(c) {
            let (doc, m) = library.get(e.id)?;
            t.titles.push(e.title.clone());
            t.texts.extend(m.outline.iter().cloned());
            t.texts.extend(m.scenarios.iter().map(|s| s.core.clone()).filter(|c| !c.trim().is_empty()));
            if m.outline.is_empty() && m.scenarios.iter().all(|s| s.core.trim().is_empty()) {
                // A baseline chunker's memory: the chunk texts stand in.
                t.texts.extend(m.scenarios.iter().filter_map(|s| s.span.slice(&doc.text)).map(str::to_string));
            }
        }
        texts.push(t);
    }
    let keywords = collection_keywords(&texts, docmem_core::route::descriptors::MAX_KEYWORDS);
    for ((t, k), is_stale) in texts.iter().zip(keywords).zip(&stale) {
        if *is_stale {
            memory.describe(&t.name, plain_summary(t), k);
            memory.descriptor_mut(&t.name).fingerprint = fingerprint(library, &t.name);
        }
    }
    Ok(true)
}

/// After an answer is delivered: apply what routing learned, let the cold-start explorer
/// probe the collections with fewer than `explore.t_min` judged searches (at most
/// `explore.max_probes` searches), and save the memory with the library.
pub async fn learn_after_answer<S: Store>(
    library: &mut Library<S>,
    embedder: &mut dyn Embedder,
    model: Option<&mut dyn TextModel>,
    memory: &mut SymbolicMemory,
    update: Option<&MemoryUpdate>,
    explore_settings: &ExploreSettings,
    k: usize,
) -> Result<MemoryUpdate, Error> {
    if let Some(u) = update {
        memory.apply(u);
    }
    let probes = explore_collections(library, embedder, model, memory, explore_settings, k).await?;
    memory.apply(&probes);
    library.save_routing_memory(memory)?;
    Ok(probes)
}

/// The explorer's probes over `library`'s collections (not applied).
pub async fn explore_collections<S: Store>(
    library: &Library<S>,
    embedder: &mut dyn Embedder,
    model: Option<&mut dyn TextModel>,
    memory: &SymbolicMemory,
    settings: &ExploreSettings,
    k: usize,
) -> Result<MemoryUpdate, Error> {
    let names = library.collections();
    let mut items: Vec<Vec<String>> = Vec::with_capacity(names.len());
    for c in &names {
        let mut v = Vec::new();
        for e in library.collection_documents(c) {
            let (_, m) = library.get(e.id)?;
            v.extend(m.outline.iter().filter(|o| o.chars().any(char::is_alphabetic)).cloned());
        }
        items.push(v);
    }
    let cols: Vec<(&str, &[String])> = names.iter().copied().zip(items.iter().map(Vec::as_slice)).collect();
    let search = SearchParams { k: k.max(1), ..SearchParams::default() };
    let mut search_fn = collection_search(library, embedder, &search);
    explore(&cols, memory, model, settings, &mut search_fn).await.map_err(Error::from)
}
