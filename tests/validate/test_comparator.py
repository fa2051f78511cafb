"""The comparator and its noise model on hand-made distributions: values matter, near-ties do not."""

from __future__ import annotations

import math

import pytest

from onboard.comparator import (
    THRESHOLDS,
    NoiseStats,
    compare_position,
    compare_rows,
    judge,
    noise_from,
    scale_ratio,
    tolerances,
)
from onboard.validate_serving.candidates import TopK


def dist(logits: dict[int, float]) -> TopK:
    """A full distribution over the given ids (softmax), best first."""
    z = math.log(sum(math.exp(v) for v in logits.values()))
    pairs = sorted(((i, v - z) for i, v in logits.items()), key=lambda p: -p[1])
    return TopK(tuple(i for i, _ in pairs), tuple(v for _, v in pairs))


BASE = {0: 2.0, 1: 1.0, 2: 0.5, 3: -1.0, 4: -2.0}


def test_identical_distributions_have_zero_error_and_scale_one() -> None:
    m = compare_position(0, dist(BASE), dist(BASE))
    assert m.top1_agree and m.max_logprob_error == 0.0 and m.kl == pytest.approx(0.0, abs=1e-12)
    assert scale_ratio([m]) == pytest.approx(1.0)


def test_logits_times_ten_keeps_argmax_but_fails_on_scale_and_values() -> None:
    """BUGZOO B34: the argmax is unchanged, so a top-k membership rule passes; the value checks do not."""
    ref, cand = dist(BASE), dist({k: 10 * v for k, v in BASE.items()})
    m = compare_position(0, ref, cand)
    assert m.top1_agree
    assert scale_ratio([m]) == pytest.approx(10.0, rel=1e-6)
    verdict = judge([m], tolerances("float32", None))
    assert not verdict.passed and any("logprob error" in r for r in verdict.reasons)


def test_near_tie_swap_is_excused_but_a_real_swap_is_not() -> None:
    tol = tolerances("bfloat16", None)
    ref = dist({0: 1.0, 1: 0.999, 2: -1.0})
    tie = dist({0: 0.999, 1: 1.0, 2: -1.0})
    m = compare_position(0, ref, tie)
    assert not m.top1_agree and m.gap < tol.near_tie
    assert judge([m], tol).near_ties == 1 and judge([m], tol).passed
    wrong = dist({0: -1.0, 1: 3.0, 2: 0.0})
    assert not judge([compare_position(0, ref, wrong)], tol).passed


def test_missing_reference_ids_are_bounded_by_the_candidates_kth_logprob() -> None:
    ref = dist(BASE)
    cand = TopK(ref.ids[:2], tuple(v - 3.0 for v in ref.logprobs[:2]))  # two ids only, far below the reference
    m = compare_position(0, ref, cand)
    assert m.max_logprob_error >= 3.0 - 1e-9
    assert m.topk_overlap == pytest.approx(2 / 5)


def test_nonfinite_candidate_values_are_infinite_errors() -> None:
    m = compare_position(0, dist(BASE), TopK((0, 1), (float("nan"), -1.0)))
    assert math.isinf(m.kl) and not judge([m], tolerances("float32", None)).passed


def test_tolerance_is_max_of_floor_and_multiplier_times_noise() -> None:
    noise = NoiseStats("bfloat16", "bfloat16", 0.5, 0.01, 0.001, 0.02, 100)
    tol = tolerances("bfloat16", noise)
    assert tol.max_logprob_error == pytest.approx(THRESHOLDS["max_logprob_error"]["multiplier"] * 0.5)
    quiet = tolerances("float32", NoiseStats("float32", "float64", 1e-9, 0, 0, 0, 10))
    assert quiet.max_logprob_error == THRESHOLDS["max_logprob_error"]["floor"]["float32"]
    assert tol.calibrated and quiet.calibrated


def test_noise_from_flags_a_reference_that_overflows() -> None:
    bad = compare_rows([dist(BASE)], [TopK((0,), (float("inf"),))])
    stats = noise_from("float16", "float16", bad, [])
    assert stats.nonfinite
    assert not tolerances("float16", stats).calibrated
