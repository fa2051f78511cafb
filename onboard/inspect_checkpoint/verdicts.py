"""The inspect stage's checks from a ModelProfile's JSON (the pipeline's inspect.json, or `onboard inspect --json`):
no fatal or error finding; no config finding above info; a known closest family and nothing new beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onboard.checks import Check

__all__ = ["inspect_checks"]


def inspect_checks(profile: Mapping[str, Any]) -> list[Check]:
    findings = [f for f in profile.get("findings") or [] if isinstance(f, dict)]
    bad = [f for f in findings if f.get("severity") in ("fatal", "error")]
    lint = [f for f in findings if str(f.get("code", "")).startswith("config-") and f.get("severity") != "info"]
    # Fields inspect could not establish (unreadable weights) are listed in `unknown` and hold the string "unknown".
    withheld = "closest_family" in (profile.get("unknown") or [])
    family = None if withheld else profile.get("closest_family")
    # novelty's first line sums it up ("qwen3 + sinks"); exactly the family name means nothing differs.
    listed = profile.get("novelty")
    novelty = [str(n) for n in (listed if isinstance(listed, list) else []) if str(n) != family]
    arch_detail = (
        "not established: inspect could not read the weights (see inspect_no_errors)"
        if withheld
        else f"closest family {family}, nothing new"
        if family and not novelty
        else (f"novelty vs {family or 'no known family'}: " + "; ".join(novelty[:5]))
    )
    return [
        Check("inspect_no_errors", not bad, detail=_describe(bad) if bad else f"{len(findings)} findings, no errors"),
        Check(
            "config_lint_clean", not lint, detail=_describe(lint) if lint else "no unknown or unmodelled config fields"
        ),
        Check("architecture_no_novelty", bool(family) and not novelty, detail=arch_detail),
    ]


def _describe(items: list[dict[str, Any]]) -> str:
    return "; ".join(f"{f.get('code')}: {f.get('message')}" for f in items[:5]) + (" …" if len(items) > 5 else "")
