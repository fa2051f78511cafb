"""Per-position metrics on distributions written as probabilities (the expected values are computed from the
probabilities, not from the comparator's logprob arithmetic), the reference-vs-reference summary (`noise_from`), the
logit-scale fit, and the one-line detail generate's parity report shows."""

from __future__ import annotations

import math

import pytest

from onboard.comparator import (
    LATE_FROM,
    SAMPLE_SIGMAS,
    Agreement,
    NoiseStats,
    PositionMetrics,
    Tolerances,
    TopK,
    Verdict,
    agreement,
    compare_position,
    compare_rows,
    judge_scale,
    noise_from,
    quantile,
    scale_fit,
    scale_ratio,
    tolerances,
    topk_rows,
)

ln = math.log


def probs(ids: tuple[int, ...], ps: tuple[float, ...], token: float | None = None) -> TopK:
    return TopK(ids, tuple(ln(p) for p in ps), None if token is None else ln(token))


def kl(pairs: list[tuple[float, float]]) -> float:
    return sum(p * ln(p / q) for p, q in pairs)


def test_kl_covers_the_reference_top_k_and_one_bucket_for_the_rest() -> None:
    """Top-2 of each side: the mass outside it (0.2 vs 0.05) is one more term of the KL."""
    m = compare_position(3, probs((0, 1), (0.5, 0.3)), probs((0, 1), (0.6, 0.35)), prompt="q")
    assert m.kl == pytest.approx(kl([(0.5, 0.6), (0.3, 0.35), (0.2, 0.05)]), rel=1e-9)
    assert m.max_logprob_error == pytest.approx(ln(0.6 / 0.5))
    assert m.top1_agree and m.gap == 0.0 and m.topk_overlap == 1.0
    # Margin of the top-1 over the runner-up: ln(0.5/0.3) in the reference, ln(0.6/0.35) in the candidate.
    assert m.margin_error == pytest.approx(abs(ln(0.5 / 0.3) - ln(0.6 / 0.35)))
    assert (m.index, m.prompt, m.key) == (3, "q", "q:3")
    # The logit-scale regression pairs: runner-up minus top-1, the reference's on x, the candidate's on y.
    x, y = ln(0.3 / 0.5), ln(0.35 / 0.6)
    assert (m.scale_num, m.scale_den) == (pytest.approx(x * y), pytest.approx(x * x))


def test_equal_tails_add_nothing_and_a_full_top_k_has_no_tail() -> None:
    m = compare_position(0, probs((0, 1), (0.5, 0.3)), probs((0, 1), (0.4, 0.4)))
    assert m.kl == pytest.approx(kl([(0.5, 0.4), (0.3, 0.4)]), rel=1e-9)
    full = compare_position(0, probs((0, 1, 2), (0.5, 0.3, 0.2)), probs((0, 1, 2), (0.4, 0.4, 0.2)))
    assert full.kl == pytest.approx(kl([(0.5, 0.4), (0.3, 0.4)]), rel=1e-6)


def test_an_id_missing_from_the_candidates_top_k_is_bounded_by_its_kth_logprob() -> None:
    ref = probs((0, 1, 2), (0.5, 0.3, 0.15))
    m = compare_position(0, ref, probs((0, 1, 5), (0.6, 0.2, 0.1)))
    # id 2 is taken at the candidate's 3rd logprob (0.1): error ln(0.15/0.1), same as id 1's ln(0.3/0.2).
    assert m.max_logprob_error == pytest.approx(ln(1.5))
    assert m.kl == pytest.approx(kl([(0.5, 0.6), (0.3, 0.2), (0.15, 0.1), (0.05, 0.1)]), rel=1e-9)
    assert m.topk_overlap == pytest.approx(2 / 3)
    # A reference logprob below the candidate's k-th is no error: the id may sit anywhere below it.
    low = compare_position(0, probs((0, 1, 2), (0.5, 0.3, 0.05)), probs((0, 1, 5), (0.5, 0.3, 0.1)))
    assert low.max_logprob_error == pytest.approx(0.0, abs=1e-12)
    # The bound alone can make the worst error: id 2 at 0.15 in the reference, the candidate's k-th at 0.05.
    far = compare_position(0, ref, probs((0, 1, 5), (0.52, 0.31, 0.05)))
    assert far.max_logprob_error == pytest.approx(ln(0.15 / 0.05))


