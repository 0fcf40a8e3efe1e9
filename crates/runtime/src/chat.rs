//! Chat prompts: a model's own `tokenizer.chat_template` (Jinja) rendered with `minijinja`.
//!
//! Templates are written for Python's Jinja, so Python string methods (`.strip()`,
//! `.startswith()`, …) come from `minijinja-contrib`'s pycompat layer, and
//! `raise_exception` is provided as templates expect. A model without a template gets
//! ChatML (`<|im_start|>role\n…<|im_end|>\n`), the format of Qwen and SmolLM.

use std::fmt;

use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};

/// One chat turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message with a role.
    pub fn new(role: &str, content: &str) -> Self {
        ChatMessage { role: role.to_owned(), content: content.to_owned() }
    }
}

/// Why a chat prompt could not be rendered.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChatError {
    /// The template is not valid Jinja, or failed while rendering (the message says where).
    Template {
        /// What minijinja said.
        message: String,
    },
    /// Rendering took more steps than the limit ([`ChatTemplate::with_step_limit`]): the
    /// template loops too long to be a chat template.
    StepLimit {
        /// The limit, in template instructions.
        steps: u64,
    },
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatError::Template { message } => write!(f, "chat template: {message}"),
            ChatError::StepLimit { steps } => {
                write!(f, "chat template: rendering took more than {steps} steps (the template step limit), so it was stopped")
            }
        }
    }
}

impl std::error::Error for ChatError {}

/// ChatML, the fallback template.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Template instructions one render may take by default: real chat templates take a few
/// thousand per message; a template that loops for ever stops here in well under a second.
pub const DEFAULT_RENDER_STEPS: u64 = 2_000_000;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    steps: u64,
    bos: String,
    eos: String,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

fn template_err(e: JinjaError) -> ChatError {
    let mut message = e.to_string();
    if let Some(line) = e.line() {
        message = format!("{message} (line {line})");
    }
    ChatError::Template { message }
}

impl ChatTemplate {
    /// Compile `source` (or ChatML when `None`); `bos`/`eos` are the texts templates see as
    /// `bos_token`/`eos_token`.
    pub fn new(source: Option<&str>, bos: &str, eos: &str) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", source.unwrap_or(CHATML).to_owned()).map_err(template_err)?;
        let mut t = ChatTemplate { env, steps: 0, bos: bos.to_owned(), eos: eos.to_owned() };
        t.set_step_limit(DEFAULT_RENDER_STEPS);
        Ok(t)
    }

    /// The template with at most `steps` template instructions per render (a model file's
    /// template is untrusted input: this bounds the time it can take). Recursion is bounded
    /// by minijinja itself.
    pub fn with_step_limit(mut self, steps: u64) -> Self {
        self.set_step_limit(steps);
        self
    }

    fn set_step_limit(&mut self, steps: u64) {
        self.steps = steps;
        self.env.set_fuel(Some(steps));
    }

    /// The prompt text for `messages`; with `add_generation_prompt`, it ends where the
    /// assistant's reply begins.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String, ChatError> {
        let tmpl = self.env.get_template("chat").map_err(template_err)?;
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos,
            eos_token => self.eos,
        })
        .map_err(|e| if e.kind() == ErrorKind::OutOfFuel { ChatError::StepLimit { steps: self.steps } } else { template_err(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_fallback() {
        let t = ChatTemplate::new(None, "", "").unwrap();
        let p = t.render(&[ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn a_template_that_loops_for_ever_stops_at_the_step_limit() {
        let src = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}";
        let t = ChatTemplate::new(Some(src), "", "").unwrap().with_step_limit(100_000);
        let start = std::time::Instant::now();
        let err = t.render(&[ChatMessage::new("user", "x")], false).unwrap_err();
        assert!(matches!(err, ChatError::StepLimit { steps: 100_000 }), "{err}");
        assert!(err.to_string().contains("step limit"), "{err}");
        assert!(start.elapsed().as_secs_f64() < 5.0);
        // The default limit stops it too, and leaves real templates alone.
        let t = ChatTemplate::new(Some(src), "", "").unwrap();
        assert!(matches!(t.render(&[ChatMessage::new("user", "x")], false), Err(ChatError::StepLimit { .. })));
        let many: Vec<ChatMessage> = (0..200).map(|i| ChatMessage::new("user", &format!("message {i}"))).collect();
        assert!(ChatTemplate::new(None, "", "").unwrap().render(&many, true).is_ok());
    }

    #[test]
    fn python_methods_and_exceptions() {
        let src =
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}{{ messages[0]['content'].strip() }}";
        let t = ChatTemplate::new(Some(src), "", "").unwrap();
        assert_eq!(t.render(&[ChatMessage::new("system", "  hi  ")], false).unwrap(), "hi");
        let err = t.render(&[ChatMessage::new("user", "x")], false).unwrap_err();
        assert!(err.to_string().contains("system first"), "{err}");
    }

    #[test]
    fn broken_template_is_an_error() {
        assert!(ChatTemplate::new(Some("{% for %}"), "", "").is_err());
    }
}
