"""The day-zero checklist: load `checklists/day-zero.yaml`, tick its items from stage results and sign-offs, and
write a model's checklist (`<revision>/checklist.json`, `checklists/<slug>.md`).

An item is ticked by stage checks (`ticked_by`), by a person (`signoff: only`), or by checks that a person may
waive with a note (`signoff: allowed`). Required stage checks that fail but are on no item still block (as
`<stage>:<check>`), so a renamed check can never slip a failure past promotion. Sign-offs (who, when, why) are
appended to `<revision>/signoffs.json` under an exclusive lock, so two people signing at once both land.
"""

from __future__ import annotations

import fcntl
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import msgspec

from onboard.errors import InputError
from onboard.fsutil import atomic_write, atomic_write_json, os_error, read_json
from onboard.promote.stage_results import STAGES, StageResults
from onboard.resources import data_dir


@dataclass(frozen=True)
class Signoff:
    """One manual sign-off of a checklist item (licence review, model card read, a waiver)."""

    item: str
    by: str
    at: str
    note: str = ""


SATISFIED = frozenset({"done", "signed_off", "not_applicable"})
MARKS = {"done": "✅", "signed_off": "✍️", "failed": "❌", "open": "⬜", "not_applicable": "➖"}
LABELS = {"done": "done", "signed_off": "signed off", "failed": "FAILED", "open": "open", "not_applicable": "n/a"}
SIGNOFFS_FILE = "signoffs.json"
SignoffMode = Literal["no", "allowed", "only"]
_NonBlank = Annotated[str, msgspec.Meta(pattern=r"\S")]


class CheckRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    stage: str
    check: str

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"bad ticked_by entry: unknown stage {self.stage!r} (use one of {STAGES})")


class ChecklistItem(msgspec.Struct, forbid_unknown_fields=True):
    """One item as written in the YAML (unknown keys are typos: refused); decoding checks that something ticks it."""

    id: _NonBlank
    title: _NonBlank
    command: _NonBlank
    required: bool
    owner: str | None = ""
    ticked_by: tuple[CheckRef, ...] | None = ()
    signoff: SignoffMode = "no"
    """no | allowed (a named person may waive a failed/missing check with a note) | only (manual item)."""
    when: Literal["previously_promoted", "endpoint_validated"] | None = None
    """previously_promoted: only for a new revision of a promoted model; endpoint_validated: only when validate ran
    against a serving endpoint (in-process validation has no serving load to replay)."""

    def __post_init__(self) -> None:
        self.owner = self.owner or ""
        self.ticked_by = self.ticked_by or ()
        if self.signoff != "only" and not self.ticked_by:
            raise ValueError("nothing ticks it: add ticked_by checks or make it `signoff: only`")


@dataclass(frozen=True)
class Checklist:
    path: str
    items: tuple[ChecklistItem, ...]

    def item(self, item_id: str) -> ChecklistItem:
        for it in self.items:
            if it.id == item_id:
                return it
        raise InputError(
            f"no checklist item {item_id!r} in {self.path}",
            "items: " + ", ".join(it.id for it in self.items),
        )

    def check_names(self) -> dict[str, list[str]]:
        """stage -> the check names this checklist expects that stage to emit."""
        out: dict[str, list[str]] = {}
        for it in self.items:
            for ref in it.ticked_by:
                out.setdefault(ref.stage, []).append(ref.check)
        return out


@dataclass(frozen=True)
class ItemStatus:
    id: str
    title: str
    required: bool
    status: str
    """done | signed_off | failed | open | not_applicable"""
    evidence: tuple[str, ...]
    command: str
    owner: str = ""


@dataclass(frozen=True)
class ChecklistState:
    slug: str
    revision: str
    items: tuple[ItemStatus, ...]
    previously_promoted: bool = False
    evaluated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def blocking(self) -> tuple[ItemStatus, ...]:
        """Required items that are not done, signed off or not applicable: promotion refuses while any remain."""
        return tuple(it for it in self.items if it.required and it.status not in SATISFIED)

    @property
    def ready(self) -> bool:
        return not self.blocking


class _ChecklistFile(msgspec.Struct):
    items: list[ChecklistItem]
    version: int | str | None = None


_ITEM_HINT = (
    "each item needs id, title, command (strings) and required (true/false); optional: owner, "
    f"ticked_by ({{stage: one of {STAGES}, check: NAME}}), signoff ({', '.join(get_args(SignoffMode))}), when "
    "(previously_promoted); see checklists/day-zero.yaml"
)


def load_checklist(path: Path | None = None) -> Checklist:
    """Parse and validate a checklist YAML; every problem names the file, the item and the field."""
    import yaml

    path = path or data_dir("checklists") / "day-zero.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read checklist {path}: {exc.strerror or exc}", "reinstall onboard") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path} is not valid YAML: {exc}", "fix the YAML syntax") from exc
    try:
        items = tuple(msgspec.convert(doc, _ChecklistFile).items)
    except msgspec.ValidationError as exc:
        raise InputError(f"{path}: {_item_named(doc, str(exc))}{exc}", _ITEM_HINT) from exc
    ids = [it.id for it in items]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"{path}: duplicate item ids {dupes}", "give every item a unique id")
    return Checklist(str(path), items)


