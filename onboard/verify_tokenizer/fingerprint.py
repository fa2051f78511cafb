"""Pre-tokenizer fingerprint: llama.cpp's `chkhsh` of the check string, matched against known families."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache

from onboard.resources import package_data
from onboard.verify_tokenizer.subject import Subject


@dataclass(frozen=True)
class Fingerprint:
    chkhsh: str
    family: str | None
    """llama.cpp pre-tokenizer name, or None for a pre-tokenizer llama.cpp does not know."""
    reference_repo: str | None


@cache
def known_fingerprints() -> tuple[str, dict[str, tuple[str, str | None]]]:
    """(chktxt, chkhsh -> (pre-tokenizer name, example repo))."""
    doc = json.loads(package_data("pretokenizer_fingerprints.json").read_text(encoding="utf-8"))
    return doc["chktxt"], {e["chkhsh"]: (e["pre_tokenizer"], e.get("ref")) for e in doc["entries"]}


def chkhsh(ids: list[int]) -> str:
    """sha256 of Python's list repr of the ids, exactly as llama.cpp's convert_hf_to_gguf computes it."""
    return hashlib.sha256(str(ids).encode()).hexdigest()


def fingerprint(subject: Subject) -> Fingerprint:
    text, table = known_fingerprints()
    # llama.cpp encodes with the tokenizer's default add_special_tokens (BOS included when the tokenizer adds one).
    digest = chkhsh(subject.hf.encode(text))
    family, ref = table.get(digest, (None, None))
    return Fingerprint(digest, family, ref)
