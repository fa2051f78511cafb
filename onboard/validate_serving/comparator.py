"""Compare a candidate's next-token distributions with the reference's, position by position, against a noise model.

Why not vLLM's rule (each side's token inside the other's top-k at the first divergence): it has no value tolerance,
so logits scaled ×10 (argmax unchanged) pass (BUGZOO B34). Why not SGLang's fixed 5e-2: it is order-sensitive and
flaky on near-ties (B48). Here every tolerance is `max(floor[dtype], multiplier × noise)`, where `noise` is the
reference's own spread measured when the goldens were recorded (float32 vs float64 for float32 candidates, float32 vs
bfloat16/float16 for those dtypes), and a top-1 swap whose gap is below the tie tolerance is not a failure.

Per position: top-1 agreement, top-k overlap, KL(ref‖cand) over the reference top-k plus one tail bucket, max
logprob error over the reference top-k, and the logit-scale ratio (least-squares slope of the candidate's logprob
differences on the reference's: ×10 logits give 10, argmax unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from onboard.validate_serving.candidates import TopK

# THE threshold table (the only one). tolerance = max(floor[dtype], multiplier × calibrated noise statistic).
# Floors keep a perfectly quiet reference (tiny models: fp32 vs fp64 noise ~1e-7) from demanding bit-exactness of
# another kernel library; multipliers leave room for a second implementation whose rounding differs from the
# reference's own low-precision run (measured: vLLM CPU fp32 vs transformers ~5e-7, ENVIRONMENT.md).
#   metric              statistic compared                 multiplier  floors by candidate dtype
THRESHOLDS: dict[str, dict[str, object]] = {
    "max_logprob_error": {"stat": "max over positions", "multiplier": 4.0,
                          "floor": {"float64": 1e-6, "float32": 2e-5, "float16": 1e-2, "bfloat16": 8e-2}},
    "kl_max": {"stat": "max over positions", "multiplier": 4.0,
               "floor": {"float64": 1e-12, "float32": 1e-9, "float16": 1e-3, "bfloat16": 5e-3}},
    "kl_mean": {"stat": "mean over positions", "multiplier": 4.0,
                "floor": {"float64": 1e-13, "float32": 1e-10, "float16": 1e-4, "bfloat16": 1e-3}},
    "logit_scale": {"stat": "|ratio - 1| per prompt", "multiplier": 4.0,
                    "floor": {"float64": 1e-4, "float32": 1e-2, "float16": 2e-2, "bfloat16": 5e-2}},
    "near_tie": {"stat": "top-1 gap below which a swap is excused (noise: 2 x max_logprob_error)", "multiplier": 4.0,
                 "floor": {"float64": 1e-5, "float32": 1e-3, "float16": 2e-2, "bfloat16": 1e-1}},
}  # fmt: skip
# Minimum sum of squared logprob spreads for a per-prompt scale ratio to mean anything (flat distributions).
MIN_SCALE_SPREAD = 1e-6


@dataclass(frozen=True)
class NoiseStats:
    """The reference's own spread for one candidate dtype (stored in the golden MANIFEST)."""

    dtype: str
    baseline: str
    """What the float32 golden was compared with to measure it (float64, bfloat16, ...)."""
    max_logprob_error: float
    kl_max: float
    kl_mean: float
    logit_scale: float
    positions: int
    nonfinite: bool = False
    """The reference itself produced NaN/inf at this dtype (overflow): the dtype is unusable for this model."""


@dataclass(frozen=True)
class Tolerances:
    dtype: str
    max_logprob_error: float
    kl_max: float
    kl_mean: float
    logit_scale: float
    near_tie: float
    calibrated: bool


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


def tolerances(dtype: str, noise: NoiseStats | None) -> Tolerances:
    """The tolerance table applied to one dtype and its calibrated noise (floors alone when uncalibrated)."""

    def tol(metric: str, measured: float) -> float:
        row = THRESHOLDS[metric]
        floor = row["floor"].get(dtype, row["floor"]["float32"])  # type: ignore[union-attr]
        return max(float(floor), float(row["multiplier"]) * measured)  # type: ignore[arg-type]

    usable = noise is not None and not noise.nonfinite
    n = noise if usable else None
    return Tolerances(
        dtype,
        tol("max_logprob_error", n.max_logprob_error if n else 0.0),
        tol("kl_max", n.kl_max if n else 0.0),
        tol("kl_mean", n.kl_mean if n else 0.0),
        tol("logit_scale", n.logit_scale if n else 0.0),
        tol("near_tie", 2 * n.max_logprob_error if n else 0.0),
        usable,
    )


