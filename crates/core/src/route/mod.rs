//! Routing across collections (SEGMEM-RAG): a library holds several named collections,
//! and with routing on, answering runs as segments on a bounded step budget, each
//! choosing a collection, writing a sub-query, retrieving and judging, until a judge is
//! satisfied or the budget is spent.
//!
//! - [`terms`]: token-level similarity (words; character bigrams for CJK), the recall
//!   measure of everything below;
//! - [`memory`]: the symbolic memory (procedural rules, semantic descriptors with
//!   success/failure counters, episodic entries), persisted with the library;
//! - [`descriptors`]: a collection's descriptor made from its memories;
//! - [`judge`]: the feedback evaluator (the model's yes/no and reflection; an overlap
//!   test as fallback);
//! - [`router`]: the state machine and its trace;
//! - [`explore`]: the cold-start explorer.
//!
//! Learning never sits on the answer's critical path: a run returns a
//! [`MemoryUpdate`], applied after the answer is delivered.

pub mod descriptors;
pub mod explore;
pub mod judge;
pub mod memory;
pub mod router;
pub mod terms;

pub use descriptors::{collection_keywords, model_summary, plain_summary, CollectionTexts};
pub use explore::{explore, probe_queries, ExploreSettings};
pub use judge::{judge, overlap_verdict, JudgeKind, Verdict};
pub use memory::{CollectionScore, Descriptor, Episode, MemoryUpdate, Outcome, Rule, SymbolicMemory};
pub use router::{route, CollectionSearch, Controller, Found, RouteSettings, RouteTarget, Routed, Segment};
