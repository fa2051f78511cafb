"""The onboarding report's speculative-decoding section from `draft-check.json` in the revision folder: an
"acceptance by position" plot and a speedup table, as plain tuples (the report wraps them in its Plot / Table).
"""

from __future__ import annotations

from typing import Any

from onboard import svg

PlotParts = tuple[str, str, str, str]
TableParts = tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]


def section(result: dict[str, Any]) -> tuple[list[PlotParts], list[TableParts]]:
    """(plots, tables); nothing when draft-check did not measure acceptance for this revision."""
    greedy = result.get("greedy")
    if not isinstance(greedy, dict):
        return [], []
    modes = [("greedy", greedy)]
    sampled = result.get("sampled")
    if isinstance(sampled, dict):
        modes.append((f"T={sampled.get('temperature')}", sampled))
    return [_plot(result, modes)], [_table(result, modes)]


def _plot(result: dict[str, Any], modes: list[tuple[str, dict[str, Any]]]) -> PlotParts:
    series = []
    for name, mode in modes:
        points = tuple((float(p["position"]), float(p["rate"])) for p in mode["by_position"] if p["rate"] is not None)
        series.append(svg.Series(name, points))
    chart = svg.line_chart("Acceptance by position", series, "position in the draft window", "acceptance rate")
    caption = (
        f"Draft {result.get('draft')} for {result.get('target')}: the fraction of proposals at each position of the "
        "draft window that the target accepts, given the proposals before it were accepted (greedy: counted along "
        "the target's greedy trajectories; at temperature T: sum(min(p, q)) of both distributions)."
    )
    return ("plot-acceptance-by-position", "Acceptance by position", chart, caption)


def _table(result: dict[str, Any], modes: list[tuple[str, dict[str, Any]]]) -> TableParts:
    cost = result.get("cost") or {}
    rows = []
    for name, mode in modes:
        for accepted, speed in zip(mode["by_k"], mode["speedup"]):
            speeds = (_fmt(speed["measured"], "x"), _fmt(speed["model"], "x"))
            recommended = "yes" if mode.get("recommended_k") == accepted["k"] else ""
            rows.append((name, str(accepted["k"]), _fmt(accepted["mean_accepted"], ""), *speeds, recommended))
    title = f"Speculative decoding: {result.get('draft')} (draft/target step cost c = {cost.get('ratio', 0):.3f})"
    header = ("mode", "k", "accepted per step", "speedup (measured)", "speedup (model)", "recommended")
    return (title, header, tuple(rows))


def _fmt(value: float | None, unit: str) -> str:
    return f"{value:.2f}{unit}" if value is not None else "— (no window this long)"
