"""llama.cpp's tokenizer vectors (HF AutoTokenizer ids, no special tokens) through every reference we can build.

Each (tokenizer, loader) pair must reproduce every case exactly; the count per tokenizer is printed (-s) for the
closing note of the issue.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from onboard.verify_tokenizer.references import (
    RepoTokenizerInfo,
    load_sentencepiece,
    load_tiktoken,
    load_tokenizer_json,
    load_vocab_merges,
)
from tests.real_data import llamacpp_vectors

NO_INFO = RepoTokenizerInfo({}, None, None)

# (vector set, loader name, file under shared/data, tokenizer_class for vocab+merges)
FILE_CASES = [
    ("gpt-2", "vocab+merges", "gpt2/ort-extensions/vocab.json", "GPT2Tokenizer"),
    ("llama-spm", "tokenizer.json", "llama2/llama-2-7b-hf_hf-mirror/tokenizer.json", None),
    (
        "llama-spm",
        "sentencepiece",
        "phi/phi-3.5-mini-instruct_user-upload/tokenizer.model",
        None,
    ),  # == Llama 2's (sha256)
    ("llama-bpe", "tiktoken", "llama3/llama-models/tokenizer.model", None),
    ("phi-3", "tokenizer.json", "phi/phi-3_ort-extensions/phi-3-mini/tokenizer.json", None),
    ("phi-3", "tokenizer.json", "phi/phi-3.5-mini-instruct_user-upload/tokenizer.json", None),
    ("phi-3", "sentencepiece", "phi/phi-3.5-mini-instruct_user-upload/tokenizer.model", None),
    ("falcon", "tokenizer.json", "falcon/ort-extensions/tokenizer.json", None),
    ("qwen2", "vocab+merges", "qwen/qwen3-1.7b_mlx-bf16-copy/vocab.json", "Qwen2Tokenizer"),
    ("deepseek-r1-qwen", "vocab+merges", "qwen/qwen3-1.7b_mlx-bf16-copy/vocab.json", "Qwen2Tokenizer"),
]
GGUF_CASES = [
    "gpt-2",
    "llama-spm",
    "phi-3",
    "falcon",
    "mpt",
    "starcoder",
    "refact",
    "deepseek-llm",
    "deepseek-coder",
    "bert-bge",
]


@pytest.fixture(scope="module")
def vectors(shared_data: Path) -> dict:
    return llamacpp_vectors(shared_data)


def _encoder(kind: str, path: Path, tokenizer_class: str | None):
    if kind == "vocab+merges":
        return load_vocab_merges(path, RepoTokenizerInfo({}, tokenizer_class, None)).encode
    if kind == "tokenizer.json":
        return load_tokenizer_json(path, NO_INFO).encode
    if kind == "sentencepiece":  # declared dependencies: missing is a failure, not a skip
        return load_sentencepiece(path, NO_INFO).encode
    if kind == "tiktoken":
        return load_tiktoken(path, NO_INFO).encode
    raise AssertionError(kind)


def _check(name: str, cases: list[dict], encode) -> None:
    bad = [(c["text"], encode(c["text"]), c["ids"]) for c in cases if encode(c["text"]) != c["ids"]]
    print(f"{name}: {len(cases) - len(bad)}/{len(cases)}")
    assert not bad, f"{len(bad)} of {len(cases)} differ; first: {bad[0][0]!r}: got {bad[0][1]} want {bad[0][2]}"


@pytest.mark.parametrize(("name", "kind", "file", "cls"), FILE_CASES, ids=[f"{c[0]}-{c[1]}" for c in FILE_CASES])
def test_reference_reproduces_llamacpp_vectors(vectors: dict, shared_data: Path, name: str, kind: str, file: str, cls):
    _check(f"{name} via {kind}", vectors[name]["cases"], _encoder(kind, shared_data / file, cls))


@pytest.mark.parametrize("name", GGUF_CASES)
def test_gguf_vocab_reproduces_llamacpp_vectors(vectors: dict, shared_data: Path, name: str):
    from onboard.verify_tokenizer.gguf_vocab import gguf_encoder, read_gguf_vocab

    encode, why = gguf_encoder(read_gguf_vocab(shared_data / vectors[name]["gguf_vocab_file"]))
    assert encode is not None, why
    _check(f"{name} via gguf ({why})", vectors[name]["cases"], encode)


@pytest.mark.parametrize(
    ("name", "folder"), [("qwen2", "qwen/qwen3-1.7b_mlx-bf16-copy"), ("falcon", "falcon/ort-extensions")]
)
def test_fast_tokenizer_subject_reproduces_llamacpp_vectors(vectors: dict, shared_data: Path, name: str, folder: str):
    """The tokenizer under test (transformers AutoTokenizer) on the same vectors."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from onboard.verify_tokenizer.subject import load_subject

    subject = load_subject(shared_data / folder)
    _check(f"{name} via AutoTokenizer", vectors[name]["cases"], lambda t: subject.encode(t))
