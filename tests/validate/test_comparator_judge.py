"""`judge` on hand-made positions: where each rule's limit lies, and the figures its reason reports to the user
(validate's parity check and generate's parity detail show these reasons as they are)."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from onboard.comparator import (
    FAILED_CHECKS,
    LATE_FROM,
    ROUTING_FLIPS_ALLOWED,
    SAMPLE_SIGMAS,
    PositionMetrics,
    Tolerances,
    judge,
    poisson_bound,
    tail_events,
)

TOL = Tolerances("bfloat16", max_logprob_error=0.1, kl_max=0.01, kl_mean=0.001, logit_scale=0.01, near_tie=0.05,
                 calibrated=True, kl_sd=0.002, kl_tail_level=0.004, kl_late_mean=0.0005, kl_late_sd=0.001,
                 swap_rate=0.01)  # fmt: skip


def pm(index: int, kl: float = 0.0, err: float = 0.0, *, swap: bool = False, gap: float = 0.0, prompt: str = "p"):
    return PositionMetrics(index, not swap, 1.0, kl, err, gap if swap else 0.0, 0.0, 0.0, 0.0, prompt)


def numbers(reason: str) -> list[float]:
    """The figures a reason reports, in order (the "1" of "top-1" included)."""
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", reason)]


# Each reason's phrase and the stable name callers read instead of the text (Verdict.failed).
CHECK_OF = {"max logprob error": "max-logprob-error", "max KL": "max-kl", "mean KL": "mean-kl", "KL tail": "kl-tail",
            "grows with position": "kl-late", "beyond the near-tie gap": "top1-beyond-near-tie",
            "top-1 swaps in": "top1-rate"}  # fmt: skip


def only_reason(verdict, phrase: str) -> str:
    found = [r for r in verdict.reasons if phrase in r]
    assert len(found) == 1 and len(verdict.reasons) == 1, verdict.reasons
    assert verdict.failed == (CHECK_OF[phrase],), verdict.failed
    return found[0]


def approx_all(values: list[float]) -> list:
    return [pytest.approx(v, rel=5e-3) for v in values]  # reasons print 3 significant digits


def test_the_poisson_bound_is_the_mean_plus_four_standard_deviations_plus_one() -> None:
    assert SAMPLE_SIGMAS == 4.0
    assert poisson_bound(0.0) == 1  # one event is allowed even where none is expected
    assert poisson_bound(1.0) == 6  # 1 + 4 x 1 + 1
    assert poisson_bound(4.0) == 13  # 4 + 4 x 2 + 1
    assert poisson_bound(6.25) == 17  # 6.25 + 4 x 2.5 + 1 = 17.25, rounded down


def test_a_clean_run_passes_and_the_verdict_reports_its_statistics() -> None:
    metrics = [pm(i, kl=0.001 * (i % 3), err=0.01 * (i % 5)) for i in range(100)]
    verdict = judge(metrics, TOL)
    assert verdict.passed and verdict.reasons == ()
    assert verdict.positions == 100 and verdict.routing_flips == 0
    assert verdict.max_logprob_error == pytest.approx(0.04) and verdict.kl_max == pytest.approx(0.002)
    assert verdict.kl_mean == pytest.approx(sum(0.001 * (i % 3) for i in range(100)) / 100)
    late = [0.001 * (i % 3) for i in range(LATE_FROM, 100)]
    assert verdict.kl_late_mean == pytest.approx(sum(late) / len(late))
    assert verdict.top1_mismatches == verdict.near_ties == verdict.kl_tail_count == 0
    assert verdict.allowed_swaps == poisson_bound(TOL.swap_rate * 100) == 6


def test_no_positions_is_an_empty_pass() -> None:
    verdict = judge([], TOL)
    assert verdict.passed and verdict.reasons == () and verdict.kl_late_mean is None
    figures = {k: v for k, v in dataclasses.asdict(verdict).items()
               if k not in ("passed", "reasons", "kl_late_mean", "failed")}  # fmt: skip
    assert figures == dict.fromkeys(figures, 0) and len(figures) == 9 and verdict.failed == ()


def test_every_failed_check_has_one_stable_name_in_the_order_of_the_reasons() -> None:
    # A position with a gross error and KL, then a late rise and swaps: several checks fail at once.
    bad = [pm(i) for i in range(100)] + [pm(100, kl=0.5, err=0.9, swap=True, gap=1.0)]
    verdict = judge(bad + [pm(101 + i, kl=0.009, swap=i % 2 == 0, gap=1.0) for i in range(60)], TOL)
    assert len(verdict.failed) == len(verdict.reasons) >= 4, verdict.reasons
    assert set(verdict.failed) <= set(FAILED_CHECKS) and len(set(verdict.failed)) == len(verdict.failed)
    for name, reason in zip(verdict.failed, verdict.reasons):
        assert CHECK_OF[next(phrase for phrase in CHECK_OF if phrase in reason)] == name, (name, reason)


def test_a_gross_logprob_error_is_reported_with_its_value_and_bound() -> None:
    verdict = judge([pm(i) for i in range(20)] + [pm(20, err=0.25)], TOL)
    assert not verdict.passed and verdict.max_logprob_error == 0.25
    assert numbers(only_reason(verdict, "max logprob error")) == approx_all([0.25, 0.1])
    assert judge([pm(i) for i in range(20)] + [pm(20, err=0.1)], TOL).passed  # at the bound: passes


def test_a_gross_kl_is_reported_with_its_value_and_bound() -> None:
    # One position at 0.02 is also a tail run (1 run is allowed in 200 positions) and moves the mean by 1e-4 only.
    verdict = judge([pm(i) for i in range(200)] + [pm(200, kl=0.02)], TOL)
    assert not verdict.passed and verdict.kl_max == 0.02
    assert numbers(only_reason(verdict, "max KL")) == approx_all([0.02, 0.01])


def mean_limit(n: int) -> float:
    """The documented allowance: the tolerance + SAMPLE_SIGMAS standard errors + one position at the worst allowed."""
    return TOL.kl_mean + SAMPLE_SIGMAS * TOL.kl_sd / math.sqrt(n) + TOL.kl_max / n


def test_the_mean_kl_limit_allows_sampling_error_and_reports_it() -> None:
    n = LATE_FROM  # every position before the late group: only the overall mean is judged
    limit = mean_limit(n)  # 0.001 + 4 x 0.002 / 8 + 0.01 / 64
    assert limit == pytest.approx(0.00215625)
    below = judge([pm(i, kl=limit * 0.99) for i in range(n)], TOL)
    assert below.passed and below.kl_late_mean is None, below.reasons
    verdict = judge([pm(i, kl=limit * 1.02) for i in range(n)], TOL)
    assert verdict.kl_mean == pytest.approx(limit * 1.02)
    assert numbers(only_reason(verdict, "mean KL")) == approx_all([limit * 1.02, limit, n])


def test_few_positions_get_a_wider_mean_limit() -> None:
    """Over 4 positions the standard error and one worst-allowed position dominate: a mean of 0.004 passes there
    (limit 0.001 + 0.004 + 0.0025) and fails over 400 positions (limit 0.001 + 0.0004 + 0.000025)."""
    few = judge([pm(i, kl=0.0039) for i in range(4)], TOL)
    assert few.passed, few.reasons
    many = judge([pm(i, kl=0.0039) for i in range(400)], TOL)
    assert not many.passed
    reason = next(r for r in many.reasons if "mean KL" in r)
    assert numbers(reason) == approx_all([0.0039, mean_limit(400), 400])


def late_limit(late: int) -> float:
    return TOL.kl_late_mean + SAMPLE_SIGMAS * TOL.kl_late_sd / math.sqrt(late) + TOL.kl_max / late


def test_errors_growing_past_late_from_are_reported_with_their_mean_and_limit() -> None:
    n, late = 200, 200 - LATE_FROM
    limit = late_limit(late)
    quiet_start = [pm(i) for i in range(LATE_FROM)]
    below = judge(quiet_start + [pm(i, kl=limit * 0.99) for i in range(LATE_FROM, n)], TOL)
    assert below.passed, below.reasons
    verdict = judge(quiet_start + [pm(i, kl=limit * 1.05) for i in range(LATE_FROM, n)], TOL)
    assert verdict.kl_late_mean == pytest.approx(limit * 1.05)
    assert numbers(only_reason(verdict, "grows with position")) == approx_all([limit * 1.05, LATE_FROM, limit])


def test_the_late_group_starts_at_late_from() -> None:
    assert judge([pm(i, kl=0.001) for i in range(LATE_FROM)], TOL).kl_late_mean is None
    verdict = judge([pm(i, kl=0.001) for i in range(LATE_FROM)] + [pm(LATE_FROM, kl=0.003)], TOL)
    assert verdict.kl_late_mean == pytest.approx(0.003)


def runs_of(count: int, n: int = 100, kl: float = 0.005) -> list[PositionMetrics]:
    """`count` separate two-position runs above the tail level (0.004), early in a prompt of n positions."""
    above = {3 * r + d for r in range(count) for d in (0, 1)}
    return [pm(i, kl=kl if i in above else 0.0) for i in range(n)]


def test_the_tail_allows_its_poisson_bound_of_runs_and_reports_the_count() -> None:
    allowed = poisson_bound(0.01 * 100)  # 1% of 100 positions expected above the reference's p99
    at_bound = judge(runs_of(allowed), TOL)
    assert at_bound.passed and at_bound.kl_tail_count == allowed, at_bound.reasons
    verdict = judge(runs_of(allowed + 1), TOL)
    assert verdict.kl_tail_count == allowed + 1
    assert numbers(only_reason(verdict, "KL tail")) == approx_all([allowed + 1, TOL.kl_tail_level, 100, allowed])


def test_tail_runs_are_counted_per_prompt_and_broken_by_a_quiet_position() -> None:
    level = 0.004
    # One run of three positions; a position at the level itself is not above it.
    assert tail_events([pm(0), pm(1, kl=0.01), pm(2, kl=0.01), pm(3, kl=0.01), pm(4, kl=level)], level) == 1
    assert tail_events([pm(0, kl=level), pm(1), pm(2, kl=level)], level) == 0
    # A quiet position between two runs: two events.
    assert tail_events([pm(0, kl=0.01), pm(1), pm(2, kl=0.01)], level) == 2
    # Consecutive indices of different prompts are different runs.
    assert tail_events([pm(5, kl=0.01, prompt="a"), pm(6, kl=0.01, prompt="b")], level) == 2
    # Adjacent in the list but not in the prompt (a position skipped): two runs.
    assert tail_events([pm(5, kl=0.01), pm(7, kl=0.01)], level) == 2
    # A NaN KL is above any level.
    assert tail_events([pm(0, kl=math.nan)], level) == 1
    assert tail_events([], level) == 0


def test_a_swap_is_a_near_tie_up_to_the_gap_tolerance_and_reported_with_it() -> None:
    quiet = [pm(i) for i in range(1, 100)]
    tie = judge([pm(0, swap=True, gap=TOL.near_tie)] + quiet, TOL)
    assert tie.passed and tie.top1_mismatches == 1 and tie.near_ties == 1
    verdict = judge([pm(0, swap=True, gap=0.3), pm(1, swap=True, gap=0.2), pm(2, swap=True, gap=0.01)] + quiet[2:], TOL)
    assert verdict.top1_mismatches == 3 and verdict.near_ties == 1
    # "2 top-1 disagreement(s) beyond the near-tie gap 0.05"
    assert numbers(only_reason(verdict, "beyond the near-tie gap")) == approx_all([2, 1, TOL.near_tie])


def test_a_swap_the_reference_makes_itself_is_excused_by_prompt_and_index() -> None:
    tol = Tolerances(**{**TOL.__dict__, "reference_swaps": ("p:0",)})
    own = judge([pm(0, swap=True, gap=0.3)] + [pm(i) for i in range(1, 100)], tol)
    assert own.passed and own.near_ties == 1
    other_prompt = judge([pm(0, swap=True, gap=0.3, prompt="q")] + [pm(i) for i in range(1, 100)], tol)
    assert not other_prompt.passed and other_prompt.near_ties == 0


def test_near_ties_beyond_the_reference_swap_rate_fail_with_the_count_and_allowance() -> None:
    allowed = poisson_bound(TOL.swap_rate * 100)
    swaps = [pm(i, swap=i % 10 == 0 and i // 10 < allowed, gap=0.01) for i in range(100)]
    at_bound = judge(swaps, TOL)
    assert at_bound.passed and at_bound.top1_mismatches == allowed == at_bound.allowed_swaps, at_bound.reasons
    more = [pm(i, swap=i % 10 == 0 and i // 10 <= allowed, gap=0.01) for i in range(100)]
    verdict = judge(more, TOL)
    assert verdict.top1_mismatches == verdict.near_ties == allowed + 1
    # "7 top-1 swaps in 100 positions (the reference's own rate allows 6)"
    assert numbers(only_reason(verdict, "top-1 swaps in")) == approx_all([allowed + 1, 1, 100, allowed])


def test_moe_routing_flips_excuse_the_worst_few_single_position_outliers_only() -> None:
    quiet = [pm(i, err=0.05, kl=0.0003) for i in range(5, 400)]
    gross = [pm(i, err=0.5 + 0.1 * i, kl=0.002) for i in range(5)]  # errors 0.5 .. 0.9
    metrics = gross[:ROUTING_FLIPS_ALLOWED] + quiet
    moe = judge(metrics, TOL, moe=True)
    assert moe.passed and moe.routing_flips == ROUTING_FLIPS_ALLOWED, moe.reasons
    assert moe.max_logprob_error == 0.05  # the flips' values are not in the worst case...
    assert moe.kl_mean == pytest.approx(sum(m.kl for m in metrics) / len(metrics))  # ...but they count in the mean
    dense = judge(metrics, TOL)
    assert not dense.passed and dense.routing_flips == 0 and dense.max_logprob_error == pytest.approx(0.8)
    # One flip too many: the smallest of the five outliers is what remains, and it is reported.
    five = judge(gross + quiet, TOL, moe=True)
    assert five.routing_flips == ROUTING_FLIPS_ALLOWED and five.max_logprob_error == 0.5
    assert numbers(only_reason(five, "max logprob error")) == approx_all([0.5, 0.1])


def test_moe_flips_are_chosen_by_logprob_error_and_a_kl_outlier_counts_as_one() -> None:
    quiet = [pm(i) for i in range(3, 300)]
    outliers = [pm(0, kl=0.05, err=0.02), pm(1, err=0.3), pm(2, kl=0.03, err=0.01)]
    verdict = judge(outliers + quiet, TOL, moe=True)
    assert verdict.passed and verdict.routing_flips == 3 and verdict.kl_max == 0.0, verdict.reasons


def test_moe_positions_all_beyond_the_bounds_are_not_excused() -> None:
    """With every position an outlier there is nothing to excuse them against: the worst is reported."""
    verdict = judge([pm(0, err=0.3), pm(1, err=0.2)], TOL, moe=True)
    assert not verdict.passed and verdict.max_logprob_error == 0.3


def test_values_exactly_at_their_limits_pass() -> None:
    """Binary-exact figures: each limit is inclusive (KL 0.875 = 0.125 + 4 x 0.25 / sqrt(4) + 1.0 / 4)."""
    tol = Tolerances("float16", max_logprob_error=0.5, kl_max=1.0, kl_mean=0.125, logit_scale=0.01, near_tie=0.25,
                     calibrated=True, kl_sd=0.25, kl_tail_level=1.0, kl_late_mean=0.125, kl_late_sd=0.25)  # fmt: skip
    at_limits = [pm(LATE_FROM + i, kl=0.875, err=0.5) for i in range(4)]
    verdict = judge(at_limits, tol)
    assert verdict.passed and verdict.kl_mean == verdict.kl_late_mean == 0.875, verdict.reasons
    assert judge([pm(0, kl=1.0, err=0.5), pm(1), pm(2), pm(3)], tol).passed  # max KL and error at their bounds
    moe = judge([pm(0, kl=1.0), pm(1, err=0.5), pm(2), pm(3)], tol, moe=True)
    assert moe.routing_flips == 0 and moe.kl_max == 1.0 and moe.max_logprob_error == 0.5  # at a bound: no flip
