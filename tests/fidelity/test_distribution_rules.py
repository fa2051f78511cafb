"""The distribution rules of the comparator on hand-made rows: what each statistic sees that worst-case x4 did not."""

from __future__ import annotations

import math
import random

from onboard.comparator import (
    LATE_FROM,
    NoiseStats,
    compare_rows,
    judge,
    judge_scale,
    noise_from,
    tolerances,
)
from onboard.validate_serving.candidates import TopK

VOCAB = 12


def row(logits: list[float]) -> TopK:
    z = math.log(sum(math.exp(v) for v in logits))
    pairs = sorted(((i, v - z) for i, v in enumerate(logits)), key=lambda p: -p[1])
    return TopK(tuple(i for i, _ in pairs), tuple(v for _, v in pairs))


def sequences(n: int, seed: int = 0) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.gauss(0, 3) for _ in range(VOCAB)] for _ in range(n)]


def noisy(logits: list[list[float]], sigma: float, seed: int, scale: float = 1.0) -> list[TopK]:
    rng = random.Random(10_000 + seed)  # not sequences()' stream: noise equal to logits/60 is a scale, not noise
    return [row([scale * v + rng.gauss(0, sigma) for v in lg]) for lg in logits]


def calibrated(logits: list[list[float]], sigma: float) -> tuple[list[TopK], NoiseStats]:
    ref = [row(lg) for lg in logits]
    metrics = compare_rows(ref, noisy(logits, sigma, seed=99), prompt="p")
    return ref, noise_from("bfloat16", "bfloat16", metrics, [])


def test_clean_noise_at_the_reference_level_passes_every_rule() -> None:
    logits = sequences(300)
    ref, noise = calibrated(logits, 0.05)
    tol = tolerances("bfloat16", noise)
    for seed in range(20):
        metrics = compare_rows(ref, noisy(logits, 0.05, seed), prompt="p")
        assert judge(metrics, tol).passed, judge(metrics, tol).reasons
        assert judge_scale(metrics, tol)[0]


def test_a_three_percent_scale_passes_the_worst_case_but_not_the_regression() -> None:
    logits = sequences(300)
    ref, noise = calibrated(logits, 0.05)
    tol = tolerances("bfloat16", noise)
    metrics = compare_rows(ref, noisy(logits, 0.05, seed=1, scale=1.03), prompt="p")
    assert max(m.max_logprob_error for m in metrics) < 4 * noise.max_logprob_error * 2  # the old rule's near-tie room
    ok, slope, _ = judge_scale(metrics, tol)
    assert not ok and abs(slope - 1.03) < 0.005


def test_mean_kl_catches_errors_each_within_the_worst_case() -> None:
    logits = sequences(300)
    ref, noise = calibrated(logits, 0.05)
    tol = tolerances("bfloat16", noise)
    metrics = compare_rows(ref, noisy(logits, 0.09, seed=2), prompt="p")  # 1.8x the noise everywhere
    verdict = judge(metrics, tol)
    assert verdict.kl_max <= tol.kl_max and verdict.max_logprob_error <= tol.max_logprob_error
    assert not verdict.passed and any("mean KL" in r for r in verdict.reasons)


def test_errors_growing_with_position_fail_the_late_rule() -> None:
    logits = sequences(200)
    ref, noise = calibrated(logits, 0.05)
    tol = tolerances("bfloat16", noise)
    rng = random.Random(3)
    cand = [row([v + rng.gauss(0, 0.05 if i < LATE_FROM else 0.16) for v in lg]) for i, lg in enumerate(logits)]
    verdict = judge(compare_rows(ref, cand, prompt="p"), tol)
    assert any("grows with position" in r for r in verdict.reasons), verdict.reasons


def test_a_swap_is_excused_only_where_the_reference_swaps_or_within_its_margin_noise() -> None:
    tie = [1.0, 0.3, -2.0] + [-5.0] * (VOCAB - 3)  # a 0.7-nat margin: far beyond the margin noise below
    logits = [tie] + sequences(99, seed=4)
    ref = [row(lg) for lg in logits]
    swapped = [row([0.3, 1.0, -2.0] + [-5.0] * (VOCAB - 3))] + ref[1:]
    quiet = noise_from("bfloat16", "bfloat16", compare_rows(ref, noisy(logits, 0.01, seed=5), prompt="p"), [])
    assert quiet.margin_max < 0.35
    unexcused = judge(compare_rows(ref, swapped, prompt="p"), tolerances("bfloat16", quiet))
    assert unexcused.near_ties == 0 and any("beyond the near-tie gap" in r for r in unexcused.reasons)
    own = NoiseStats(**{**quiet.__dict__, "swaps": ("p:0",)})  # the reference's own run swaps at p:0
    excused = judge(compare_rows(ref, swapped, prompt="p"), tolerances("bfloat16", own))
    assert excused.near_ties == 1 and not any("near-tie" in r for r in excused.reasons)


def test_many_small_swaps_fail_the_swap_rate_even_when_each_is_a_near_tie() -> None:
    logits = [[1.0, 0.95] + [-4.0] * (VOCAB - 2) for _ in range(200)]
    ref = [row(lg) for lg in logits]
    tol = tolerances("bfloat16", noise_from("bfloat16", "bfloat16", compare_rows(ref, ref, prompt="p"), []))
    cand = [row([0.95, 1.0] + [-4.0] * (VOCAB - 2)) if i % 5 == 0 else r for i, (lg, r) in enumerate(zip(logits, ref))]
    verdict = judge(compare_rows(ref, cand, prompt="p"), tol)
    assert verdict.top1_mismatches == 40 and any("swaps in 200 positions" in r for r in verdict.reasons)


def test_goldens_recorded_before_the_distribution_statistics_get_wider_not_narrower_tolerances() -> None:
    legacy = NoiseStats("bfloat16", "bfloat16", 0.2, 0.004, 3e-5, 0.01, 500)
    tol = tolerances("bfloat16", legacy)
    assert tol.calibrated and tol.kl_tail_level >= 4 * legacy.kl_max * 0.999
    assert tol.near_tie >= 2 * 2 * legacy.max_logprob_error * 0.999


def test_the_logit_scale_tolerance_follows_a_noisy_references_own_slope() -> None:
    """Where the reference's own run is itself off in scale (2% here, far above the bfloat16 floor), the candidate's
    slope may deviate 4x as much (THRESHOLDS' logit_scale multiplier): 6% passes, 10% does not."""
    logits = sequences(300)
    ref = [row(lg) for lg in logits]
    noise = noise_from(
        "bfloat16", "bfloat16", compare_rows(ref, noisy(logits, 0.001, seed=7, scale=1.02), prompt="p"), []
    )
    assert abs(noise.slope_deviation - 0.02) < 0.002
    tol = tolerances("bfloat16", noise)
    within = judge_scale(compare_rows(ref, noisy(logits, 0.001, seed=8, scale=1.06), prompt="p"), tol)
    assert within[0] and abs(within[1] - 1.06) < 0.005
    beyond = judge_scale(compare_rows(ref, noisy(logits, 0.001, seed=8, scale=1.10), prompt="p"), tol)
    assert not beyond[0] and abs(beyond[1] - 1.10) < 0.005
