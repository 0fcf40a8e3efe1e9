"""Export a BERT sentence-embedding model directory to the layout transformers.js reads,
for `docmem bench embed` (its transformers.js column): the same weights as ours and
sentence-transformers', so the three run one model.

    python export_onnx.py MODEL_DIR OUT_DIR

Writes OUT_DIR/onnx/model.onnx (inputs input_ids, attention_mask, token_type_ids; output
last_hidden_state; batch and sequence axes dynamic; fp32) with torch's ONNX exporter, and
copies config.json and tokenizer.json beside it with a tokenizer_config.json.
"""

import json
import pathlib
import shutil
import sys

import torch
from transformers import AutoModel


def main():
    src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    (out / "onnx").mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(src)).eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        model,
        args,
        str(out / "onnx/model.onnx"),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "last_hidden_state": axes},
        opset_version=17,
        dynamo=False,
    )
    for f in ["config.json", "tokenizer.json"]:
        shutil.copy(src / f, out / f)
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 512}
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    print(out)


if __name__ == "__main__":
    main()
