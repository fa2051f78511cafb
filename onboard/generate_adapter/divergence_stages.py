"""The first-divergence bisect where a stage needs it: generate's parity and validate's adapter candidate, when
they fail. The reference is transformers in process, or the repository's code captured in the sandbox worker.

It runs in float32 first: a code difference shows at any precision, while bf16 rounding in sharp attention can hide
one. Only when float32 agrees everywhere is the served dtype compared, with the reference's own error in that
dtype as the yardstick: the first divergence is then where precision breaks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from onboard.errors import InputError, OnboardError
from onboard.generate_adapter.divergence import locate, projection_names, summary
from onboard.generate_adapter.divergence_capture import capture

WORKER = "onboard.generate_adapter.divergence_stages:capture_in_worker"
# Longest input the validate bisect runs: every point of every layer is kept in memory.
MAX_TOKENS = 512
ReferenceAt = Callable[[str, Sequence[str]], Mapping[str, torch.Tensor]]


def capture_in_worker(checkpoint: str, input_ids: list[int], dtype: str, extra: list[str]) -> dict[str, Any]:
    """Worker side (onboard.sandbox): the repository's model, hooked; {"points": [[key, tensor], ...]} in order."""
    from onboard.reference import load_transformers, remote_code_allowed

    with remote_code_allowed():
        model = load_transformers(Path(checkpoint), dtype)
    return {"points": [[k, v] for k, v in capture(model, torch.tensor([list(input_ids)]), extra).items()]}


def reference_at(
    checkpoint: Path,
    input_ids: torch.Tensor,
    policy: Any = None,
    loaded: Any = None,
    rerun: str | None = None,
    cache: dict[Any, Mapping[str, torch.Tensor]] | None = None,
) -> ReferenceAt:
    """dtype, extra names -> the reference's capture on `input_ids`: `loaded` (a float32 model in memory),
    transformers, or the repository's code in the sandbox when `policy` trusts it (else an InputError naming
    `rerun`). `cache`: captures kept between calls (the search's trials capture the reference once)."""
    from onboard.reference import REPO_CODE, RemoteCodePolicy, reference_for, rerun_command, run_in_sandbox

    def at(dtype: str, extra: Sequence[str]) -> Mapping[str, torch.Tensor]:
        key = (dtype, tuple(extra), tuple(input_ids[0].tolist()))
        if cache is not None and key not in cache:
            cache[key] = capture_at(dtype, extra)
        return cache[key] if cache is not None else capture_at(dtype, extra)

    def capture_at(dtype: str, extra: Sequence[str]) -> Mapping[str, torch.Tensor]:
        if dtype == "float32" and isinstance(loaded, nn.Module):
            return capture(loaded, input_ids, extra)
        source = reference_for(checkpoint)
        if source.kind == REPO_CODE:
            allowed = policy or RemoteCodePolicy()
            refused = source.refusal(allowed, rerun or rerun_command("validate", str(checkpoint), policy=allowed))
            if refused:
                raise InputError(refused)
            kwargs = dict(checkpoint=str(checkpoint), input_ids=input_ids[0].tolist(), dtype=dtype, extra=list(extra))
            return dict(run_in_sandbox(WORKER, kwargs, checkpoint, allowed)["points"])
        from onboard.reference import load_transformers

        return capture(load_transformers(checkpoint, dtype), input_ids, extra)

    return at


def bisect(adapter_at: Callable[[str], nn.Module], ref_at: ReferenceAt, input_ids: torch.Tensor, dtype: str) -> dict:
    """Locate in float32; when nothing diverges there and `dtype` is lower, locate in `dtype`. A side that cannot
    run leaves it not located (never read as "no divergence")."""
    try:
        adapter = adapter_at("float32")
        names = projection_names(adapter)
        ref = ref_at("float32", names)
        result = locate(adapter, ref, input_ids, "float32") | {"compared_in": "float32"}
        if result["first_divergence"] is None and dtype not in ("float32", "float64"):
            result = locate(adapter_at(dtype), ref, input_ids, dtype, ref_at(dtype, names)) | {"compared_in": dtype}
    except OnboardError as exc:
        return not_located(exc.message)
    return result | {"divergence": summary(result)}


def not_located(why: str) -> dict[str, Any]:
    """The bisect could not run: empty fields and the reason (never read as "no divergence")."""
    return {"per_layer_error": [], "first_divergence": None, "divergence": f"not located: {why}"}


def parity_divergence(
    model_cls: Any,
    checkpoint: Path,
    reference: Any,
    input_ids: torch.Tensor,
    dtype: str,
    policy: Any = None,
    rerun: str | None = None,
    cache: dict[Any, Mapping[str, torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """The bisect for generate's failed parity: the adapter reloaded per dtype, parity's float32 reference reused
    (and its captures, in `cache`)."""

    def adapter_at(name: str) -> nn.Module:
        # torch's own dtype names (not parity.DTYPES: parity imports this module, and the table is the same names)
        dtype = getattr(torch, name, None)
        dtype = dtype if isinstance(dtype, torch.dtype) else torch.float32
        return model_cls.from_pretrained(checkpoint, dtype=dtype, trust_remote_code=False)

    ref_at = reference_at(checkpoint, input_ids, policy, reference, rerun, cache)
    return bisect(adapter_at, ref_at, input_ids, dtype)


def candidate_divergence(
    model: nn.Module, checkpoint: Path, sequence: Sequence[int], dtype: str, policy: Any = None
) -> dict[str, Any]:
    """The bisect for validate's in-process adapter candidate on one golden sequence (at most MAX_TOKENS)."""
    input_ids = torch.tensor([list(sequence)[:MAX_TOKENS]])

    def adapter_at(name: str) -> nn.Module:
        if name == dtype:
            return model
        reload = getattr(type(model), "from_pretrained", None)
        if reload is not None and getattr(type(model), "WEIGHT_MAP", None) is not None:
            return reload(checkpoint, dtype=getattr(torch, name))
        return copy.deepcopy(model).to(getattr(torch, name))  # a wrapped adapter: same modules, other precision

    return bisect(adapter_at, reference_at(checkpoint, input_ids, policy), input_ids, dtype)


# validate's checks that compare values with the reference: when one fails on an adapter, the bisect runs.
FIDELITY_CHECKS = ("logit_parity", "long_context_parity", "logit_scale", "greedy_parity")


def validation_divergence(candidate: Any, golden: Any, failed: Sequence[str], policy: Any = None) -> dict[str, Any]:
    """per_layer_error and first_divergence for validate, when a fidelity check failed on an in-process adapter
    candidate (engines expose no activations), on the longest golden prompt; {} otherwise."""
    if candidate.info.kind != "adapter" or not set(failed) & set(FIDELITY_CHECKS):
        return {}
    model, path = getattr(candidate, "model", None), getattr(candidate, "path", None)
    if model is None or path is None:
        return not_located("the candidate holds no model or checkpoint folder")
    longest = max(golden.prompts, key=lambda p: len(p.sequence))
    return candidate_divergence(model, Path(path), longest.sequence, candidate.info.dtype, policy)
