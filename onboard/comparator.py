"""Compare a candidate's next-token distributions with the reference's, position by position, against a noise model.

The candidate's error distribution over all positions is judged against the reference's own run in the same dtype
(measured when the goldens were recorded: `noise_from`): mean KL, the tail, the later positions, the logit-scale
slope, top-1 swaps, and the worst position. Why not simpler rules: vLLM's (each side's token in the other's top-k)
has no value tolerance, so logits x10 pass (BUGZOO B34); a fixed bound such as SGLang's 5e-2 is flaky on near-ties
(B48); a bound on the worst position alone lets logits x1.03 or a wrong rope theta through in bfloat16.

validate (candidate vs goldens) and generate's parity (`agreement`: adapter vs transformers, the noise measured in
the same run) both judge with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from onboard.errors import UnknownDtype

CALIBRATION = {"float32": "float64", "bfloat16": "bfloat16", "float16": "float16"}
"""Candidate dtype -> the run compared with the float32 reference to measure that dtype's noise: float64 for
float32 (another correct rounding), the model itself in the low precision for bfloat16/float16."""

DTYPE_COLUMNS = ("float64", "float32", "float16", "bfloat16")
"""The order of the floor and uncalibrated tuples in THRESHOLDS' rows."""


def _row(multiplier: float, floor: tuple[float, ...], uncalibrated: tuple[float, ...], stat: str, why: str) -> dict:
    return {
        "stat": stat,
        "multiplier": multiplier,
        "floor": dict(zip(DTYPE_COLUMNS, floor)),
        "uncalibrated": dict(zip(DTYPE_COLUMNS, uncalibrated)),
        "why": why,
    }


