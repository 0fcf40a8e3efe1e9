//! Chat prompts: a model's own `tokenizer.chat_template` (Jinja) rendered with `minijinja`.
//!
//! Templates are written for Python's Jinja, so Python string methods (`.strip()`,
//! `.startswith()`, …) come from `minijinja-contrib`'s pycompat layer, and
//! `raise_exception` is provided as templates expect. Blocks are trimmed as Hugging Face's
//! `apply_chat_template` trims them (`trim_blocks`, `lstrip_blocks`), so a prompt is the one
//! the model was trained on. A model without a template gets ChatML
//! (`<|im_start|>role\n…<|im_end|>\n`), the format of Qwen and SmolLM.
//!
//! A template is untrusted code from a model file. Its render is bounded three ways: steps
//! (minijinja's fuel), bytes made (a meter threaded through its compiled instructions, see
//! [`meter`] and [`rewrite`]) and bytes scanned; each refusal is an [`Error`] naming the
//! limit.

mod constants;
mod meter;
mod rewrite;

use std::fmt;
use std::sync::{Arc, Mutex};

use minijinja::machinery::{get_compiled_template, make_string_output, parse, Vm, WhitespaceConfig};
use minijinja::value::Value;
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};

use meter::{Gate, Meter, Tripped};

use crate::Error;

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

/// ChatML, the fallback template.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Template instructions one render may take by default: real chat templates take a few
/// thousand per message; a template that loops for ever stops here in well under a second.
pub const DEFAULT_RENDER_STEPS: u64 = 2_000_000;

/// Bytes one render may make by default, beyond [`RENDER_BYTES_PER_INPUT_BYTE`] per byte of
/// its messages: real templates make a few times their messages' size.
pub const DEFAULT_RENDER_MEMORY: u64 = 32 << 20;

/// Bytes a render may make per byte of its messages, on top of the memory setting (so a long
/// document is never refused for its length alone).
pub const RENDER_BYTES_PER_INPUT_BYTE: u64 = 32;

/// Bytes a render may read through its operations per byte it may make.
const SCAN_PER_MEMORY_BYTE: u64 = 1;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    steps: u64,
    memory: u64,
    /// Instructions of the metered template per instruction of the template (rounded up):
    /// the gates' instructions use fuel too.
    expansion: u64,
    meter: Arc<Meter>,
    /// One render at a time per template: the gates share one meter.
    rendering: Mutex<()>,
    bos: String,
    eos: String,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

fn template_err(e: JinjaError) -> Error {
    let mut message = e.to_string();
    if let Some(line) = e.line() {
        message = format!("{message} (line {line})");
    }
    Error::Template { message }
}

fn unsupported(what: rewrite::Unsupported) -> Error {
    Error::Template { message: format!("a chat template may not use {}", what.0) }
}

