"""Two golden folders compared value by value: `onboard golden diff` and new-model's `goldens_match_promoted`.

A new revision (or library release) must reproduce the recorded goldens: the same prompt ids and greedy
continuations, and distributions within the float32 noise the older goldens measured. What only describes the
recording (revision, versions, hardware) is context, never a difference.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from onboard.comparator import compare_rows, judge, tolerances
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet

# Manifest fields that change what the goldens mean: a difference here is a difference of the model.
MEANINGFUL = ("model_type", "stop_token_ids", "boundaries")
# Manifest fields that describe how the goldens were recorded: shown, never failed on.
CONTEXT = ("revision", "weights_fingerprint", "versions", "reference")


@dataclass(frozen=True)
class PromptDiff:
    name: str
    status: str
    """match | differs | only_old | only_new"""
    detail: str
    positions: int = 0
    max_logprob_error: float | None = None


@dataclass(frozen=True)
class GoldenDiff:
    old: str
    new: str
    differences: list[str]
    notes: list[str]
    prompts: list[PromptDiff]
    compared_positions: int
    tolerance: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.differences

    @property
    def detail(self) -> str:
        if self.differences:
            more = len(self.differences) - 5
            return "; ".join(self.differences[:5]) + (f" (+{more} more)" if more > 0 else "")
        return f"{self.compared_positions} positions within float32 noise"

    def to_dict(self) -> dict[str, Any]:
        from onboard.validate_serving.report import json_safe

        return json_safe({"passed": self.passed, **asdict(self)})


def diff_goldens(old: GoldenSet, new: GoldenSet) -> GoldenDiff:
    """Every difference between `old` and `new` beyond the float32 noise the old goldens measured."""
    tol = tolerances("float32", old.noise("float32"))
    differences, notes = _manifest_diff(old.manifest, new.manifest)
    new_by = {p.name: p for p in new.prompts}
    prompts = [_prompt_diff(p, new_by.get(p.name), tol) for p in old.prompts]
    old_names = {p.name for p in old.prompts}
    prompts += [
        PromptDiff(p.name, "only_new", "not in the old goldens") for p in new.prompts if p.name not in old_names
    ]
    differences += [f"{p.name}: {p.detail}" for p in prompts if p.status in ("differs", "only_old")]
    notes += [f"{p.name}: {p.detail}" for p in prompts if p.status == "only_new"]
    compared = sum(p.positions for p in prompts)
    if not compared:
        differences.append("no prompt in common with the old goldens: nothing compared")
    return GoldenDiff(str(old.folder), str(new.folder), differences, notes, prompts, compared, asdict(tol))


def _manifest_diff(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    differences = [f"{key}: {old.get(key)!r} -> {new.get(key)!r}" for key in MEANINGFUL if old.get(key) != new.get(key)]
    notes = []
    for key in CONTEXT:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
            if changed:
                notes.append(f"{key}: " + ", ".join(f"{k} {x} -> {y}" for k, (x, y) in changed.items()))
        elif a != b:
            notes.append(f"{key}: {a} -> {b}")
    return differences, notes


def _prompt_diff(old: GoldenPrompt, new: GoldenPrompt | None, tol: Any) -> PromptDiff:
    if new is None:
        return PromptDiff(old.name, "only_old", "missing from the new goldens")
    shared = _common_prefix(old.prompt_ids, new.prompt_ids)
    if shared < min(len(old.prompt_ids), len(new.prompt_ids)):
        why = "prompt text changed" if old.text != new.text else "the same text tokenizes differently"
        return PromptDiff(old.name, "differs", f"{why}: prompt ids differ from token {shared}")
    diverged = None
    if old.prompt_ids == new.prompt_ids:
        same = _common_prefix(old.generated_ids, new.generated_ids)
        diverged = same if same < min(len(old.generated_ids), len(new.generated_ids)) else None
        # Teacher-forced rows are comparable up to and including the position where the greedy tokens part.
        n = min(len(old.prompt_ids) + same, len(old.rows), len(new.rows))
    else:  # one long prompt is a prefix of the other (another --max-long-tokens): the shared prefix is comparable
        n = shared - 1
    verdict = judge(compare_rows(old.rows[:n], new.rows[:n], old.sequence[1 : n + 1]), tol)
    fork = f"greedy continuation parts at generated token {diverged}" if diverged is not None else ""
    if not verdict.passed:
        detail = "; ".join(filter(None, [fork, *verdict.reasons]))
    else:
        detail = (
            f"{verdict.positions} positions: max logprob difference {verdict.max_logprob_error:.3g} "
            f"(tol {tol.max_logprob_error:.3g}), top-1 swaps {verdict.top1_mismatches}"
            + (f"; {fork} (a near-tie)" if fork else "")
        )
    status = "match" if verdict.passed else "differs"
    return PromptDiff(old.name, status, detail, verdict.positions, verdict.max_logprob_error)


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def summary(diff: GoldenDiff) -> str:
    lines = [f"golden diff: {'SAME' if diff.passed else 'DIFFERENT'} — {diff.old} vs {diff.new}"]
    lines += [f"  difference: {d}" for d in diff.differences]
    lines += [f"  context: {n}" for n in diff.notes]
    lines += [f"  [{p.status}] {p.name}: {p.detail}" for p in diff.prompts]
    lines.append(
        f"  {diff.compared_positions} positions compared (float32 tolerance "
        f"{diff.tolerance.get('max_logprob_error', 0):.3g} on logprobs)"
    )
    return "\n".join(lines) + "\n"