def test_the_next_tokens_own_logprob_replaces_the_bound_when_the_candidate_reports_it() -> None:
    ref = probs((0, 1, 2), (0.5, 0.3, 0.15))
    cand = probs((0, 1, 5), (0.6, 0.2, 0.1), token=0.12)
    m = compare_position(0, ref, cand, next_id=2)
    assert m.kl == pytest.approx(kl([(0.5, 0.6), (0.3, 0.2), (0.15, 0.12), (0.05, 0.08)]), rel=1e-9)
    # Another next token leaves id 2 at the bound; no next token given, the token logprob is not used.
    assert compare_position(0, ref, cand, next_id=7).kl == pytest.approx(compare_position(0, ref, cand).kl)
    assert compare_position(0, ref, cand).kl == pytest.approx(
        kl([(0.5, 0.6), (0.3, 0.2), (0.15, 0.1), (0.05, 0.1)]), rel=1e-9
    )
    # The top-k's own value wins over the token logprob for an id the candidate lists.
    listed = compare_position(0, ref, probs((0, 1, 2), (0.6, 0.2, 0.1), token=0.5), next_id=1)
    assert listed.max_logprob_error == pytest.approx(ln(1.5))
    # A candidate that reports no token logprob: the next id changes nothing.
    bare = probs((0, 1, 5), (0.6, 0.2, 0.1))
    assert compare_position(0, ref, bare, next_id=2).kl == pytest.approx(compare_position(0, ref, bare).kl)
    # A token logprob is read for the next id only: an underflowed one (-inf) without a next id is not an error.
    underflow = TopK(bare.ids, bare.logprobs, -math.inf)
    assert compare_position(0, ref, underflow).kl == pytest.approx(compare_position(0, ref, bare).kl)


def test_a_swap_reports_the_larger_of_the_two_sides_top1_gaps() -> None:
    ref = probs((0, 1, 2), (0.5, 0.3, 0.15))
    # The candidate prefers 1 (0.45) over 0 (0.4): the reference puts 0 ahead by ln(0.5/0.3), the candidate 1 by
    # ln(0.45/0.4); the larger says how far from a tie the swap is.
    m = compare_position(0, ref, probs((1, 0, 2), (0.45, 0.4, 0.1)))
    assert not m.top1_agree and m.gap == pytest.approx(ln(0.5 / 0.3))
    assert compare_position(0, ref, probs((1, 0, 2), (0.7, 0.1, 0.1))).gap == pytest.approx(ln(0.7 / 0.1))
    # The margin change: the reference's top-1 over its runner-up, ln(0.5/0.3), became ln(0.4/0.45).
    assert m.margin_error == pytest.approx(ln(0.5 / 0.3) - ln(0.4 / 0.45))


def test_a_candidate_top1_outside_the_reference_top_k_is_at_least_the_reference_k_th_away() -> None:
    ref = probs((0, 1, 2), (0.5, 0.3, 0.15))
    m = compare_position(0, ref, probs((7, 0, 1), (0.5, 0.3, 0.1)))
    assert m.gap == pytest.approx(ln(0.5 / 0.15))
    assert m.topk_overlap == pytest.approx(2 / 3)


