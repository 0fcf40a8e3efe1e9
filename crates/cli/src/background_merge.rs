//! A library's merges on a thread of their own while documents are added, so that an
//! add never waits for a graph to be built (see docmem_core::library::Library::merge_job).

use std::thread::JoinHandle;

use docmem_core::library::{Library, Store};
use docmem_core::retrieve::MergedPart;

use crate::CliError;

/// At most one merge at a time, built on a thread.
#[derive(Default)]
pub struct BackgroundMerges {
    running: Option<JoinHandle<MergedPart>>,
}

impl BackgroundMerges {
    /// Store a finished merge and start the next one due. Call between adds.
    pub fn poll<S: Store>(&mut self, library: &mut Library<S>) -> Result<(), CliError> {
        if self.running.as_ref().is_some_and(JoinHandle::is_finished) {
            self.store(library)?;
        }
        if self.running.is_none() {
            if let Some(job) = library.merge_job() {
                self.running = Some(std::thread::spawn(move || job.run()));
            }
        }
        Ok(())
    }

    /// Wait for the merge under way, if any, and store it.
    pub fn finish<S: Store>(&mut self, library: &mut Library<S>) -> Result<(), CliError> {
        self.store(library)
    }

    fn store<S: Store>(&mut self, library: &mut Library<S>) -> Result<(), CliError> {
        let Some(handle) = self.running.take() else { return Ok(()) };
        // A panic in the build is a bug: carry it on rather than dress it as an error.
        let merged = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        library.apply_merge(merged)?;
        Ok(())
    }
}