# The one threshold table: every check that bounds a numeric difference reads it (validate, generate's and MTP's
# parity through `tolerances` / `agreement`; the first-divergence bisect and quantize-plan's runner through
# `threshold`). Calibrated: max(floor, multiplier x the reference's own statistic in that dtype); floors stop a
# perfectly quiet reference (float32 vs float64) from demanding bit-exactness. Uncalibrated: that column alone.
# stat: what is compared; why: the multiplier's reason (figures: docs/fidelity.md, benchmarks/fidelity_limits.py).
THRESHOLDS: dict[str, dict[str, object]] = {
    "kl_mean": _row(1.5, (1e-14, 1e-10, 1e-8, 1e-6), (1e-13, 1e-10, 1e-4, 1e-3),
        stat="mean KL(ref||cand) over positions <= multiplier x (reference mean + SAMPLE_SIGMAS x its sd / sqrt(N)) "
             "+ kl_max / N",
        why="a second correct implementation rounds about as the reference's own low-precision run does; heavy "
            "tails (MoE routing flips) are what the SAMPLE_SIGMAS allowance on the reference's sd absorbs"),
    "kl_late": _row(1.5, (1e-14, 1e-10, 1e-8, 1e-6), (1e-13, 1e-10, 1e-4, 1e-3),
        stat="as kl_mean, over the positions at index >= LATE_FROM",
        why="positional trend: rope and norm errors grow with distance, so the short prompts dilute them in the "
            "overall mean"),
    "kl_tail": _row(4.0, (1e-12, 1e-9, 1e-7, 1e-5), (1e-12, 1e-9, 1e-3, 5e-3),
        stat="runs of consecutive positions whose KL exceeds multiplier x the reference p99, vs a Poisson bound on 1% of N",
        why="a defect confined to a few positions (a soft-cap reached by few logits, a window edge) hides in the "
            "mean; runs are counted because one disturbance reaches every later position attending to it"),
    "kl_max": _row(4.0, (1e-12, 1e-9, 1e-6, 1e-4), (1e-12, 1e-9, 1e-3, 5e-3),
        stat="max KL over positions",
        why="gross single-position errors; the worst of N positions is a noisy statistic, hence 4x"),
    "max_logprob_error": _row(4.0, (1e-6, 2e-5, 2e-3, 2e-2), (1e-6, 2e-5, 1e-2, 8e-2),
        stat="max |logprob error| over the reference top-k, over positions",
        why="gross single-position errors; the float32 floor covers another kernel library"),
    "logit_scale": _row(4.0, (1e-6, 1e-4, 1e-3, 2e-3), (1e-4, 1e-2, 2e-2, 5e-2),
        stat="|slope - 1| of the logit-scale regression over all positions, + SAMPLE_SIGMAS x its standard error",
        why="rounding is nearly unbiased, so the floor sets the limit; a dropped or doubled multiplier (logits "
            "x1.03) is a slope of 1.03. Noisy models widen it through the regression's standard error"),
    "top1_swaps": _row(3.0, (1e-4, 1e-3, 2e-3, 5e-3), (1e-3, 1e-2, 5e-2, 1e-1),
        stat="top-1 swaps <= Poisson bound on multiplier x the reference's own swap rate x N",
        why="near-ties flip in low precision (B48) at about the reference's own rate; a wrong rope theta flips "
            "many more"),
    "near_tie": _row(2.0, (1e-5, 1e-4, 2e-3, 1e-2), (1e-5, 1e-3, 2e-2, 1e-1),
        stat="a top-1 swap is excused where the reference's own run swaps too, or its gap is below multiplier x "
             "the reference's largest change of the top-1/runner-up margin (of any logprob, when that is larger)",
        why="a swap is noise only when rounding can move the margin it crosses that far (heavy tails: MoE routing "
            "flips move whole distributions)"),
    "point_error": _row(2.0, (1e-9, 1e-4, 5e-3, 2e-2), (1e-9, 1e-4, 5e-3, 2e-2),
        stat="max|adapter - reference| / max|reference| at one hooked module output (generate's first-divergence "
             "bisect, generate_adapter/divergence.py), <= multiplier x the reference's own error there in that dtype",
        why="intermediate activations, not distributions: the bisect names the first module past its bound; 1e-4 "
            "is generate's float32 parity bar, and in low precision the floor alone applies when the reference's "
            "own rounding at that point was not captured"),
    "token_wise": _row(1.0, (1e-2, 1e-2, 1e-2, 1e-2), (1e-2, 1e-2, 1e-2, 1e-2),
        stat="|module over every prompt's tokens at once - module per prompt| / |module per prompt|, per token "
             "(quantize-plan's runner, quantize/forward.py): never calibrated, the bound alone applies",
        why="not a fidelity verdict: it tells a module that maps each token on its own (whose batched rerun rounds "
            "a little differently) from one that mixes neighbouring tokens (a time shift, a convolution)"),
}  # fmt: skip
ROUTING_FLIPS_ALLOWED = 4
"""MoE models: positions beyond the single-position bounds (max logprob error, max KL) excused as routing flips: a
router near-tie picks another expert by rounding alone. The mean, tail, late and swap rules still judge them."""
SAMPLE_SIGMAS = 4.0
"""Standard errors a statistic of N positions may sit above its expectation (one false alarm in ~30 000 per check)."""
TAIL_QUANTILE = 0.99
LATE_FROM = 64
"""Positions at or past this index form the `kl_late` group (the long prompt's; short prompts end before it)."""
MIN_SCALE_SPREAD = 1e-6
"""Minimum sum of squared logprob spreads for a scale slope to mean anything (flat distributions)."""


@dataclass(frozen=True)
class TopK:
    """One position: the top-k next-token distribution, best first, and the logprob of the token that followed."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    token_logprob: float | None = None


@dataclass(frozen=True)
class NoiseStats:
    """The reference's own spread for one candidate dtype, stored in the golden MANIFEST (fields added later default,
    so older manifests still load)."""

    dtype: str
    baseline: str
    """What the float32 golden was compared with to measure it (float64, bfloat16, ...)."""
    max_logprob_error: float
    kl_max: float
    kl_mean: float
    logit_scale: float
    """Worst per-prompt |scale ratio - 1| (kept for reports; judging uses slope_deviation)."""
    positions: int
    nonfinite: bool = False
    """The reference itself produced NaN/inf at this dtype (overflow): the dtype is unusable for this model."""
    kl_sd: float | None = None
    kl_p99: float | None = None
    kl_late_mean: float | None = None
    kl_late_sd: float | None = None
    late_positions: int = 0
    slope_deviation: float | None = None
    """|slope - 1| of the regression over all positions."""
    swap_rate: float | None = None
    margin_max: float | None = None
    """Largest change of the reference's top-1/runner-up logprob margin."""
    swaps: tuple[str, ...] = ()
    """"prompt:index" of every position where the reference's own run picks another top-1."""


