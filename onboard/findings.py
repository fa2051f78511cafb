"""Finding: one problem or observation, naming the file and tensor it concerns.

Severity, from worst: `fatal` (input unusable: exit 2), `error` (exit 1), `warning`, `info`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SEVERITIES = ("fatal", "error", "warning", "info")
# Codes whose repeats read best as "<count> <phrase>: <files>" when grouped.
GROUP_PHRASES = {"missing-shard": "shards missing"}
MAX_NAMED = 5


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    message: str
    hint: str | None = None
    file: str | None = None
    tensor: str | None = None
    members: tuple[Finding, ...] = ()  # a grouped finding's individual findings

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}; use one of {SEVERITIES}")


def fatal(code: str, message: str, hint: str | None = None, **where: str | None) -> Finding:
    return Finding(code, "fatal", message, hint, **where)


def error(code: str, message: str, hint: str | None = None, **where: str | None) -> Finding:
    return Finding(code, "error", message, hint, **where)


def warning(code: str, message: str, hint: str | None = None, **where: str | None) -> Finding:
    return Finding(code, "warning", message, hint, **where)


def info(code: str, message: str, hint: str | None = None, **where: str | None) -> Finding:
    return Finding(code, "info", message, hint, **where)


def exit_code_for(findings: Iterable[Finding]) -> int:
    """2 if any finding is fatal, 1 if any is an error, else 0."""
    severities = {f.severity for f in findings}
    if "fatal" in severities:
        return 2
    if "error" in severities:
        return 1
    return 0


def group_of(members: Sequence[Finding], message: str, hint: str | None) -> Finding:
    """One finding standing for `members` (same code and severity)."""
    first = members[0]
    return Finding(first.code, first.severity, message, hint, members=tuple(members))


def group_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings of one code and severity about whole files, one per file (a missing shard, a pointer), become one
    grouped finding at the first's place; findings about tensors, or several in one file, are kept as they are."""
    findings = list(findings)
    by_kind: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        if f.file and not f.tensor and not f.members:
            by_kind.setdefault((f.code, f.severity), []).append(f)
    by_kind = {k: same for k, same in by_kind.items() if len({f.file for f in same}) == len(same)}
    out: list[Finding] = []
    for f in findings:
        same = by_kind.get((f.code, f.severity), [])
        if len(same) < 2 or not any(f is g for g in same):
            out.append(f)
        elif f is same[0]:
            out.append(group_of(sorted(same, key=lambda m: m.file or ""), _group_message(same), f.hint))
    return out


def _group_message(same: list[Finding]) -> str:
    files = sorted({f.file for f in same if f.file})
    phrase = GROUP_PHRASES.get(same[0].code)
    if phrase:
        return f"{len(same)} {phrase}: {span(files)}"
    others = sorted({f.file for f in same[1:] if f.file})
    return f"{same[0].message} (and {len(same) - 1} more like it: {span(others)})"


def span(names: Sequence[str]) -> str:
    """`a … z` for a numbered series without gaps (model-00001 … model-00019), else the first few names."""
    names = sorted(names)
    numbers = [_number(n) for n in names]
    one_series = len({re.sub(r"\d+", "#", n) for n in names}) == 1
    if len(names) > 2 and one_series and numbers == list(range(numbers[0], numbers[0] + len(names))):  # type: ignore[operator]
        return f"{names[0]} … {names[-1]}"
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _number(name: str) -> int | None:
    found = re.search(r"\d+", name)
    return int(found.group(0)) if found else None
