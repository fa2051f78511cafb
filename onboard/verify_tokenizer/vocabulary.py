"""Where a tokenizer's vocabulary lives, and what to say when a folder has none.

A folder with tokenizer_config.json but no vocabulary file (a metadata-only mirror) makes transformers build a
tokenizer of special tokens only; every finding computed from it (EOS ids, BOS flags, round trip) would be false.
The files counted are the generic ones plus those the named class reads (transformers' `vocab_files_names`); a
class that reads none (byte-level ByT5 / CANINE) needs no vocabulary file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from onboard.errors import InputError

if TYPE_CHECKING:
    from onboard.verify_tokenizer.repo import TokenizerRepo

NO_VOCABULARY = "no-tokenizer-vocabulary"
# Files a tokenizer's vocabulary lives in, at the top of the repo (where transformers looks).
VOCABULARY_GLOBS = ("tokenizer.json", "*.model", "vocab.json", "vocab.txt", "*.tiktoken", "tekken.json")
# Files transformers reads besides the vocabulary to build any tokenizer.
SETTINGS_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


class NoVocabulary(InputError):
    """The folder holds tokenizer settings but no vocabulary: nothing to build the tokenizer from (exit 2)."""

    code = NO_VOCABULARY

    def __init__(self, display: str, looked_for: list[str], hint: str) -> None:
        self.looked_for = tuple(looked_for)
        super().__init__(
            f"[{NO_VOCABULARY}] {display}: no tokenizer vocabulary: none of {', '.join(looked_for)} is in the folder "
            "(tokenizer_config.json alone describes a tokenizer; transformers would invent one of special tokens "
            "only, and nothing computed from it would be true of the model)",
            hint,
        )


def vocabulary_files(root: Path) -> list[str]:
    """The vocabulary files at the top of `root` (pointers included: they are there, only not downloaded)."""
    return sorted({p.name for pattern in VOCABULARY_GLOBS for p in root.glob(pattern) if p.is_file()})


def looked_for(named: str | None = None) -> list[str]:
    """What counts as a vocabulary, in words: the generic files plus the ones the named class reads."""
    names = [
        "tokenizer.json",
        "tokenizer.model (or another *.model)",
        "vocab.json + merges.txt",
        "vocab.txt",
        "*.tiktoken",
        "tekken.json",
    ]
    for file in _class_files(named):
        if not any(file in n for n in names):
            names.append(file)
    return names


def named_class(repo: TokenizerRepo) -> str | None:
    config = repo.json("tokenizer_config.json") or {}
    named = config.get("tokenizer_class")
    return named if isinstance(named, str) and named else None


def model_type(repo: TokenizerRepo) -> str | None:
    model_type = (repo.json("config.json") or {}).get("model_type")
    return model_type if isinstance(model_type, str) and model_type else None


def _tokenizer_class(named: str | None) -> type | None:
    if not named:
        return None
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    return tokenizer_class_from_name(named) or tokenizer_class_from_name(named.removesuffix("Fast"))


def _class_files(named: str | None) -> list[str]:
    """The files transformers' class `named` reads (its vocab_files_names); [] when unknown."""
    files = getattr(_tokenizer_class(named), "vocab_files_names", None)
    return [str(f) for f in files.values()] if isinstance(files, dict) else []


def needs_vocabulary(named: str | None) -> bool:
    """False only for a class known to read no file (byte-level ByT5 / CANINE-style tokenizers)."""
    cls = _tokenizer_class(named)
    return cls is None or getattr(cls, "vocab_files_names", None) != {}


def fetch_hint(repo: TokenizerRepo) -> str:
    if repo.repo_id:
        return (
            f"fetch the tokenizer files from the model's repo: hf download {repo.repo_id} --include 'tokenizer*' "
            f"'*.model' 'vocab*' 'merges.txt' --local-dir {repo.root}; or point SOURCE at a folder that has them"
        )
    return "copy the tokenizer files (tokenizer.json, or tokenizer.model / vocab.json + merges.txt) into the folder"
