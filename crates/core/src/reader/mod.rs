//! The pure half of memory extraction: what the reader is asked ([`prompt`]) and how its
//! reply is read ([`crate::parse`], [`line_reply`]), how a long
//! document is split into windows and their memories joined ([`window`]), and when a
//! reader's output is too poor to keep ([`fallback`]), how candidates are scored
//! ([`scoring`]), and the whole procedure over a model trait ([`extract`], [`model`]). The runtime drives the model
//! through these steps; everything here is deterministic and tested without a model.

pub mod extract;
pub mod fallback;
pub mod line_reply;
pub mod misplaced_core;
pub mod model;
pub mod numbered;
pub mod prompt;
#[cfg(feature = "serde")]
mod saved_draft;
pub mod scoring;
pub mod window;

pub use extract::{extract_memory, ExtractSettings, MemoryDraft, Progress, Stage, MIN_WINDOW_TOKENS};
pub use fallback::{fallback_reason, FallbackPolicy};
pub use model::{Generated, Opening, ReaderModel, ReadingCost, SampleSpec};
pub use numbered::NumberedText;
pub use prompt::{choose_prompt, ReaderPrompt};
pub use window::{plan_windows, stitch, Stitched, WindowMemory};
