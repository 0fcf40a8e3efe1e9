"""Golden chunks from the reference implementations of docmem's baseline chunkers.

Writes crates/core/tests/golden/chunkers.json: for each text and setting, the chunks that
LangChain's RecursiveCharacterTextSplitter and LlamaIndex's SentenceSplitter produce.
crates/core/tests/chunkers_golden.rs checks docmem's chunkers against them.

LlamaIndex counts tokens with the `tokenizer` it is given; both sides count whitespace-
separated words here, so the comparison tests the splitting and packing logic rather than a
BPE vocabulary.

    python3 -m venv ~/.cache/docmem/golden-venv
    ~/.cache/docmem/golden-venv/bin/pip install langchain-text-splitters==0.3.8 llama-index-core==0.14.25
    ~/.cache/docmem/golden-venv/bin/python scripts/golden/chunkers.py
"""

import json
import pathlib
from importlib.metadata import version

from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core.node_parser import SentenceSplitter

ROOT = pathlib.Path(__file__).resolve().parents[2]

TEXTS = {
    "printing-press": (ROOT / "examples" / "printing-press.md").read_text(encoding="utf-8"),
    "short-paragraphs": "Hi.\n\nI'm Harrison.\n\nHow? Are? You?\nOkay then f f f f.\n"
    "This is a weird text to write, but gotta test the splittingggg some how.\n\nBye!\n\n-H.",
    "chinese": "印刷术是中国古代的重要发明。 北宋时期，毕昇发明了活字印刷术，比欧洲早约四百年。 "
    "活字用胶泥制成，每字一印，可以反复使用！ 这种方法为什么重要？ 因为它大大降低了印书的成本。 "
    "后来又出现了木活字和金属活字，印刷技术逐渐传到朝鲜、日本和欧洲。",
    "lists": "Shopping list:\n- apples\n- pears\n- bread and butter\n\n\nNotes:\nBuy the bread first. "
    "The market closes at noon on Saturdays. Bring a bag.",
}

RECURSIVE = [(100, 0), (200, 20), (400, 50), (1000, 100)]
SENTENCE = [(30, 0), (60, 10), (120, 20)]


def main() -> None:
    cases = []
    for name, text in TEXTS.items():
        for size, overlap in RECURSIVE:
            splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
            cases.append({"chunker": "recursive", "text": name, "size": size, "overlap": overlap, "chunks": splitter.split_text(text)})
        for size, overlap in SENTENCE:
            splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=str.split)
            cases.append({"chunker": "sentence", "text": name, "size": size, "overlap": overlap, "chunks": splitter.split_text(text)})
    out = {
        "generator": "scripts/golden/chunkers.py",
        "versions": {p: version(p) for p in ["langchain-text-splitters", "llama-index-core", "nltk"]},
        "texts": TEXTS,
        "cases": cases,
    }
    path = ROOT / "crates" / "core" / "tests" / "golden" / "chunkers.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
