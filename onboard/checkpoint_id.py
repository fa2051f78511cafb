"""Which checkpoint is this? One content fingerprint of a checkpoint folder, and one key for its goldens.

The fingerprint tells goldens of another checkpoint apart (`onboard validate` refuses them) and keys the
`new-model` stage cache. It reads content, not modification times, so a copy or a fresh clone of the same files has
the same fingerprint. The golden key names `golden_outputs/<key>/` after the hub repo id whenever one is known, so
a hub cache snapshot (`models--ORG--NAME/snapshots/SHA`) of a new revision finds the goldens of the earlier one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

WHOLE_FILE_BYTES = 64 * 2**20
"""Files up to this size (configs, tokenizers, tiny weights) are hashed whole."""
SAMPLES = 64
SAMPLE_BYTES = 4096
"""Larger files (weight shards) are hashed by their header plus SAMPLES evenly spaced blocks: a fine-tune or another
checkpoint changes every tensor and is caught, at a few hundred KiB read per shard instead of terabytes."""
MAX_SAFETENSORS_HEADER = 100 * 2**20
# Files that describe a checkpoint but do not change what it computes: a README edit must not orphan its goldens.
DOC_SUFFIXES = frozenset({".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf"})
DOC_PREFIXES = ("LICENSE", "LICENCE", "NOTICE", "USE_POLICY")
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
"""A full git commit sha, as the hub names revisions (a listing's `sha`, a webhook's `headSha` / `newSha`)."""


def is_commit_sha(value: object) -> bool:
    return isinstance(value, str) and COMMIT_SHA.fullmatch(value) is not None


def checkpoint_fingerprint(folder: Path) -> str:
    """sha256 (16 hex digits) over each file's relative path, size and content (sampled past WHOLE_FILE_BYTES).

    Hidden files and folders (`.git`, `.cache`) and documentation (DOC_SUFFIXES, DOC_PREFIXES) are left out.
    """
    import hashlib  # here, not at the top: hashlib loads OpenSSL (~3.5 ms), and inspect imports this module

    digest = hashlib.sha256()
    for path in sorted(_content_files(folder)):
        rel = path.relative_to(folder).as_posix()
        size = path.stat().st_size
        digest.update(f"{rel}\0{size}\0".encode())
        with path.open("rb") as fh:
            if size <= WHOLE_FILE_BYTES:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            else:
                _sample(fh, size, digest, header=path.suffix == ".safetensors")
    return digest.hexdigest()[:16]


def _content_files(folder: Path) -> list[Path]:
    out = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).parts
        if any(part.startswith(".") for part in rel) or not path.is_file():
            continue
        if path.suffix.lower() in DOC_SUFFIXES or path.name.upper().startswith(DOC_PREFIXES):
            continue
        out.append(path)
    return out


def _sample(fh, size: int, digest, *, header: bool) -> None:  # noqa: ANN001 (binary file, hashlib object)
    start = 0
    if header:  # safetensors: 8-byte little-endian header length, then the JSON header (names, dtypes, offsets)
        length = int.from_bytes(fh.read(8), "little")
        start = 8 + min(length, MAX_SAFETENSORS_HEADER)
        fh.seek(0)
        digest.update(fh.read(start))
    span = max(size - start - SAMPLE_BYTES, 0)
    for i in range(SAMPLES + 1):
        fh.seek(start + span * i // SAMPLES)
        digest.update(fh.read(SAMPLE_BYTES))


def repo_id_of(source: str, name: str | None = None) -> str | None:
    """The hub repo id `ORG/NAME` of SOURCE when one is known, else None.

    In order: `name` (the user's --name), a hub id given as SOURCE, a hub cache snapshot path
    (`…/models--ORG--NAME/snapshots/SHA`), config.json's `_name_or_path` when it is a repo id.
    """
    if name:
        return name.strip("/")
    path = Path(source)
    if not path.exists():
        if REPO_ID.match(source.strip("/")) and not source.startswith((".", "/")):
            return source.strip("/")
        return None
    parts = path.resolve().parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots":
            org_name = part[len("models--") :].split("--", 1)
            if len(org_name) == 2:
                return "/".join(org_name)
    try:
        recorded = json.loads((path / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(recorded, str) and REPO_ID.match(recorded) and not Path(recorded).exists():
        return recorded
    return None


def golden_key(source: str, name: str | None = None) -> str:
    """`golden_outputs/<key>/` and `onboarding/<key>/`: `ORG__NAME` when the repo id is known, else the folder name."""
    repo = repo_id_of(source, name)
    if repo:
        return repo.replace("/", "__")
    return Path(source).resolve().name
