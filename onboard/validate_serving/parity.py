"""Parity checks against the goldens: teacher-forced logits (short, long context, scale) and greedy continuations.

Teacher forcing (the candidate scores the golden's own sequence) compares every position without the two sides
drifting apart after a harmless tie; a greedy divergence is excused only at a near-tie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from onboard.checks import Check, skipped
from onboard.comparator import (
    LATE_FROM,
    PositionMetrics,
    Tolerances,
    compare_position,
    compare_rows,
    first_difference,
    judge,
    judge_scale,
    scale_ratio,
)
from onboard.validate_serving.candidates import Candidate, Generation, TopK
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet

SHOW_TOP = 5


@dataclass(frozen=True)
class PromptParity:
    prompt: GoldenPrompt
    metrics: tuple[PositionMetrics, ...]
    long_from: int | None
    """First position index past a boundary (long_context_parity), None when the prompt crosses none."""
    ratio: float | None
    rows: tuple[TopK, ...] = ()
    """The candidate's own distributions (for the NaN/inf scan)."""


def score_prompts(golden: GoldenSet, candidate: Candidate, top_k: int) -> list[PromptParity]:
    """Teacher-forced candidate distributions on every golden sequence (one request per prompt: batch effects are
    determinism_batch's job, not parity's)."""
    out = []
    for prompt in golden.prompts:
        rows = candidate.score([prompt.sequence], top_k)[0]
        metrics = tuple(compare_rows(prompt.rows, rows, prompt.sequence[1:], prompt=prompt.name))
        # Position j attends to tokens 0..j; past a window of w it no longer sees token 0 (some kernels count w-1,
        # BUGZOO B26), so the long-context region starts one early to cover both conventions.
        # The model's boundaries apply to every prompt (a short prompt may cross a small window too).
        bounds = golden.manifest.get("boundaries") or prompt.boundaries
        long_from = min(bounds.values()) - 1 if bounds and len(prompt.sequence) - 1 > min(bounds.values()) - 1 else None
        out.append(PromptParity(prompt, metrics, long_from, scale_ratio(metrics), tuple(rows)))
    return out


def logit_checks(parities: list[PromptParity], tol: Tolerances) -> list[Check]:
    """logit_parity (positions before any boundary), long_context_parity (past them), logit_scale (all positions)."""
    short = [m for p in parities for m in (p.metrics if p.long_from is None else p.metrics[: p.long_from])]
    long = [m for p in parities if p.long_from is not None for m in p.metrics[p.long_from :]]
    results = [_verdict_check("logit_parity", short, tol, parities)]
    if long:
        bounds = sorted({f"{k}={v}" for p in parities for k, v in p.prompt.boundaries.items()}) or ["the boundaries"]
        check = _verdict_check("long_context_parity", long, tol, parities)
        results.append(replace(check, detail=f"past {', '.join(bounds)}: {check.detail}"))
    else:
        why = "the model has no sliding window or rope original context below the long prompt's length"
        results.append(
            skipped("long_context_parity", f"not checked: {why} (the long prompt is in logit_parity)", passed=True)
        )
    ratios = {p.prompt.name: p.ratio for p in parities if p.ratio is not None}
    ok, slope, limit = judge_scale([m for p in parities for m in p.metrics], tol)
    if slope is None:
        why = "not checked: distributions too flat to estimate a scale (a checkpoint with peaked outputs would show it)"
        results.append(skipped("logit_scale", why, passed=True, required=True))
    else:
        worst = max(ratios.items(), key=lambda kv: abs(kv[1] - 1.0), default=("-", 1.0))
        detail = (
            f"logit-scale slope {slope:.4g} over all positions (tolerance |slope-1| <= {limit:.3g}); "
            f"worst prompt {worst[0]} {worst[1]:.4g}"
        )
        results.append(Check("logit_scale", ok, True, detail, data={"slope": slope, "ratios": ratios}))
    return results