def _item_named(doc: Any, message: str) -> str:
    """'item 'x': ' when msgspec's path points into an item that has an id, so the message names it."""
    match = re.search(r"`\$\.items\[(\d+)\]", message)
    try:
        return f"item {doc['items'][int(match.group(1))]['id']!r}: " if match else ""
    except (KeyError, IndexError, TypeError):
        return ""


def evaluate(
    checklist: Checklist,
    results: StageResults,
    signoffs: tuple[Signoff, ...] | list[Signoff],
    *,
    slug: str,
    revision: str,
    previously_promoted: bool = False,
    promoted_golden_sha256: str | None = None,
) -> ChecklistState:
    """One status per item, plus a blocking entry for each failing required check that no item names."""
    latest = {s.item: s for s in signoffs}  # later sign-offs win
    items = [
        _evaluate_item(it, results, latest.get(it.id), previously_promoted, promoted_golden_sha256)
        for it in checklist.items
    ]
    listed = {(ref.stage, ref.check) for it in checklist.items for ref in it.ticked_by}
    for stage, check in results.all_checks():
        if (stage, check.name) not in listed and check.required and not check.passed:
            evidence = f"{results.stages[stage].file}: {check.name} failed — {check.detail}".rstrip(" —")
            title = f"Required {stage} check (not on the checklist)"
            items.append(ItemStatus(f"{stage}:{check.name}", title, True, "failed", (evidence,), f"onboard {stage} …"))
    return ChecklistState(slug, revision, tuple(items), previously_promoted)


def _evaluate_item(
    item: ChecklistItem,
    results: StageResults,
    signoff: Signoff | None,
    previously_promoted: bool,
    promoted_golden_sha256: str | None,
) -> ItemStatus:
    def status(value: str, evidence: list[str]) -> ItemStatus:
        return ItemStatus(item.id, item.title, item.required, value, tuple(evidence), item.command, item.owner)

    if item.when == "previously_promoted" and not previously_promoted:
        return status("not_applicable", ["first promotion of this model: no promoted goldens to compare against"])
    if item.when == "endpoint_validated" and _validated_in_process(results):
        return status("not_applicable", ["validate ran in process, not against a serving endpoint: no load to replay"])
    signed = (
        [f"signed off by {signoff.by} at {signoff.at}" + (f": {signoff.note}" if signoff.note else "")]
        if signoff
        else []
    )
    if item.signoff == "only":
        return status("signed_off", signed) if signoff else status("open", ["waiting for a sign-off"])
    found = [_check_state(ref, results, promoted_golden_sha256) for ref in item.ticked_by]
    states = [state for state, _ in found]
    evidence = list(dict.fromkeys(line for _, line in found))  # two checks of one missing stage say it once
    if states and all(s == "skipped" for s in states):
        return status("not_applicable", evidence)
    value = "failed" if "failed" in states else "open" if "open" in states else "done"
    if value != "done" and signoff and item.signoff == "allowed":
        return status("signed_off", evidence + signed)
    return status(value, evidence)


def _check_state(ref: CheckRef, results: StageResults, promoted_golden_sha256: str | None) -> tuple[str, str]:
    stage = results.get(ref.stage)
    if stage is None:
        return "open", f"no {ref.stage} result yet"
    if stage.error:
        return "open", stage.error
    # A self-check ticks nothing, whatever checks it holds or lacks: say so before anything else.
    if ref.stage == "validate" and _self_check(stage.data):
        return "open", (
            f"{stage.file}: {ref.check} comes from a self-check (transformers against its own goldens): it tests the "
            "harness, not the serving implementation; validate the generated adapter or an --endpoint"
        )
    check = stage.check(ref.check)
    if check is None:
        return "open", f"{stage.file} has no check {ref.check!r}"
    if ref.check == "goldens_match_promoted" and promoted_golden_sha256:
        # The comparison must have been made against the goldens of the promotion now in the registry.
        against = stage.data.get("promoted_golden_sha256")
        if against is not None and against != promoted_golden_sha256:
            promoted = promoted_golden_sha256[:12]
            return "open", f"{stage.file} compared against goldens {str(against)[:12]}, promoted are {promoted}"
    detail = f" — {check.detail}" if check.detail else ""
    if check.not_applicable:  # the stage says the model has nothing to check here
        return "skipped", f"{stage.file}: {ref.check} not applicable{detail}"
    if check.skipped:  # not run, whatever `passed` says: a skipped check never ticks an item
        return "open", f"{stage.file}: {ref.check} not checked{detail}"
    verdict = "passed" if check.passed else "FAILED"
    return ("done" if check.passed else "failed"), f"{stage.file}: {ref.check} {verdict}{detail}"


def _validated_in_process(results: StageResults) -> bool:
    """A validate result whose candidate is not a serving endpoint (no result yet: unknown, so False; a self-check
    is not in-process validation either: it ticks nothing, as _check_state says)."""
    stage = results.get("validate")
    candidate = stage.data.get("candidate") if stage is not None else None
    return isinstance(candidate, dict) and candidate.get("kind") != "endpoint" and not _self_check(stage.data)


