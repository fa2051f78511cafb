"""Tokenizer settings that transformers loads without complaint but that break it later, refused before it loads them.

Found by feeding every field of the settings files bad values (None, "", strings, lists, objects, huge numbers) through
`onboard verify-tokenizer`: transformers coerces or ignores almost all of them, and these two are what is left.

- `model_max_length` that is not a number: every encode compares the length of its ids with it (TypeError).
- an empty `unk_token`: no vocabulary holds "", so looking up the unknown token's id falls back to the unknown token's
  id, forever (RecursionError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from onboard.errors import InputError

SETTINGS = ("tokenizer_config.json", "special_tokens_map.json")


def check_settings(root: Path) -> None:
    """Raise InputError naming the file and field when a settings file of `root` holds a value transformers breaks on.
    A file that is missing or not a JSON object is left to the loader, which reports it."""
    for name in SETTINGS:
        doc = _object(root / name)
        if doc is None:
            continue
        limit = doc.get("model_max_length")
        if name == "tokenizer_config.json" and limit is not None and not _is_number(limit):
            raise InputError(
                f"{name}: model_max_length is {limit!r} ({type(limit).__name__}), not a number: transformers compares "
                "every encoded length with it",
                f"set model_max_length in {name} to the model's context length (a whole number), or remove it",
            )
        unk = doc.get("unk_token")
        content = unk.get("content") if isinstance(unk, dict) else unk
        if content == "":
            raise InputError(
                f"{name}: unk_token is an empty string: no vocabulary holds it, and transformers' lookup of the "
                "unknown token's id then never ends",
                f'set unk_token in {name} to the vocabulary\'s unknown token (e.g. "<unk>"), or to null when it has none',
            )


def _object(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
