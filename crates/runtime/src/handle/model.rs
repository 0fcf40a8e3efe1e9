//! [`ModelHandle`]: a language model on the CPU, on WebGPU or on a host, in every role.

use std::rc::Rc;

use docmem_core::reader::{ExtractSettings, ReaderModel};
use docmem_core::text_model::TextModel;
use docmem_core::Scorer;

use crate::answerer::Answerer;
use crate::lm::{Backend, Lm, LmContext, LmReader, LmText, WorkDone};
use crate::pipeline::ingest::MemoryMethod;
use crate::remote::{RemoteModel, Transport};

/// Where a [`ModelHandle`]'s model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelBackend {
    /// The CPU kernels (native SIMD, or wasm's).
    Cpu,
    /// A GPU through WebGPU.
    Gpu,
    /// A hosted model through an OpenAI-compatible API.
    Hosted,
}

impl ModelBackend {
    /// `cpu`, `gpu` or `hosted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelBackend::Cpu => "cpu",
            ModelBackend::Gpu => "gpu",
            ModelBackend::Hosted => "hosted",
        }
    }
}

/// A language model wherever it runs, shared cheaply (clones share the model).
pub struct ModelHandle<T: Transport> {
    /// What the model is known by: a file's name for a local one (provenance, prompt
    /// choice), `remote:NAME` for a hosted one.
    name: String,
    runs: Runs<T>,
}

enum Runs<T: Transport> {
    Cpu(Rc<LmContext>),
    #[cfg(feature = "gpu")]
    Gpu(Rc<LmContext<crate::gpu::GpuTransformer>>),
    Hosted(RemoteModel<T>),
}

impl<T: Transport + Clone> Clone for ModelHandle<T> {
    fn clone(&self) -> Self {
        let runs = match &self.runs {
            Runs::Cpu(lm) => Runs::Cpu(lm.clone()),
            #[cfg(feature = "gpu")]
            Runs::Gpu(lm) => Runs::Gpu(lm.clone()),
            Runs::Hosted(m) => Runs::Hosted(m.clone()),
        };
        ModelHandle { name: self.name.clone(), runs }
    }
}

/// The role `$role` of a local model's context `$lm`, whichever backend it is on (the
/// CPU's and the GPU's `LmContext` are different types with the same roles).
macro_rules! local {
    ($self:expr, $lm:ident => $role:expr, $hosted:ident => $other:expr) => {
        match &$self.runs {
            Runs::Cpu($lm) => $role,
            #[cfg(feature = "gpu")]
            Runs::Gpu($lm) => $role,
            Runs::Hosted($hosted) => $other,
        }
    };
}

impl<T: Transport + Clone> ModelHandle<T> {
    /// A model on the CPU with what it keeps (its context), known as `name`: every role
    /// shares the context, so a question's kept prompt and a memory's stopped window
    /// outlive the calls that made them.
    pub fn on_cpu(context: impl Into<Rc<LmContext>>, name: impl Into<String>) -> Self {
        ModelHandle { name: name.into(), runs: Runs::Cpu(context.into()) }
    }

    /// A model on WebGPU with its context, known as `name`.
    #[cfg(feature = "gpu")]
    pub fn on_gpu(context: impl Into<Rc<LmContext<crate::gpu::GpuTransformer>>>, name: impl Into<String>) -> Self {
        ModelHandle { name: name.into(), runs: Runs::Gpu(context.into()) }
    }

    /// A hosted model, known as `remote:` and its name on the host.
    pub fn hosted(model: RemoteModel<T>) -> Self {
        ModelHandle { name: format!("remote:{}", model.model()), runs: Runs::Hosted(model) }
    }

    /// What the model is known by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This handle with another name (a local model's file name, once known).
    pub fn renamed(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Where it runs.
    pub fn backend(&self) -> ModelBackend {
        local!(self, _lm => match self.runs { Runs::Cpu(_) => ModelBackend::Cpu, _ => ModelBackend::Gpu }, _m => ModelBackend::Hosted)
    }

    /// Whether its futures wait on the event loop (WebGPU's read-backs, a host's replies):
    /// false on the CPU, whose futures are ready when first polled.
    pub fn needs_await(&self) -> bool {
        self.backend() != ModelBackend::Cpu
    }

    /// The model on the CPU, where it runs there (for what only that backend offers, such
    /// as its logits for a parity check).
    pub fn cpu(&self) -> Option<&Lm> {
        match &self.runs {
            Runs::Cpu(context) => Some(context.model()),
            _ => None,
        }
    }

    /// The model on WebGPU, where it runs there.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> Option<&Lm<crate::gpu::GpuTransformer>> {
        match &self.runs {
            Runs::Gpu(context) => Some(context.model()),
            _ => None,
        }
    }