def test_a_reference_top1_missing_from_the_candidate_is_at_its_kth_and_has_no_margin() -> None:
    m = compare_position(0, probs((0, 1), (0.6, 0.3)), probs((1, 2), (0.5, 0.2)))
    assert m.gap == pytest.approx(ln(0.5 / 0.2))  # the candidate's top-1 over its bound for id 0
    assert m.margin_error == math.inf and m.scale_num == m.scale_den == 0.0
    # A runner-up missing from the candidate is at its bound too.
    r = compare_position(0, probs((0, 1, 2), (0.5, 0.3, 0.15)), probs((0, 5, 6), (0.6, 0.2, 0.1)))
    assert r.margin_error == pytest.approx(abs(ln(0.5 / 0.3) - ln(0.6 / 0.1)))
    # A single-id reference has no runner-up: no margin; its one id found is a full overlap.
    single = compare_position(0, probs((0,), (0.9,)), probs((0, 1), (0.8, 0.1)))
    assert single.margin_error == 0.0 and single.topk_overlap == 1.0


def test_the_bound_for_a_missing_id_is_the_candidates_kth_not_a_lower_next_token_logprob() -> None:
    """The next token's own logprob (0.05, outside the top-k) says nothing about the missing reference id 2: the
    candidate's k-th (0.15) still bounds it."""
    ref = probs((0, 1, 2), (0.5, 0.3, 0.15))
    m = compare_position(0, ref, probs((0, 1), (0.6, 0.15), token=0.05), next_id=9)
    assert m.kl == pytest.approx(kl([(0.5, 0.6), (0.3, 0.15), (0.15, 0.15), (0.05, 0.1)]), rel=1e-9)


def test_a_nonfinite_candidate_is_an_infinite_error_and_a_swap() -> None:
    m = compare_position(4, probs((0, 1), (0.6, 0.3)), TopK((0, 1), (-math.inf, -1.0)), prompt="p")
    assert (m.kl, m.max_logprob_error, m.gap, m.margin_error) == (math.inf, math.inf, math.inf, 0.0)
    # validate's result writes top1_agree per position: false, not null.
    assert m.top1_agree is False and m.topk_overlap == 0.0 and (m.key, m.scale_num, m.scale_den) == ("p:4", 0.0, 0.0)


def test_compare_rows_pairs_positions_and_their_next_tokens() -> None:
    ref = [probs((0, 1, 2), (0.5, 0.3, 0.15))] * 3
    cand = [probs((0, 1, 5), (0.6, 0.2, 0.1), token=0.12)] * 2
    rows = compare_rows(ref, cand, [2, 9, 2], prompt="x")
    assert [(m.index, m.prompt) for m in rows] == [(0, "x"), (1, "x")]
    assert rows[0].kl == pytest.approx(compare_position(0, ref[0], cand[0], 2).kl)
    assert rows[1].kl == pytest.approx(compare_position(0, ref[0], cand[0]).kl)
    assert rows[0].kl != pytest.approx(rows[1].kl)


def fit_metrics(pairs: list[tuple[float, float]]) -> list[PositionMetrics]:
    return [PositionMetrics(i, True, 1.0, 0.0, 0.0, 0.0, num, den) for i, (num, den) in enumerate(pairs)]


def test_the_logit_scale_fit_and_its_cluster_robust_error() -> None:
    metrics = fit_metrics([(1.0, 1.0), (3.0, 2.0)])
    slope, se = scale_fit(metrics)
    # Slope 4/3; residuals -1/3 and +1/3: se = sqrt(2/9) / 3.
    assert slope == pytest.approx(4 / 3) and se == pytest.approx(math.sqrt(2 / 9) / 3)
    assert scale_ratio(metrics) == pytest.approx(4 / 3)
    tol = Tolerances("bfloat16", 0.1, 0.01, 0.001, 0.01, 0.05, True)
    ok, fitted, limit = judge_scale(metrics, tol)
    assert fitted == pytest.approx(4 / 3) and limit == pytest.approx(0.01 + SAMPLE_SIGMAS * se) and ok
    assert judge_scale(fit_metrics([(1.5, 1.0)]), Tolerances("bfloat16", 0.1, 0.01, 0.001, 0.5, 0.05, True))[0]
    exact = fit_metrics([(1.03, 1.0), (2.06, 2.0)])  # every pair on slope 1.03: no standard error
    assert judge_scale(exact, tol) == (False, pytest.approx(1.03), pytest.approx(0.01))
    assert judge_scale(exact, Tolerances("bfloat16", 0.1, 0.01, 0.001, 0.031, 0.05, True))[0]


