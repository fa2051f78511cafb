"""Content hashes for the promotion record: files, folders (goldens), and named sets of files (tokenizer)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

# Files that decide how text becomes tokens and back; their combined hash is the record's tokenizer hash.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)
_SKIP_SUFFIXES = (".lock", ".tmp", ".pending")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def combine(hashes: Mapping[str, str | None]) -> str:
    """One hash for a set of named hashes; order-independent, and a renamed file changes it."""
    h = hashlib.sha256()
    for name in sorted(hashes):
        h.update(f"{name}\0{hashes[name] or '-'}\n".encode())
    return h.hexdigest()


def sha256_tree(root: Path) -> str | None:
    """Hash of every regular file under `root` (relative paths + contents); None when `root` is not a folder."""
    if not root.is_dir():
        return None
    files = {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(_SKIP_SUFFIXES)
    }
    return combine(files)


def tokenizer_hash(file_hashes: Mapping[str, str | None]) -> str | None:
    """Combined hash of the tokenizer files among `file_hashes` (None when none are present or hashed)."""
    picked = {n: h for n, h in file_hashes.items() if Path(n).name in TOKENIZER_FILES and h}
    return combine(picked) if picked else None