def compare_position(index: int, ref: TopK, cand: TopK, next_id: int | None = None) -> PositionMetrics:
    """Metrics for one position; ids missing from the candidate's top-k are bounded by its k-th logprob."""
    got = dict(zip(cand.ids, cand.logprobs))
    if next_id is not None and cand.token_logprob is not None:
        got.setdefault(next_id, cand.token_logprob)
    if not got or any(not math.isfinite(v) for v in got.values()):
        return PositionMetrics(index, False, 0.0, math.inf, math.inf, math.inf, 0.0, 0.0)
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
    num = den = 0.0
    if anchor is not None:
        for rid, a in zip(ref.ids, ref.logprobs):
            if rid in got:
                x, y = a - ref.logprobs[0], got[rid] - anchor
                num += x * y
                den += x * x
    overlap = len(set(ref.ids) & set(cand.ids[:k])) / max(1, k)
    return PositionMetrics(index, agree, overlap, kl, max(errors) if errors else 0.0, gap, num, den)


def compare_rows(
    ref_rows: Sequence[TopK], cand_rows: Sequence[TopK], next_ids: Sequence[int] | None = None
) -> list[PositionMetrics]:
    """Position-wise metrics of two equally long lists (teacher-forced on the same sequence)."""
    n = min(len(ref_rows), len(cand_rows))
    return [
        compare_position(i, ref_rows[i], cand_rows[i], next_ids[i] if next_ids is not None else None) for i in range(n)
    ]


def scale_ratio(metrics: Sequence[PositionMetrics]) -> float | None:
    """Least-squares logit-scale ratio over positions (None when the distributions are too flat to tell)."""
    num = sum(m.scale_num for m in metrics)
    den = sum(m.scale_den for m in metrics)
    return num / den if den > MIN_SCALE_SPREAD else None


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


def judge(metrics: Sequence[PositionMetrics], tol: Tolerances) -> Verdict:
    """Pass/fail of a set of positions against the tolerances (scale is judged separately, per prompt)."""
    if not metrics:
        return Verdict(True, (), 0.0, 0.0, 0.0, 0, 0, 0)
    err = max(m.max_logprob_error for m in metrics)
    kl_max = max(m.kl for m in metrics)
    kl_mean = sum(m.kl for m in metrics) / len(metrics)
    swaps = [m for m in metrics if not m.top1_agree]
    ties = [m for m in swaps if m.gap <= tol.near_tie]
    reasons = []
    if not err <= tol.max_logprob_error:
        reasons.append(f"max logprob error {err:.3g} > {tol.max_logprob_error:.3g}")
    if not kl_max <= tol.kl_max:
        reasons.append(f"max KL {kl_max:.3g} > {tol.kl_max:.3g}")
    if not kl_mean <= tol.kl_mean:
        reasons.append(f"mean KL {kl_mean:.3g} > {tol.kl_mean:.3g}")
    if len(swaps) > len(ties):
        reasons.append(f"{len(swaps) - len(ties)} top-1 disagreement(s) beyond the near-tie gap {tol.near_tie:.3g}")
    return Verdict(not reasons, tuple(reasons), err, kl_max, kl_mean, len(swaps), len(ties), len(metrics))


def noise_from(
    dtype: str, baseline: str, metrics: Sequence[PositionMetrics], prompt_ratios: Sequence[float]
) -> NoiseStats:
    """Summarise reference-vs-reference metrics as the noise statistics of `dtype`."""
    finite = all(math.isfinite(m.kl) and math.isfinite(m.max_logprob_error) for m in metrics)
    if not metrics or not finite:
        return NoiseStats(dtype, baseline, math.inf, math.inf, math.inf, math.inf, len(metrics), nonfinite=True)
    return NoiseStats(
        dtype,
        baseline,
        max(m.max_logprob_error for m in metrics),
        max(m.kl for m in metrics),
        sum(m.kl for m in metrics) / len(metrics),
        max((abs(r - 1.0) for r in prompt_ratios), default=0.0),
        len(metrics),
    )
