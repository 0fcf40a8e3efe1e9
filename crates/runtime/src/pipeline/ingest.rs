//! A document into a library: its memory written (by the reader model, or a baseline
//! chunker) and added atomically.
//!
//! The one place this happens, called by [`crate::session::Session::add`] and
//! [`crate::session::Session::write_memory`] (the front ends go through the session), so
//! the CLI, the npm package and the tests ingest the same way; each front end only reads
//! files (or receives text) and shows progress.

use crate::Error;

use docmem_core::chunk::{chunk_with, ChunkOptions, ChunkerKind};
use docmem_core::library::{Library, Store};
use docmem_core::reader::{ExtractSettings, MemoryDraft, Progress, ReaderModel};
use docmem_core::{Document, DocumentMemory, Embedder, Scorer};

/// How a document becomes a memory.
pub enum MemoryMethod<'a> {
    /// MoM: the reader model writes outline, cores and chunks; candidates are scored by
    /// `scorer` (default: the reader). Either may be a local model
    /// ([`crate::lm::LmReader`]) or a hosted one ([`crate::remote::RemoteModel`]).
    Mom {
        /// The reader.
        reader: Box<dyn ReaderModel + 'a>,
        /// Another model to score candidates with.
        scorer: Option<Box<dyn Scorer + 'a>>,
        /// Sampling, windows, fallback.
        settings: ExtractSettings,
    },
    /// A baseline chunker: plain chunks, no outline or cores.
    Chunker {
        /// Which.
        kind: ChunkerKind,
        /// Its sizes.
        options: ChunkOptions,
    },
}

impl MemoryMethod<'_> {
    /// The baseline chunker `kind` at its passage sizes (`docmem_core::chunk::passage_sizes`).
    pub fn chunker(kind: ChunkerKind) -> Self {
        let (size, overlap) = docmem_core::chunk::passage_sizes(kind, None, None);
        MemoryMethod::Chunker { kind, options: ChunkOptions { size, overlap } }
    }
}

/// What an add did.
#[derive(Debug)]
pub struct Ingested {
    /// The memory (read back from the library when the document was already there).
    pub memory: DocumentMemory,
    /// False when the same content was already in the library (nothing was done).
    pub added: bool,
}

/// The most bytes of text a document may have by default: 16 MiB, several times the text
/// of the longest books (a 1,500-page novel is about 3 MB), and small enough that a
/// library holding a few such documents (text, memory, JSON and index, several copies of
/// the text in all) stays well inside a wasm page's 4 GiB of memory.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Limits on what an add takes (`AddOptions::limits`); each refusal is a typed error naming its
/// limit, and leaves the library as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestLimits {
    /// Most bytes of document text (UTF-8); longer documents are refused with
    /// [`Error::DocumentTooLarge`]. Default [`DEFAULT_MAX_DOCUMENT_BYTES`].
    pub max_document_bytes: usize,
}

impl Default for IngestLimits {
    fn default() -> Self {
        IngestLimits { max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES }
    }
}

impl IngestLimits {
    /// These limits with at most `bytes` bytes of document text.
    pub fn with_max_document_bytes(mut self, bytes: usize) -> Self {
        self.max_document_bytes = bytes;
        self
    }
}

