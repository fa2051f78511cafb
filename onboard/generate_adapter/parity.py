"""Parity harness: a generated adapter's logits vs the reference's (transformers, eager attention) on the same
checkpoint, judged by the comparator (onboard/comparator.py, the one validate uses).

Two correct implementations that round at different points differ by rounding noise, so no fixed bar is sound:
the adapter is compared with the reference in float32 (the truth) and judged against the reference's own run in
the comparator's calibration dtype for the adapter's dtype, on the same machine and prompts. Reported besides:
max|Δlogit| / max|reference logit| per prompt (`worst`), and the reference's own in low precision.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from onboard.comparator import CALIBRATION, agreement, topk_rows
from onboard.errors import InputError, ReferenceUnusable
from onboard.generate_adapter.parity_power import missed_probes, power_fields
from onboard.generate_adapter.runtime import import_file
from onboard.inspect_checkpoint.config_view import language_model_config
from onboard.reference import REPO_CODE, RemoteCodePolicy, describe, load_transformers, reference_for, rerun_command

CALIBRATED_BAR = "calibrated (onboard/comparator.py THRESHOLDS)"
"""The one parity bar, named in every parity result: adapters and the MTP draft head (tests/speculative/mtp_parity.py)
are both judged by the comparator's `agreement` against the reference's own run in the calibration dtype."""
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
PARITY_TOP_K = 10
"""Reference top-k per position, as the goldens record (the adapter and the calibration run give twice as many)."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


@dataclass(frozen=True)
class PromptParity:
    length: int
    max_abs_diff: float
    max_abs_logit: float
    relative: float


def load_adapter(path: str | Path) -> ModuleType:
    """Import a generated adapter file as a module (it need not be on sys.path)."""
    return import_file(Path(path), f"_onboard_adapter_{Path(path).stem}")


def prompt_lengths(config: dict[str, Any]) -> tuple[int, ...]:
    """Short, medium and longer than twice the smallest sliding window or attention chunk (so windows really cut in)."""
    window = min((w for w in (config.get("sliding_window"), config.get("attention_chunk_size")) if w), default=0)
    longest = max(48, 2 * window + 5)
    limit = config.get("max_position_embeddings") or longest
    return tuple(sorted({min(n, limit) for n in (5, 19, longest)}))


def prompts(config: dict[str, Any], seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    vocab = config["vocab_size"]
    return [torch.randint(0, vocab, (1, n), generator=g) for n in prompt_lengths(config)]


def parity_config(checkpoint: Path) -> dict[str, Any]:
    """config.json, or its text part for a composite model: what sizes the parity prompts."""
    config = json.loads((checkpoint / "config.json").read_text())
    return language_model_config(config)


def reference_model(
    checkpoint: Path, dtype: torch.dtype, policy: RemoteCodePolicy | None = None, attn: str = "eager"
) -> Any:
    """transformers' model (eager attention); when the reference is the repository's own code and `policy` allows
    it, a stand-in whose logits come from that code run in the sandbox worker (onboard/reference.py)."""
    policy = policy or RemoteCodePolicy()
    name = next(k for k, v in DTYPES.items() if v == dtype)
    ref = reference_for(checkpoint)
    if ref.kind == REPO_CODE:
        refused = ref.refusal(policy, rerun_command("generate", str(checkpoint), "--parity", policy=policy))
        if refused:
            raise InputError(refused)
        from onboard.generate_adapter.remote_reference import SandboxedReference

        return SandboxedReference(checkpoint, name, policy, prompts(parity_config(checkpoint)))
    return load_transformers(checkpoint, name, attn=attn)


def unverified(dtype: str, why: str, status: str = "unverified") -> dict[str, Any]:
    """Parity that could not run (no reference may run) or stopped (one side raised: status `failed` for the
    adapter): never passed, and says why and what to run."""
    return {
        "passed": False,
        "status": status,
        "dtype": dtype,
        "worst": None,
        "reference_worst": None,
        "tolerance": CALIBRATED_BAR,
        "failed": [],
        "prompts": [],
        "detail": f"unverified: {why}" if status == "unverified" else why,
    }


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}"


