"""The tokenizer under test: what transformers' AutoTokenizer builds from the repo (what serving engines load), once
its files are known to be real (not Git LFS pointers), to hold a vocabulary (else transformers would invent a
tokenizer of special tokens only) and to hold no setting transformers breaks on later (check_settings).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onboard.errors import InputError, panics_as_errors
from onboard.findings import Finding, warning
from onboard.lfs import LfsPointerError

if TYPE_CHECKING:
    from onboard.verify_tokenizer.repo import TokenizerRepo

NO_VOCABULARY = "no-tokenizer-vocabulary"
# Files a tokenizer's vocabulary lives in, at the top of the repo (where transformers looks).
VOCABULARY_GLOBS = ("tokenizer.json", "*.model", "vocab.json", "vocab.txt", "*.tiktoken", "tekken.json")
# Files transformers reads besides the vocabulary to build any tokenizer.
SETTINGS_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
RAW_BPE_CLASS = "GPT2Tokenizer"


@dataclass
class Subject:
    hf: Any
    """transformers PreTrainedTokenizerBase."""
    backend: Any | None
    """tokenizers.Tokenizer, when the tokenizer is backed by one."""
    class_name: str
    notes: tuple[Finding, ...] = ()
    """Warnings about an assumption the build took (a raw BPE export's class)."""
    assumed_class: str | None = None
    """The class assumed for files that name none (RAW_BPE_CLASS for vocab.json + merges.txt alone)."""

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        if self.backend is not None:
            return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)]
        return [self.hf.encode(t, add_special_tokens=add_special_tokens) for t in texts]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.hf.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.hf.decode(ids, skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False)

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        if self.backend is not None:
            return self.backend.decode_batch(batch, skip_special_tokens=False)
        return [self.decode(ids) for ids in batch]

    def token_id(self, text: str | None) -> int | None:
        if not text:
            return None
        found = self.hf.convert_tokens_to_ids(text)
        unk = getattr(self.hf, "unk_token_id", None)
        return None if found is None or (found == unk and text != getattr(self.hf, "unk_token", None)) else found

    def observed_insertion(self) -> tuple[bool, bool]:
        """Does encode(add_special_tokens=True) put BOS in front / EOS at the end?"""
        plain = self.encode("Hello world", add_special_tokens=False)
        full = self.encode("Hello world", add_special_tokens=True)
        bos, eos = self.hf.bos_token_id, self.hf.eos_token_id
        start = full.index(plain[0]) if plain and plain[0] in full else 0
        inserts_bos = bos is not None and bos in full[:start]
        inserts_eos = eos is not None and len(full) > len(plain) + start and full[-1] == eos
        return inserts_bos, inserts_eos

    def __len__(self) -> int:
        return len(self.hf)


class NoVocabulary(InputError):
    """The folder holds tokenizer settings but no vocabulary: nothing to build the tokenizer from (exit 2)."""

    code = NO_VOCABULARY

    def __init__(self, display: str, looked_for: list[str], hint: str) -> None:
        super().__init__(
            f"[{NO_VOCABULARY}] {display}: no tokenizer vocabulary: none of {', '.join(looked_for)} is in the folder "
            "(tokenizer_config.json alone describes a tokenizer; transformers would invent one of special tokens "
            "only, and nothing computed from it would be true of the model)",
            hint,
        )


def open_subject(repo: TokenizerRepo) -> Subject:
    """The tokenizer the repo's files build; a raw GPT-2-style export (vocab.json + merges.txt, nothing naming the
    class) is loaded as byte-level BPE with a warning saying so.

    Raises:
        LfsPointerError: a file the tokenizer is built from is a Git LFS pointer (others are the caller's to report).
        NoVocabulary: no vocabulary file at all, for a tokenizer class that needs one.
        InputError: transformers cannot build the tokenizer from the files.
    """
    from onboard.reference import tokenizer_needs_code

    root = repo.root
    vocabulary = vocabulary_files(root)
    built_from = [*SETTINGS_FILES, *(["tokenizer.json"] if "tokenizer.json" in vocabulary else vocabulary)]
    if "vocab.json" in built_from:
        built_from.append("merges.txt")
    pointers = {p.file: p for p in repo.pointers}
    blocking = [pointers[name] for name in built_from if name in pointers]
    if blocking:
        raise LfsPointerError(blocking, root, repo.repo_id)
    if tokenizer_needs_code(root) is None:  # repository code decides its own files
        named = _string_field(repo.json("tokenizer_config.json"), "tokenizer_class")
        if not vocabulary and needs_vocabulary(named):
            raise NoVocabulary(repo.display, looked_for(named), fetch_hint(repo))
        raw_bpe = "tokenizer.json" not in vocabulary and "vocab.json" in vocabulary and (root / "merges.txt").is_file()
        if raw_bpe and named is None and _string_field(repo.json("config.json"), "model_type") is None:
            return _raw_bpe(root)
    return load_subject(root)


