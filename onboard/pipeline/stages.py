"""The stages of `onboard new-model`, each a thin call into its stage package that writes its result
(onboard/checks.py) into the run folder and returns it.

A stage whose reference is the repository's own code is refused without --trust-remote-code (sandboxed with it): it
is recorded as blocked, with the reason and the command that would run it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.checks import Check, stage_result
from onboard.fsutil import atomic_write, atomic_write_json
from onboard.inspect_checkpoint.checkpoint_types import RepoListing
from onboard.inspect_checkpoint.verdicts import inspect_checks
from onboard.reference import RemoteCodePolicy, classify, rerun_command


@dataclass
class RunContext:
    source: str
    revision: str | None
    slug: str
    run_dir: Path
    workspace: Path
    target: str | None = None
    endpoint: str | None = None
    served_model: str | None = None
    dtype: str | None = None
    """--dtype: the candidate's dtype; None: the checkpoint's own for an endpoint, float32 in process (served_dtype)."""
    max_long_tokens: int | None = None
    """--max-long-tokens: the long prompt's cap (None: DEFAULT_MAX_LONG); raise it to cross a far boundary."""
    local_dir: Path | None = None
    run_id: str = ""
    """The run folder's name: the hub commit sha, or local-<fingerprint> for a local folder."""
    policy: RemoteCodePolicy = field(default_factory=RemoteCodePolicy)
    """--trust-remote-code / --unsafe-no-sandbox: may the repository's own code be the reference (sandboxed)."""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    listing: RepoListing | None = None
    """The hub repo's files at the run's commit, listed once when the run folder was named; None for a folder."""

    @property
    def golden_root(self) -> Path:
        return self.workspace / "golden_outputs"

    @property
    def served_dtype(self) -> str:
        """The dtype validate judges: --dtype, else what an engine loads by default (the checkpoint's stored dtype)
        for an endpoint, else float32 (the in-process adapter on CPU)."""
        if self.dtype:
            return self.dtype
        profile = self.run_dir / "profile.json"
        if self.endpoint and profile.is_file():
            return _stored_dtype(json.loads(profile.read_text())) or "float32"
        return "float32"

    @property
    def rerun(self) -> str:
        """This run again with --trust-remote-code: what a stage blocked for want of it tells people to run."""
        revision = ["--revision", self.revision] if self.revision else []
        return rerun_command(
            "new-model", self.source, *revision, "--workspace", str(self.workspace), policy=self.policy
        )


# safetensors dtype names -> candidate dtypes (the stored dtype of an unquantized checkpoint)
_STORED = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
}


def _stored_dtype(profile: dict[str, Any]) -> str | None:
    """config.json's dtype, else the dtype holding most parameters in the safetensors headers (inspect's profile)."""
    declared = str(profile.get("config_dtype") or "").removeprefix("torch.")
    if declared in _STORED:
        return _STORED[declared]
    parameters = profile.get("parameters")  # the string "unknown" when inspect could not read the weights
    by_dtype = (parameters.get("by_dtype") if isinstance(parameters, dict) else None) or {}
    counts = {_STORED[k]: v for k, v in by_dtype.items() if k in _STORED}
    return max(counts, key=counts.get) if counts else None


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RunContext], dict[str, Any]]
    outputs: tuple[str, ...]
    needs: tuple[str, ...] = ()
    params: Callable[[RunContext], dict[str, Any]] = lambda ctx: {}
    refuses: Callable[[RunContext], str | None] | None = None
    """Why the stage may not run in this run (e.g. its reference is repository code, not trusted), or None."""
    code: tuple[str, ...] = ()
    """Where its code lives (cache.code_path names): an edit there invalidates its cached result."""


def run_inspect(ctx: RunContext) -> dict[str, Any]:
    from onboard.inspect_checkpoint import inspect

    profile = inspect(ctx.source, revision=ctx.revision, target=ctx.target, listing=ctx.listing)
    atomic_write(ctx.run_dir / "profile.json", profile.to_json() + "\n")
    fatal = [f for f in profile.findings if f.severity == "fatal"]
    checks = inspect_checks(profile.to_dict())  # the same verdicts the checklist derives from a profile.json
    # checkpoint_dir: the absolute folder this run read (a local source), so promote can hash its files from
    # anywhere; the profile's `source` is the path as typed, relative to where new-model ran.
    local = str(ctx.local_dir.resolve()) if ctx.local_dir is not None else None
    result = stage_result(
        "inspect",
        checks,
        model_type=profile.model_type,
        revision=profile.revision,
        features=list(profile.features),
        unusable=bool(fatal),
        checkpoint_dir=local,
    )
    atomic_write_json(ctx.run_dir / "inspect.json", result)
    return result