def test_a_distribution_too_flat_to_fit_passes_the_scale_rule_without_a_slope() -> None:
    tol = Tolerances("bfloat16", 0.1, 0.01, 0.001, 0.01, 0.05, True)
    flat = fit_metrics([(1e-7, 5e-7), (1e-7, 5e-7)])  # spread 1e-6: not more than MIN_SCALE_SPREAD
    assert scale_fit(flat) is None and scale_ratio(flat) is None
    assert judge_scale(flat, tol) == (True, None, 0.01)
    assert scale_ratio(fit_metrics([(2e-6, 2e-6)])) == pytest.approx(1.0)
    assert scale_fit(fit_metrics([(math.inf, 1.0)])) is None


def test_quantile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert quantile(values, 0.99) == 99.0 and quantile(values, 0.5) == 50.0
    assert quantile(values, 1.0) == 100.0 and quantile(values, 0.0) == 1.0
    assert quantile([3.0], 0.99) == 3.0 and quantile([], 0.99) == 0.0


def position(index: int, kl_value: float, err: float, *, swap: bool = False, margin: float = 0.0, prompt: str = "p"):
    return PositionMetrics(index, not swap, 1.0, kl_value, err, 0.0, 0.0, 0.0, margin, prompt)


def test_noise_from_summarises_the_references_own_run() -> None:
    metrics = [position(i, 0.001 * (i % 4), 0.01 * (i % 7)) for i in range(LATE_FROM + 36)]
    metrics[10] = position(10, 0.0, 0.02, swap=True, margin=0.4)
    metrics[70] = position(70, 0.003, 0.02, swap=True, margin=math.inf)  # no anchor: margin unknown, not counted
    metrics.append(position(0, 0.002, 0.01, swap=True, prompt=""))  # a position without a prompt name
    stats = noise_from("bfloat16", "bfloat16", metrics, [0.98, 1.01])
    kls = [m.kl for m in metrics]
    mean = sum(kls) / len(kls)
    late = [m.kl for m in metrics if m.index >= LATE_FROM]
    late_mean = sum(late) / len(late)
    assert (stats.dtype, stats.baseline, stats.positions, stats.nonfinite) == ("bfloat16", "bfloat16", 101, False)
    assert stats.max_logprob_error == pytest.approx(0.06) and stats.kl_max == pytest.approx(0.003)
    assert stats.kl_mean == pytest.approx(mean)
    assert stats.kl_sd == pytest.approx(math.sqrt(sum((k - mean) ** 2 for k in kls) / (len(kls) - 1)))
    assert stats.kl_p99 == pytest.approx(0.003)
    assert stats.late_positions == 36 and stats.kl_late_mean == pytest.approx(late_mean)
    assert stats.kl_late_sd == pytest.approx(math.sqrt(sum((k - late_mean) ** 2 for k in late) / 35))
    assert stats.logit_scale == pytest.approx(0.02)  # the worst per-prompt ratio, |0.98 - 1|
    assert stats.swap_rate == pytest.approx(3 / 101) and stats.margin_max == pytest.approx(0.4)
    assert stats.swaps == ("p:10", "p:70")
    assert stats.slope_deviation == 0.0  # no regression pairs: nothing to fit


def test_noise_from_one_position_and_no_prompt_ratios() -> None:
    stats = noise_from("float32", "float64", [position(0, 1e-12, 1e-7)], [])
    assert stats.kl_sd == 0.0 and stats.logit_scale == 0.0 and stats.margin_max == 0.0
    assert stats.late_positions == 0 and stats.kl_late_mean == 0.0 and stats.kl_late_sd == 0.0
    assert stats.kl_p99 == 1e-12 and stats.swap_rate == 0.0 and stats.swaps == ()
    fitted = noise_from("float32", "float64", fit_metrics([(1.0, 1.0), (3.0, 2.0)]), [])
    assert fitted.slope_deviation == pytest.approx(1 / 3)