@dataclass(frozen=True)
class Tolerances:
    dtype: str
    max_logprob_error: float
    kl_max: float
    kl_mean: float
    logit_scale: float
    near_tie: float
    calibrated: bool
    kl_sd: float = 0.0
    kl_tail_level: float = 0.0
    kl_late_mean: float = 0.0
    kl_late_sd: float = 0.0
    swap_rate: float = 0.0
    reference_swaps: tuple[str, ...] = ()


@dataclass(frozen=True)
class PositionMetrics:
    index: int
    top1_agree: bool
    topk_overlap: float
    kl: float
    max_logprob_error: float
    gap: float
    """Largest top-1 gap of the two sides when top-1 differs (0 when it agrees): a swap is a tie when small."""
    scale_num: float
    scale_den: float
    margin_error: float = 0.0
    """|change of the reference top-1 vs runner-up logprob margin|: what rounding does to near-ties."""
    prompt: str = ""

    @property
    def key(self) -> str:
        return f"{self.prompt}:{self.index}"


def known_dtype(dtype: str, known: Iterable[str], what: str) -> str:
    """`dtype` itself where `known` holds it; otherwise UnknownDtype naming it and the dtypes known (a dtype without
    its own bounds is refused: judged with another's it would pass or fail by accident)."""
    if dtype not in known:
        names = ", ".join(known)
        raise UnknownDtype(
            f"dtype {dtype!r} has no {what} (known: {names})", f"give the candidate's dtype as one of {names}"
        )
    return dtype


def threshold(rule: str, dtype: str, measured: float | None = None) -> float:
    """THRESHOLDS[rule]'s bound in `dtype`: max(floor, multiplier x `measured`), the reference's own statistic in
    that dtype; the uncalibrated bound when nothing was measured. A dtype outside DTYPE_COLUMNS raises UnknownDtype."""
    known_dtype(dtype, DTYPE_COLUMNS, "column in the comparator's threshold table")
    row: dict[str, Any] = THRESHOLDS[rule]  # type: ignore[assignment]
    if measured is None:
        return float(row["uncalibrated"][dtype])
    return max(float(row["floor"][dtype]), float(row["multiplier"]) * measured)


# Tolerances field -> the THRESHOLDS rule that bounds it.
BOUNDS = {
    "max_logprob_error": "max_logprob_error",
    "kl_max": "kl_max",
    "kl_mean": "kl_mean",
    "logit_scale": "logit_scale",
    "near_tie": "near_tie",
    "kl_tail_level": "kl_tail",
    "kl_late_mean": "kl_late",
    "swap_rate": "top1_swaps",
}


def tolerances(dtype: str, noise: NoiseStats | None) -> Tolerances:
    """The tolerance table applied to one dtype and its calibrated noise (the uncalibrated column without one).
    A dtype outside DTYPE_COLUMNS raises UnknownDtype."""
    n = noise if noise is not None and not noise.nonfinite else None
    if n is None:
        return Tolerances(dtype, calibrated=False, **{f: threshold(rule, dtype) for f, rule in BOUNDS.items()})
    # Older manifests lack the distribution statistics: substitute bounds that can only widen the tolerance.
    kl_sd = n.kl_sd if n.kl_sd is not None else n.kl_max
    late = n.late_positions > 0 and n.kl_late_mean is not None
    late_sd = n.kl_late_sd if late and n.kl_late_sd is not None else kl_sd
    measured = {
        "max_logprob_error": n.max_logprob_error,
        "kl_max": n.kl_max,
        "kl_mean": n.kl_mean,
        "logit_scale": n.slope_deviation if n.slope_deviation is not None else n.logit_scale,
        # Margin noise: the largest top-1/runner-up margin change of the reference's own run, or of any single
        # logprob when that is larger (heavy-tailed noise: MoE routing flips move whole distributions).
        "near_tie": max(n.margin_max if n.margin_max is not None else 2 * n.max_logprob_error, n.max_logprob_error),
        "kl_tail": n.kl_p99 if n.kl_p99 is not None else n.kl_max,
        "kl_late": n.kl_late_mean if late else n.kl_mean,  # no calibrated late positions: the overall distribution
        "top1_swaps": n.swap_rate if n.swap_rate is not None else 1.0,
    }
    return Tolerances(
        dtype,
        calibrated=True,
        kl_sd=_multiplier("kl_mean") * kl_sd,
        kl_late_sd=_multiplier("kl_late") * late_sd,
        reference_swaps=tuple(n.swaps),
        **{f: threshold(rule, dtype, measured[rule]) for f, rule in BOUNDS.items()},  # type: ignore[arg-type]
    )


