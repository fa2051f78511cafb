"""Stage cache: a stage's result is reused when the hash of everything it read is unchanged.

The key of a stage hashes the tool version, the checkpoint fingerprint (hub commit, or the content fingerprint of a
local folder: onboard/checkpoint_id.py, the one the goldens record), the stage's parameters and the keys of the
stages it depends on — so a changed profile reruns generate, and an unchanged checkpoint resumes instantly. Keys
live in `<run>/.cache/<stage>.key`, written after the stage's outputs, so a crash mid-stage leaves no key and the
stage reruns.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from onboard import __version__


def fingerprint_local(folder: Path) -> str:
    """The checkpoint's content fingerprint: the one the goldens record (onboard/checkpoint_id.py)."""
    from onboard.checkpoint_id import checkpoint_fingerprint

    return checkpoint_fingerprint(folder)


def stage_key(stage: str, fingerprint: str, params: dict[str, Any], upstream: list[str]) -> str:
    doc = {"stage": stage, "tool": __version__, "checkpoint": fingerprint, "params": params, "upstream": upstream}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def cached(run_dir: Path, stage: str, key: str, outputs: list[str]) -> bool:
    key_file = run_dir / ".cache" / f"{stage}.key"
    try:
        return key_file.read_text().strip() == key and all((run_dir / o).exists() for o in outputs)
    except OSError:
        return False


def remember(run_dir: Path, stage: str, key: str) -> None:
    folder = run_dir / ".cache"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{stage}.key.tmp"
    tmp.write_text(key + "\n")
    os.replace(tmp, folder / f"{stage}.key")


def forget(run_dir: Path, stage: str) -> None:
    (run_dir / ".cache" / f"{stage}.key").unlink(missing_ok=True)