def load_tokenizer(folder: Path) -> Any | None:
    """A checkpoint folder's tokenizer for the stages that only tokenize (goldens, quantize-plan), built as
    verify-tokenizer builds it; None when the folder declares no vocabulary (they fall back to token-id prompts)."""
    from onboard.verify_tokenizer.repo import open_tokenizer_repo

    if not any((folder / f).is_file() for f in (*SETTINGS_FILES, "tokenizer.json", "vocab.json")):
        return None
    try:
        return open_subject(open_tokenizer_repo(str(folder))).hf
    except NoVocabulary:
        return None


def _raw_bpe(root: Path) -> Subject:
    """vocab.json + merges.txt and nothing naming the class: GPT-2's byte-level BPE, said out loud."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import GPT2Tokenizer

    check_settings(root)

    try:
        with panics_as_errors():
            tok = GPT2Tokenizer.from_pretrained(str(root), trust_remote_code=False, local_files_only=True)
    except Exception as exc:  # malformed vocab.json / merges.txt: tokenizers raises several types
        raise InputError(
            f"{root.name}: vocab.json + merges.txt cannot be loaded as byte-level BPE ({type(exc).__name__}: "
            f"{_first_line(exc)})",
            "check that vocab.json maps tokens to ids and merges.txt holds one merge per line",
        ) from exc
    note = warning(
        "tokenizer-class-assumed",
        f"no tokenizer.json and nothing names the tokenizer class (tokenizer_config.json has no tokenizer_class, "
        f"no config.json model_type): loaded vocab.json + merges.txt as byte-level BPE, class {RAW_BPE_CLASS} "
        "assumed (GPT-2's pre-tokenizer regex, no normalizer)",
        "if the model's tokenizer is another class, name it in tokenizer_config.json (tokenizer_class) or add its "
        "tokenizer.json",
        file="vocab.json",
    )
    backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None)
    return Subject(tok, backend, type(tok).__name__, (note,), RAW_BPE_CLASS)


def load_subject(root: Path) -> Subject:
    """AutoTokenizer from a local folder, offline; repository code only inside the sandbox worker's
    `remote_code_allowed()` (onboard/reference.py). Unusable files: InputError."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    from onboard.reference import tokenizer_needs_code, trust_remote_code

    logging.getLogger("transformers").setLevel(logging.ERROR)
    check_settings(root)
    try:
        with warnings.catch_warnings(), panics_as_errors():
            warnings.simplefilter("ignore")
            tok = AutoTokenizer.from_pretrained(str(root), trust_remote_code=trust_remote_code(), local_files_only=True)
    except Exception as exc:  # transformers raises many types (ValueError, OSError, Exception from tokenizers)
        needs = tokenizer_needs_code(root)
        raise InputError(
            f"{root.name}: transformers cannot load the tokenizer ({type(exc).__name__}: {_first_line(exc)})",
            f"{needs}: `onboard verify-tokenizer SOURCE --trust-remote-code` runs it in a sandbox"
            if needs
            else "check tokenizer.json / tokenizer_config.json (truncated download? wrong tokenizer_class?)",
        ) from exc
    backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None)
    return Subject(tok, backend, type(tok).__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def vocabulary_files(root: Path) -> list[str]:
    """The vocabulary files at the top of `root` (pointers included: they are there, only not downloaded)."""
    return sorted({p.name for pattern in VOCABULARY_GLOBS for p in root.glob(pattern) if p.is_file()})


def looked_for(named: str | None = None) -> list[str]:
    """What counts as a vocabulary, in words: the generic files plus the ones the named class reads (transformers'
    `vocab_files_names`)."""
    names = [
        "tokenizer.json",
        "tokenizer.model (or another *.model)",
        "vocab.json + merges.txt",
        "vocab.txt",
        "*.tiktoken",
        "tekken.json",
    ]
    files = getattr(_tokenizer_class(named), "vocab_files_names", None)
    for file in [str(f) for f in files.values()] if isinstance(files, dict) else []:
        if not any(file in n for n in names):
            names.append(file)
    return names


def _string_field(doc: dict[str, Any] | None, key: str) -> str | None:
    value = (doc or {}).get(key)
    return value if isinstance(value, str) and value else None


def _tokenizer_class(named: str | None) -> type | None:
    if not named:
        return None
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    return tokenizer_class_from_name(named) or tokenizer_class_from_name(named.removesuffix("Fast"))


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


def check_settings(root: Path) -> None:
    """InputError naming the file and field for a setting transformers loads without complaint but breaks on later
    (what was left after feeding every settings field bad values): a `model_max_length` that is not a number (every
    encode compares with it: TypeError), an empty `unk_token` (its id lookup falls back to itself: RecursionError).
    A file that is missing or not a JSON object is left to the loader, which reports it."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        try:
            doc = json.loads((root / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        limit = doc.get("model_max_length")
        number = isinstance(limit, (int, float)) and not isinstance(limit, bool)
        if name == "tokenizer_config.json" and limit is not None and not number:
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
