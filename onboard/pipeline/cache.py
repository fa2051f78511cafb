"""Stage cache: a stage's result is reused when the hash of everything it read is unchanged.

A stage's key hashes the checkpoint fingerprint (onboard/checkpoint_id.py, the one the goldens record), its
parameters, the keys of the stages it depends on, the versions of the numeric libraries (onboard/versions.py) and
its own code, so an edit or an upgrade reruns what it affects. Keys live in `<run>/.cache/<stage>.key`, written
after the stage's outputs: a crash mid-stage leaves no key and the stage reruns.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from onboard.fsutil import atomic_write
from onboard.versions import NUMERIC_LIBRARIES, library_versions

ONBOARD_ROOT = Path(__file__).resolve().parents[1]
# Files of a stage package that decide its results: code, templates and the data tables it reads.
CODE_SUFFIXES = frozenset({".py", ".j2", ".jinja", ".json", ".yaml", ".yml", ".toml"})


def code_path(name: str) -> Path:
    """Where the code named `name` lives: a package or module of onboard (`validate_serving`, `profile.py`), else a
    data folder shipped with it (`templates`)."""
    if (ONBOARD_ROOT / name).exists():
        return ONBOARD_ROOT / name
    from onboard.resources import data_dir

    return data_dir(name)


@functools.cache
def code_hash(location: Path) -> str:
    """sha256 over the relative path and bytes of every code file at `location` (a folder or one file)."""
    if location.is_file():
        files, base = [location], location.parent
    else:
        files = sorted(p for p in location.rglob("*") if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts)
        base = location
    if not files:
        raise ValueError(f"no code at {location}: a stage names code that does not exist")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def stage_key(stage: str, fingerprint: str, params: dict[str, Any], upstream: list[str], code: tuple[str, ...]) -> str:
    """The cache key: everything the stage's result depends on. `code`: where the stage's code lives (code_path)."""
    doc = {
        "stage": stage,
        "versions": library_versions(NUMERIC_LIBRARIES),
        "code": {name: code_hash(code_path(name)) for name in code},
        "checkpoint": fingerprint,
        "params": params,
        "upstream": upstream,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def cached(run_dir: Path, stage: str, key: str, outputs: list[str]) -> bool:
    key_file = run_dir / ".cache" / f"{stage}.key"
    try:
        return key_file.read_text().strip() == key and all((run_dir / o).exists() for o in outputs)
    except OSError:
        return False


def remember(run_dir: Path, stage: str, key: str) -> None:
    atomic_write(run_dir / ".cache" / f"{stage}.key", key + "\n")


def forget(run_dir: Path, stage: str) -> None:
    (run_dir / ".cache" / f"{stage}.key").unlink(missing_ok=True)
