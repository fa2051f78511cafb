"""Deliberately broken tokenizers are caught with a precise diff: first differing string, both id lists, pieces.

Qwen3 (vocab.json + merges.txt, Qwen2Tokenizer) gets a tokenizer.json written by the tokenizers library, then a
changed pre-tokenizer regex or a dropped merge; Llama 2 (its tokenizer.json + the identical tokenizer.model, sha256
9e556afd…) gets `legacy` flipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from onboard.verify_tokenizer import verify_tokenizer
from onboard.verify_tokenizer.compare import compare
from onboard.verify_tokenizer.corpus import special_token_strings
from onboard.verify_tokenizer.references import RepoTokenizerInfo, load_sentencepiece
from onboard.verify_tokenizer.subject import load_subject

QWEN = "qwen/qwen3-1.7b_mlx-bf16-copy"
QWEN_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def qwen_tokenizer_json(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen3 folder plus the tokenizer.json the tokenizers library writes for it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = tmp_path_factory.mktemp("qwen-base")
    for name in QWEN_FILES:
        shutil.copy(shared_data / QWEN / name, root / name)
    load_subject(root).backend.save(str(root / "tokenizer.json"))
    return root


def _variant(base: Path, dest: Path, edit) -> Path:
    shutil.copytree(base, dest)
    doc = json.loads((dest / "tokenizer.json").read_text(encoding="utf-8"))
    edit(doc)
    (dest / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return dest


def _mismatch(report):
    return next(c for c in report.references if c.first is not None)


def test_unbroken_qwen_matches_every_reference(qwen_tokenizer_json: Path, tmp_path: Path) -> None:
    report = verify_tokenizer(str(qwen_tokenizer_json), golden_dir=tmp_path / "g")
    assert [c.mismatches for c in report.references] == [0, 0]
    assert report.fingerprint.family == "qwen2"


def test_changed_pretokenizer_regex_is_caught(qwen_tokenizer_json: Path, tmp_path: Path) -> None:
    def edit(doc: dict) -> None:
        split = doc["pre_tokenizer"]["pretokenizers"][0]
        # Only a space may attach to a word now (GPT-2 style), not other punctuation: "(normal" splits differently.
        # (Widening \p{N} to \p{N}{1,3} would change nothing: Qwen's vocabulary has no multi-digit tokens.)
        split["pattern"]["Regex"] = split["pattern"]["Regex"].replace(r"[^\r\n\p{L}\p{N}]?\p{L}+", r" ?\p{L}+", 1)

    report = verify_tokenizer(str(_variant(qwen_tokenizer_json, tmp_path / "regex", edit)), golden_dir=tmp_path / "g")
    assert report.exit_code == 1
    diff = _mismatch(report).first
    assert diff.subject_ids != diff.reference_ids
    assert "".join(diff.subject_pieces) == "".join(diff.reference_pieces) == diff.text  # same text, split differently
    finding = next(f for f in report.findings if f.code in ("reference-mismatch", "tokenizer-json-mismatch"))
    assert repr(diff.text[:20])[:10] in finding.message and str(diff.subject_ids[diff.position]) in finding.message


def test_dropped_merge_is_caught(qwen_tokenizer_json: Path, tmp_path: Path) -> None:
    dropped = ["Ġ", "t"]

    def edit(doc: dict) -> None:
        doc["model"]["merges"] = [m for m in doc["model"]["merges"] if m != dropped and m != "Ġ t"]

    report = verify_tokenizer(str(_variant(qwen_tokenizer_json, tmp_path / "merge", edit)), golden_dir=tmp_path / "g")
    comparison = _mismatch(report)
    assert comparison.independent  # caught by the independent vocab.json + merges.txt BPE
    diff = comparison.first
    assert " t" in diff.text
    at = diff.position
    assert diff.reference_tokens[at].startswith("Ġt") and diff.subject_tokens[at] == "Ġ"
    assert "reference-mismatch" in {f.code for f in report.findings}


@pytest.fixture(scope="module")
def llama2(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("llama2")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(shared_data / "llama2/llama-2-7b-hf_hf-mirror" / name, root / name)
    # Byte-identical to Llama 2's tokenizer.model (the LFS pointer's sha256 9e556afd… matches this file).
    shutil.copy(shared_data / "phi/phi-3.5-mini-instruct_user-upload/tokenizer.model", root / "tokenizer.model")
    return root


def test_legacy_flipped_is_caught(llama2: Path) -> None:
    texts = list(special_token_strings(["<s>", "</s>"]))
    results = {}
    for legacy in (False, True):
        config = json.loads((llama2 / "tokenizer_config.json").read_text(encoding="utf-8"))
        config["legacy"] = legacy
        (llama2 / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        subject = load_subject(llama2)
        info = RepoTokenizerInfo(
            {str(t): i for i, t in subject.hf.added_tokens_decoder.items()}, "LlamaTokenizer", None
        )
        reference = load_sentencepiece(llama2 / "tokenizer.model", info)
        results[legacy] = compare(subject, texts, subject.encode_batch(texts), reference)
    assert results[True].mismatches > results[False].mismatches
    diff = results[True].first
    assert diff.text == "Hello<s>world"
    # legacy=True puts a prefix space after the special token; sentencepiece (and legacy=False) do not.
    assert diff.subject_tokens[diff.position] == "▁world" and diff.reference_tokens[diff.position] == "world"
