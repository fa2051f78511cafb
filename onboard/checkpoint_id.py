"""Which checkpoint is this? A content fingerprint of a folder (goldens of another checkpoint are refused; the
stage cache is keyed by it), and the key of its goldens: the hub repo id when known, so a new revision's snapshot
finds the earlier one's goldens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from onboard.fsutil import files_under

WHOLE_FILE_BYTES = 64 * 2**20  # files up to this size are hashed whole
# Larger files (weight shards): their header plus SAMPLES evenly spaced blocks; a fine-tune changes every tensor.
SAMPLES = 64
SAMPLE_BYTES = 4096
MAX_SAFETENSORS_HEADER = 100 * 2**20
# Files that describe a checkpoint but do not change what it computes: a README edit must not orphan its goldens.
DOC_SUFFIXES = frozenset({".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf"})
DOC_PREFIXES = ("LICENSE", "LICENCE", "NOTICE", "USE_POLICY")
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")  # a full git commit sha, as the hub names revisions


def is_commit_sha(value: object) -> bool:
    return isinstance(value, str) and COMMIT_SHA.fullmatch(value) is not None


def checkpoint_fingerprint(folder: Path) -> str:
    """sha256 (16 hex digits) over each file's relative path, size and content (sampled past WHOLE_FILE_BYTES),
    hidden files and documentation left out."""
    import hashlib  # here: it loads OpenSSL, and inspect imports this module

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
    paths = [folder / rel for rel in files_under(folder)]
    return [p for p in paths if p.is_file() and not p.name.startswith(".") and not _is_doc(p)]


def _is_doc(path: Path) -> bool:
    return path.suffix.lower() in DOC_SUFFIXES or path.name.upper().startswith(DOC_PREFIXES)


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
    """The hub repo id `ORG/NAME` of SOURCE, else None: `name` (--name), SOURCE as a hub id, a hub cache snapshot
    path (`…/models--ORG--NAME/snapshots/SHA`), or config.json's `_name_or_path` when it is a repo id."""
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
