"""Golden dequantizations from llama.cpp's own `gguf` Python package.

Writes crates/runtime/tests/golden/dequant.json: for every tensor type docmem runs, raw
blocks (random bytes with sane f16 scales, seeded) and the f32 values that
`gguf.quants.dequantize` gives for them; plus the first blocks of real SmolLM2 tensors when
the model is present. crates/runtime/tests/dequant_golden.rs checks docmem's
dequantization against it.

    ~/.cache/docmem/golden-venv/bin/pip install gguf==0.19.0 numpy
    ~/.cache/docmem/golden-venv/bin/python scripts/golden/dequant.py
"""

import json
import os
import pathlib
from importlib.metadata import version

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.quants import GGML_QUANT_SIZES, dequantize

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCKS = 4
# (type, block bytes, byte offsets of f16 scale fields)
TYPES = [
    (T.F16, 2, []),
    (T.BF16, 2, []),
    (T.Q4_0, 18, [0]),
    (T.Q4_1, 20, [0, 2]),
    (T.Q5_0, 22, [0]),
    (T.Q5_1, 24, [0, 2]),
    (T.Q8_0, 34, [0]),
    (T.Q4_K, 144, [0, 2]),
    (T.Q5_K, 176, [0, 2]),
    (T.Q6_K, 210, [208]),
]


def random_blocks(rng, qtype, block_bytes, scale_offsets):
    if qtype == T.F16:
        return rng.normal(0, 1, 256 * BLOCKS // 8).astype(np.float16).tobytes()
    if qtype == T.BF16:
        f = rng.normal(0, 1, 256 * BLOCKS // 8).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    raw = bytearray(rng.integers(0, 256, block_bytes * BLOCKS, dtype=np.uint8).tobytes())
    for b in range(BLOCKS):
        for off in scale_offsets:
            scale = np.float16(rng.uniform(-0.05, 0.05))
            raw[b * block_bytes + off : b * block_bytes + off + 2] = scale.tobytes()
    return bytes(raw)


def case(name, qtype, raw):
    data = np.frombuffer(raw, dtype=np.uint8)
    values = dequantize(data, qtype).astype(np.float32).reshape(-1)
    return {"name": name, "type": qtype.name, "type_id": int(qtype), "bytes": raw.hex(), "values": [int(v) for v in values.view(np.uint32)]}


def main() -> None:
    rng = np.random.default_rng(20261122)
    cases = [case(f"random {t.name}", t, random_blocks(rng, t, size, offs)) for t, size, offs in TYPES]
    model = pathlib.Path(os.environ.get("DOCMEM_MODELS", pathlib.Path.home() / ".cache/docmem/models")) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if model.exists():
        reader = GGUFReader(model)
        for tensor in reader.tensors:
            if tensor.name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"):
                block_bytes = GGML_QUANT_SIZES[tensor.tensor_type][1]
                raw = np.asarray(tensor.data).reshape(-1).view(np.uint8)[: BLOCKS * block_bytes].tobytes()
                cases.append(case(f"SmolLM2 {tensor.name}", tensor.tensor_type, raw))
    out = {"generator": "scripts/golden/dequant.py", "gguf": version("gguf"), "numpy": version("numpy"), "cases": cases}
    path = ROOT / "crates" / "runtime" / "tests" / "golden" / "dequant.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
