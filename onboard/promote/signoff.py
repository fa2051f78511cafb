"""Manual sign-offs (licence review, model card read, waivers): who, when, why, in `<revision>/signoffs.json`.

Appends take an exclusive lock so two people signing at once both land; the file is replaced atomically.
"""

from __future__ import annotations

import fcntl
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from onboard.errors import InputError
from onboard.fsutil import atomic_write_json, os_error, read_json
from onboard.promote.checklist import Checklist, Signoff, load_checklist

SIGNOFFS_FILE = "signoffs.json"


class _SignoffsFile(msgspec.Struct):
    signoffs: list[Signoff]


def load_signoffs(rev_dir: Path) -> tuple[Signoff, ...]:
    """Sign-offs recorded for one revision, oldest first; a malformed file is an error naming it and the field."""
    path = rev_dir / SIGNOFFS_FILE
    if not path.is_file():
        return ()
    data = read_json(path, _SignoffsFile, "fix or delete it (or the entry named) and record the sign-offs again")
    return tuple(data.signoffs)


def record_signoff(rev_dir: Path, item_id: str, by: str, note: str = "", checklist: Checklist | None = None) -> Signoff:
    """Append a sign-off for `item_id` after checking the checklist allows one (and has a note for a waiver)."""
    checklist = checklist or load_checklist()
    item = checklist.item(item_id)
    if item.signoff == "no":
        checks = ", ".join(f"{r.stage}:{r.check}" for r in item.ticked_by)
        raise InputError(
            f"{item_id!r} is ticked only by its checks ({checks}); a sign-off cannot stand in for them",
            f"fix what fails and rerun: {item.command}",
        )
    by = by.strip()
    if not by:
        raise InputError("--by is empty", "give the name of the person signing off")
    if item.signoff == "allowed" and not note.strip():
        raise InputError(
            f"signing off {item_id!r} waives its checks, so it needs a reason",
            'add --note "why this is acceptable" (it is shown in the checklist and the promotion record)',
        )
    if not rev_dir.is_dir():
        raise InputError(f"{rev_dir} does not exist", "run `onboard new-model` for this model first")
    entry = Signoff(item_id, by, datetime.now(timezone.utc).isoformat(timespec="seconds"), note.strip())
    lock_path = rev_dir / (SIGNOFFS_FILE + ".lock")
    try:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            existing = load_signoffs(rev_dir)
            data = {"signoffs": [asdict(s) for s in (*existing, entry)]}
            atomic_write_json(rev_dir / SIGNOFFS_FILE, data)
    except OSError as exc:
        raise os_error(exc, lock_path, "lock") from exc
    return entry
