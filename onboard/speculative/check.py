"""`onboard draft-check`: compatibility, measured acceptance and expected speedup of a draft for a target.

The target runs in process (the generated adapter, else transformers with trust_remote_code=False) along the goldens'
continuations or its own greedy ones; target and draft model each run one teacher-forced forward per trajectory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.checks import Check
from onboard.errors import InputError
from onboard.findings import Finding, error
from onboard.speculative import acceptance, drafts
from onboard.speculative.acceptance import MAX_K, Windows

RESULT_FILE = "draft-check.json"
SPECIAL_DRAFTS = ("ngram", "mtp")


@dataclass(frozen=True)
class Request:
    target: str
    draft: str
    """A checkpoint folder or hub repo, or `ngram` / `mtp`."""
    ks: tuple[int, ...] = tuple(range(1, MAX_K + 1))
    temperature: float = 1.0
    """0: greedy only."""
    dtype: str = "bfloat16"
    golden: Path | None = None
    max_new_tokens: int = 32
    out: Path | None = None
    revision: str | None = None


@dataclass(frozen=True)
class Trajectory:
    name: str
    prompt: tuple[int, ...]
    continuation: tuple[int, ...]
    logits: Any = None
    """(N, V) float32: the target's logits that chose each continuation token in its own (KV-cached) generation;
    None for goldens' continuations (a teacher-forced forward then)."""


def run(request: Request, say: Any) -> dict[str, Any]:
    """The draft-check result (also written to OUT/draft-check.json); IncompatibleDraft after writing it."""
    from onboard.environment import resolve_local, slug
    from onboard.fsutil import output_folder

    started = time.perf_counter()
    folder = resolve_local(request.target, request.revision)
    with output_folder(request.out or Path("draft-check") / slug(request.target)) as out:  # before the work
        return _check(request, folder, out, started, say)


def _check(request: Request, folder: Path, out: Path, started: float, say: Any) -> dict[str, Any]:
    """run's measurement, written into `out` (made beforehand)."""
    from onboard.environment import resolve_local
    from onboard.speculative.compat import IncompatibleDraft, check_compatibility

    kind = request.draft if request.draft in SPECIAL_DRAFTS else "model"
    draft_folder = resolve_local(request.draft) if kind == "model" else None
    result: dict[str, Any] = {
        "stage": "draft-check",
        "target": request.target,
        "draft": request.draft,
        "draft_kind": kind,
        "dtype": request.dtype,
        "temperature": request.temperature,
    }
    findings: list[Finding] = []
    if draft_folder is not None:
        try:
            compat = check_compatibility(folder, draft_folder)
        except IncompatibleDraft as exc:
            _finish(result, [error(exc.code, exc.message, exc.hint)], None, out)
            raise
        findings += compat.findings
        result["compatibility"] = {
            "corpus_strings": compat.corpus_strings,
            "target_rows": compat.target_rows,
            "draft_rows": compat.draft_rows,
            "vocab_mapping": {str(d): t for d, t in compat.vocab_mapping.items()},
        }
    target = _load(folder, request.dtype)
    mtp_draft = drafts.open_mtp(target, folder) if kind == "mtp" else None
    if isinstance(mtp_draft, Finding):  # before any generation: nothing to measure
        return _finish(result, [*findings, mtp_draft], None, out)
    trajectories, source = _trajectories(folder, request, target)
    if not trajectories:
        raise InputError(
            f"{folder}: no continuation to measure along ({source}): every one is empty",
            "record goldens with --max-new-tokens >= 2, or run without --golden",
        )
    say(f"draft-check: {len(trajectories)} trajectories ({source}), target {target.info.kind}, {request.dtype}")
    rows = []
    for t in trajectories:  # the target's logits predicting each continuation token
        sequence = t.prompt + t.continuation
        logits = t.logits if t.logits is not None else _forward(target, sequence)[len(t.prompt) - 1 : -1]
        rows.append(drafts.TargetRows(sequence, len(t.prompt), logits))
    if mtp_draft is not None:
        windows, draft_step = drafts.mtp_windows(target, mtp_draft, rows, request.temperature)
    else:
        windows, draft_step = _measure(kind, draft_folder, rows, request, say)
    result["prompts"] = {
        "count": len(trajectories),
        "from": source,
        "generated_tokens": sum(len(t.continuation) for t in trajectories),
    }
    target_step = acceptance.decode_step_seconds(target, trajectories[0].prompt)
    result.update(_acceptance(windows, request, draft_step, target_step))
    result["trajectories"] = [
        {
            "name": t.name,
            "prompt_ids": list(t.prompt),
            "continuation_ids": list(t.continuation),
            "greedy_runs": list(w.runs),
        }
        for t, w in zip(trajectories, windows)
    ]
    result["seconds"] = round(time.perf_counter() - started, 3)
    return _finish(result, findings, windows, out)


def _load(folder: Path, dtype: str) -> Any:
    """The in-process target or draft (InProcessCandidate): adapter, else transformers; never repository code."""
    from onboard.reference import BUILTIN, reference_for
    from onboard.validate_serving.runtime import load_candidate

    reference = reference_for(folder)
    if reference.kind == BUILTIN:
        return load_candidate(folder, dtype, runtime="auto")
    try:
        return load_candidate(folder, dtype, runtime="adapter")
    except InputError as exc:
        raise InputError(
            f"{folder}: {reference.detail}; draft-check runs the generated adapter or transformers, never the "
            "repository's code",
            f"generate the adapter first (onboard generate {folder}), then rerun",
        ) from exc


