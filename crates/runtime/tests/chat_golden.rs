//! Chat prompts against Hugging Face's renderer: each template in
//! `tests/fixtures/chat_templates/` and conversation of `tests/golden/chat_templates.json`
//! (made by `scripts/golden/chat_templates.py` with Jinja2 as `apply_chat_template` sets it
//! up) renders to exactly the same text through docmem's metered minijinja render.

mod common;

use common::manifest_dir;
use docmem_runtime::chat::{ChatMessage, ChatTemplate};
use serde_json::Value;

#[test]
fn templates_render_as_hugging_face_renders_them() {
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(manifest_dir().join("tests/golden/chat_templates.json")).unwrap()).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    assert!(cases.len() >= 12, "{} cases", cases.len());
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let source = std::fs::read_to_string(manifest_dir().join("tests/fixtures/chat_templates").join(name)).unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let template = ChatTemplate::new(Some(&source), case["bos_token"].as_str().unwrap(), case["eos_token"].as_str().unwrap()).unwrap();
        let add = case["add_generation_prompt"].as_bool().unwrap();
        let prompt = template.render(&messages, add).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(prompt, case["prompt"].as_str().unwrap(), "{name}, {}, generation prompt {add}", case["conversation"]);
    }
}
