"""The plan search against brute force over every combination, on small random instances."""

from __future__ import annotations

import itertools
import random

import pytest

from onboard.quantize.search import Option, fewest_bytes, least_kl


def _instance(seed: int, units: int = 5, formats: int = 4) -> list[list[Option]]:
    rng = random.Random(seed)
    out = []
    for _ in range(units):
        size = rng.randint(10, 100)
        options = [Option("bf16", 2.0 * size, 0.0)]
        for f in range(formats):
            bits = rng.choice((4, 5, 6, 8))
            options.append(Option(f"f{f}", bits / 8 * size, rng.uniform(0, 1e-3) * (16 - bits) * size / 100))
        out.append(options)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_fewest_bytes_is_optimal_within_the_budget(seed: int) -> None:
    options = _instance(seed)
    combos = list(itertools.product(*options))
    budget = sorted(sum(o.kl for o in c) for c in combos)[len(combos) // 3]
    best = min(sum(o.bytes for o in c) for c in combos if sum(o.kl for o in c) <= budget)
    chosen = fewest_bytes(options, budget)
    assert chosen is not None and sum(o.kl for o in chosen) <= budget
    # Discretisation rounds each KL up: never over budget, at most a little above the optimum in bytes.
    assert sum(o.bytes for o in chosen) <= best * 1.05


@pytest.mark.parametrize("seed", range(6))
def test_least_kl_is_optimal_within_the_target(seed: int) -> None:
    options = _instance(seed)
    combos = list(itertools.product(*options))
    target = sorted(sum(o.bytes for o in c) for c in combos)[len(combos) // 2]
    best = min(sum(o.kl for o in c) for c in combos if sum(o.bytes for o in c) <= target)
    chosen = least_kl(options, target)
    assert chosen is not None and sum(o.bytes for o in chosen) <= target
    assert sum(o.kl for o in chosen) <= best * 1.05 + 1e-12


def test_infeasible_and_trivial_caps() -> None:
    options = _instance(0)
    assert least_kl(options, 1.0) is None  # smaller than any choice
    zero = fewest_bytes(options, 0.0)  # zero budget: nothing can move
    assert zero is not None and all(o.format == "bf16" for o in zero)
