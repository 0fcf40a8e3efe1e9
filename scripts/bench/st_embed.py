"""sentence-transformers' side of `docmem bench embed`: encode the same texts, time it.

    python st_embed.py MODEL_DIR TEXTS.json THREADS REPEATS [DEVICE]

(`docmem bench embed` runs it with the Python of scripts/bench/setup-peers.sh.)

TEXTS.json is a JSON list of strings (written by the benchmark). Prints one JSON object:
sentences per second at batch 1 and batch 32 on DEVICE (PyTorch's name for it; default
"cpu", with THREADS threads), best of REPEATS runs each. `encode` returns host arrays, so
a GPU run's time includes its synchronisation.
"""

import json
import pathlib
import shutil
import sys
import tempfile
import time


def main():
    model_dir, texts_path, threads, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    device = sys.argv[5] if len(sys.argv) > 5 else "cpu"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    texts = json.loads(pathlib.Path(texts_path).read_text())
    tmp = pathlib.Path(tempfile.mkdtemp())
    shutil.copytree(model_dir, tmp / "model")
    # A wheel-shipped model may lack the (file-less) Normalize module's folder.
    (tmp / "model/2_Normalize").mkdir(exist_ok=True)
    model = SentenceTransformer(str(tmp / "model"), device=device)
    out = {"threads": threads, "device": device, "torch": torch.__version__}
    with torch.inference_mode():
        model.encode(texts[:4], batch_size=4)  # warm-up
        for batch, n in [(1, min(len(texts), 32)), (32, len(texts))]:
            best = 0.0
            for _ in range(repeats):
                t = time.perf_counter()
                model.encode(texts[:n], batch_size=batch)
                best = max(best, n / (time.perf_counter() - t))
            out[f"batch{batch}"] = best
    shutil.rmtree(tmp)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
