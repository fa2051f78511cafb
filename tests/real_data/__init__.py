"""The real third-party test data: what scripts/fetch_test_data.py fetches (manifest.json), and the few files that
were extracted by hand from a source file and so have no public copy to fetch (extracted/, with PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXTRACTED = Path(__file__).resolve().parent / "extracted"
VECTOR_SEPARATOR = "\n__ggml_vocab_test__\n"


def llamacpp_vectors(data: Path) -> dict[str, dict[str, Any]]:
    """llama.cpp's tokenizer test vectors from its own files (models/ggml-vocab-NAME.gguf.inp / .out): per NAME, the
    cases [{text, ids}] (HF AutoTokenizer ids, no special tokens) and the vocab-only GGUF's path under `data` when it
    is there. The .inp holds the texts separated by VECTOR_SEPARATOR (most files end with one too); the .out one line
    of ids per text."""
    vectors = {}
    for inp in sorted((data / "llamacpp" / "vocab").glob("ggml-vocab-*.gguf.inp")):
        texts = inp.read_text(encoding="utf-8").split(VECTOR_SEPARATOR)
        texts = texts[:-1] if texts[-1] == "" else texts
        lines = inp.with_suffix(".out").read_text(encoding="utf-8").split("\n")
        if len(lines) < len(texts):
            raise ValueError(f"{inp.with_suffix('.out')}: {len(lines)} lines of ids for {len(texts)} texts")
        name = inp.name.removeprefix("ggml-vocab-").removesuffix(".gguf.inp")
        gguf = inp.with_suffix("")
        vectors[name] = {
            "cases": [{"text": t, "ids": [int(i) for i in line.split()]} for t, line in zip(texts, lines)],
            "gguf_vocab_file": str(gguf.relative_to(data)) if gguf.is_file() else None,
        }
    return vectors
