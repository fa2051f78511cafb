"""Choosing one format per unit: a multiple-choice knapsack by dynamic programming, `fewest_bytes` within a KL budget
or `least_kl` within a byte target. The capped quantity is discretised into buckets, each option rounded UP, so a
solution never exceeds the cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_BUCKETS = 2000
BUCKETS_PER_UNIT = 20


@dataclass(frozen=True)
class Option:
    format: str
    bytes: float
    kl: float


def fewest_bytes(options: Sequence[Sequence[Option]], budget_kl: float) -> list[Option] | None:
    return _solve(options, budget_kl, capped=lambda o: o.kl, minimised=lambda o: o.bytes)


def least_kl(options: Sequence[Sequence[Option]], target_bytes: float) -> list[Option] | None:
    return _solve(options, target_bytes, capped=lambda o: o.bytes, minimised=lambda o: o.kl)


def _solve(
    options: Sequence[Sequence[Option]],
    cap: float,
    capped: Callable[[Option], float],
    minimised: Callable[[Option], float],
) -> list[Option] | None:
    """None when no choice fits under `cap`."""
    import numpy as np

    if cap < 0 or any(not unit for unit in options):
        return None
    buckets = max(MIN_BUCKETS, BUCKETS_PER_UNIT * len(options))
    scale = buckets / cap if cap > 0 else 0.0

    def width(o: Option) -> int:
        value = capped(o)
        if value <= 0:
            return 0
        return buckets + 1 if cap == 0 else math.ceil(value * scale - 1e-9)

    best = np.zeros(buckets + 1)  # best[c]: least minimised sum with capped sum at most c buckets
    choices = []
    for unit in options:
        new = np.full(buckets + 1, np.inf)
        pick = np.full(buckets + 1, -1, dtype=np.int64)
        for index, option in enumerate(unit):
            w = width(option)
            if w > buckets:
                continue
            shifted = np.full(buckets + 1, np.inf)
            shifted[w:] = best[: buckets + 1 - w] + minimised(option)
            better = shifted < new
            new[better], pick[better] = shifted[better], index
        best = new
        choices.append(pick)
    if not np.isfinite(best[buckets]):
        return None
    chosen, c = [], buckets
    for unit, pick in zip(reversed(options), reversed(choices)):
        option = unit[int(pick[c])]
        chosen.append(option)
        c -= width(option)
    return chosen[::-1]
