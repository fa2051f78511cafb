"""The onboarding report's quantization section, from `quantize-plan.json` in the revision folder (written there
by `onboard quantize-plan --out onboarding/<slug>/<revision>`): a sensitivity-per-layer plot and the plan's table.

Plain tuples out (the report wraps them in its Plot / Table), so this module never imports the report's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from onboard.promote import svg

PLAN_FILE = "quantize-plan.json"

PlotParts = tuple[str, str, str, str]
"""(id, title, svg, caption)"""
TableParts = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]
"""(title, header, rows)"""


def section(rev_dir: Path) -> tuple[list[PlotParts], list[TableParts], list[str]]:
    """(plots, tables, missing lines) for the report; nothing when no plan was written for this revision."""
    path = rev_dir / PLAN_FILE
    if not path.is_file():
        return [], [], []
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
        units = plan["sensitivity"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return (
            [],
            [],
            [f"quantization plan: {path} unreadable ({type(exc).__name__}: {exc}); rerun onboard quantize-plan"],
        )
    return [_plot(units)], [_table(plan)], []


def _coarsest_kl(unit: dict[str, Any]) -> float | None:
    values = [f["kl"] for name, f in unit.get("formats", {}).items() if name != "bf16"]
    return max(values) if values else None


def _plot(units: list[dict[str, Any]]) -> PlotParts:
    series: dict[str, list[tuple[float, float]]] = {}
    for unit in units:
        kl = _coarsest_kl(unit)
        if unit.get("layer") is not None and kl is not None:
            series.setdefault(unit["kind"], []).append((float(unit["layer"]), kl))
    chart = svg.line_chart(
        "Sensitivity per layer", [svg.Series(kind, tuple(points)) for kind, points in series.items()],
        "layer", "KL alone, coarsest format", log_y=True,
    )  # fmt: skip
    caption = (
        "KL to the reference over the prompt suite with one unit quantized alone, at the coarsest format it can "
        "take (the sweep's measured probe); embedding and head are in the table."
    )
    return ("plot-quantize-sensitivity", "Quantization sensitivity per layer", chart, caption)


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def _table(plan: dict[str, Any]) -> TableParts:
    chosen = {u["unit"]: u for u in plan.get("units", [])}
    rows = []
    for unit in plan["sensitivity"]:
        pick = chosen.get(unit["unit"], {})
        rows.append((
            unit["unit"], str(pick.get("format", "—")), _fmt(pick.get("kl_alone")), _fmt(_coarsest_kl(unit)),
            _fmt(unit.get("weight_outlier")), _fmt(unit.get("activation_outlier")),
        ))  # fmt: skip
    best = plan.get("uniform_best") or {}
    rows.append((
        "whole plan, measured", f"{plan.get('bytes', 0):,} B of {plan.get('bf16_bytes', 0):,} (bf16)",
        f"predicted {_fmt(plan.get('predicted_kl'))}", f"measured {_fmt(plan.get('measured_kl'))}", "", "",
    ))  # fmt: skip
    rows.append((
        "best uniform format", str(best.get("format", "none")), "", f"measured {_fmt(best.get('measured_kl'))}",
        f"{best['bytes']:,} B" if "bytes" in best else "", "",
    ))  # fmt: skip
    header = ("unit", "format", "KL alone", "KL at coarsest format", "max|w|/rms", "max|x|/rms")
    return ("Quantization plan", header, tuple(rows))
