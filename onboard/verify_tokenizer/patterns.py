"""Pre-tokenizer regex table (onboard/data/pretokenizer_regexes.json) and the tokenizer.json -> regex conversion."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from onboard.resources import package_data

# The GPT-2 regex HF's ByteLevel(use_regex=True) applies.
GPT2_NAME = "gpt-2"


@cache
def _table() -> dict[str, Any]:
    return json.loads(package_data("pretokenizer_regexes.json").read_text(encoding="utf-8"))


def patterns_for(name: str) -> tuple[str, ...] | None:
    """Regexes of a known pre-tokenizer (llama.cpp names: gpt-2, llama-bpe, qwen2, falcon, …), or None."""
    found = _table()["patterns"].get(name)
    return tuple(found) if found is not None else None


def name_for_tokenizer_class(tokenizer_class: str | None) -> str | None:
    """The pre-tokenizer a transformers tokenizer class hard-codes when it builds from vocab.json + merges.txt."""
    return _table()["hf_tokenizer_class"].get(tokenizer_class or "")


def normalization_for_tokenizer_class(tokenizer_class: str | None) -> str | None:
    """Unicode normalization form the class applies before BPE (Qwen2Tokenizer: NFC)."""
    return _table()["hf_tokenizer_normalizer"].get(tokenizer_class or "")


def name_for_tiktoken_file(file_name: str) -> str | None:
    return _table()["tiktoken_files"].get(file_name)


def name_for_rank_count(count: int) -> str | None:
    """tiktoken rank files do not carry their regex; the rank count identifies the known ones (Llama 3: 128000)."""
    return _table()["tiktoken_rank_counts"].get(str(count))


def patterns_from_tokenizer_json(pre_tokenizer: dict[str, Any] | None) -> tuple[str, ...] | None:
    """Convert a tokenizer.json byte-level pre_tokenizer into split regexes; None when it uses an unsupported step.

    Only the steps byte-level BPE repos use are understood: Sequence, Split(Isolated or Removed+invert), ByteLevel,
    Digits. The result shares the subject's configuration, so a reference built from it is not independent.
    """
    if pre_tokenizer is None:
        return None
    kind = pre_tokenizer.get("type")
    if kind == "Sequence":
        out: list[str] = []
        for step in pre_tokenizer.get("pretokenizers", []):
            converted = patterns_from_tokenizer_json(step)
            if converted is None:
                return None
            out.extend(converted)
        return tuple(out)
    if kind == "ByteLevel":
        return patterns_for(GPT2_NAME) if pre_tokenizer.get("use_regex", True) else ()
    if kind == "Digits":
        return (r"\p{N}",) if pre_tokenizer.get("individual_digits") else (r"\p{N}+",)
    if kind == "Split":
        pattern = pre_tokenizer.get("pattern", {})
        text = pattern.get("Regex")
        if text is None and "String" in pattern:
            import regex

            text = regex.escape(pattern["String"])
        behavior, invert = pre_tokenizer.get("behavior"), pre_tokenizer.get("invert", False)
        if text is not None and ((behavior == "Isolated" and not invert) or (behavior == "Removed" and invert)):
            return (text,)
        return None
    if kind == "Punctuation" and pre_tokenizer.get("behavior") == "Contiguous":
        return (r"[\p{P}\$\+<=>\^~\|`]+",)
    return None