def _trajectories(folder: Path, request: Request, target: Any) -> tuple[list[Trajectory], str]:
    if request.golden is not None:
        from onboard.validate_serving.golden import assert_same_checkpoint, read_golden

        goldens = read_golden(request.golden)
        assert_same_checkpoint(goldens, folder)
        found = [Trajectory(p.name, p.prompt_ids, p.generated_ids) for p in goldens.prompts if p.generated_ids]
        return found, f"goldens {request.golden}"
    from onboard.speculative.compat import embedding_rows
    from onboard.validate_serving.prompts import build_suite
    from onboard.verify_tokenizer.subject import load_tokenizer

    vocab = int(target.model.get_input_embeddings().weight.shape[0]) if target.hf else None
    vocab = vocab or embedding_rows(folder)
    suite = build_suite(load_tokenizer(folder), None, vocab_size=vocab, max_new_tokens=request.max_new_tokens)
    out = [_generate(target, spec.name, spec.ids, request.max_new_tokens) for spec in suite]
    found = [t for t in out if t.continuation]
    return found, f"the golden prompt suite, the target's greedy continuations (up to {request.max_new_tokens} tokens)"


def _generate(target: Any, name: str, prompt: tuple[int, ...], max_new_tokens: int) -> Trajectory:
    """The target's greedy continuation (stopped by its stop set), with the logits of every step (a forward hook keeps
    the last position's logits of each call the decode loop makes)."""
    import torch

    steps: list[Any] = []

    def keep(_module: Any, _args: Any, output: Any) -> None:
        logits = output.logits if hasattr(output, "logits") else output
        steps.append(logits[0, -1].float())

    handle = target.model.register_forward_hook(keep)
    try:
        generation = target.generate([prompt], max_new_tokens, 1, ignore_eos=False)[0]
    finally:
        handle.remove()
    n = len(generation.ids)
    return Trajectory(name, prompt, generation.ids, torch.stack(steps[:n]) if n else None)


def _forward(candidate: Any, sequence: tuple[int, ...]) -> Any:
    """The candidate's float32 logits over `sequence` (one teacher-forced forward)."""
    import torch

    ids = torch.tensor([list(sequence)], device=candidate.device)
    with torch.no_grad():
        out = candidate.model(input_ids=ids, use_cache=False).logits if candidate.hf else candidate.model(ids)
    return out[0].float()


def _measure(
    kind: str, draft_folder: Path | None, rows: list[drafts.TargetRows], request: Request, say: Any
) -> tuple[list[Windows], float]:
    """(windows per trajectory, seconds per draft step) of a draft model or n-gram lookup."""
    if kind == "ngram":
        return drafts.ngram_windows(rows, request.temperature)
    assert draft_folder is not None
    draft = _load(draft_folder, request.dtype)
    say(f"draft-check: draft {draft_folder.name} ({draft.info.kind})")
    temperature = request.temperature  # one draft forward at a time: its logits are freed row by row
    windows = [drafts.model_windows(r, _forward(draft, r.sequence)[r.prompt_len - 1 : -1], temperature) for r in rows]
    return windows, acceptance.decode_step_seconds(draft, rows[0].sequence[: rows[0].prompt_len])


def _acceptance(windows: list[Windows], request: Request, draft_step: float, target_step: float) -> dict[str, Any]:
    c = draft_step / target_step if target_step > 0 else 0.0
    greedy = {**_mode(windows, request.ks, c, greedy=True), "departures": sum(w.departures for w in windows)}
    sampled = None
    if request.temperature > 0:
        sampled = {"temperature": request.temperature, **_mode(windows, request.ks, c, greedy=False)}
    cost = {"draft_step_seconds": draft_step, "target_step_seconds": target_step, "ratio": c}
    return {"cost": cost, "greedy": greedy, "sampled": sampled}


def _mode(windows: list[Windows], ks: tuple[int, ...], c: float, greedy: bool) -> dict[str, Any]:
    """Greedy or sampled acceptance: per-token alpha, per k and per position, and the speedup it buys."""
    by_k = acceptance.greedy_table(windows, ks) if greedy else acceptance.sampled_table(windows, ks)
    alpha = acceptance.alpha(windows, greedy)
    speed = acceptance.speedup_rows(alpha, {r["k"]: r["tokens_per_step"] for r in by_k}, c)
    return {
        "alpha": alpha,
        "by_k": by_k,
        "by_position": acceptance.by_position(windows, greedy),
        "speedup": speed,
        "recommended_k": acceptance.recommended_k(speed),
    }


def _finish(
    result: dict[str, Any], findings: list[Finding], windows: list[Windows] | None, out: Path
) -> dict[str, Any]:
    from onboard.fsutil import atomic_write_json
    from onboard.serde import to_dict

    compatible = not any(f.code == "incompatible-draft" for f in findings)
    measured = windows is not None
    greedy = result.get("greedy") or {}
    detail = (
        f"greedy alpha {greedy['alpha']:.3f}, recommended k {acceptance.describe_k(greedy['recommended_k'])}"
        if measured
        else "; ".join(f.message for f in findings if f.severity in ("error", "fatal"))[:300]
    )
    result["findings"] = [to_dict(f) for f in findings]
    # Not required: speculative decoding is optional, so its checks never block a promotion on their own.
    compat_detail = "tokenizer ids, special tokens and vocabulary checked" if compatible else detail
    checks = [
        Check("draft_compatible", compatible, False, compat_detail, not_applicable=result["draft_kind"] != "model"),
        Check("draft_acceptance_measured", measured, False, detail, skipped=not measured),
    ]
    result["checks"] = [c.to_dict() for c in checks]
    result["passed"] = compatible and measured
    atomic_write_json(out / RESULT_FILE, result)
    result["written"] = str(out / RESULT_FILE)
    return result