def _self_check(data: dict[str, Any]) -> bool:
    """`onboard validate --candidate reference` (or an older result whose candidate was transformers itself)."""
    candidate = data.get("candidate")
    kind = candidate.get("kind") if isinstance(candidate, dict) else None
    return data.get("self_check") is True or kind == "reference-as-candidate"


def state_to_dict(state: ChecklistState) -> dict[str, Any]:
    from onboard import serde

    data = serde.to_dict(state)
    data["ready"] = state.ready
    data["blocking"] = [it.id for it in state.blocking]
    return data


class _SignoffsFile(msgspec.Struct):
    signoffs: list[Signoff]


def load_signoffs(rev_dir: Path) -> tuple[Signoff, ...]:
    """Sign-offs recorded for one revision, oldest first; a malformed file is an error naming it and the field."""
    path = rev_dir / SIGNOFFS_FILE
    if not path.is_file():
        return ()
    hint = "fix or delete it (or the entry named) and record the sign-offs again"
    return tuple(read_json(path, _SignoffsFile, hint).signoffs)


def record_signoff(rev_dir: Path, item_id: str, by: str, note: str = "") -> Signoff:
    """Append a sign-off for `item_id` after checking the checklist allows one (and has a note for a waiver)."""
    item = load_checklist().item(item_id)
    if item.signoff == "no":
        checks = ", ".join(f"{r.stage}:{r.check}" for r in item.ticked_by)
        raise InputError(
            f"{item_id!r} is ticked only by its checks ({checks}); a sign-off cannot stand in for them",
            f"fix what fails and rerun: {item.command}",
        )
    by = by.strip()
    if not by:
        raise InputError("--by is empty", "give the name of the person signing off")
    if item.signoff == "allowed" and not note.strip():
        raise InputError(
            f"signing off {item_id!r} waives its checks, so it needs a reason",
            'add --note "why this is acceptable" (it is shown in the checklist and the promotion record)',
        )
    if not rev_dir.is_dir():
        raise InputError(f"{rev_dir} does not exist", "run `onboard new-model` for this model first")
    entry = Signoff(item_id, by, datetime.now(timezone.utc).isoformat(timespec="seconds"), note.strip())
    lock_path = rev_dir / (SIGNOFFS_FILE + ".lock")
    try:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            signoffs = [asdict(s) for s in (*load_signoffs(rev_dir), entry)]
            atomic_write_json(rev_dir / SIGNOFFS_FILE, {"signoffs": signoffs})
    except OSError as exc:
        raise os_error(exc, lock_path, "lock") from exc
    return entry


def cell(text: str) -> str:
    """Markdown table cells cannot hold pipes or newlines."""
    return text.replace("|", "\\|").replace("\n", " ")


def checklist_table(state: ChecklistState) -> list[str]:
    """The Markdown status table, one row per item with its evidence (the checklist's and the report's)."""
    lines = ["| | Item | Required | Status | Owner | Evidence |", "|---|---|---|---|---|---|"]
    for it in state.items:
        evidence = "<br>".join(cell(e) for e in it.evidence) or "—"
        lines.append(
            f"| {MARKS.get(it.status, '?')} | **{cell(it.title)}** (`{it.id}`) | {'yes' if it.required else 'no'} | "
            f"{LABELS.get(it.status, it.status)} | {cell(it.owner) or '—'} | {evidence} |"
        )
    return lines


def render_checklist_md(state: ChecklistState) -> str:
    """The per-model checklist: a status table with evidence, then what to run for every open item."""
    done = sum(1 for it in state.items if it.status in SATISFIED)
    verdict = "READY to promote" if state.ready else f"NOT ready: {len(state.blocking)} required item(s) open"
    lines = [
        f"# Day-zero checklist: {state.slug}",
        "",
        f"Revision `{state.revision}` · evaluated {state.evaluated_at} · {done}/{len(state.items)} items ticked · "
        f"**{verdict}**",
        "",
        *checklist_table(state),
    ]
    todo = [it for it in state.items if it.status in ("open", "failed")]
    if todo:
        lines += ["", "## To do", ""]
        for it in todo:
            # The checklist's command with this run's slug and revision filled in.
            command = re.sub(r"\bREV\b", state.revision, re.sub(r"\bSLUG\b", state.slug, it.command))
            need = "required" if it.required else "optional"
            lines.append(f"- [ ] `{it.id}` ({need}, {it.owner or 'anyone'}): `{command}`")
        lines += ["", "What to do when a check fails: see docs/runbook.md, section of the same name."]
    return "\n".join(lines) + "\n"


def write_checklist(state: ChecklistState, rev_dir: Path, workspace: Path) -> Path:
    """Write `<rev_dir>/checklist.json` and `<workspace>/checklists/<slug>.md`; returns the latter."""
    md_path = workspace / "checklists" / f"{state.slug}.md"
    atomic_write_json(rev_dir / "checklist.json", state_to_dict(state))
    atomic_write(md_path, render_checklist_md(state))
    return md_path