    /// The model as a reader of documents (and the scorer of its own candidates).
    pub fn reader(&self) -> Box<dyn ReaderModel + '_> {
        local!(self, lm => Box::new(LmReader::new(lm, self.name.clone())), m => Box::new(m.clone()))
    }

    /// The model as a reader that writes memories in the background: `interrupt` is asked
    /// between prompt pieces and before every decoding step, and `true` stops the window
    /// there, the model keeping what it read and wrote so that the same window asked for
    /// again goes on where it stopped; `on_work` hears how far the window has got. `None`
    /// for a hosted model, which can be neither stopped midway nor resumed.
    pub fn interruptible_reader<'a>(
        &'a self,
        interrupt: &'a dyn Fn() -> bool,
        on_work: &'a dyn Fn(&WorkDone),
    ) -> Option<Box<dyn ReaderModel + 'a>> {
        fn hooked<'a, B: Backend>(
            lm: &'a LmContext<B>,
            name: &str,
            interrupt: &'a dyn Fn() -> bool,
            on_work: &'a dyn Fn(&WorkDone),
        ) -> Box<dyn ReaderModel + 'a> {
            let mut reader = LmReader::new(lm, name);
            reader.interrupt = Some(interrupt);
            reader.on_work = Some(on_work);
            Box::new(reader)
        }
        local!(self, lm => Some(hooked(lm, &self.name, interrupt, on_work)), _m => None)
    }

    /// The model as a scorer of another reader's candidates.
    pub fn scorer(&self) -> Box<dyn Scorer + '_> {
        local!(self, lm => Box::new(LmReader::new(lm, self.name.clone())), m => Box::new(m.clone()))
    }

    /// The model as the writer of answers.
    pub fn answerer(&self) -> &dyn Answerer {
        local!(self, lm => &**lm, m => m)
    }

    /// The model as a writer of short replies (clues, sub-queries, routing's judgements).
    pub fn text(&self) -> Box<dyn TextModel + '_> {
        local!(self, lm => Box::new(LmText::new(lm.model())), m => Box::new(m.clone()))
    }

    /// The model as a session's ask uses it: the answerer, and the writer of clues and
    /// routing's replies, under its name.
    pub fn answering(&self) -> crate::session::Answering<'_> {
        crate::session::Answering { answerer: self.answerer(), writer: self.text(), name: &self.name }
    }

    /// MoM ingest with this model as the reader and `scorer` (`None`: the reader itself)
    /// scoring the candidates.
    pub fn memory_method<'a>(&'a self, scorer: Option<&'a ModelHandle<T>>, settings: ExtractSettings) -> MemoryMethod<'a> {
        MemoryMethod::Mom { reader: self.reader(), scorer: scorer.map(ModelHandle::scorer), settings }
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use super::*;
    use crate::answerer::ReplyOptions;
    use crate::gguf::testing::{tiny_lm, TinyTokenizer};
    use crate::lm::LoadOptions;
    use crate::remote::testing::{reply, FakeTransport};
    use crate::source::MemorySource;

    type Handle = ModelHandle<Rc<FakeTransport>>;

    fn tiny() -> Lm {
        Lm::load_from(&MemorySource::new(tiny_lm("qwen2", TinyTokenizer::Gpt2, None)), &LoadOptions::default()).unwrap()
    }

    fn reply_text(answerer: &dyn Answerer) -> String {
        let options = ReplyOptions { max_tokens: 6, probe_decides: false };
        crate::block_on(answerer.reply("Who rang the bell?", options, &mut |_| ControlFlow::Continue(()))).unwrap().text
    }

    #[test]
    fn a_model_on_the_cpu_answers_through_its_handle_as_it_does_itself() {
        let handle = Handle::on_cpu(LmContext::new(tiny()), "tiny.gguf");
        assert_eq!((handle.name(), handle.backend(), handle.needs_await()), ("tiny.gguf", ModelBackend::Cpu, false));
        assert!(handle.cpu().is_some());
        assert!(handle.answerer().reads_ahead(), "a local model keeps what it reads ahead");
        assert_eq!(reply_text(handle.answerer()), reply_text(&LmContext::new(tiny())));
        assert_eq!(handle.reader().name(), "tiny.gguf");
        let clone = handle.clone().renamed("other.gguf");
        assert!(std::ptr::eq(clone.cpu().unwrap(), handle.cpu().unwrap()), "clones share the model");
        assert_eq!(clone.name(), "other.gguf");
    }

    #[test]
    fn a_hosted_model_is_named_remote_and_its_roles_go_to_the_host() {
        let transport = Rc::new(FakeTransport::new(|_, _| reply(400, "{}")));
        let handle = Handle::hosted(RemoteModel::new(transport.clone(), "qwen-7b"));
        assert_eq!((handle.name(), handle.backend(), handle.needs_await()), ("remote:qwen-7b", ModelBackend::Hosted, true));
        assert!(handle.cpu().is_none());
        assert!(!handle.answerer().reads_ahead(), "a hosted model reads nothing ahead, so nothing is searched for it");
        let options = ReplyOptions { max_tokens: 6, probe_decides: false };
        let failed = crate::block_on(handle.answerer().reply("Who?", options, &mut |_| ControlFlow::Continue(())));
        assert!(failed.is_err(), "the host's 400 is the answer's error");
        assert!(
            transport.requests().iter().any(|(path, body)| path.contains("chat") && body.contains("qwen-7b")),
            "{:?}",
            transport.requests()
        );
    }
}
