"""`promote`: turn a finished onboarding run into a registry record, or refuse and say which items are open.

Crash safety: the registry write is one SQLite transaction; a per-revision flock serialises promoters of one run, and
`promotion.pending` (the attempt id) lets a rerun finish a run killed between its commit and `promotion.json`.
"""

from __future__ import annotations

import fcntl
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from onboard.checks import Check
from onboard.errors import ChecksFailed
from onboard.fsutil import atomic_write_json, clean_os_errors, os_error
from onboard.promote import record as records
from onboard.promote.checklist import ChecklistState, evaluate, load_checklist, load_signoffs, write_checklist
from onboard.promote.record import PromotionRecord, source_files
from onboard.promote.registry import AlreadyPromoted, Registry, default_registry_path
from onboard.promote.stage_results import StageResults, load_stage_results, model_id, resolve_revision

PENDING = "promotion.pending"
LOCK = "promotion.lock"
RECORD = "promotion.json"


class PromotionRefused(ChecksFailed):
    """Required checklist items are open or failed (exit 1). `state` holds the evaluated checklist."""

    def __init__(self, message: str, hint: str, state: ChecklistState) -> None:
        super().__init__(message, hint)
        self.state = state


class PromotionBusy(ChecksFailed):
    """Another `promote` of the same revision is running right now (exit 1)."""


@dataclass(frozen=True)
class Evaluation:
    state: ChecklistState
    rev_dir: Path
    results: StageResults
    previous: PromotionRecord | None
    checklist_md: Path


@dataclass(frozen=True)
class PromotionOutcome:
    record: PromotionRecord
    state: ChecklistState
    resumed: bool
    """True when this run finished a promotion whose commit an earlier, killed run had made."""
    record_path: Path
    checklist_md: Path


@clean_os_errors
def evaluate_revision(
    slug: str,
    workspace: Path | str = ".",
    *,
    revision: str | None = None,
    registry: Path | str | None = None,
) -> Evaluation:
    """Tick the checklist of one run from its stage results, sign-offs and the registry; write checklist.json/md.
    `promote` calls it again, after the pipeline did, so it never trusts a stale file."""
    workspace = Path(workspace)
    rev_dir = resolve_revision(workspace, slug, revision)
    reg = Registry(registry or default_registry_path(workspace))
    results = load_stage_results(rev_dir)
    revision = _revision_of(results, rev_dir)
    previous = reg.latest(model_id(slug))
    # When this very revision is the promoted one, there are no earlier goldens to compare against.
    earlier = None if previous is not None and previous.revision == revision else previous
    state = evaluate(
        load_checklist(),
        results,
        load_signoffs(rev_dir),
        slug=slug,
        revision=revision,
        previously_promoted=earlier is not None,
        promoted_golden_sha256=earlier.golden_sha256 if earlier else None,
    )
    return Evaluation(state, rev_dir, results, previous, write_checklist(state, rev_dir, workspace))


@clean_os_errors
def promote(
    slug: str,
    workspace: Path | str = ".",
    *,
    revision: str | None = None,
    registry: Path | str | None = None,
    by: str | None = None,
) -> PromotionOutcome:
    """Append a promotion record for the latest (or given) run of `slug`, or raise PromotionRefused (`.state` lists
    the open items), AlreadyPromoted, PromotionConflict, PromotionBusy or, for unusable input, InputError."""
    workspace = Path(workspace)
    rev_dir = resolve_revision(workspace, slug, revision)
    reg = Registry(registry or default_registry_path(workspace))
    with _revision_lock(rev_dir):
        finished = _finish_interrupted(rev_dir, reg)
        ev = evaluate_revision(slug, workspace, revision=rev_dir.name, registry=reg.path)
        if finished is not None:
            return PromotionOutcome(finished, ev.state, True, rev_dir / RECORD, ev.checklist_md)
        state = ev.state
        if ev.previous is not None and ev.previous.revision == state.revision:
            p = ev.previous
            raise AlreadyPromoted(
                f"{p.model} at {p.revision} is already promoted (record #{p.id}, by {p.promoted_by} at {p.promoted_at})",
                f"see it with: onboard registry show {p.model}",
            )
        if not state.ready:
            listing = ", ".join(f"{it.id} ({it.status})" for it in state.blocking)
            raise PromotionRefused(
                f"{slug} at {state.revision} is not ready: {len(state.blocking)} required item(s) open: {listing}",
                f"see {ev.checklist_md} for evidence and the command that ticks each item (docs/runbook.md)",
                state,
            )
        record = build_record(slug, workspace, ev, by or records.current_user())
        atomic_write_json(rev_dir / PENDING, {"attempt": record.attempt, "model": record.model})
        saved = reg.add(record, expect_latest=ev.previous.id if ev.previous else None)
        _finish(rev_dir, saved)
        return PromotionOutcome(saved, state, False, rev_dir / RECORD, ev.checklist_md)


