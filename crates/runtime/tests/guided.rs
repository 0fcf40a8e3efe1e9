//! Clue-guided and routed answering end to end on SmolLM2: a library of two collections,
//! clues written from its global memory and fused with the question's own list, a routed
//! answer with its trace, and the symbolic memory learned after the answer and kept with
//! the library.

mod common;

use std::ops::ControlFlow;

use common::model;
use docmem_core::chunk::{chunk_with, ChunkerKind};
use docmem_core::clues::{ClueKind, CluesMode, GlobalMemorySettings};
use docmem_core::library::{Library, LibrarySettings, MemStore};
use docmem_core::local_future::poll_once;
use docmem_core::route::{ExploreSettings, JudgeKind, RouteSettings, RouteTarget};
use docmem_core::{Document, DocumentMemory, HashingEmbedder};
use docmem_runtime::lm::{Lm, LmContext, LmText, LoadOptions};
use docmem_runtime::pipeline::guided::{global_memory, learn_after_answer, prepare_guided, refresh_descriptors, GuideSettings};
use docmem_runtime::pipeline::qa::{answer, AskParams};

const PRINTING: &str = "William Caxton brought the printing press to England in 1476. He set up his shop at Westminster. \
                        His first book printed in England was an edition of The Canterbury Tales.";
const ENGINES: &str = "The steam engine converts heat into work. James Watt added a separate condenser in 1765. \
                       Its efficiency is limited by the temperature of the steam.";

fn library(e: &mut HashingEmbedder) -> Library<MemStore> {
    let settings = LibrarySettings::new("hashing-64".into(), 64);
    let mut lib = Library::open(MemStore::default(), &settings).unwrap();
    for (collection, title, text) in [("history", "printing.txt", PRINTING), ("engineering", "engines.txt", ENGINES)] {
        let doc = Document::new(title, text);
        let spans = chunk_with(ChunkerKind::Sentence, text, Default::default(), None).unwrap();
        let memory = DocumentMemory::from_spans(&doc, &spans, "sentence");
        assert!(lib.add_to(collection, &doc, &memory, e).unwrap());
    }
    lib
}

#[test]
fn clues_then_a_routed_answer_that_teaches_the_memory() {
    let lm =
        LmContext::new(Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions { threads: 2, ..Default::default() }).unwrap());
    let mut e = HashingEmbedder::new(64);
    let mut lib = library(&mut e);
    let mut text = LmText::new(lm.model());
    let params = AskParams { k: 3, max_tokens: 24, ..AskParams::default() };

    // Clues: the global memory holds both documents' openings; the question's own list
    // comes first, and every source says which queries found it.
    let global = poll_once(global_memory(&mut lib, &mut text, "smol", &GlobalMemorySettings::default())).unwrap().unwrap();
    assert!(global.text.contains("# printing.txt") && global.text.contains("William Caxton"));
    assert_eq!(lib.cached_global_memory("smol"), Some(global.clone()));
    let on = GuideSettings { clues: CluesMode::On, ..GuideSettings::default() };
    let memory = lib.routing_memory().unwrap().unwrap_or_default();
    let q = "Who brought printing to England?";
    let guided = poll_once(prepare_guided(&lib, &mut e, &mut text, Some(&global), &memory, q, &params, &on)).unwrap().unwrap();
    let trace = guided.clues.unwrap();
    assert_eq!((trace.queries[0].kind, trace.queries[0].text.as_str()), (ClueKind::Question, q));
    assert!(!guided.prompt.sources.is_empty());
    assert_eq!(trace.found_by.len(), guided.prompt.sources.len());
    assert!(trace.found_by.iter().all(|f| !f.is_empty()));
    assert!(guided.prompt.sources.iter().all(|s| s.title == "printing.txt" || s.title == "engines.txt"));

    // Routing: the descriptors send the question to "history"; the trace and the update
    // come back, and the memory learns only after the answer.
    let mut memory = lib.routing_memory().unwrap().unwrap_or_default();
    assert!(refresh_descriptors(&lib, &mut memory).unwrap());
    let route = GuideSettings {
        route: Some(RouteTarget::Auto),
        route_settings: RouteSettings { judge: JudgeKind::Model, ..RouteSettings::default() },
        ..GuideSettings::default()
    };
    let q = "When did Caxton bring the printing press to England?";
    let guided = poll_once(prepare_guided(&lib, &mut e, &mut text, None, &memory, q, &params, &route)).unwrap().unwrap();
    let trace = guided.route.clone().unwrap();
    assert_eq!(trace.segments[0].collection, "history", "{:?}", trace.segments);
    assert!(trace.segments[0].chosen_by.starts_with("descriptor"), "{}", trace.segments[0].chosen_by);
    assert!(guided.prompt.sources.iter().all(|s| s.title == "printing.txt") || trace.collection.is_none());
    let a = poll_once(answer(guided.prompt, &lm, params.max_tokens, |_| ControlFlow::Continue(()))).unwrap().unwrap();
    assert!(!a.answer.is_empty());
    assert!(memory.episodes.is_empty(), "nothing is learned before the answer");
    let explore = ExploreSettings { judge: JudgeKind::Overlap, ..ExploreSettings::default() };
    poll_once(learn_after_answer(&mut lib, &mut e, Some(&mut text), &mut memory, guided.update.as_ref(), &explore, 3)).unwrap().unwrap();
    let saved = lib.routing_memory().unwrap().unwrap();
    assert_eq!(saved, memory);
    let segments = trace.segments.len();
    assert!(saved.episodes.len() >= segments && saved.episodes.len() <= segments + explore.max_probes);
    assert!(saved.episodes.iter().skip(segments).all(|e| e.probe));
    assert!(saved.descriptor("history").is_some_and(|d| d.interactions() >= 1));
}
