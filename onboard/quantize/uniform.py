"""Uniform formats, the baseline a plan is judged against: each candidate on every unit it applies to, measured.

A uniform format is `complete` when it covers every unit of the kinds its engine quantizes (vLLM formats never
cover the embedding; int4-g128 and fp8-block need input widths divisible by 128). Only complete ones compete:
  best()          --budget-kl: the fewest bytes within the budget; --target-bytes: the least KL within the size
  nearest_size()  the one whose bytes are nearest the plan's, with plan KL / its KL
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from onboard.quantize.formats import BF16, FORMATS, Format
from onboard.quantize.forward import Score
from onboard.quantize.sensitivity import Sensitivity
from onboard.quantize.units import Unit


class Swept(Protocol):
    """What a uniform baseline reads of plan.Swept (a Protocol, not an import: plan imports this module)."""

    units: list[Unit]
    results: list[Sensitivity]
    kept_bytes: float

    def measure(self, formats: list[str]) -> Score: ...


def measure_all(swept: Swept, candidates: list[Format], say: Any) -> list[dict[str, Any]]:
    rows = []
    units = swept.units
    for fmt in candidates:
        formats = [fmt.name if u.applies(fmt) else BF16 for u in units]
        if all(name == BF16 for name in formats):
            continue
        score = swept.measure(formats)
        predicted = sum(r.costs.get(fmt.name, r.costs[BF16]).kl for r in swept.results)
        rows.append(
            {
                "format": fmt.name,
                "bytes": math.ceil(swept.kept_bytes + sum(u.nbytes(FORMATS[n]) for u, n in zip(units, formats))),
                "measured_kl": score.kl,
                "predicted_kl": predicted,
                "top1": score.top1,
                "complete": all(u.applies(fmt) for u in units if u.kind in fmt.kinds),
                "kept_bf16": [u.name for u, n in zip(units, formats) if n == BF16 and u.kind in fmt.kinds],
            }
        )
        say(f"  uniform {fmt.name}: {rows[-1]['bytes']} bytes, measured KL {score.kl:.3e}")
    return rows


def best(rows: list[dict[str, Any]], budget_kl: float | None, target_bytes: int | None) -> dict[str, Any] | None:
    complete = [u for u in rows if u["complete"]]
    if budget_kl is not None:
        within = [u for u in complete if u["measured_kl"] <= budget_kl]
        return min(within, key=lambda u: u["bytes"]) if within else None
    within = [u for u in complete if u["bytes"] <= (target_bytes or 0)]
    return min(within, key=lambda u: u["measured_kl"]) if within else None


def nearest_size(rows: list[dict[str, Any]], plan_bytes: float, measured: float) -> dict[str, Any] | None:
    complete = [u for u in rows if u["complete"]]
    if not complete:
        return None
    nearest = min(complete, key=lambda u: abs(u["bytes"] - plan_bytes))
    ratio = measured / nearest["measured_kl"] if nearest["measured_kl"] > 0 else None
    return {
        "format": nearest["format"],
        "bytes": nearest["bytes"],
        "measured_kl": nearest["measured_kl"],
        "plan_over_uniform_kl": ratio,
    }
