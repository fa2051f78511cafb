"""Check: one verdict of a stage, and the stage result that carries a stage's checks.

Every stage writes one JSON object: `stage`, `passed` (every required check passed), `checks`, then its own fields.
checklists/day-zero.yaml ticks its items by check name; promote reads the checks back (promote/stage_results.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from onboard import serde


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    required: bool = True
    """A failed required check fails its stage; an optional one is information."""
    detail: str = ""
    skipped: bool = False
    """Not run (an engine capability, a cap, too little signal, a refused reference): never a pass; the detail says
    what would run it."""
    not_applicable: bool = False
    """Nothing to check for this model (no boundary for long_context_parity): the one skip that satisfies an item."""
    stage: str = field(default="", metadata=serde.OMIT_EMPTY)
    """The stage that ran it, where checks of several stages share one list (a promotion record); empty (and not
    written) inside the stage's own result."""
    data: dict[str, Any] = field(default_factory=dict, compare=False, metadata=serde.OMIT_EMPTY)
    """The figures behind the verdict (validate's checks); a stage result keeps them under `check_data[name]`."""

    def to_dict(self) -> dict[str, Any]:
        """The check as it stands in a stage result's `checks` (its data goes to the result's `check_data`)."""
        out = serde.to_dict(self)
        out.pop("data", None)
        return out


def skipped(name: str, detail: str, *, passed: bool = False, required: bool = False, **fields: Any) -> Check:
    """A check that did not run; `detail` says why and what would run it."""
    return Check(name, passed, required, detail, skipped=True, **fields)


def all_passed(checks: Sequence[Check]) -> bool:
    """Does the stage pass: every required check passed."""
    return all(c.passed for c in checks if c.required)


def failed_names(checks: Sequence[Check]) -> list[str]:
    """The required checks that failed, in order."""
    return [c.name for c in checks if c.required and not c.passed]


def stage_result(stage: str, checks: Sequence[Check], **fields: Any) -> dict[str, Any]:
    """A stage result: stage, passed, checks, then the stage's own `fields`."""
    return {"stage": stage, "passed": all_passed(checks), "checks": [c.to_dict() for c in checks], **fields}


def read_checks(raw: Any, file: str) -> tuple[tuple[Check, ...], str | None]:
    """A stage result's `checks` list as Checks, and what was wrong with it (None when nothing was).

    Each item is decoded by msgspec (types checked); a malformed item is named with its JSON path
    (`$.checks[2].passed`) and left out, the others kept, so one bad entry does not hide the stage's other results.
    """
    if not isinstance(raw, list):
        return (), f"{file} has no `checks` list"
    checks: list[Check] = []
    bad: list[str] = []
    for i, item in enumerate(raw):
        try:
            checks.append(msgspec.convert(item, Check))
        except msgspec.ValidationError as exc:
            where = f"$.checks[{i}]"  # msgspec's path is relative to the item, and omitted at its root
            message = str(exc)
            bad.append(message.replace("`$", f"`{where}") if " - at `$" in message else f"{message} - at `{where}`")
    return tuple(checks), (f"{file}: malformed checks (need name and passed): {'; '.join(bad)}" if bad else None)