def test_noise_from_two_positions_uses_the_sample_standard_deviation() -> None:
    stats = noise_from("bfloat16", "bfloat16", [position(0, 0.001, 0.01), position(LATE_FROM, 0.003, 0.01)], [])
    assert stats.kl_mean == pytest.approx(0.002) and stats.kl_sd == pytest.approx(math.sqrt(2) * 0.001)
    assert stats.late_positions == 1 and stats.kl_late_mean == pytest.approx(0.003) and stats.kl_late_sd == 0.0


def test_swaps_of_positions_compared_without_a_prompt_name_are_not_listed_as_the_references() -> None:
    """An unnamed position's key would be the same in every prompt: it cannot excuse a candidate's swap."""
    ref, swapped = probs((0, 1, 2), (0.4, 0.39, 0.15)), probs((1, 0, 2), (0.4, 0.39, 0.15))
    unnamed = compare_rows([ref, ref], [ref, swapped])
    assert [m.prompt for m in unnamed] == ["", ""]
    assert noise_from("bfloat16", "bfloat16", unnamed, []).swaps == ()
    assert noise_from("bfloat16", "bfloat16", [compare_position(1, ref, swapped)], []).swaps == ()
    named = compare_rows([ref, ref], [ref, swapped], prompt="p3")
    assert noise_from("bfloat16", "bfloat16", named, []).swaps == ("p3:1",)


def test_no_measurable_margin_is_no_margin_noise() -> None:
    """Where the candidate never has the reference's top-1 in its top-k, no margin change can be measured."""
    stats = noise_from("bfloat16", "bfloat16", [position(i, 0.01, 0.1, margin=math.inf) for i in range(3)], [])
    assert stats.margin_max == 0.0


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_noise_from_a_nonfinite_run_or_no_positions_marks_the_dtype_unusable(bad: float) -> None:
    for metrics in ([position(0, 0.001, 0.01), position(1, bad, 0.01)], [position(0, 0.001, bad)], []):
        stats = noise_from("float16", "float16", metrics, [1.0])
        assert stats.nonfinite and stats.positions == len(metrics)
        assert (stats.dtype, stats.baseline) == ("float16", "float16")
        assert stats.max_logprob_error == stats.kl_max == stats.kl_mean == stats.logit_scale == math.inf


def test_topk_rows_are_float32_log_softmax_top_k_with_the_next_tokens_logprob() -> None:
    torch = pytest.importorskip("torch")
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.0, 0.0, 5.0]], dtype=torch.bfloat16)
    rows = topk_rows(logits, 2, [0, 1])
    lse = [math.log(math.exp(1) + math.exp(3) + math.exp(2)), math.log(2 + math.exp(5))]
    assert [r.ids for r in rows] == [(1, 2), (2, 0)] or [r.ids for r in rows] == [(1, 2), (2, 1)]
    assert rows[0].logprobs == (pytest.approx(3 - lse[0], abs=1e-6), pytest.approx(2 - lse[0], abs=1e-6))
    assert rows[0].token_logprob == pytest.approx(1 - lse[0], abs=1e-6)
    assert rows[1].token_logprob == pytest.approx(0 - lse[1], abs=1e-6)
    whole = topk_rows(logits, 10, None)  # k beyond the vocabulary: all of it
    assert [len(r.ids) for r in whole] == [3, 3] and all(r.token_logprob is None for r in whole)


def noise(**kw: object) -> NoiseStats:
    return NoiseStats("bfloat16", "bfloat16", max_logprob_error=0.031, kl_max=0.002, kl_mean=2.5e-4, logit_scale=0.01,
                      positions=480, **kw)  # fmt: skip


