"""Choosing one format per unit: a multiple-choice knapsack by dynamic programming, `fewest_bytes` within a KL budget
or `least_kl` within a byte target (the capped quantity is discretised into buckets, each option rounded UP, so a
solution never exceeds the cap); then `*_within` measures a few neighbouring plans whole and keeps the best measured.
The sum of per-unit KLs mispredicts a whole plan (units interact), so neighbours (one unit's format changed, or one
up and one down) are ranked by the prediction and the most promising measured, at most `measurements` forwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_BUCKETS = 2000
BUCKETS_PER_UNIT = 20
MEASUREMENTS = 8
PAIR_POOL = 12  # pairs are formed from this many of the best single upgrades and downgrades


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


@dataclass
class Refined:
    chosen: list[Option]
    score: Any
    """forward.Score of `chosen`, measured."""
    tried: list[dict[str, Any]] = field(default_factory=list)
    """Every neighbour measured: {changes: {unit index: format}, bytes, measured_kl, kept}."""


def least_kl_within(
    options: Sequence[Sequence[Option]],
    chosen: list[Option],
    score: Any,
    cap_bytes: float,
    measure: Callable[[list[Option]], Any],
    measurements: int = MEASUREMENTS,
) -> Refined:
    """Lower the measured KL of `chosen` (measured as `score`) without exceeding `cap_bytes` (units' bytes only)."""

    def candidates(current: Refined) -> list[list[Option]]:
        within = [c for c in _neighbours(options, current.chosen) if _bytes(c) <= cap_bytes]
        return sorted(within, key=lambda c: (_kl(c), _bytes(c)))

    return _climb(
        Refined(list(chosen), score), candidates, lambda new, current: new.kl < current.kl, measure, measurements
    )


def fewest_bytes_within(
    options: Sequence[Sequence[Option]],
    chosen: list[Option],
    score: Any,
    budget_kl: float,
    measure: Callable[[list[Option]], Any],
    measurements: int = MEASUREMENTS,
) -> Refined:
    """Lower the bytes of `chosen` (measured as `score`, within `budget_kl`) keeping the measured KL in the budget."""

    def candidates(current: Refined) -> list[list[Option]]:
        predicted = _kl(current.chosen)
        scale = current.score.kl / predicted if predicted > 0 else 1.0
        smaller = [
            c
            for c in _neighbours(options, current.chosen)
            if _bytes(c) < _bytes(current.chosen) and _kl(c) * scale <= budget_kl
        ]
        return sorted(smaller, key=lambda c: (_bytes(c), _kl(c)))

    return _climb(
        Refined(list(chosen), score), candidates, lambda new, _current: new.kl <= budget_kl, measure, measurements
    )


def _climb(
    result: Refined,
    candidates: Callable[[Refined], list[list[Option]]],
    accept: Callable[[Any, Any], bool],
    measure: Callable[[list[Option]], Any],
    measurements: int,
) -> Refined:
    """Measure candidates in order; the first accepted becomes the plan and its neighbours are searched next."""
    tried: set[tuple[str, ...]] = {_key(result.chosen)}
    while measurements > 0:
        improved = False
        for candidate in [c for c in candidates(result) if _key(c) not in tried][:measurements]:
            measurements -= 1
            tried.add(_key(candidate))
            new = measure(candidate)
            kept = accept(new, result.score)
            result.tried.append(_record(result.chosen, candidate, new, kept))
            if kept:
                result.chosen, result.score, improved = candidate, new, True
                break
        if not improved:
            break
    return result


def _neighbours(options: Sequence[Sequence[Option]], chosen: list[Option]) -> Iterator[list[Option]]:
    """Plans differing from `chosen` in one unit's format, or in two (one unit up in bytes, another down)."""
    ups: list[tuple[float, int, Option]] = []
    downs: list[tuple[float, int, Option]] = []
    for index, (unit_options, current) in enumerate(zip(options, chosen)):
        for option in unit_options:
            if option.format == current.format:
                continue
            yield _with(chosen, {index: option})
            extra, gain = option.bytes - current.bytes, current.kl - option.kl
            if extra > 0 and gain > 0:
                ups.append((-gain / extra, index, option))  # most KL removed per byte added first
            elif extra < 0:
                downs.append((max(-gain, 0.0) / -extra, index, option))  # least KL added per byte saved first
    ups.sort(key=lambda t: t[0])
    downs.sort(key=lambda t: t[0])
    for _, up_index, up in ups[:PAIR_POOL]:
        for _, down_index, down in downs[:PAIR_POOL]:
            if up_index != down_index:
                yield _with(chosen, {up_index: up, down_index: down})


def _with(chosen: list[Option], changes: dict[int, Option]) -> list[Option]:
    return [changes.get(i, o) for i, o in enumerate(chosen)]


def _key(chosen: Sequence[Option]) -> tuple[str, ...]:
    return tuple(o.format for o in chosen)


def _bytes(chosen: Sequence[Option]) -> float:
    return sum(o.bytes for o in chosen)


def _kl(chosen: Sequence[Option]) -> float:
    return sum(o.kl for o in chosen)


def _record(before: list[Option], after: list[Option], score: Any, kept: bool) -> dict[str, Any]:
    changes = {i: o.format for i, (b, o) in enumerate(zip(before, after)) if b.format != o.format}
    return {"changes": changes, "bytes": _bytes(after), "measured_kl": score.kl, "kept": kept}
