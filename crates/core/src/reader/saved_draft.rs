//! A memory draft kept between windows, so that a reading stopped by a reload, a crash or
//! a closed laptop goes on from its last finished window instead of its first.
//!
//! A window takes minutes on a CPU; a document's memory, several windows. What a window
//! produced (its memory, the candidate chosen, the alignment figures) is small, so after
//! each one the caller stores the draft ([`MemoryDraft::to_bytes`]); a later reading plans
//! the document again and adopts the stored windows ([`MemoryDraft::resume`]) only when
//! they were read of the same text, in the same windows, by the same reader with the
//! same settings, since anything else would stitch windows of two different readings.
//! The form is JSON: readable, and small beside the document it belongs to.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::extract::{ExtractSettings, MemoryDraft, WindowResult};
use super::window::WindowMemory;
use crate::align::AlignmentStats;
use crate::document::Document;
use crate::memory::Scenario;
use crate::select::CandidateScores;
use crate::span::Span;

/// The layout's version: a draft of another is not resumed.
const SAVED_DRAFT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct SavedDraft {
    version: u32,
    /// The document's id (hex), the reader's name and a digest of the settings: what
    /// must be the same for the windows to be adopted.
    document: String,
    reader: String,
    settings: String,
    windows: Vec<Span>,
    window_tokens: Vec<usize>,
    read: Vec<SavedWindow>,
}

#[derive(Serialize, Deserialize)]
struct SavedWindow {
    window: Span,
    outline: Vec<String>,
    scenarios: Vec<Scenario>,
    chosen: Option<SavedChoice>,
    stats: AlignmentStats,
    fallback: Option<String>,
}

/// The candidate a window kept, with its scores.
#[derive(Serialize, Deserialize)]
struct SavedChoice {
    candidate: usize,
    clarity: Option<f64>,
    completeness: Option<f64>,
    rrf: Option<f64>,
}

/// What the windows' results depend on besides the text and the reader.
fn settings_digest(settings: &ExtractSettings) -> String {
    let digest = Sha256::digest(format!("{settings:?}").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl MemoryDraft {
    /// The windows read so far of `doc` with `settings`, to store until the memory is
    /// done (see the module docs).
    pub fn to_bytes(&self, doc: &Document, settings: &ExtractSettings) -> Vec<u8> {
        let read = self
            .results
            .iter()
            .map(|r| SavedWindow {
                window: r.memory.window,
                outline: r.memory.outline.clone(),
                scenarios: r.memory.scenarios.clone(),
                chosen: r.chosen.map(|(candidate, s, rrf)| SavedChoice {
                    candidate,
                    clarity: s.clarity,
                    completeness: s.completeness,
                    rrf,
                }),
                stats: r.stats.clone(),
                fallback: r.fallback.clone(),
            })
            .collect();
        let saved = SavedDraft {
            version: SAVED_DRAFT_VERSION,
            document: format!("{}", doc.id),
            reader: self.name.clone(),
            settings: settings_digest(settings),
            windows: self.windows.clone(),
            window_tokens: self.window_tokens.clone(),
            read,
        };
        serde_json::to_vec(&saved).unwrap_or_default()
    }

    /// Adopt the windows a stored draft (`bytes`, from [`MemoryDraft::to_bytes`]) read,
    /// when it was made of `doc` by this draft's reader with `settings` and planned the
    /// same windows; returns how many were adopted (0 when none could be: the reading
    /// starts from its first window). Only a draft nothing has been read into yet adopts.
    pub fn resume(&mut self, bytes: &[u8], doc: &Document, settings: &ExtractSettings) -> usize {
        let Ok(saved) = serde_json::from_slice::<SavedDraft>(bytes) else { return 0 };
        let same = saved.version == SAVED_DRAFT_VERSION
            && saved.document == format!("{}", doc.id)
            && saved.reader == self.name
            && saved.settings == settings_digest(settings)
            && saved.windows == self.windows
            && saved.window_tokens == self.window_tokens
            && saved.read.len() <= self.windows.len()
            && saved.read.iter().zip(&self.windows).all(|(r, w)| r.window == *w);
        if !same || !self.results.is_empty() {
            return 0;
        }
        let per_window = settings.samples + 1;
        for w in saved.read {
            let chosen = w.chosen.map(|c| (c.candidate, CandidateScores { clarity: c.clarity, completeness: c.completeness }, c.rrf));
            let memory = WindowMemory { window: w.window, outline: w.outline, scenarios: w.scenarios };
            self.results.push(WindowResult { memory, chosen, stats: w.stats, fallback: w.fallback });
        }
        let n = self.results.len();
        self.report.window = n;
        self.report.candidates_done = per_window * n;
        self.report.tokens_done = self.window_tokens[..n].iter().sum();
        n
    }
}
