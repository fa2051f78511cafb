"""Manual sign-offs (licence review, model card read, waivers): who, when, why, in `<revision>/signoffs.json`.

Appends take an exclusive lock so two people signing at once both land; the file is replaced atomically.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from onboard.errors import InputError
from onboard.promote.fsutil import atomic_write_json, os_error

if TYPE_CHECKING:
    from onboard.promote.checklist import Checklist

SIGNOFFS_FILE = "signoffs.json"


@dataclass(frozen=True)
class Signoff:
    item: str
    by: str
    at: str
    note: str = ""


def load_signoffs(rev_dir: Path) -> tuple[Signoff, ...]:
    """Sign-offs recorded for one revision, oldest first; a malformed file is an error naming it."""
    path = rev_dir / SIGNOFFS_FILE
    if not path.is_file():
        return ()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is unreadable: {exc}", "fix or delete it and record the sign-offs again") from exc
    entries = data.get("signoffs") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f'{path}: expected {{"signoffs": [...]}}', "fix or delete it and record the sign-offs again")
    out: list[Signoff] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("item", "by", "at")):
            raise InputError(f"{path}: signoffs[{i}] needs item, by and at strings", "fix or delete that entry")
        out.append(Signoff(e["item"], e["by"], e["at"], str(e.get("note") or "")))
    return tuple(out)


def record_signoff(rev_dir: Path, item_id: str, by: str, note: str = "", checklist: Checklist | None = None) -> Signoff:
    """Append a sign-off for `item_id` after checking the checklist allows one (and has a note for a waiver)."""
    from onboard.promote.checklist import load_checklist

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