def test_the_agreement_detail_reports_the_candidates_figures_beside_the_references() -> None:
    verdict = Verdict(True, (), max_logprob_error=0.0123, kl_max=0.00456, kl_mean=0.000178, top1_mismatches=3,
                      near_ties=2, positions=480)  # fmt: skip
    text = Agreement(True, (), verdict, 1.00213, 0.0042, noise()).detail()
    assert text.startswith("480 positions")
    assert "mean KL 1.78e-04 (reference's own run 2.50e-04)" in text
    assert "max KL 4.56e-03" in text and "max logprob error 1.23e-02 (own 3.10e-02)" in text
    assert "top-1 swaps 3 (2 near-ties)" in text and "logit scale 1.0021 (allowed |slope-1| 0.0042)" in text
    assert text.endswith("top-1 swaps 3 (2 near-ties), logit scale 1.0021 (allowed |slope-1| 0.0042)")


def test_the_agreement_detail_names_routing_flips_a_flat_fit_and_the_failures() -> None:
    verdict = Verdict(False, ("max KL 0.5 > 0.01",), 0.01, 0.5, 1e-4, 0, 0, 60, routing_flips=2)
    text = Agreement(False, ("max KL 0.5 > 0.01", "logit scale 1.2"), verdict, None, 0.004, noise()).detail()
    assert "logit scale too flat to fit" in text
    assert "logit scale too flat to fit, routing flips 2 (allowed 4); FAILED" in text
    assert text.endswith("; FAILED: max KL 0.5 > 0.01; logit scale 1.2")


def test_agreement_judges_the_candidate_against_the_reference_own_runs_pooled() -> None:
    ref = [[probs((0, 1, 2), (0.5, 0.3, 0.15)), probs((1, 0, 2), (0.6, 0.25, 0.1))]]
    own = [[probs((0, 1, 2), (0.49, 0.31, 0.15)), probs((1, 0, 2), (0.6, 0.25, 0.1))]]
    same = agreement("bfloat16", ref, ref, [own, ref], [[1, 2]])
    assert same.passed and same.reasons == () and same.verdict.positions == 2
    assert same.noise.positions == 4 and same.noise.baseline == "bfloat16"  # two own runs of 2 positions, pooled
    assert same.noise.swaps == () and same.slope == pytest.approx(1.0)
    # An exact candidate's regression has no residuals: the limit is the calibrated tolerance alone.
    assert same.slope_limit == pytest.approx(tolerances("bfloat16", same.noise).logit_scale)
    # A sharpened candidate (logits x3): argmax kept, the scale rule names it after the judge's own reasons.
    sharp = [[TopK(r.ids, tuple(3 * v for v in r.logprobs)) for r in ref[0]]]
    result = agreement("float32", ref, sharp, [own], [[1, 2]])
    assert not result.passed and result.noise.baseline == "float64"
    assert result.reasons[:-1] == result.verdict.reasons and result.reasons[-1].startswith("logit scale")
    assert result.slope > 2.0 and f"{result.slope:.4f}" in result.reasons[-1]


def rows_of(ps: list[tuple[float, float, float]], ids: tuple[int, int, int] = (0, 1, 2)) -> list[TopK]:
    return [probs(ids, p) for p in ps]


def test_agreement_reads_the_next_tokens_logprob_outside_the_candidates_top_k() -> None:
    """The candidate lists 2 ids; the reference's third is the next token, whose own logprob the candidate reports."""
    ref = [rows_of([(0.5, 0.3, 0.15), (0.6, 0.25, 0.1)])]
    cand = [[probs((0, 1), (0.5, 0.3), token=0.1), probs((0, 1), (0.6, 0.25), token=0.1)]]
    result = agreement("bfloat16", ref, cand, [ref], [[2, 2]])
    expected = [compare_position(i, ref[0][i], cand[0][i], 2) for i in range(2)]
    assert result.verdict.kl_mean == pytest.approx(sum(m.kl for m in expected) / 2)
    assert result.verdict.max_logprob_error == pytest.approx(ln(0.15 / 0.1))
    # The reference's own run reports next tokens too: its rows are compared with them.
    own = [[probs((0, 1), (0.5, 0.3), token=0.15), probs((0, 1), (0.6, 0.25), token=0.1)]]
    exact = agreement("bfloat16", ref, ref, [own], [[2, 2]]).noise
    assert exact.max_logprob_error == pytest.approx(0.0, abs=1e-12) and exact.kl_max == pytest.approx(0.0, abs=1e-12)