def _multiplier(rule: str) -> float:
    return float(THRESHOLDS[rule]["multiplier"])  # type: ignore[arg-type]


def compare_position(
    index: int, ref: TopK, cand: TopK, next_id: int | None = None, prompt: str = ""
) -> PositionMetrics:
    """Metrics for one position; ids missing from the candidate's top-k are bounded by its k-th logprob."""
    got = dict(zip(cand.ids, cand.logprobs))
    if next_id is not None and cand.token_logprob is not None:
        got.setdefault(next_id, cand.token_logprob)
    if not got or not math.isfinite(sum(got.values())):  # any NaN/inf makes the sum non-finite
        return PositionMetrics(index, False, 0.0, math.inf, math.inf, math.inf, 0.0, 0.0, prompt=prompt)
    floor = min(cand.logprobs) if cand.logprobs else min(got.values())
    k = len(ref.ids)
    errors, p_sum, q_sum, kl = [], 0.0, 0.0, 0.0
    for rid, a in zip(ref.ids, ref.logprobs):
        c = got.get(rid)
        errors.append(abs(a - c) if c is not None else max(0.0, a - floor))
        q = c if c is not None else floor
        p_sum += math.exp(a)
        q_sum += math.exp(q)
        kl += math.exp(a) * (a - q)
    p_tail, q_tail = max(1e-12, 1.0 - p_sum), max(1e-12, 1.0 - q_sum)
    kl = max(0.0, kl + p_tail * math.log(p_tail / q_tail))
    ref_top, cand_top = ref.ids[0], cand.ids[0]
    agree = ref_top == cand_top
    gap = 0.0
    if not agree:
        ref_lp = dict(zip(ref.ids, ref.logprobs))
        gap_ref = ref.logprobs[0] - ref_lp.get(cand_top, ref.logprobs[-1])
        gap_cand = cand.logprobs[0] - got.get(ref_top, floor)
        gap = max(gap_ref, gap_cand)
    anchor = got.get(ref_top)
    num = den = margin = 0.0
    if anchor is not None:
        for rid, a in zip(ref.ids[1:], ref.logprobs[1:]):
            if rid in got:
                x, y = a - ref.logprobs[0], got[rid] - anchor
                num, den = num + x * y, den + x * x
        if len(ref.ids) > 1:
            runner_up = got.get(ref.ids[1], floor)
            margin = abs((ref.logprobs[0] - ref.logprobs[1]) - (anchor - runner_up))
    else:
        margin = math.inf
    overlap = len(set(ref.ids) & set(cand.ids[:k])) / max(1, k)
    return PositionMetrics(index, agree, overlap, kl, max(errors) if errors else 0.0, gap, num, den, margin, prompt)


def compare_rows(
    ref_rows: Sequence[TopK], cand_rows: Sequence[TopK], next_ids: Sequence[int] | None = None, prompt: str = ""
) -> list[PositionMetrics]:
    """Position-wise metrics of two equally long lists (teacher-forced on the same sequence)."""
    n = min(len(ref_rows), len(cand_rows))
    return [
        compare_position(i, ref_rows[i], cand_rows[i], next_ids[i] if next_ids is not None else None, prompt)
        for i in range(n)
    ]


def scale_ratio(metrics: Sequence[PositionMetrics]) -> float | None:
    """Least-squares logit-scale slope over positions (None when the distributions are too flat to tell)."""
    fit = scale_fit(metrics)
    return fit[0] if fit else None