impl ChatTemplate {
    /// Compile `source` (or ChatML when `None`); `bos`/`eos` are the texts templates see as
    /// `bos_token`/`eos_token`.
    pub fn new(source: Option<&str>, bos: &str, eos: &str) -> Result<Self, Error> {
        let source = source.unwrap_or(CHATML);
        rewrite::check_source(source).map_err(unsupported)?;
        let whitespace = WhitespaceConfig { trim_blocks: true, lstrip_blocks: true, keep_trailing_newline: false };
        let parsed = parse(source, "chat", Default::default(), whitespace).map_err(template_err)?;
        if let Some(line) = constants::huge_constant(&parsed, constants::MAX_CONSTANT_BYTES) {
            return Err(Error::Template {
                message: format!(
                    "a constant expression on line {line} would be computed into more than {} bytes when the template is compiled (the template constant limit)",
                    constants::MAX_CONSTANT_BYTES
                ),
            });
        }
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
        });
        // Neither is a chat template's, and both print a whole value before any gate sees
        // the result (`pprint` indents every nesting level on every line).
        env.remove_global("debug");
        env.remove_filter("pprint");
        let meter = Arc::new(Meter::default());
        for (name, gate) in Gate::all(&meter) {
            env.add_global(name, Value::from_object(gate));
        }
        env.add_template_owned("chat", source.to_owned()).map_err(template_err)?;
        let mut t = ChatTemplate {
            env,
            steps: 0,
            expansion: 1,
            memory: DEFAULT_RENDER_MEMORY,
            meter,
            rendering: Mutex::new(()),
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        };
        // Refuse now what the metered render could not run; learn how many instructions the
        // gates add, so that the step limit counts the template's own.
        t.expansion = {
            let tmpl = t.env.get_template("chat").map_err(template_err)?;
            let compiled = get_compiled_template(&tmpl);
            if !compiled.blocks.is_empty() {
                return Err(unsupported(rewrite::Unsupported("`{% block %}`")));
            }
            let metered = rewrite::metered(&compiled.instructions).map_err(unsupported)?;
            (metered.len() as u64).div_ceil(compiled.instructions.len().max(1) as u64).max(1)
        };
        t.set_step_limit(DEFAULT_RENDER_STEPS);
        Ok(t)
    }

    /// The template with at most `bytes` (plus [`RENDER_BYTES_PER_INPUT_BYTE`] per byte of
    /// the messages) made per render: a model file's template is untrusted input, and one
    /// template step can double a string.
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self
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
        self.env.set_fuel(Some(steps.saturating_mul(self.expansion)));
    }

    /// The prompt text for `messages`; with `add_generation_prompt`, it ends where the
    /// assistant's reply begins.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String, Error> {
        let tmpl = self.env.get_template("chat").map_err(template_err)?;
        let compiled = get_compiled_template(&tmpl);
        let instructions = rewrite::metered(&compiled.instructions).map_err(unsupported)?;
        let input = messages.iter().map(|m| m.role.len() + m.content.len()).sum::<usize>() + self.bos.len() + self.eos.len();
        let memory = self.memory.saturating_add((input as u64).saturating_mul(RENDER_BYTES_PER_INPUT_BYTE));
        let scan = memory.saturating_mul(SCAN_PER_MEMORY_BYTE);
        // A poisoned lock only means an earlier render panicked; the meter is reset anyway.
        let _one_at_a_time = self.rendering.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.meter.start(memory, scan);
        let root = context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos,
            eos_token => self.eos,
        };
        let mut text = String::new();
        let result = Vm::new(&self.env).eval(
            &instructions,
            root,
            &compiled.blocks,
            &mut make_string_output(&mut text),
            compiled.initial_auto_escape,
        );
        match (result, self.meter.tripped()) {
            (Ok(_), _) => Ok(text),
            (Err(_), Some(Tripped::Memory)) => Err(Error::TemplateMemoryLimit { bytes: memory }),
            (Err(_), Some(Tripped::Work)) => Err(Error::TemplateScanLimit { bytes: scan }),
            (Err(e), None) if e.kind() == ErrorKind::OutOfFuel => Err(Error::TemplateStepLimit { steps: self.steps }),
            (Err(e), None) => Err(template_err(e)),
        }
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
        assert!(matches!(err, Error::TemplateStepLimit { steps: 100_000 }), "{err}");
        assert!(err.to_string().contains("step limit"), "{err}");
        assert!(start.elapsed().as_secs_f64() < 5.0);
        // The default limit stops it too, and leaves real templates alone.
        let t = ChatTemplate::new(Some(src), "", "").unwrap();
        assert!(matches!(t.render(&[ChatMessage::new("user", "x")], false), Err(Error::TemplateStepLimit { .. })));
        let many: Vec<ChatMessage> = (0..200).map(|i| ChatMessage::new("user", &format!("message {i}"))).collect();
        assert!(ChatTemplate::new(None, "", "").unwrap().render(&many, true).is_ok());
    }

    /// Renders a one-message conversation with `source`, in well under a second.
    fn render_quickly(source: &str) -> Result<String, Error> {
        let start = std::time::Instant::now();
        let result = ChatTemplate::new(Some(source), "", "").and_then(|t| t.render(&[ChatMessage::new("user", "x")], false));
        assert!(start.elapsed().as_secs_f64() < 1.0, "{source}: {:?}", start.elapsed());
        result
    }

    #[test]
    fn templates_that_grow_strings_exponentially_stop_at_the_memory_limit() {
        let doubling = format!("{{% set s = 'x' %}}{}{{{{ s|length }}}}", "{% set s = s ~ s %}".repeat(40));
        for source in [
            doubling.as_str(),
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
            "{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s|length }}{% endif %}{% endmacro %}{{ d('x', 60) }}",
            "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = '%s%s'|format(ns.s, ns.s) %}{% endfor %}",
            "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s|replace('a', ns.s) %}{% endfor %}",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ''.join([ns.s, ns.s]) %}{% endfor %}",
            "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}{% endfor %}",
        ] {
            // Whichever limit comes first: the bytes made, or printing values to measure them.
            let err = render_quickly(source).unwrap_err();
            assert!(matches!(err, Error::TemplateMemoryLimit { .. } | Error::TemplateScanLimit { .. }), "{source}: {err}");
        }
    }

    #[test]
    fn single_operations_that_would_make_huge_text_are_refused_before_they_run() {
        for source in [
            "{% set n = 100000000 %}{{ 'x' * n }}",
            "{% set n = 100000000 %}{{ ['x'] * n }}",
            "{% set s = 'x' * 10000 %}{{ s|replace('', s)|length }}",
            "{{ ('x\n' * 100000)|indent(100000) }}",
            "{{ '%1000000000s'|format('x') }}",
            "{{ '{:>1000000000}'.format('x') }}",
            "{% set s = 'x' * 1000000 %}{{ ([s] * 100000)|join }}",
            "{% set s = 'x' * 1000000 %}{{ ([s] * 100000)|string }}",
            "{% set s = 'x' * 1000000 %}{{ s ~ ([s] * 100000) }}",
            "{% set s = 'x' * 1000000 %}{{ (s * 30)|list|length }}",
            // found by review: a filter applied to each item, keyword widths, and text
            // joined from an iterator with no length
            "{% set n = 1000000 %}{% set s = 'x' * n %}{{ ([s] * 10000)|map('upper')|list|length }}",
            "{{ 'x'|indent(width=1000000000, first=true) }}",
            "{% set n = 1000000 %}{% set s = 'x' * n %}{{ (([s] * 10000)|chain([]))|join|length }}",
        ] {
            // Refused before the text is made: by its size, or by printing the operands to
            // measure them.
            let err = render_quickly(source).unwrap_err();
            assert!(matches!(err, Error::TemplateMemoryLimit { .. } | Error::TemplateScanLimit { .. }), "{source}: {err}");
        }
    }

    #[test]
    fn templates_that_write_without_end_stop_at_the_memory_limit() {
        for source in [
            "{% set s = 'x' * 100000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
            "{% macro m(s) %}{% for i in range(100000) %}{{ s }}{% endfor %}{% endmacro %}{% set t = m('y' * 100000) %}",
            &format!("{{% for i in range(100000) %}}{}{{% endfor %}}", "z".repeat(10_000)),
        ] {
            let err = render_quickly(source).unwrap_err();
            assert!(matches!(err, Error::TemplateMemoryLimit { .. }), "{}: {err}", &source[..source.len().min(80)]);
        }
    }

    #[test]
    fn templates_that_scan_large_values_over_and_over_stop_at_the_scan_limit() {
        let source = "{% set r = range(100000)|list %}{% for i in range(100000) %}{% if i in r %}{% endif %}{% endfor %}";
        let err = render_quickly(source).unwrap_err();
        assert!(matches!(err, Error::TemplateScanLimit { .. }), "{err}");
        assert!(err.to_string().contains("scan limit"), "{err}");
    }

    #[test]
    fn operations_that_read_large_values_over_and_over_stop_at_the_scan_limit() {
        for source in [
            "{% set n = 16000000 %}{% set s = 'x' * n %}{% for i in range(100000) %}{% if s|length %}{% endif %}{% endfor %}",
            "{% set n = 16000000 %}{% set s = 'x' * n %}{% for i in range(100000) %}{% if s is lower %}{% endif %}{% endfor %}",
            "{% set r = range(100000)|list %}{% for i in range(100000) %}{% if i is in r %}{% endif %}{% endfor %}",
            "{% set n = 1000000 %}{% set s = 'x' * n %}{% for i in range(1000) %}{% set u = ([s] * 1000)|unique|list %}{% endfor %}",
        ] {
            let err = render_quickly(source).unwrap_err();
            assert!(matches!(err, Error::TemplateScanLimit { .. } | Error::TemplateMemoryLimit { .. }), "{source}: {err}");
        }
    }

    #[test]
    fn deeply_nested_values_and_printing_helpers_are_refused() {
        let nest = "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}";
        let err = render_quickly(nest).unwrap_err();
        assert!(err.to_string().contains("nested more than 100 deep"), "{err}");
        for source in ["{{ debug() }}", "{{ [1]|pprint }}"] {
            assert!(matches!(render_quickly(source), Err(Error::Template { .. })), "{source}");
        }
    }

    #[test]
    fn the_memory_limit_grows_with_the_messages_so_long_documents_render() {
        let document = "word ".repeat(2 << 20); // 10 MiB, more than the fixed part of the limit
        let t = ChatTemplate::new(None, "", "").unwrap().with_memory_limit(1 << 20);
        let prompt = t.render(&[ChatMessage::new("user", &document)], true).unwrap();
        assert!(prompt.len() > document.len());
        // The setting applies: with a small one, a template that makes 4 MiB is refused.
        let err = ChatTemplate::new(Some("{% set n = 4000000 %}{{ 'x' * n }}"), "", "").unwrap().with_memory_limit(1 << 20);
        assert!(
            matches!(err.render(&[ChatMessage::new("user", "x")], false), Err(Error::TemplateMemoryLimit { bytes }) if bytes < 2 << 20)
        );
    }

    #[test]
    fn a_long_conversation_renders_through_the_meter() {
        // Templates look at the whole conversation from inside their loop over it.
        let src = "{% set users = messages|selectattr('role', 'equalto', 'user')|list %}{% for m in messages %}{% if loop.index0 == messages|length - 1 %}[last of {{ users|length }}]{% endif %}<{{ m.role }}>{{ m.content|trim }}</{{ m.role }}>\n{% endfor %}";
        let many: Vec<ChatMessage> =
            (0..2000).map(|i| ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, &format!(" message {i} "))).collect();
        let start = std::time::Instant::now();
        let prompt = ChatTemplate::new(Some(src), "", "").unwrap().render(&many, true).unwrap();
        assert!(prompt.contains("[last of 1000]<assistant>message 1999</assistant>"), "{}", &prompt[prompt.len() - 80..]);
        assert!(start.elapsed().as_secs_f64() < 1.0, "{:?}", start.elapsed());
    }

    #[test]
    fn templates_that_could_escape_the_meter_are_refused_when_loaded() {
        for (source, names) in [
            ("{% include 'chat' %}", "include"),
            ("{% from 'chat' import m %}", "import"),
            ("{% extends 'chat' %}", "extends"),
            ("{% block b %}x{% endblock %}", "block"),
            ("{% import 'chat' as m %}", "import"),
            ("{% set __docmem_new = 1 %}", "__docmem_"),
            ("{{ 'x' * 100000000 }}", "constant limit"),
            ("{{ ['x'] * 10 ** 8 }}", "constant limit"),
            ("{% if x %}{{ ('ab' ~ 'c') * (1000 * 1000 * 100) }}{% endif %}", "line 1"),
            ("{{ 'x' * 2 ** 200 }}", "constant limit"),
            ("{{ not ('x' * 10 ** 7 ~ 'x' * 10 ** 7) }}", "constant limit"),
            ("{{ ('x' * 10 ** 7 ~ 'x' * 10 ** 7) == 1 }}", "constant limit"),
            ("{% for a in r %}{{ range(*a) }}{% endfor %}", "*args"),
            ("{% autoescape true %}{{ x }}{% endautoescape %}", "autoescape"),
        ] {
            let err = ChatTemplate::new(Some(source), "", "").unwrap_err();
            assert!(err.to_string().contains(names), "{source}: {err}");
        }
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
