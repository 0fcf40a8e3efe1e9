"""Golden chat prompts: the templates in crates/runtime/tests/fixtures/chat_templates/
rendered as Hugging Face's `apply_chat_template` renders a model's template (Jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls, and
`raise_exception`), for two conversations, with and without the generation prompt.

Writes crates/runtime/tests/golden/chat_templates.json; crates/runtime/tests/chat_golden.rs
checks docmem's metered minijinja render against it.

    python3 -m venv ~/.cache/docmem/golden-venv
    ~/.cache/docmem/golden-venv/bin/pip install jinja2==3.1.6
    ~/.cache/docmem/golden-venv/bin/python scripts/golden/chat_templates.py
"""

import json
import pathlib
from importlib.metadata import version

import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "crates" / "runtime" / "tests" / "fixtures" / "chat_templates"
OUT = ROOT / "crates" / "runtime" / "tests" / "golden" / "chat_templates.json"

CONVERSATIONS = {
    "with-system": [
        {"role": "system", "content": "You answer from the documents.\nCite them."},
        {"role": "user", "content": "  Who built the press?\nAnd when?  "},
        {"role": "assistant", "content": "Gutenberg, about 1450 [1]."},
        {"role": "user", "content": "印刷术是谁发明的？"},
    ],
    "user-only": [
        {"role": "user", "content": "Summarise the document."},
    ],
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    cases = []
    for path in sorted(TEMPLATES.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        template = env.from_string(source)
        for name, messages in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                cases.append({
                    "template": path.name,
                    "conversation": name,
                    "messages": messages,
                    "add_generation_prompt": add_generation_prompt,
                    "bos_token": "<s>",
                    "eos_token": "</s>",
                    "prompt": template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                              bos_token="<s>", eos_token="</s>"),
                })
    OUT.write_text(json.dumps({"jinja2": version("jinja2"), "cases": cases}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
