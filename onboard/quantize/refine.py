"""After the knapsack: measure a few neighbouring plans whole and keep the best one measured.

The sum of per-unit KLs mispredicts a whole plan (units interact; in bf16 any perturbation moves the downstream
roundings), so the plan's neighbours (one unit's format changed, or one up and one down) are ranked by the
prediction and the most promising MEASURED, at most `measurements` forwards over the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from onboard.quantize.search import Option

MEASUREMENTS = 8
PAIR_POOL = 12
"""Pairs are formed from this many of the best single upgrades and downgrades."""


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