/// Write `doc`'s memory with `method` and add it to `library` (atomically: on any error,
/// or a cancel from `progress`, the library is as it was). A document whose content is
/// already there is not read again. The default [`IngestLimits`] apply.
#[cfg(test)]
pub(crate) async fn ingest<S: Store>(
    library: &mut Library<S>,
    doc: &Document,
    method: &mut MemoryMethod<'_>,
    embedder: &mut dyn Embedder,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Ingested, Error> {
    ingest_with_limits(library, doc, method, embedder, progress, &IngestLimits::default()).await
}

/// [`ingest`] under `limits`: a document past one is refused before any work is done.
#[cfg(test)]
pub(crate) async fn ingest_with_limits<S: Store>(
    library: &mut Library<S>,
    doc: &Document,
    method: &mut MemoryMethod<'_>,
    embedder: &mut dyn Embedder,
    progress: &mut dyn FnMut(&Progress) -> bool,
    limits: &IngestLimits,
) -> Result<Ingested, Error> {
    ingest_into(library, docmem_core::library::DEFAULT_COLLECTION, doc, method, embedder, progress, limits).await
}

/// Write `doc`'s memory with `method` and add it to `library` under `limits` (a document
/// past one is refused before any work is done), into the named collection (routing's
/// corpora), atomically: on any error, or a cancel from `progress`, the library is as it
/// was. A document already in the library stays in its collection and is not read again.
pub(crate) async fn ingest_into<S: Store>(
    library: &mut Library<S>,
    collection: &str,
    doc: &Document,
    method: &mut MemoryMethod<'_>,
    embedder: &mut dyn Embedder,
    progress: &mut dyn FnMut(&Progress) -> bool,
    limits: &IngestLimits,
) -> Result<Ingested, Error> {
    // Before any model work: a refused name must not cost a reading.
    let collection = docmem_core::library::check_collection_name(collection)?;
    if doc.text.trim().is_empty() {
        return Err(Error::EmptyDocument { title: doc.title.clone() });
    }
    if doc.text.len() > limits.max_document_bytes {
        return Err(Error::DocumentTooLarge { title: doc.title.clone(), bytes: doc.text.len(), limit: limits.max_document_bytes });
    }
    if library.contains(doc.id) {
        return Ok(Ingested { memory: library.get(doc.id)?.1.clone(), added: false });
    }
    let memory = write_memory_resuming(library, doc, method, embedder, progress).await?;
    // Embedded ahead where the embedder must be awaited (a GPU encoder in a browser); a
    // failed add changes nothing, so it may run again. The add drops the draft.
    let added = docmem_core::embed_ahead::ahead(embedder, |e| library.add_to(collection, doc, &memory, e)).await?;
    Ok(Ingested { memory, added })
}

/// Write the memory of document `id`, already in `library` (added with plain chunks so it
/// was searchable at once), with `method` (a reader), and swap it in for the memory it
/// has, in one commit ([`Library::replace_memory`]): searches see the old chunks until the
/// new memory lands. Returns the new memory, or `None` when the document was removed while
/// the reader worked (nothing is stored then). A cancel from `progress` or any error
/// leaves the library as it was.
pub(crate) async fn rewrite_memory<S: Store>(
    library: &mut Library<S>,
    id: docmem_core::DocId,
    method: &mut MemoryMethod<'_>,
    embedder: &mut dyn Embedder,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Option<DocumentMemory>, Error> {
    let doc = library.get(id)?.0.clone();
    let memory = write_memory_resuming(library, &doc, method, embedder, progress).await?;
    let replaced = docmem_core::embed_ahead::ahead(embedder, |e| library.replace_memory(&memory, e)).await?;
    Ok(replaced.then_some(memory))
}

/// `doc`'s memory by `method`, not yet stored. A reader's windows are kept in `library`
/// as they are read: a reading stopped by a crash or a cancel goes on from its last
/// finished window the next time (see `docmem_core::reader::MemoryDraft::resume`). The
/// draft goes when the memory is stored (the add or the replacement removes it).
pub(crate) async fn write_memory_resuming<S: Store>(
    library: &mut Library<S>,
    doc: &Document,
    method: &mut MemoryMethod<'_>,
    embedder: &mut dyn Embedder,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<DocumentMemory, Error> {
    let (reader, scorer, settings) = match method {
        MemoryMethod::Chunker { kind, options } => {
            let (kind, options) = (*kind, *options);
            let spans = docmem_core::embed_ahead::ahead(embedder, |e| chunk_with(kind, &doc.text, options, Some(e))).await?;
            return Ok(DocumentMemory::from_spans(doc, &spans, kind.name()));
        }
        MemoryMethod::Mom { reader, scorer, settings } => (reader, scorer, settings),
    };
    let mut draft = MemoryDraft::plan(doc, reader.as_mut(), settings)?;
    if let Some(stored) = library.stored_draft(doc.id)? {
        draft.resume(&stored, doc, settings);
    }
    let mut cancelled = false;
    while !draft.is_complete() {
        let read = draft
            .read_next(doc, reader.as_mut(), scorer.as_mut().map(|s| s.as_mut() as &mut dyn Scorer), settings, &mut |p| {
                let go_on = progress(p);
                cancelled |= !go_on;
                go_on
            })
            .await;
        match read {
            Err(_) if cancelled => return Err(Error::Cancelled),
            Err(e) => return Err(e.into()),
            // A draft not stored costs only a re-reading after a crash: the memory goes on.
            Ok(()) => drop(library.save_draft(doc.id, &draft.to_bytes(doc, settings))),
        }
    }
    let memory = draft.finish(doc, settings);
    progress(&draft.progress());
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use docmem_core::library::{LibrarySettings, MemStore};
    use docmem_core::local_future::{boxed, LocalBoxFuture};
    use docmem_core::reader::{Generated, SampleSpec};
    use docmem_core::ErrorCode;
    use docmem_core::HashingEmbedder;

    #[test]
    fn a_chunker_memory_goes_in_once() {
        let mut embedder = HashingEmbedder::new(64);
        let settings = LibrarySettings::new(embedder.name(), embedder.dim());
        let mut library = Library::open(MemStore::default(), &settings).unwrap();
        let doc = Document::new("bells.txt", "The bell rang at noon. It rang again at dusk, twice.");
        let mut method: MemoryMethod<'_> =
            MemoryMethod::Chunker { kind: ChunkerKind::Sentence, options: ChunkOptions { size: Some(8), overlap: Some(0) } };
        let first = crate::block_on(ingest(&mut library, &doc, &mut method, &mut embedder, &mut |_| true)).unwrap();
        assert!(first.added && !first.memory.scenarios.is_empty());
        let again = crate::block_on(ingest(&mut library, &doc, &mut method, &mut embedder, &mut |_| true)).unwrap();
        assert!(!again.added);
        assert_eq!(again.memory, first.memory);
    }

    /// A reader that always answers the numbered prompt the same way: one scenario per two
    /// sentences, each with a core that names its first sentence's number.
    struct ScriptedReader;

    impl Scorer for ScriptedReader {
        fn continuation_logprobs<'a>(
            &'a mut self,
            pairs: &'a [(&'a str, &'a str)],
        ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
            boxed(async move { Ok(pairs.iter().map(|(_, a)| vec![-1.0; a.split_whitespace().count().max(1)]).collect()) })
        }
        fn next_token_logprobs<'a>(&'a mut self, _: &'a str, c: &'a [&'a str]) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
            boxed(async move { Ok(vec![-1.0; c.len()]) })
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
            Ok(text.split_whitespace().count())
        }
    }

    impl ReaderModel for ScriptedReader {
        fn name(&self) -> String {
            "scripted-reader".into()
        }
        fn context_tokens(&self) -> usize {
            4096
        }
        fn chat_overhead_tokens(&mut self) -> usize {
            4
        }
        fn generate<'a>(
            &'a mut self,
            user_turn: &'a str,
            specs: &'a [SampleSpec],
            _max_tokens: usize,
            after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
        ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
            boxed(async move {
                let doc = user_turn.rsplit("Document:\n").next().unwrap_or("");
                let units = doc.lines().filter(|l| l.starts_with('[')).count();
                let mut text = String::from("<outline>\n");
                let starts: Vec<usize> = (1..=units).step_by(2).collect();
                for k in &starts {
                    text += &format!("Part {k}\n");
                }
                text += "</outline>\n";
                for &k in &starts {
                    text += &format!("<scenario>\n<chunk>{k}-{}</chunk>\nThe point of part {k}\n</scenario>\n", (k + 1).min(units));
                }
                let mut out = Vec::new();
                for i in 0..specs.len() {
                    let g = Generated { text: text.clone(), tokens: 50 };
                    if !after_each(i + 1, &g) {
                        return Err(docmem_core::Error::Cancelled);
                    }
                    out.push(g);
                }
                Ok(out)
            })
        }
    }

    #[test]
    fn a_readers_memory_replaces_the_chunks_a_document_went_in_with() {
        let mut embedder = HashingEmbedder::new(64);
        let settings = LibrarySettings::new(embedder.name(), embedder.dim());
        let mut library = Library::open(MemStore::default(), &settings).unwrap();
        let doc = Document::new(
            "bells.txt",
            "The bell rang at noon. It rang again at dusk, twice. The tower was built in 1310. It fell in a storm in 1703.",
        );
        let mut chunks: MemoryMethod<'_> = MemoryMethod::Chunker { kind: ChunkerKind::Sentence, options: ChunkOptions::default() };
        crate::block_on(ingest(&mut library, &doc, &mut chunks, &mut embedder, &mut |_| true)).unwrap();
        let before = library.get(doc.id).unwrap().1.clone();
        assert!(!before.has_summaries());

        // Cancelled half-way: the chunks stay.
        let mut reader = MemoryMethod::Mom {
            reader: Box::new(ScriptedReader),
            scorer: None,
            settings: ExtractSettings { samples: 1, ..ExtractSettings::default() },
        };
        let e = crate::block_on(rewrite_memory(&mut library, doc.id, &mut reader, &mut embedder, &mut |_| false)).unwrap_err();
        assert!(matches!(e, Error::Cancelled), "{e}");
        assert_eq!(library.get(doc.id).unwrap().1, &before);

        let memory = crate::block_on(rewrite_memory(&mut library, doc.id, &mut reader, &mut embedder, &mut |_| true)).unwrap().unwrap();
        assert!(memory.has_summaries() && memory.provenance.reader.starts_with("scripted-reader"), "{memory:?}");
        assert_eq!(library.get(doc.id).unwrap().1, &memory);
        let entry = library.documents()[0].clone();
        assert!(entry.reader.starts_with("scripted-reader") && entry.fallback.is_none(), "{entry:?}");
        let hits = library.search("when did the tower fall", &mut embedder, &docmem_core::retrieve::SearchParams::default()).unwrap();
        assert!(library.passage(&hits[0]).unwrap().core.starts_with("The point of part"));

        // Removed while the reader worked: nothing comes back.
        library.remove(doc.id).unwrap();
        let e = crate::block_on(rewrite_memory(&mut library, doc.id, &mut reader, &mut embedder, &mut |_| true)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound, "{e}");
    }

    /// [`ScriptedReader`] that counts the windows it is asked to read and fails the one
    /// numbered `crash_on` (from 1), as a process killed mid-reading would stop.
    struct CrashingReader {
        inner: ScriptedReader,
        asked: std::rc::Rc<std::cell::Cell<usize>>,
        crash_on: usize,
    }

    impl Scorer for CrashingReader {
        fn continuation_logprobs<'a>(
            &'a mut self,
            pairs: &'a [(&'a str, &'a str)],
        ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
            self.inner.continuation_logprobs(pairs)
        }
        fn next_token_logprobs<'a>(&'a mut self, p: &'a str, c: &'a [&'a str]) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
            self.inner.next_token_logprobs(p, c)
        }
        fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
            self.inner.count_tokens(text)
        }
    }

    impl ReaderModel for CrashingReader {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn context_tokens(&self) -> usize {
            // Windows of about 120 words.
            300
        }
        fn chat_overhead_tokens(&mut self) -> usize {
            4
        }
        fn generate<'a>(
            &'a mut self,
            user_turn: &'a str,
            specs: &'a [SampleSpec],
            max_tokens: usize,
            after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
        ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
            self.asked.set(self.asked.get() + 1);
            if self.asked.get() == self.crash_on {
                return boxed(async move { Err(docmem_core::Error::ModelFailed { message: "killed".into() }) });
            }
            self.inner.generate(user_turn, specs, max_tokens, after_each)
        }
    }

    #[test]
    fn a_reading_stopped_midway_goes_on_from_its_last_window_the_next_time() {
        let mut embedder = HashingEmbedder::new(64);
        let settings = LibrarySettings::new(embedder.name(), embedder.dim());
        let text: String = (0..40).map(|i| format!("Sentence {i} tells of the bell and its tower at some length here. ")).collect();
        let doc = Document::new("bells.txt", text);
        let extract = ExtractSettings { samples: 0, overlap_tokens: 20, ..ExtractSettings::default() };
        let reader = |asked: &std::rc::Rc<std::cell::Cell<usize>>, crash_on| MemoryMethod::Mom {
            reader: Box::new(CrashingReader { inner: ScriptedReader, asked: asked.clone(), crash_on }),
            scorer: None,
            settings: extract.clone(),
        };
        // One reading, never stopped: the memory to expect, and how many windows it takes.
        let whole_asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut whole = Library::open(MemStore::default(), &settings).unwrap();
        let expected = crate::block_on(ingest(&mut whole, &doc, &mut reader(&whole_asked, 0), &mut embedder, &mut |_| true)).unwrap();
        let windows = whole_asked.get();
        assert!(windows >= 4, "{windows} windows");

        // Stopped while reading the third window: two are kept with the library.
        let mut library = Library::open(MemStore::default(), &settings).unwrap();
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let e = crate::block_on(ingest(&mut library, &doc, &mut reader(&asked, 3), &mut embedder, &mut |_| true)).unwrap_err();
        assert!(e.to_string().contains("killed"), "{e}");
        assert!(library.documents().is_empty());
        assert!(library.stored_draft(doc.id).unwrap().is_some());

        // The next time (the library reopened, as after a crash) starts at the third window.
        let mut library = Library::open(library.into_store(), &settings).unwrap();
        let again = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut first_window = None;
        let done = crate::block_on(ingest(&mut library, &doc, &mut reader(&again, 0), &mut embedder, &mut |p| {
            first_window.get_or_insert(p.window);
            true
        }))
        .unwrap();
        assert_eq!(again.get(), windows - 2, "the two windows read before are not read again");
        assert_eq!(first_window, Some(3), "progress starts at the third window");
        assert_eq!(done.memory.scenarios, expected.memory.scenarios);
        assert_eq!(done.memory.outline, expected.memory.outline);
        assert_eq!(library.stored_draft(doc.id).unwrap(), None, "the add took the draft away");
    }

    #[test]
    fn an_empty_document_is_refused_with_its_code_and_the_library_is_unchanged() {
        let mut embedder = HashingEmbedder::new(64);
        let settings = LibrarySettings::new(embedder.name(), embedder.dim());
        let mut library = Library::open(MemStore::default(), &settings).unwrap();
        let mut method: MemoryMethod<'_> = MemoryMethod::Chunker { kind: ChunkerKind::Sentence, options: ChunkOptions::default() };
        let e = crate::block_on(ingest(&mut library, &Document::new("blank.txt", " \n\t "), &mut method, &mut embedder, &mut |_| true))
            .unwrap_err();
        assert!(matches!(&e, Error::EmptyDocument { title } if title == "blank.txt"), "{e}");
        assert_eq!(e.code(), ErrorCode::BadDocument);
        assert!(library.documents().is_empty());
    }

    #[test]
    fn a_document_over_the_size_limit_is_refused_naming_the_limit_and_the_library_is_unchanged() {
        let mut embedder = HashingEmbedder::new(64);
        let settings = LibrarySettings::new(embedder.name(), embedder.dim());
        let mut library = Library::open(MemStore::default(), &settings).unwrap();
        let mut method: MemoryMethod<'_> = MemoryMethod::Chunker { kind: ChunkerKind::Sentence, options: ChunkOptions::default() };
        let doc = Document::new("long.txt", "The bell rang at noon. ".repeat(10));
        let limits = IngestLimits::default().with_max_document_bytes(100);
        let e = crate::block_on(ingest_with_limits(&mut library, &doc, &mut method, &mut embedder, &mut |_| true, &limits)).unwrap_err();
        assert!(matches!(e, Error::DocumentTooLarge { bytes: 230, limit: 100, .. }), "{e}");
        assert!(e.to_string().contains("max_document_bytes"), "{e}");
        assert_eq!(e.code(), ErrorCode::BadDocument);
        assert!(library.documents().is_empty());
        // At the limit it goes in; the default limit is the documented one.
        let limits = IngestLimits::default().with_max_document_bytes(230);
        assert!(crate::block_on(ingest_with_limits(&mut library, &doc, &mut method, &mut embedder, &mut |_| true, &limits)).unwrap().added);
        assert_eq!(IngestLimits::default().max_document_bytes, DEFAULT_MAX_DOCUMENT_BYTES);
    }
}