def _verdict_check(name: str, metrics: list[PositionMetrics], tol: Tolerances, parities: list[PromptParity]) -> Check:
    verdict = judge(metrics, tol)
    late = f", mean KL past index {LATE_FROM} {verdict.kl_late_mean:.3g}" if verdict.kl_late_mean is not None else ""
    detail = (
        f"{verdict.positions} positions: max logprob error {verdict.max_logprob_error:.3g} (tol {tol.max_logprob_error:.3g}), "
        f"max KL {verdict.kl_max:.3g} (tol {tol.kl_max:.3g}), mean KL {verdict.kl_mean:.3g}{late}, "
        f"{verdict.kl_tail_count} positions above the tail level {tol.kl_tail_level:.3g}, "
        f"top-1 swaps {verdict.top1_mismatches} of {verdict.allowed_swaps} allowed ({verdict.near_ties} excused)"
    )
    if not verdict.passed:
        detail = "; ".join(verdict.reasons) + " — " + detail + _worst_position(metrics, parities)
    data = {"max_logprob_error": verdict.max_logprob_error, "kl_max": verdict.kl_max, "kl_mean": verdict.kl_mean}
    return Check(name, verdict.passed, True, detail, data=data | {"top1_swaps": verdict.top1_mismatches})


def _worst_position(metrics: list[PositionMetrics], parities: list[PromptParity]) -> str:
    worst = max(metrics, key=lambda m: m.kl if math.isfinite(m.kl) else math.inf)
    for p in parities:
        if any(m is worst for m in p.metrics):
            row = p.prompt.rows[worst.index]
            return f"; worst at {p.prompt.name}[{worst.index}]: reference top {_fmt(row)}"
    return ""


def _fmt(row: TopK) -> str:
    return "[" + ", ".join(f"{i}:{v:.3f}" for i, v in zip(row.ids[:SHOW_TOP], row.logprobs[:SHOW_TOP])) + "]"


@dataclass(frozen=True)
class GreedyResult:
    prompt: GoldenPrompt
    generation: Generation
    diverged_at: int | None
    near_tie: bool
    detail: str


def greedy_parity(
    golden: GoldenSet, candidate: Candidate, top_k: int, tol: Tolerances
) -> tuple[Check, list[GreedyResult]]:
    """Greedy continuations vs the golden's; the first divergence is shown with both sides' top-k."""
    results = []
    for prompt in golden.prompts:
        gen = candidate.generate([prompt.prompt_ids], len(prompt.generated_ids), top_k, ignore_eos=True)[0]
        results.append(_greedy_one(prompt, gen, tol))
    bad = [r for r in results if r.diverged_at is not None and not r.near_tie]
    ties = [r for r in results if r.near_tie]
    if bad:
        detail = "; ".join(r.detail for r in bad[:3])
    else:
        detail = f"{len(results)} prompts: identical greedy tokens" + (
            f" ({len(ties)} diverged at near-ties)" if ties else ""
        )
    data = {
        "divergences": [
            {"prompt": r.prompt.name, "index": r.diverged_at, "near_tie": r.near_tie}
            for r in results
            if r.diverged_at is not None
        ]
    }
    return Check("greedy_parity", not bad, True, detail, data=data), results


def _greedy_one(prompt: GoldenPrompt, gen: Generation, tol: Tolerances) -> GreedyResult:
    ref = prompt.generated_ids
    at = first_difference(ref, gen.ids)
    if at is None or at == min(len(ref), len(gen.ids)):  # equal, or one ends where the other goes on
        if len(gen.ids) < len(ref) and gen.finish_reason != "stop":
            return GreedyResult(
                prompt, gen, len(gen.ids), False, f"{prompt.name}: only {len(gen.ids)} of {len(ref)} tokens"
            )
        return GreedyResult(prompt, gen, None, False, "")
    ref_row = prompt.rows[len(prompt.prompt_ids) - 1 + at]
    cand_row = gen.steps[at] if at < len(gen.steps) else TopK((gen.ids[at],), (0.0,))
    position = len(prompt.prompt_ids) - 1 + at
    metric = compare_position(position, ref_row, cand_row, prompt=prompt.name)
    # Excused only where the reference's own same-dtype run swaps too, or the gap is within its margin noise.
    own_swap = metric.key in tol.reference_swaps
    tie = own_swap or metric.gap <= tol.near_tie
    why = (
        "the reference's own run swaps here"
        if own_swap
        else f"gap {metric.gap:.3g} {'<=' if tie else '>'} near-tie {tol.near_tie:.3g}"
    )
    detail = (
        f"{prompt.name}: first divergence at generated token {at} (reference {ref[at]}, candidate {gen.ids[at]}, "
        f"{why}); reference top {_fmt(ref_row)}, candidate top {_fmt(cand_row)}"
    )
    return GreedyResult(prompt, gen, at, tie, detail)
