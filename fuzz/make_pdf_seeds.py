#!/usr/bin/env python3
"""Writes the seed corpus of the `pdf` fuzz target into fuzz/corpus/pdf/.

Seeds: the two-page fixture the runtime's tests read, its first half, a one-page PDF
whose content stream is Flate-compressed (so the fuzzer mutates through the inflater),
and two decompression bombs, one under and one over the harness's 16 MiB inflate limit.

    python3 fuzz/make_pdf_seeds.py
"""
import hashlib
import pathlib
import sys
import zlib

root = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(root.parent / "scripts" / "fixtures"))
from make_pdf import write_objects  # noqa: E402
out = root / "corpus" / "pdf"
out.mkdir(parents=True, exist_ok=True)


def stream(data, flate):
    packed = zlib.compress(data, 9) if flate else data
    head = b"<< /Length %d%s >>" % (len(packed), b" /Filter /FlateDecode" if flate else b"")
    return head + b"\nstream\n" + packed + b"\nendstream"


def one_page(content, flate=True):
    return write_objects([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        stream(content, flate),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ])


fixture = (root / ".." / "crates" / "runtime" / "tests" / "fixtures" / "two-pages.pdf").read_bytes()
seeds = [
    fixture,
    fixture[: len(fixture) // 2],
    one_page(b"BT /F1 12 Tf 72 720 Td (The harbor froze every winter.) Tj ET"),
    one_page(b"BT /F1 12 Tf 72 720 Td (" + b"0" * (1 << 20) + b") Tj ET"),
    one_page(b"\0" * (32 << 20)),
]
for seed in seeds:
    (out / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    print(f"{len(seed):>8} bytes")
