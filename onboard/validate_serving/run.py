"""`validate`: one candidate against one golden set — parity, behaviour checks, then performance."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from onboard.validate_serving.candidates import Candidate
from onboard.validate_serving.checks import (
    degeneration,
    determinism_batch,
    determinism_padding,
    determinism_repeat,
    fp16_overflow,
    nan_inf_scan,
    stop_set,
)
from onboard.validate_serving.comparator import THRESHOLDS, compare_rows, tolerances
from onboard.validate_serving.golden import GoldenSet, read_golden
from onboard.validate_serving.parity import CheckResult, PromptParity, greedy_parity, logit_checks, score_prompts

MAX_CANDIDATE_TOP_K = 20  # vLLM's default --max-logprobs
# Check groups besides parity (always run): what `only=` selects.
GROUPS = {
    "determinism": ("determinism_repeat", "determinism_batch", "determinism_padding"),
    "behaviour": ("degeneration", "stop_set"),
    "precision": ("nan_inf_scan", "fp16_overflow"),
}


def default_golden_dir(source: str) -> Path:
    from onboard.validate_serving.env import slug

    return Path("golden_outputs") / slug(source)


def open_candidate(
    source: str, dtype: str, endpoint: str | None, served_model: str | None, timeout_s: float
) -> Candidate:
    """The endpoint when given, else the in-process adapter runtime (or reference-as-candidate) for SOURCE."""
    if endpoint:
        from onboard.validate_serving.endpoint import EndpointCandidate

        return EndpointCandidate(endpoint, served_model or source, dtype, timeout_s=timeout_s)
    from onboard.validate_serving.candidates import load_candidate
    from onboard.validate_serving.env import resolve_local

    return load_candidate(resolve_local(source), dtype)


def validate(
    golden: GoldenSet | Path,
    candidate: Candidate,
    *,
    source: str | None = None,
    performance: bool = True,
    only: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Run the checks of `candidate` against `golden`; the stage result (see report.build_result).

    `only` limits the run to check groups (GROUPS keys); parity always runs (the other checks need its rows).
    """
    from onboard.validate_serving.report import build_result

    golden = golden if isinstance(golden, GoldenSet) else read_golden(golden)
    dtype = candidate.info.dtype
    tol = tolerances(dtype, golden.noise(dtype))
    top_k = min(MAX_CANDIDATE_TOP_K, 2 * golden.top_k)
    checks: list[CheckResult] = []
    greedy_check, greedy = greedy_parity(golden, candidate, top_k, tol)
    if candidate.capabilities.prompt_logprobs:
        parities = score_prompts(golden, candidate, top_k)
    else:
        parities = _parities_from_generation(greedy)
        checks.append(
            CheckResult("prompt_position_parity", False, False, "not checked: the engine returns no prompt logprobs "
                        "(neither prompt_logprobs nor echo); parity judged on generated positions only", skipped=True)
        )  # fmt: skip
    checks += logit_checks(parities, tol)
    checks.append(greedy_check)
    groups = set(GROUPS) if only is None else set(only)
    if "determinism" in groups:
        checks.append(determinism_repeat(golden, candidate, top_k, tol))
        checks.append(determinism_batch(golden, candidate, top_k, tol))
        checks.append(determinism_padding(golden, candidate, top_k, tol))
    if "behaviour" in groups:
        checks.append(degeneration(greedy))
        checks.append(stop_set(golden, candidate))
    if "precision" in groups:
        activations = None
        if candidate.capabilities.activations:
            longest = max(golden.prompts, key=lambda p: len(p.sequence))
            activations = candidate.scan_activations(longest.sequence)
        checks.append(nan_inf_scan([p.rows for p in parities], activations))
        checks.append(fp16_overflow(golden, dtype, activations))
    checks += _info_checks(golden, candidate, source)
    perf = None
    if performance:
        from onboard.validate_serving.performance import measure

        perf = asdict(measure(golden, candidate))
    return build_result(golden, candidate, checks, parities, tol, perf, THRESHOLDS)


def _parities_from_generation(greedy: list[Any]) -> list[PromptParity]:
    """Without prompt logprobs: compare the generated positions up to the first divergence."""
    from onboard.validate_serving.comparator import scale_ratio

    out = []
    for r in greedy:
        n = r.diverged_at if r.diverged_at is not None else len(r.generation.steps)
        start = len(r.prompt.prompt_ids) - 1
        ref_rows = r.prompt.rows[start : start + n]
        metrics = tuple(compare_rows(ref_rows, r.generation.steps[:n], r.prompt.generated_ids[:n]))
        out.append(PromptParity(r.prompt, metrics, None, scale_ratio(metrics), tuple(r.generation.steps[:n])))
    return out


def _info_checks(golden: GoldenSet, candidate: Candidate, source: str | None) -> list[CheckResult]:
    out = []
    noise = golden.noise(candidate.info.dtype)
    if noise is None:
        out.append(CheckResult("noise_calibrated", False, False, f"no noise calibration for {candidate.info.dtype} in "
                               "the goldens: tolerance floors used alone", skipped=True))  # fmt: skip
    elif noise.nonfinite:
        out.append(CheckResult("noise_calibrated", False, False, f"the reference itself overflows in {noise.dtype}: "
                               "floors used; this dtype is unsafe for the model"))  # fmt: skip
    else:
        out.append(CheckResult("noise_calibrated", True, False, f"{noise.dtype} noise from float32 vs {noise.baseline} "
                               f"over {noise.positions} positions: max logprob error {noise.max_logprob_error:.3g}"))  # fmt: skip
    if candidate.info.kind == "reference-as-candidate":
        out.append(CheckResult("adapter_runtime", False, False, "not checked: the generated adapter runtime is not "
                               "available; transformers stood in as the candidate (reference-as-candidate)", skipped=True))  # fmt: skip
    return out