def _ensure_local(ctx: RunContext) -> None:
    """Stages past inspect need the weights: a hub source is downloaded once (safetensors + small files only)."""
    if ctx.local_dir is None:
        from onboard.environment import SNAPSHOT_PATTERNS, resolve_local

        if ctx.listing is not None:  # the run's listing says what to fetch: no second listing request
            from onboard.inspect_checkpoint.hub import download_snapshot

            ctx.local_dir = download_snapshot(ctx.listing, SNAPSHOT_PATTERNS)
        else:
            ctx.local_dir = resolve_local(ctx.source, ctx.run_id)


def run_generate(ctx: RunContext) -> dict[str, Any]:
    from onboard.generate_adapter import generate
    from onboard.profile import ModelProfile

    _ensure_local(ctx)
    # The inspect stage's typed hand-off, not a second inspect of the download; parity runs on the download.
    profile = ModelProfile.from_json((ctx.run_dir / "profile.json").read_text(encoding="utf-8"))
    result = generate(
        profile,
        ctx.run_dir / "generated",
        force=True,
        parity=True,
        policy=ctx.policy,
        rerun=ctx.rerun,
        checkpoint=ctx.local_dir,
    ).to_dict()
    atomic_write_json(ctx.run_dir / "generate.json", result)
    return result


def run_verify_tokenizer(ctx: RunContext) -> dict[str, Any]:
    from onboard import serde
    from onboard.verify_tokenizer.remote import verify_tokenizer_trusting

    golden = ctx.golden_root / ctx.slug / "tokenizer.json"
    # name=slug: the tokenizer golden lives beside the other goldens of this run (golden_root/slug), whatever key
    # verify-tokenizer would derive on its own. A tokenizer that is repository code runs sandboxed, if trusted.
    report = verify_tokenizer_trusting(
        ctx.source,
        ctx.revision,
        ctx.golden_root,
        not golden.exists(),
        policy=ctx.policy,
        rerun=ctx.rerun,
        name=ctx.slug,
    )
    result = serde.to_dict(report)
    atomic_write_json(ctx.run_dir / "verify-tokenizer.json", result)
    return result


def run_golden(ctx: RunContext) -> dict[str, Any]:
    """Record goldens with the reference; a new revision is compared with the goldens already recorded."""
    from onboard.validate_serving.golden import read_golden, record
    from onboard.validate_serving.golden_diff import diff_goldens
    from onboard.validate_serving.prompts import DEFAULT_MAX_LONG

    _ensure_local(ctx)
    folder = ctx.golden_root / ctx.slug
    previous = folder / "MANIFEST.json"
    source = str(ctx.local_dir or ctx.source)
    cap = ctx.max_long_tokens or DEFAULT_MAX_LONG
    options = {"revision": ctx.run_id, "policy": ctx.policy, "rerun": ctx.rerun, "max_long_tokens": cap}
    manifest = json.loads(previous.read_text()) if previous.exists() else None
    if manifest is None:
        record(source, folder, **options)
        return _done_golden(ctx, [Check("goldens_recorded", True, detail=str(folder))], folder)
    if manifest.get("revision") == ctx.run_id:
        if (manifest.get("long_prompt") or {}).get("cap", DEFAULT_MAX_LONG) != cap:
            record(source, folder, **options)  # same revision, another long prompt
            detail = f"re-recorded {folder} with --max-long-tokens {cap}"
        else:
            detail = f"reusing {folder} (same revision)"
        return _done_golden(ctx, [Check("goldens_recorded", True, detail=detail)], folder)
    # A new revision: its reference must still match the goldens of the earlier (promoted) revision, value by value.
    new_folder = ctx.run_dir / "golden"
    record(source, new_folder, **options)
    diff = diff_goldens(read_golden(folder), read_golden(new_folder))
    checks = [
        Check("goldens_recorded", True, detail=str(new_folder)),
        Check("goldens_match_promoted", diff.passed, detail=diff.detail),
    ]
    return _done_golden(ctx, checks, new_folder, compared_with=str(folder))


def _done_golden(ctx: RunContext, checks: list[Check], folder: Path, **extra: Any) -> dict[str, Any]:
    from onboard.promote.record import sha256_tree

    result = stage_result("golden", checks, golden_dir=str(folder), golden_sha256=sha256_tree(folder), **extra)
    atomic_write_json(ctx.run_dir / "golden.json", result)
    return result


