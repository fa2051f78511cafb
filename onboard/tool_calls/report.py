"""The onboarding report's tool-call section from validate.json's `tool_calls` check data (validate_serving/
tool_check.py): the vendor-verifier summary and one row per suite conversation, as plain tuples (the report wraps
them in its Table)."""

from __future__ import annotations

from typing import Any

TableParts = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]
HEADER = ("conversation", "reference calls", "engine calls", "agrees", "differences")


def section(validate: dict[str, Any]) -> list[TableParts]:
    """Nothing when validate did not run the check against an endpoint."""
    data = (validate.get("check_data") or {}).get("tool_calls")
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
        return []
    summary = data["summary"]
    schema = summary.get("schema_accuracy")
    configured = data.get("configured") or {}
    rows: list[tuple[str, ...]] = [
        (
            "summary",
            f"format {data.get('tool_format')}",
            f"parsers {configured.get('tool_call_parser') or '?'} / {configured.get('reasoning_parser') or '?'}",
            f"{summary.get('agreeing')}/{summary.get('conversations')}",
            f"trigger similarity {_percent(summary.get('trigger_similarity'))}, schema accuracy {_percent(schema)}",
        )
    ]
    for outcome in data.get("conversations") or ():
        lines = [*outcome.get("differences", ()), *outcome.get("errors", ()), *outcome.get("stream_differences", ())]
        rows.append(
            (
                str(outcome.get("name")),
                "yes" if outcome.get("expected_call") else "no",
                str(outcome.get("calls", 0)) if outcome.get("triggered") else "none",
                "yes" if outcome.get("agrees") else "NO",
                "; ".join(lines),
            )
        )
    advice = data.get("advice")
    if isinstance(advice, dict) and advice.get("line"):
        rows.append(("parser advice", "", "", "", str(advice["line"])))
    return [("Tool calls", HEADER, tuple(rows))]


def _percent(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "n/a"
