"""`validate`: one candidate against one golden set — parity, behaviour checks, then performance."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from onboard.checks import Check, skipped
from onboard.comparator import compare_rows, scale_ratio, tolerances
from onboard.validate_serving import checks as behaviour
from onboard.validate_serving.candidates import Candidate
from onboard.validate_serving.golden import GoldenSet, read_golden
from onboard.validate_serving.parity import PromptParity, greedy_parity, logit_checks, score_prompts
from onboard.validate_serving.report import SELF_CHECK

MAX_CANDIDATE_TOP_K = 20  # vLLM's default --max-logprobs
CANDIDATES = ("adapter", "reference")
"""In-process candidates: the generated adapter runtime, or transformers itself as an explicit self-check."""
NO_CANDIDATE_HINT = (
    "validate a serving engine with --endpoint URL --served-model NAME, or run onboard new-model SOURCE (it generates "
    "the adapter and validates that); --candidate reference compares transformers with its own goldens, a "
    "self-check of the harness that proves nothing about serving"
)
# Check groups besides parity (always run): what `only=` selects.
GROUPS = {
    "determinism": ("determinism_repeat", "determinism_batch", "determinism_padding"),
    "behaviour": ("degeneration", "stop_set"),
    "precision": ("nan_inf_scan", "fp16_overflow"),
    "tool_calls": ("tool_calls",),
}


def default_golden_dir(source: str) -> Path:
    from onboard.environment import slug

    return Path("golden_outputs") / slug(source)


def open_candidate(
    source: str,
    dtype: str,
    endpoint: str | None,
    served_model: str | None,
    timeout_s: float,
    candidate: str = "adapter",
) -> Candidate:
    """The endpoint when given; else, in process, the generated adapter or (candidate="reference") transformers.
    Never a silent stand-in: without either, an InputError names the ways to get a candidate."""
    from onboard.errors import InputError

    if endpoint:
        from onboard.validate_serving.endpoint import EndpointCandidate

        return EndpointCandidate(endpoint, served_model or source, dtype, timeout_s=timeout_s)
    from onboard.environment import resolve_local
    from onboard.validate_serving.runtime import load_candidate

    if candidate not in CANDIDATES:
        raise InputError(f"--candidate {candidate!r} is not a candidate", f"use one of {', '.join(CANDIDATES)}")
    folder = resolve_local(source)
    if candidate == "reference":
        return load_candidate(folder, dtype, runtime="reference")
    try:
        return load_candidate(folder, dtype, runtime="adapter")
    except InputError as exc:
        raise InputError(f"{source}: nothing to validate: {exc.message}", NO_CANDIDATE_HINT) from exc


def checkpoint_of(source: str, endpoint: str | None) -> Path | None:
    """The local checkpoint folder the goldens must belong to; None for an endpoint named by a hub id (its weights
    are the engine's, not on this machine)."""
    from onboard.environment import resolve_local

    if endpoint and not Path(source).is_dir():
        return None
    return resolve_local(source)


def validate(
    golden: GoldenSet | Path,
    candidate: Candidate,
    *,
    source: str | None = None,
    performance: bool = True,
    only: frozenset[str] | None = None,
    checkpoint: Path | None = None,
    policy: Any = None,
    parsers: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """Run the checks of `candidate` against `golden`; the stage result (see report.build_result).

    `only`: check groups (GROUPS keys) to run besides parity. `checkpoint`: the local folder being served (goldens of
    another checkpoint raise InputError). `policy` (RemoteCodePolicy): may the first-divergence bisect run a
    repository-code reference (sandboxed)? `parsers`: the endpoint's --tool-call-parser and --reasoning-parser, when
    known (named by the tool_calls check's parser advice).
    """
    from onboard.validate_serving.report import build_result

    golden = golden if isinstance(golden, GoldenSet) else read_golden(golden)
    identity = _goldens_checkpoint(golden, checkpoint)
    dtype = candidate.info.dtype
    tol = tolerances(dtype, golden.noise(dtype))
    top_k = min(MAX_CANDIDATE_TOP_K, 2 * golden.top_k)
    checks: list[Check] = []
    greedy_check, greedy = greedy_parity(golden, candidate, top_k, tol)
    if candidate.capabilities.prompt_logprobs:
        parities = score_prompts(golden, candidate, top_k)
    else:
        parities = _parities_from_generation(greedy)
        checks.append(
            skipped(
                "prompt_position_parity",
                "not checked: the engine returns no prompt logprobs (neither prompt_logprobs nor echo); parity judged "
                "on generated positions only; an engine that returns prompt_logprobs (vLLM, SGLang) or echo with "
                "logprobs checks every prompt position",
            )
        )
    checks += [_long_context_coverage(c, golden) for c in logit_checks(parities, tol)]
    checks.append(greedy_check)
    groups = set(GROUPS) if only is None else set(only)
    if "determinism" in groups:
        checks.append(behaviour.determinism_repeat(golden, candidate, top_k, tol))
        checks.append(behaviour.determinism_batch(golden, candidate, top_k, tol))
        checks.append(behaviour.determinism_padding(golden, candidate, top_k, tol))
    if "behaviour" in groups:
        checks.append(behaviour.degeneration(greedy))
        checks.append(behaviour.stop_set(golden, candidate))
    if "precision" in groups:
        activations = None
        if candidate.capabilities.activations:
            longest = max(golden.prompts, key=lambda p: len(p.sequence))
            activations = candidate.scan_activations(longest.sequence)
        checks.append(behaviour.nan_inf_scan([p.rows for p in parities], activations))
        checks.append(behaviour.fp16_overflow(golden, dtype, activations))
    if "tool_calls" in groups:
        from onboard.validate_serving.tool_check import tool_calls_check

        tool_parser, reasoning_parser = parsers
        checks.append(
            tool_calls_check(
                golden, candidate, tool_parser=tool_parser, reasoning_parser=reasoning_parser, tokenizer=checkpoint
            )
        )
    checks += [identity, *_info_checks(golden, candidate)]
    perf = None
    if performance:
        from onboard.validate_serving.performance import measure

        perf = asdict(measure(golden, candidate))
    result = build_result(golden, candidate, checks, parities, tol, perf)
    from onboard.generate_adapter.divergence_stages import validation_divergence

    return result | validation_divergence(candidate, golden, result["failed"], policy)


def _parities_from_generation(greedy: list[Any]) -> list[PromptParity]:
    """Without prompt logprobs: compare the generated positions up to the first divergence."""
    out = []
    for r in greedy:
        n = r.diverged_at if r.diverged_at is not None else len(r.generation.steps)
        start = len(r.prompt.prompt_ids) - 1
        ref_rows = r.prompt.rows[start : start + n]
        metrics = tuple(compare_rows(ref_rows, r.generation.steps[:n], r.prompt.generated_ids[:n]))
        out.append(PromptParity(r.prompt, metrics, None, scale_ratio(metrics), tuple(r.generation.steps[:n])))
    return out


def _goldens_checkpoint(golden: GoldenSet, checkpoint: Path | None) -> Check:
    """Goldens of another checkpoint are an error (raised); this check records which checkpoint they matched."""
    from onboard.validate_serving.golden import assert_same_checkpoint

    if checkpoint is None:
        return skipped(
            "goldens_checkpoint",
            "not checked: no local checkpoint folder to fingerprint; pass the checkpoint folder as SOURCE to check "
            "that the goldens were recorded from it",
        )
    fingerprint = assert_same_checkpoint(golden, checkpoint)
    detail = f"goldens recorded from this checkpoint ({checkpoint.name}, fingerprint {fingerprint})"
    return Check("goldens_checkpoint", True, False, detail, data={"weights_fingerprint": fingerprint})


def _long_context_coverage(check: Check, golden: GoldenSet) -> Check:
    """long_context_parity is "not applicable" only when no boundary can be crossed within the model's context; one
    the long prompt stops short of (the --max-long-tokens cap) leaves it not checked, saying how far to raise the cap."""
    if check.name != "long_context_parity":
        return check
    plan = long_plan_of(golden)
    uncrossed, beyond = plan["uncrossed"], plan.get("beyond_context") or {}
    if not uncrossed:
        if not check.skipped:
            return check
        where = ", ".join(f"{k}={v}" for k, v in sorted(beyond.items()))
        detail = (
            f"not applicable: {where} lies beyond the model's context (max_position_embeddings), no prompt can cross it"
            if beyond
            else "not applicable: the model has no sliding window, attention chunk or "
            "original rope context to cross (the long prompt is in logit_parity)"
        )
        return skipped(check.name, detail, passed=True, not_applicable=True)
    bounds = {**golden.manifest.get("boundaries", {}), **beyond}
    name = max(uncrossed, key=lambda k: uncrossed[k])
    what = ", ".join(f"{k}={bounds.get(k, '?')}" for k in sorted(uncrossed))
    hint = (
        f"raise --max-long-tokens to {uncrossed[name]} to cross the boundary at {bounds.get(name, '?')} ({name}): "
        f"onboard golden record SOURCE --max-long-tokens {uncrossed[name]}, or onboard new-model SOURCE "
        f"--max-long-tokens {uncrossed[name]}"
    )
    short = f"the long prompt ({plan['tokens']} tokens, --max-long-tokens {plan['cap']}) stops before {what}"
    if check.skipped:
        return skipped(check.name, f"not checked: {short}; {hint}", data=check.data)
    if not check.passed:
        return replace(check, detail=f"{check.detail}; also not checked: {short}; {hint}")
    return skipped(check.name, f"{check.detail}; not checked: {short}; {hint}", data=check.data)


def long_plan_of(golden: GoldenSet) -> dict[str, Any]:
    """The manifest's long-prompt plan; for goldens recorded before it was stored, rebuilt from the long prompt."""
    from onboard.validate_serving.prompts import DEFAULT_LONG_MARGIN

    plan = golden.manifest.get("long_prompt")
    if isinstance(plan, dict) and "uncrossed" in plan:
        return plan
    long = [p for p in golden.prompts if p.kind == "long"]
    tokens = len(long[0].prompt_ids) if long else 0
    bounds = golden.manifest.get("boundaries") or {}
    uncrossed = {k: v + DEFAULT_LONG_MARGIN for k, v in bounds.items() if v >= tokens}
    return {"tokens": tokens, "cap": "unknown", "uncrossed": uncrossed, "beyond_context": {}}


def _info_checks(golden: GoldenSet, candidate: Candidate) -> list[Check]:
    dtype = candidate.info.dtype
    noise = golden.noise(dtype)
    if noise is None:
        calibrated = skipped(
            "noise_calibrated",
            f"no noise calibration for {dtype} in the goldens: tolerance floors used alone; re-record with onboard "
            f"golden record SOURCE --calibrate {dtype} to calibrate them",
        )
    elif noise.nonfinite:
        why = f"the reference itself overflows in {noise.dtype}: floors used; this dtype is unsafe for the model"
        calibrated = Check("noise_calibrated", False, False, why)
    else:
        what = f"over {noise.positions} positions: max logprob error {noise.max_logprob_error:.3g}"
        calibrated = Check(
            "noise_calibrated", True, False, f"{noise.dtype} noise from float32 vs {noise.baseline} {what}"
        )
    if candidate.info.kind != "reference-as-candidate":
        return [calibrated]
    hint = (
        "validate the generated adapter (onboard new-model SOURCE generates and validates it) or an engine (--endpoint "
        "URL --served-model NAME)"
    )
    return [calibrated, skipped("adapter_runtime", f"not checked: {SELF_CHECK}; {hint}")]