def test_agreement_excuses_a_swap_its_own_run_makes_at_the_same_prompt_and_position() -> None:
    shift, tie, quiet = (0.5, 0.3, 0.15), (0.4, 0.39, 0.15), (0.6, 0.25, 0.1)
    ref = [rows_of([shift, tie]), rows_of([quiet, tie])]
    # The own run: every top-k logprob of p0:0 0.105 nats low (no margin change), and a near-tie swap at p1:1.
    own = [[probs((0, 1, 2), (0.45, 0.27, 0.135)), ref[0][1]], [ref[1][0], probs((1, 0, 2), (0.4, 0.39, 0.15))]]
    # The candidate's swap: ln(0.5/0.3) = 0.51 nats apart, beyond the near-tie gap (2 x 0.105), each value within
    # the logprob tolerance (4 x 0.105).
    swapped = probs((1, 0, 2), (0.5, 0.3, 0.15))
    excused = agreement("bfloat16", ref, [ref[0], [ref[1][0], swapped]], [own], [[1, 1], [1, 1]])
    assert excused.noise.swaps == ("p1:1",)
    assert excused.passed and excused.verdict.near_ties == 1, excused.reasons
    elsewhere = agreement("bfloat16", ref, [[ref[0][0], swapped], ref[1]], [own], [[1, 1], [1, 1]])
    assert not elsewhere.passed and elsewhere.verdict.near_ties == 0
    assert any("beyond the near-tie gap" in r for r in elsewhere.reasons)


def test_agreement_keeps_the_worst_per_prompt_scale_ratio_of_its_own_runs() -> None:
    ref = [rows_of([(0.5, 0.3, 0.15), (0.6, 0.25, 0.1)]), rows_of([(0.7, 0.2, 0.05)])]
    sharp = [[TopK(r.ids, tuple(1.1 * v for v in r.logprobs)) for r in rows] for rows in ref]
    own = [ref[0], sharp[1]]  # prompt 0 exact, prompt 1 at scale 1.1
    result = agreement("bfloat16", ref, ref, [own], [[1, 1], [1]])
    assert result.noise.logit_scale == pytest.approx(0.1, rel=1e-6)
    assert result.noise.dtype == "bfloat16" and result.passed


def test_agreement_applies_the_candidates_dtype_floors() -> None:
    """A reference whose own run is exact: the candidate's dtype floor alone bounds it (bfloat16's, not float32's)."""
    ref = [rows_of([(0.5, 0.3, 0.15)] * 8)]
    cand = [rows_of([(0.5005, 0.2997, 0.15)] * 8)]  # ~1e-3 nats off: within bfloat16's floors, not float32's
    assert agreement("bfloat16", ref, cand, [ref], [[1] * 8]).passed
    assert not agreement("float32", ref, cand, [ref], [[1] * 8]).passed


def test_agreement_judges_every_position_unless_the_model_is_moe() -> None:
    quiet = (0.5, 0.3, 0.15)
    ref = [rows_of([quiet] * 40)]
    own = [rows_of([(0.49, 0.31, 0.15)] * 40)]
    cand = [rows_of([quiet] * 39 + [(0.45, 0.34, 0.15)])]  # one position 0.1 nats off: a routing flip in an MoE
    dense = agreement("bfloat16", ref, cand, [own], [[1] * 40])
    assert not dense.passed and dense.verdict.routing_flips == 0 and any("max KL" in r for r in dense.reasons)
    moe = agreement("bfloat16", ref, cand, [own], [[1] * 40], moe=True)
    assert moe.passed and moe.verdict.routing_flips == 1, moe.reasons
