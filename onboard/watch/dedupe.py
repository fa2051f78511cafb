"""Has this (repo, revision) already been promoted? Then neither the watcher nor the worker runs it again.

INTEGRATION POINT (issue 6): `onboard.promote.registry.already_promoted(repo, revision, registry_path)` answers
from the promotion registry (SQLite; `$ONBOARD_REGISTRY`, else `./onboarding/registry.sqlite3`) without creating it.
When that module is absent (a build without promotion), only the durable queue dedupes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PromotedCheck = Callable[[str, str], bool]


def never_promoted(repo: str, revision: str) -> bool:
    return False


def registry_check(registry_path: Path | str | None = None) -> PromotedCheck:
    """A check against the promotion registry, or `never_promoted` when this build has no registry module."""
    try:
        from onboard.promote.registry import already_promoted
    except ImportError:
        return never_promoted

    def check(repo: str, revision: str) -> bool:
        return already_promoted(repo, revision, registry_path)

    return check