def scale_fit(metrics: Sequence[PositionMetrics]) -> tuple[float, float] | None:
    """(slope, standard error) of the logit-scale regression through the origin over all positions.

    The error is cluster-robust by position: the pairs of one position share its top-1 logprob (their errors are
    correlated), so positions, not pairs, are the independent samples.
    """
    num = sum(m.scale_num for m in metrics)
    den = sum(m.scale_den for m in metrics)
    if den <= MIN_SCALE_SPREAD or not math.isfinite(num + den):
        return None
    slope = num / den
    spread = sum((m.scale_num - slope * m.scale_den) ** 2 for m in metrics)
    return slope, math.sqrt(spread) / den


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two token-id sequences differ (the shorter one's length when one is a prefix of the
    other); None when they are equal."""
    n = min(len(a), len(b))
    at = next((i for i in range(n) if a[i] != b[i]), None)
    return at if at is not None else (None if len(a) == len(b) else n)


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def poisson_bound(expected: float) -> int:
    """Largest event count consistent with a Poisson mean `expected` (SAMPLE_SIGMAS above it, plus one)."""
    return int(expected + SAMPLE_SIGMAS * math.sqrt(expected) + 1.0)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]
    max_logprob_error: float
    kl_max: float
    kl_mean: float
    top1_mismatches: int
    near_ties: int
    positions: int
    kl_tail_count: int = 0
    kl_late_mean: float | None = None
    allowed_swaps: int = 0
    routing_flips: int = 0
    """MoE only: positions excused as routing flips (left out of max_logprob_error and kl_max)."""
    failed: tuple[str, ...] = ()
    """Stable names of the failed checks (FAILED_CHECKS), in the order of `reasons`: what callers read."""


FAILED_CHECKS = (
    "max-logprob-error",
    "max-kl",
    "mean-kl",
    "kl-tail",
    "kl-late",
    "top1-beyond-near-tie",
    "top1-rate",
    "logit-scale",
)


def tail_events(metrics: Sequence[PositionMetrics], level: float) -> int:
    """Runs of consecutive positions (within a prompt) whose KL exceeds `level`: one disturbance reaches every later
    position that attends to it, so runs, not positions, are the independent events a Poisson bound can count."""
    events, previous = 0, None
    for m in metrics:
        above = not m.kl <= level
        if above and previous != (m.prompt, m.index - 1):
            events += 1
        previous = (m.prompt, m.index) if above else None
    return events


def judge(metrics: Sequence[PositionMetrics], tol: Tolerances, *, moe: bool = False) -> Verdict:
    """Pass/fail of a set of positions against the tolerances (the logit scale is `judge_scale`'s). moe: up to
    ROUTING_FLIPS_ALLOWED positions beyond the single-position bounds are routing flips, not defects."""
    if not metrics:
        return Verdict(True, (), 0.0, 0.0, 0.0, 0, 0, 0)
    n = len(metrics)
    kls = [m.kl for m in metrics]
    gross = sorted(
        (m for m in metrics if not (m.max_logprob_error <= tol.max_logprob_error and m.kl <= tol.kl_max)),
        key=lambda m: -m.max_logprob_error,
    )
    flips = gross[:ROUTING_FLIPS_ALLOWED] if moe else []
    rest = [m for m in metrics if m not in flips] or list(metrics)
    err = max(m.max_logprob_error for m in rest)
    kl_max = max(m.kl for m in rest)
    kl_mean = sum(kls) / n
    failures: dict[str, str] = {}  # FAILED_CHECKS name -> reason
    if not err <= tol.max_logprob_error:
        failures["max-logprob-error"] = f"max logprob error {err:.3g} > {tol.max_logprob_error:.3g}"
    if not kl_max <= tol.kl_max:
        failures["max-kl"] = f"max KL {kl_max:.3g} > {tol.kl_max:.3g}"
    # Sampling allowance: SAMPLE_SIGMAS standard errors, plus one position as bad as the worst allowed (KL is heavy-
    # tailed: over a few positions one outlier moves the mean more than the normal approximation says).
    mean_limit = tol.kl_mean + SAMPLE_SIGMAS * tol.kl_sd / math.sqrt(n) + tol.kl_max / n
    if not kl_mean <= mean_limit:
        failures["mean-kl"] = f"mean KL {kl_mean:.3g} > {mean_limit:.3g} over {n} positions"
    tail = tail_events(metrics, tol.kl_tail_level)
    tail_allowed = poisson_bound((1 - TAIL_QUANTILE) * n)
    if tail > tail_allowed:
        failures["kl-tail"] = (
            f"KL tail: {tail} runs of positions above {tol.kl_tail_level:.3g} in {n} (allowed {tail_allowed})"
        )
    late = [m.kl for m in metrics if m.index >= LATE_FROM]
    late_mean = sum(late) / len(late) if late else None
    if late_mean is not None:
        late_limit = tol.kl_late_mean + SAMPLE_SIGMAS * tol.kl_late_sd / math.sqrt(len(late)) + tol.kl_max / len(late)
        if not late_mean <= late_limit:
            failures["kl-late"] = (
                f"KL grows with position: mean {late_mean:.3g} past index {LATE_FROM} > {late_limit:.3g}"
            )
    swaps = [m for m in metrics if not m.top1_agree]
    excused = set(tol.reference_swaps)
    ties = [m for m in swaps if m.gap <= tol.near_tie or m.key in excused]
    if len(swaps) > len(ties):
        beyond = len(swaps) - len(ties)
        failures["top1-beyond-near-tie"] = f"{beyond} top-1 disagreement(s) beyond the near-tie gap {tol.near_tie:.3g}"
    allowed = poisson_bound(tol.swap_rate * n)
    if len(swaps) > allowed:
        failures["top1-rate"] = f"{len(swaps)} top-1 swaps in {n} positions (the reference's own rate allows {allowed})"
    reasons, failed = tuple(failures.values()), tuple(failures)
    return Verdict(
        not reasons,
        reasons,
        err,
        kl_max,
        kl_mean,
        len(swaps),
        len(ties),
        n,
        tail,
        late_mean,
        allowed,
        len(flips),
        failed,
    )


def judge_scale(metrics: Sequence[PositionMetrics], tol: Tolerances) -> tuple[bool, float | None, float]:
    """(passed, slope, allowed |slope - 1|) of the logit-scale regression over all `metrics`; slope None: too flat."""
    fit = scale_fit(metrics)
    if fit is None:
        return True, None, tol.logit_scale
    slope, se = fit
    limit = tol.logit_scale + SAMPLE_SIGMAS * se
    return abs(slope - 1.0) <= limit, slope, limit


def pooled_noise(dtype: str, baseline: str, prompts: Sequence[Sequence[PositionMetrics]]) -> NoiseStats:
    """noise_from over the metrics of several prompts (of one run or more, pooled), each with its own scale ratio."""
    ratios = [r for r in map(scale_ratio, prompts) if r is not None]
    return noise_from(dtype, baseline, [m for metrics in prompts for m in metrics], ratios)


def noise_from(
    dtype: str, baseline: str, metrics: Sequence[PositionMetrics], prompt_ratios: Sequence[float]
) -> NoiseStats:
    """Summarise reference-vs-reference metrics as the noise statistics of `dtype`."""
    finite = all(math.isfinite(m.kl) and math.isfinite(m.max_logprob_error) for m in metrics)
    if not metrics or not finite:
        return NoiseStats(dtype, baseline, math.inf, math.inf, math.inf, math.inf, len(metrics), nonfinite=True)
    kls = [m.kl for m in metrics]
    mean, sd = _mean_sd(kls)
    late_mean, late_sd = _mean_sd([m.kl for m in metrics if m.index >= LATE_FROM])
    fit = scale_fit(metrics)
    swaps = [m for m in metrics if not m.top1_agree]
    return NoiseStats(
        dtype,
        baseline,
        max(m.max_logprob_error for m in metrics),
        max(kls),
        mean,
        max((abs(r - 1.0) for r in prompt_ratios), default=0.0),
        len(metrics),
        kl_sd=sd,
        kl_p99=quantile(kls, TAIL_QUANTILE),
        kl_late_mean=late_mean,
        kl_late_sd=late_sd,
        late_positions=sum(1 for m in metrics if m.index >= LATE_FROM),
        slope_deviation=abs(fit[0] - 1.0) if fit else 0.0,
        swap_rate=len(swaps) / len(metrics),
        margin_max=max((m.margin_error for m in metrics if math.isfinite(m.margin_error)), default=0.0),
        swaps=tuple(m.key for m in swaps if m.prompt),
    )


def topk_rows(logits: Any, k: int, next_ids: Sequence[int] | None) -> list[TopK]:
    """log_softmax in float32 over the vocabulary, top-k per row, and the logprob of each row's next token."""
    import torch

    logprobs = torch.log_softmax(logits.float(), dim=-1)
    values, indices = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
    token_lp = None
    if next_ids is not None:
        token_lp = logprobs.gather(-1, torch.tensor(list(next_ids)).unsqueeze(-1)).squeeze(-1).tolist()
    rows = []
    for r, (ids, vals) in enumerate(zip(indices.tolist(), values.tolist())):
        rows.append(TopK(tuple(ids), tuple(vals), token_lp[r] if token_lp is not None else None))
    return rows


@dataclass(frozen=True)
class Agreement:
    """Do a candidate's distributions agree with the reference's, judged against the reference's own run?"""

    passed: bool
    reasons: tuple[str, ...]
    verdict: Verdict
    slope: float | None
    slope_limit: float
    noise: NoiseStats
    failed: tuple[str, ...] = ()
    """Stable names of the failed checks (FAILED_CHECKS), in the order of `reasons`."""

    def detail(self) -> str:
        v = self.verdict
        slope = (
            "too flat to fit" if self.slope is None else f"{self.slope:.4f} (allowed |slope-1| {self.slope_limit:.2g})"
        )
        return (
            f"{v.positions} positions: mean KL {v.kl_mean:.2e} (reference's own run {self.noise.kl_mean:.2e}), "
            f"max KL {v.kl_max:.2e}, max logprob error {v.max_logprob_error:.2e} (own {self.noise.max_logprob_error:.2e}), "
            f"top-1 swaps {v.top1_mismatches} ({v.near_ties} near-ties), logit scale {slope}"
            + (f", routing flips {v.routing_flips} (allowed {ROUTING_FLIPS_ALLOWED})" if v.routing_flips else "")
            + (f"; FAILED: {'; '.join(self.reasons)}" if self.reasons else "")
        )


def agreement(
    dtype: str,
    reference: Sequence[Sequence[TopK]],
    candidate: Sequence[Sequence[TopK]],
    own_runs: Sequence[Sequence[Sequence[TopK]]],
    next_ids: Sequence[Sequence[int]],
    *,
    moe: bool = False,
) -> Agreement:
    """The candidate's rows vs the reference's (per prompt, teacher-forced on the same sequences), with the noise of
    `dtype` measured from `own_runs`: the reference model itself run in CALIBRATION[dtype] on the same prompts (one
    or more runs, pooled, as golden recording pools eager and sdpa attention). A dtype outside CALIBRATION raises
    UnknownDtype."""
    calibration = CALIBRATION[known_dtype(dtype, CALIBRATION, "calibration run")]

    def per_prompt(rows: Sequence[Sequence[TopK]]) -> list[list[PositionMetrics]]:
        return [compare_rows(r, c, ids, prompt=f"p{i}") for i, (r, c, ids) in enumerate(zip(reference, rows, next_ids))]

    noise = pooled_noise(dtype, calibration, [m for run in own_runs for m in per_prompt(run)])
    ours = [m for metrics in per_prompt(candidate) for m in metrics]
    tol = tolerances(dtype, noise)
    verdict = judge(ours, tol, moe=moe)
    scale_ok, slope, limit = judge_scale(ours, tol)
    reasons = verdict.reasons + (() if scale_ok else (f"logit scale {slope:.4f}: |slope-1| > {limit:.3g}",))
    failed = verdict.failed + (() if scale_ok else ("logit-scale",))
    return Agreement(not reasons, reasons, verdict, slope, limit, noise, failed)