class _revision_lock:
    """flock on `<rev_dir>/promotion.lock`: the kernel drops it when the holder dies, even by SIGKILL."""

    def __init__(self, rev_dir: Path) -> None:
        self.path = rev_dir / LOCK
        self.fh: Any = None

    def __enter__(self) -> None:
        try:
            self.fh = open(self.path, "a+")
        except OSError as exc:
            raise os_error(exc, self.path, "create the promotion lock") from exc
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self.fh.close()
            raise PromotionBusy(
                f"another `onboard promote` of {self.path.parent} is running",
                "wait for it to finish; its result will be in `onboard registry list`",
            ) from exc

    def __exit__(self, *exc: object) -> None:
        self.fh.close()


class _Pending(msgspec.Struct):
    attempt: str | None = None


def _finish_interrupted(rev_dir: Path, reg: Registry) -> PromotionRecord | None:
    """A pending attempt from a killed run: finish it if its record was committed, else forget it."""
    pending = rev_dir / PENDING
    if not pending.is_file():
        return None
    try:  # a pending file cut short by the crash is forgotten like one whose record never landed
        attempt = msgspec.json.decode(pending.read_bytes(), type=_Pending).attempt
    except (OSError, msgspec.DecodeError):
        attempt = None
    record = reg.by_attempt(attempt) if attempt else None
    if record is None:
        pending.unlink(missing_ok=True)
        return None
    _finish(rev_dir, record)
    return record


def _finish(rev_dir: Path, record: PromotionRecord) -> None:
    atomic_write_json(rev_dir / RECORD, record.to_dict())
    (rev_dir / PENDING).unlink(missing_ok=True)


def _revision_of(results: StageResults, rev_dir: Path) -> str:
    """The pinned revision: the profile's resolved sha when it has one, else the run folder's name."""
    rev = results.data("inspect").get("revision")
    return rev if isinstance(rev, str) and rev else rev_dir.name


def build_record(slug: str, workspace: Path, ev: Evaluation, by: str) -> PromotionRecord:
    results, rev_dir = ev.results, ev.rev_dir
    profile_file, profile = records.pinned_profile(results)
    files, notes = source_files(rev_dir, profile, workspace, results.data("inspect").get("checkpoint_dir"))
    golden = results.data("golden")
    golden_dir = records.golden_dir(golden, workspace, slug)
    golden_sha = golden.get("golden_sha256") if isinstance(golden.get("golden_sha256"), str) else None
    golden_sha = golden_sha or (records.sha256_tree(golden_dir) if golden_dir else None)
    tok = results.data("verify-tokenizer").get("tokenizer_sha256")
    versions = records.tool_versions()
    for stage, result in results.stages.items():
        if isinstance(result.data.get("tool_version"), str):
            versions[f"{stage}.tool_version"] = result.data["tool_version"]
    validate = results.data("validate")
    validated_on = {k: validate[k] for k in ("hardware", "target", "device", "candidate") if k in validate}
    perf = validate.get("performance") if isinstance(validate.get("performance"), dict) else {}
    validated_on.update({f"performance.{k}": perf[k] for k in ("hardware", "versions", "dtype") if k in perf})
    return PromotionRecord(
        model=model_id(slug),
        slug=slug,
        revision=ev.state.revision,
        promoted_by=by,
        promoted_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        attempt=uuid.uuid4().hex,
        source=str(profile.get("source") or slug),
        files=files,
        profile_sha256=records.sha256_file(profile_file) if profile_file.is_file() else None,
        tokenizer_sha256=tok if isinstance(tok, str) else records.tokenizer_hash({f.path: f.sha256 for f in files}),
        golden_sha256=golden_sha,
        golden_dir=str(golden_dir) if golden_dir else None,
        checks=tuple(_with_figures(c, results.data(stage)) for stage, c in results.all_checks()),
        checklist={it.id: it.status for it in ev.state.items},
        signoffs=load_signoffs(rev_dir),  # signoff.py's Signoff structs as stored, not copied
        versions=versions,
        hardware={"validated_on": validated_on or None, "promoted_on": records.host()},
        supersedes=ev.previous.id if ev.previous else None,
        notes=tuple(notes),
    )


def _with_figures(check: Check, stage_data: dict[str, Any]) -> Check:
    """The check with the figures behind its verdict (its stage result's `check_data`, e.g. the load replay's
    conditions), so the record holds the evidence and not only the verdict's text."""
    figures = (stage_data.get("check_data") or {}).get(check.name)
    return replace(check, data=figures) if isinstance(figures, dict) and figures and not check.data else check