def _logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids)
    return (out if isinstance(out, torch.Tensor) else out.logits).float()


def compare(adapter: Any, reference: Any, inputs: list[torch.Tensor]) -> list[PromptParity]:
    """Run both models on each prompt (one row, no padding) and measure the logit gap."""
    with torch.no_grad():
        refs = [_logits(reference, ids) for ids in inputs]
        errors = position_errors_of([_logits(adapter, ids) for ids in inputs], refs)
    return [summarise(e, ref) for e, ref in zip(errors, refs)]


def position_errors_of(logits: list[torch.Tensor], refs: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    for got, ref in zip(logits, refs):
        diff = (got.double() - ref.double()).abs().amax(dim=-1).flatten()
        out.append(diff / max(float(ref.abs().max()), 1e-30))
    return out


def summarise(errors: torch.Tensor, ref: torch.Tensor) -> PromptParity:
    scale = float(ref.abs().max())
    return PromptParity(errors.numel(), float(errors.max()) * scale, scale, float(errors.max()))


def _own_runs(checkpoint: Path, dtype: str, policy: RemoteCodePolicy, given: Any) -> Iterator[Any]:
    """The reference itself in CALIBRATION[dtype], as golden recording measures its noise: in low precision with eager
    and sdpa attention (pooled: one run under-samples rare MoE routing flips). A given module is itself, cast."""
    calibration = DTYPES[CALIBRATION[dtype]]
    if given is not None:
        yield copy.deepcopy(given).to(calibration)
        return
    yield reference_model(checkpoint, calibration, policy)
    if dtype != "float32" and reference_for(checkpoint).kind != REPO_CODE:
        try:
            yield reference_model(checkpoint, calibration, policy, attn="sdpa")
        except (InputError, ValueError, NotImplementedError):
            return  # e.g. sdpa has no attention soft-cap (Gemma 2)


def check_parity(
    adapter_file: str | Path,
    checkpoint: str | Path,
    dtype: str = "float32",
    reference: Any = None,
    policy: RemoteCodePolicy | None = None,
    rerun: str | None = None,
    memo: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Adapter vs the reference (transformers, or the repository's code in the sandbox when `policy` trusts it) on
    `checkpoint`: {passed, status, worst, tolerance, failed, prompts, detail, reference}. When no reference may run,
    "unverified", naming `rerun`, the command that would run it. A pass states its power (parity_power): a probe
    defect the comparison would miss makes it "passed, low power", never passed. `memo`: a dict kept between calls
    on the same checkpoint (the search's trials): the reference's runs and captures are made once."""
    from onboard.environment import require_loadable

    checkpoint = Path(checkpoint)
    require_loadable(checkpoint)  # a pointer is the clone's fault, named with the fix, not the adapter's
    policy = policy or RemoteCodePolicy()
    source = reference_for(checkpoint)
    rerun = rerun or rerun_command("generate", str(checkpoint), "--parity", policy=policy)
    refused = source.refusal(policy, rerun) if reference is None else None
    if refused:
        return unverified(dtype, refused)
    torch_dtype = DTYPES[dtype]
    config = parity_config(checkpoint)
    inputs = prompts(config)
    module = load_adapter(adapter_file)
    # A day-zero model may break either side: the adapter (a guard refusing the config, a shape it did not expect)
    # or the reference itself. Either is this check's result, naming the side and the error, not a crash.
    try:
        adapter = module.Model.from_pretrained(checkpoint, dtype=torch_dtype, trust_remote_code=False)
        with torch.no_grad():
            ours_logits = [_logits(adapter, ids) for ids in inputs]
    except Exception as exc:  # noqa: BLE001 - reported as the failed check, with the error
        why = f"the adapter in {dtype} raised {_error(exc)}"
        what_next = "fix the adapter (or its guard's refusal is the answer: this config is not one it runs)"
        return unverified(dtype, f"{why}; {what_next}", "failed")
    # float32 truth, and the reference's own run(s) in the calibration dtype (the yardstick: same machine, prompts).
    # The reference raising (in the float32 truth, or in the calibration run the tolerance comes from) leaves
    # nothing to judge against: unverified, naming the run.
    given, calibration = reference, CALIBRATION[dtype]
    run = "the reference in float32"
    memo = {} if memo is None else memo
    try:
        if memo.get("runs", (None,))[0] != dtype:
            reference = reference if reference is not None else reference_model(checkpoint, torch.float32, policy)
            with torch.no_grad():
                refs = [_logits(reference, ids) for ids in inputs]
                run = f"the reference's calibration run in {calibration}"
                own_runs = [[_logits(m, ids) for ids in inputs] for m in _own_runs(checkpoint, dtype, policy, given)]
            memo["runs"] = (dtype, reference, refs, own_runs)
        _, reference, refs, own_runs = memo["runs"]
    except ReferenceUnusable as exc:  # never "adapter parity failed" against a broken reference (issue 41)
        return unverified(dtype, f"reference-unusable: {exc.message}") | {"verdict": exc.verdict, "cause": exc.cause}
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - no reference run, no tolerance: not judged
        return unverified(
            dtype,
            f"{run} raised {_error(exc)}; the reference model's own code fails here: check it with that code, or "
            "check the adapter in another dtype or against an engine (onboard validate)",
        )
    results = [summarise(e, r) for e, r in zip(position_errors_of(ours_logits, refs), refs)]
    worst = max(r.relative for r in results)
    hf_worst = float(torch.cat(position_errors_of(own_runs[0], refs)).max()) if dtype != "float32" else None
    nexts = [ids[0, 1:].tolist() for ids in inputs]

    def rows(logits: list[torch.Tensor], k: int) -> list[list[Any]]:
        return [topk_rows(x[0, :-1], k, n) for x, n in zip(logits, nexts)]

    def judged(logits: list[torch.Tensor]) -> Any:
        own = [rows(run, 2 * PARITY_TOP_K) for run in own_runs]
        moe = any(config.get(k) for k in MOE_KEYS)
        return agreement(dtype, rows(refs, PARITY_TOP_K), rows(logits, 2 * PARITY_TOP_K), own, nexts, moe=moe)

    verdict = judged(ours_logits)
    power: dict[str, Any] = {}
    if verdict.passed:  # the same comparison on probe defects: would it have caught them at this noise level?
        rerun_adapter = lambda: [_logits(adapter, ids) for ids in inputs]  # noqa: E731
        power = power_fields(*missed_probes(adapter, ours_logits, rerun_adapter, lambda bent: judged(bent).passed))
    passed = verdict.passed and power["status"] == "passed"
    lengths = ", ".join(str(r.length) for r in results)
    ref_name = "the repository's code" if source.kind == REPO_CODE else "transformers"  # which reference, in words
    detail = (
        f"adapter in {dtype} vs {ref_name} float32, judged against {ref_name} in {CALIBRATION[dtype]}: "
        f"{verdict.detail()}; max|Δ|/max|logit| {worst:.2e}"
        + (f" ({ref_name} {dtype}: {hf_worst:.2e})" if hf_worst is not None else "")
    )
    result = {
        "passed": passed,
        "status": power["status"] if verdict.passed else "failed",
        "reference": describe(source, policy, checkpoint),
        "dtype": dtype,
        "worst": worst,
        "reference_worst": hf_worst,
        "tolerance": CALIBRATED_BAR,
        "failed": list(verdict.failed),
        "prompts": [asdict(r) for r in results],
        "detail": (f"{power['lead']}: " if power else "") + f"{detail} (prompt lengths {lengths})",
    } | ({"power": power["power"]} if power else {})
    if not verdict.passed:  # where it breaks: first layer and module beyond tolerance (divergence_stages)
        from onboard.generate_adapter.divergence_stages import parity_divergence

        captures = memo.setdefault("captures", {})
        result |= parity_divergence(module.Model, checkpoint, reference, inputs[-1], dtype, policy, rerun, captures)
        result["detail"] += f"; {result['divergence']}"
    return result
