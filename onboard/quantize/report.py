"""The onboarding report's quantization section from `quantize-plan.json` in the revision folder: a
sensitivity-per-layer plot and the plan's table, as plain tuples (the report wraps them in its Plot / Table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from onboard import svg
from onboard.quantize.plan_file import PLAN_FILE, ChosenUnit

PlotParts = tuple[str, str, str, str]
"""(id, title, svg, caption)"""
TableParts = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]
"""(title, header, rows)"""


class _Cost(msgspec.Struct):
    kl: float


class _Unit(msgspec.Struct):
    unit: str
    kind: str
    layer: int | None = None
    formats: dict[str, _Cost] = {}
    weight_outlier: float | None = None
    activation_outlier: float | None = None


class _Uniform(msgspec.Struct):
    format: str | None = None
    bytes: int | float | None = None
    measured_kl: float | None = None


class _Plan(msgspec.Struct):
    """The fields of quantize-plan.json the report reads (plan.py writes more)."""

    sensitivity: list[_Unit]
    units: list[ChosenUnit] = []
    bytes: int = 0
    bf16_bytes: int = 0
    predicted_kl: float | None = None
    measured_kl: float | None = None
    uniform_best: _Uniform | None = None
    formats_left_out: dict[str, str] = {}


def section(rev_dir: Path) -> tuple[list[PlotParts], list[TableParts], list[str]]:
    """(plots, tables, missing lines) for the report; nothing when no plan was written for this revision."""
    path = rev_dir / PLAN_FILE
    if not path.is_file():
        return [], [], []
    try:
        plan = msgspec.json.decode(path.read_bytes(), type=_Plan)
    except (OSError, msgspec.DecodeError) as exc:  # a wrong shape names the field: `$.sensitivity[2].kind`
        return [], [], [f"quantization plan: {path} unreadable ({exc}); rerun onboard quantize-plan"]
    left_out = [f"quantization plan: {name} not planned: {why}" for name, why in plan.formats_left_out.items()]
    return [_plot(plan.sensitivity)], [_table(plan)], left_out


def _coarsest_kl(unit: _Unit) -> float | None:
    values = [f.kl for name, f in unit.formats.items() if name != "bf16"]
    return max(values) if values else None


def _plot(units: list[_Unit]) -> PlotParts:
    series: dict[str, list[tuple[float, float]]] = {}
    for unit in units:
        kl = _coarsest_kl(unit)
        if unit.layer is not None and kl is not None:
            series.setdefault(unit.unit.split(".", 2)[-1], []).append((float(unit.layer), kl))  # attn.qkv, mlp.down
    lines = [svg.Series(kind, tuple(points)) for kind, points in series.items()]
    chart = svg.line_chart("Sensitivity per layer", lines, "layer", "KL alone, coarsest format", log_y=True)
    caption = (
        "KL to the reference over the prompt suite with one unit quantized alone, at the coarsest format it can "
        "take (the sweep's measured probe); embedding and head are in the table."
    )
    return ("plot-quantize-sensitivity", "Quantization sensitivity per layer", chart, caption)


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def _table(plan: _Plan) -> TableParts:
    chosen = {u.unit: u for u in plan.units}
    rows = []
    for unit in plan.sensitivity:
        pick = chosen.get(unit.unit)
        kls = (_fmt(pick and pick.kl_alone), _fmt(_coarsest_kl(unit)))
        outliers = (_fmt(unit.weight_outlier), _fmt(unit.activation_outlier))
        rows.append((unit.unit, pick.format if pick else "—", *kls, *outliers))
    size = f"{plan.bytes:,} B of {plan.bf16_bytes:,} (bf16)"
    kls = (f"predicted {_fmt(plan.predicted_kl)}", f"measured {_fmt(plan.measured_kl)}")
    rows.append(("whole plan, measured", size, *kls, "", ""))
    best = plan.uniform_best or _Uniform()
    best_size = f"{best.bytes:,} B" if best.bytes is not None else ""
    rows.append(("best uniform format", best.format or "none", "", f"measured {_fmt(best.measured_kl)}", best_size, ""))
    header = ("unit", "format", "KL alone", "KL at coarsest format", "max|w|/rms", "max|x|/rms")
    return ("Quantization plan", header, tuple(rows))
