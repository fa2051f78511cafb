"""Finding: one problem or observation, naming the file and tensor it concerns.

Severity, from worst: `fatal` (input unusable: exit 2), `error` (exit 1), `warning`, `info`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SEVERITIES = ("fatal", "error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    message: str
    hint: str | None = None
    file: str | None = None
    tensor: str | None = None

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
