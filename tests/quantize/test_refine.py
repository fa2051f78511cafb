"""The measured refinement against a plan whose true KL is not the sum of its units' (a stand-in `measure`)."""

from __future__ import annotations

from dataclasses import dataclass

from onboard.quantize.search import Option, fewest_bytes_within, least_kl_within


@dataclass(frozen=True)
class _Score:
    kl: float


def _options() -> list[list[Option]]:
    # Three units; the prediction says unit 0 is cheap to coarsen to q4_k.
    return [
        [Option("bf16", 200, 0.0), Option("q8_0", 106, 1e-4), Option("q4_k", 56, 2e-4)],
        [Option("bf16", 200, 0.0), Option("q8_0", 106, 3e-4), Option("q4_k", 56, 9e-4)],
        [Option("bf16", 200, 0.0), Option("q8_0", 106, 3e-4), Option("q4_k", 56, 9e-4)],
    ]


def _measure(chosen: list[Option]) -> _Score:
    # Measured whole, unit 0 is the most sensitive to q4_k, unlike predicted.
    true = [{"bf16": 0.0, "q8_0": 1e-4, "q4_k": 5e-3}, *[{"bf16": 0.0, "q8_0": 3e-4, "q4_k": 1e-3}] * 2]
    return _Score(sum(true[i][o.format] for i, o in enumerate(chosen)))


def test_least_kl_keeps_a_measured_improvement_within_the_cap() -> None:
    options = _options()
    start = [options[0][2], options[1][1], options[2][1]]  # what the prediction prefers: 268 bytes
    cap = 268.0
    refined = least_kl_within(options, start, _measure(start), cap, _measure)
    assert sum(o.bytes for o in refined.chosen) <= cap
    assert refined.score.kl < _measure(start).kl  # unit 0 back to q8_0, another unit down: measured better
    assert refined.score == _measure(refined.chosen)
    assert all(t["bytes"] <= cap for t in refined.tried) and any(t["kept"] for t in refined.tried)


def test_least_kl_never_returns_a_plan_measured_worse() -> None:
    options = _options()
    start = [options[0][1], options[1][1], options[2][1]]  # already the best within 318 bytes
    refined = least_kl_within(options, start, _measure(start), 318.0, _measure)
    assert refined.chosen == start and not any(t["kept"] for t in refined.tried)


def test_fewest_bytes_stays_within_the_measured_budget() -> None:
    options = _options()
    start = [options[0][0], options[1][1], options[2][1]]  # 412 bytes, measured 6e-4
    budget = 1e-3
    refined = fewest_bytes_within(options, start, _measure(start), budget, _measure, measurements=8)
    assert refined.score.kl <= budget and sum(o.bytes for o in refined.chosen) < 412
    assert all(t["measured_kl"] > budget for t in refined.tried if not t["kept"])


def test_measurements_are_capped() -> None:
    options = _options()
    start = [options[0][0], options[1][0], options[2][0]]
    calls: list[int] = []

    def counting(chosen: list[Option]) -> _Score:
        calls.append(1)
        return _Score(1.0)  # every neighbour measures worse: nothing kept, the search stops at the cap

    least_kl_within(options, start, _Score(0.5), 600.0, counting, measurements=3)
    assert len(calls) == 3