def run_validate(ctx: RunContext) -> dict[str, Any]:
    from onboard.validate_serving.golden import read_golden
    from onboard.validate_serving.report import write_result
    from onboard.validate_serving.run import open_candidate, validate

    golden_dir = Path(ctx.results["golden"]["golden_dir"])
    _ensure_local(ctx)
    if ctx.endpoint:
        candidate = open_candidate(
            str(ctx.local_dir or ctx.source), ctx.served_dtype, ctx.endpoint, ctx.served_model, 120.0
        )
    else:
        candidate = _generated_adapter(ctx)
    try:
        result = validate(
            read_golden(golden_dir), candidate, source=ctx.source, policy=ctx.policy, checkpoint=ctx.local_dir
        )
    finally:
        candidate.close()
    result.setdefault("stage", "validate")
    write_result(result, ctx.run_dir / "validation.json")
    atomic_write_json(ctx.run_dir / "validate.json", result)
    return result


def _generated_adapter(ctx: RunContext) -> Any:
    """The adapter this run generated (not a committed one, and never the reference standing in for it)."""
    import importlib.util

    from onboard.errors import InputError
    from onboard.reference import torch_dtype
    from onboard.validate_serving.runtime import InProcessCandidate

    model_type = ctx.results["generate"]["model_type"]
    path = ctx.run_dir / "generated" / "adapters" / f"{model_type}.py"
    if ctx.local_dir is None or not path.is_file():
        raise InputError(f"no generated adapter at {path}", "the generate stage must succeed before validate")
    import sys

    name = f"onboard_run_adapter_{model_type}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the adapter look their module up while it executes
    spec.loader.exec_module(module)
    model = module.Model.from_pretrained(ctx.local_dir, dtype=torch_dtype(ctx.served_dtype), trust_remote_code=False)
    return InProcessCandidate(model, ctx.local_dir, ctx.served_dtype, kind="adapter", hf=False)


def _reference_refusal(ctx: RunContext) -> str | None:
    """Why the reference may not run under the run's policy (None when it may), from the profile inspect wrote."""
    from onboard.profile import ModelProfile

    profile_file = ctx.run_dir / "profile.json"
    if not profile_file.is_file():
        return None  # no profile: the stage finds out for itself and reports it
    profile = ModelProfile.from_json(profile_file.read_text())
    auto_map = dict(profile.remote_code.auto_map) if profile.remote_code else None
    return classify(profile.model_type, auto_map).refusal(ctx.policy, ctx.rerun)


def _validate_refusal(ctx: RunContext) -> str | None:
    if _reference_refusal(ctx) is None:
        return None
    return f"no goldens to validate against: their reference is the repository's own code; rerun with: {ctx.rerun}"


def _trust(ctx: RunContext) -> dict[str, Any]:
    return {"remote_code": ctx.policy.to_dict()}


def write_refused(run_dir: Path, stage: str, result_file: str, reason: str) -> dict[str, Any]:
    """The result of a stage refused its run: every check the checklist expects from it open ("not checked") for
    `reason`, so the checklist and the report say why and what to run."""
    from onboard.promote.checklist import load_checklist

    names = load_checklist().check_names().get(stage) or [f"{stage}_ran"]
    checks = [Check(name, False, detail=reason, skipped=True) for name in dict.fromkeys(names)]
    result = stage_result(stage, checks, blocked=reason)
    atomic_write_json(run_dir / result_file, result)
    return result


# The code each stage runs, besides this module and what every stage shares (the profile, findings, errors, I/O).
_SHARED = tuple(
    "pipeline/stages.py profile.py serde.py findings.py errors.py fsutil.py reference.py checks.py environment.py".split()
)
STAGES: tuple[Stage, ...] = (
    Stage("inspect", run_inspect, ("profile.json", "inspect.json"), params=lambda c: {"target": c.target},
          code=(*_SHARED, "inspect_checkpoint", "lfs.py")),
    Stage("generate", run_generate, ("generate.json",), needs=("inspect",), params=_trust,
          code=(*_SHARED, "generate_adapter", "blocks", "kernels", "templates", "comparator.py")),
    Stage("verify-tokenizer", run_verify_tokenizer, ("verify-tokenizer.json",), needs=("inspect",),
          code=(*_SHARED, "verify_tokenizer", "lfs.py")),
    Stage("golden", run_golden, ("golden.json",), needs=("inspect",),
          params=lambda c: {**_trust(c), "max_long_tokens": c.max_long_tokens}, refuses=_reference_refusal,
          code=(*_SHARED, "validate_serving", "verify_tokenizer", "sandbox", "checkpoint_id.py", "comparator.py")),
    Stage("validate", run_validate, ("validate.json",), needs=("generate", "golden"),
          params=lambda c: {"endpoint": c.endpoint, "served_model": c.served_model, "dtype": c.served_dtype},
          refuses=_validate_refusal,
          code=(*_SHARED, "validate_serving", "verify_tokenizer", "sandbox", "adapters", "comparator.py")),
)  # fmt: skip
