"""`promote`: turn a finished onboarding run into a registry record, or refuse and say which items are open.

Crash safety: the registry write is one SQLite transaction; around it a per-revision flock serialises promoters of
the same run and a `promotion.pending` file (the attempt id) lets a rerun finish a run that was killed after its
commit but before `promotion.json` was written. Kill -9 anywhere leaves the full record or none, and a rerun
completes.
"""

from __future__ import annotations

import fcntl
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from onboard.errors import ChecksFailed
from onboard.fsutil import atomic_write_json, clean_os_errors, os_error, read_json
from onboard.promote import hashing, provenance
from onboard.promote.checklist import Checklist, ChecklistState, evaluate, load_checklist
from onboard.promote.checklist_md import write_checklist
from onboard.promote.record import FileEntry, PromotionRecord
from onboard.promote.registry import AlreadyPromoted, Registry, default_registry_path
from onboard.promote.signoff import load_signoffs
from onboard.promote.stage_results import StageResults, load_stage_results
from onboard.promote.workspace import model_id, resolve_revision

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
    checklist_json: Path
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
    checklist: Checklist | None = None,
) -> Evaluation:
    """Tick the checklist of one run from its stage results, sign-offs and the registry; write checklist.json/md.

    The pipeline calls this after its last stage; `promote` calls it again so it never trusts a stale file.
    """
    workspace = Path(workspace)
    rev_dir = resolve_revision(workspace, slug, revision)
    reg = Registry(registry or default_registry_path(workspace))
    results = load_stage_results(rev_dir)
    previous = reg.latest(model_id(slug))
    if previous is not None and previous.revision == _revision_of(results, rev_dir):
        previous_for_goldens = None  # this very revision is the promoted one: nothing newer to compare
    else:
        previous_for_goldens = previous
    state = evaluate(
        checklist or load_checklist(),
        results,
        load_signoffs(rev_dir),
        slug=slug,
        revision=_revision_of(results, rev_dir),
        previously_promoted=previous_for_goldens is not None,
        promoted_golden_sha256=previous_for_goldens.golden_sha256 if previous_for_goldens else None,
    )
    json_path, md_path = write_checklist(state, rev_dir, workspace)
    return Evaluation(state, rev_dir, results, previous, json_path, md_path)


@clean_os_errors
def promote(
    slug: str,
    workspace: Path | str = ".",
    *,
    revision: str | None = None,
    registry: Path | str | None = None,
    by: str | None = None,
    checklist: Checklist | None = None,
) -> PromotionOutcome:
    """Append a promotion record for the latest (or given) run of `slug`, or raise PromotionRefused.

    Raises PromotionRefused (required items open; `.state` lists them), AlreadyPromoted, PromotionConflict,
    PromotionBusy (all exit 1) and InputError/RegistryError for unusable input, full disks or permissions (exit 2).
    """
    workspace = Path(workspace)
    rev_dir = resolve_revision(workspace, slug, revision)
    reg = Registry(registry or default_registry_path(workspace))
    with _revision_lock(rev_dir):
        finished = _finish_interrupted(rev_dir, reg)
        if finished is not None:
            ev = evaluate_revision(slug, workspace, revision=rev_dir.name, registry=reg.path, checklist=checklist)
            return PromotionOutcome(finished, ev.state, True, rev_dir / RECORD, ev.checklist_md)
        ev = evaluate_revision(slug, workspace, revision=rev_dir.name, registry=reg.path, checklist=checklist)
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
        record = build_record(slug, workspace, ev, by or provenance.current_user())
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


def _profile(results: StageResults, rev_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The ModelProfile the run pinned (profile.json, which inspect and new-model write) and its fields; else the
    inspect stage's own file. new-model's inspect.json is a stage summary (checks, model_type): hashing it, or
    reading the checkpoint's files and source from it, recorded no file at all."""
    pinned = rev_dir / "profile.json"
    if pinned.is_file():
        data = read_json(pinned, hint="rerun `onboard inspect SOURCE --json` (or new-model) to rewrite it")
        if isinstance(data, dict):
            return pinned, data
    name = results.stages["inspect"].file if "inspect" in results.stages else "profile.json"
    return rev_dir / name, results.data("inspect")


def build_record(slug: str, workspace: Path, ev: Evaluation, by: str) -> PromotionRecord:
    """Gather hashes, checks, versions and hardware into a record (not yet saved)."""
    results, rev_dir = ev.results, ev.rev_dir
    profile_file, profile = _profile(results, rev_dir)
    files, notes = source_files(rev_dir, profile, workspace, results.data("inspect").get("checkpoint_dir"))
    golden = results.data("golden")
    golden_dir = _golden_dir(golden, workspace, slug)
    golden_sha = golden.get("golden_sha256") if isinstance(golden.get("golden_sha256"), str) else None
    golden_sha = golden_sha or (hashing.sha256_tree(golden_dir) if golden_dir else None)
    tok = results.data("verify-tokenizer").get("tokenizer_sha256")
    versions = provenance.tool_versions()
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
        profile_sha256=hashing.sha256_file(profile_file) if profile_file.is_file() else None,
        tokenizer_sha256=tok if isinstance(tok, str) else hashing.tokenizer_hash({f.path: f.sha256 for f in files}),
        golden_sha256=golden_sha,
        golden_dir=str(golden_dir) if golden_dir else None,
        checks=tuple(c for _, c in results.all_checks()),
        checklist={it.id: it.status for it in ev.state.items},
        signoffs=load_signoffs(rev_dir),  # signoff.py's Signoff structs as stored, not copied
        versions=versions,
        hardware={"validated_on": validated_on or None, "promoted_on": provenance.host()},
        supersedes=ev.previous.id if ev.previous else None,
        notes=tuple(notes),
    )


def _golden_dir(golden: dict[str, Any], workspace: Path, slug: str) -> Path | None:
    for key in ("golden_dir", "dir", "path"):
        if isinstance(golden.get(key), str):
            path = Path(golden[key])
            return path if path.is_absolute() else workspace / path
    default = workspace / "golden_outputs" / slug
    return default if default.is_dir() else None


def source_files(
    rev_dir: Path, profile: dict[str, Any], workspace: Path, checkpoint_dir: object = None
) -> tuple[tuple[FileEntry, ...], list[str]]:
    """Checkpoint file hashes: `files.json` from the pipeline (e.g. hub LFS sha256s), else hashed from a local
    folder (`checkpoint_dir`, the absolute folder new-model read, then the profile's source as typed, from here or
    the workspace), else names only with a note saying they were not hashed."""
    manifest = rev_dir / "files.json"
    if manifest.is_file():
        return _parse_manifest(manifest), []
    names = [str(n) for n in profile.get("files") or []]
    source = str(profile.get("source") or "")
    roots = [Path(checkpoint_dir)] if isinstance(checkpoint_dir, str) and checkpoint_dir else []
    if source:
        roots += [Path(source), workspace / source]
    snapshot = _cached_snapshot(source, profile.get("revision"))
    roots += [snapshot] if snapshot is not None else []
    for root in roots:
        if root.is_dir():
            absent = [n for n in names if not (root / n).is_file()]
            try:
                entries = tuple(
                    FileEntry(n, hashing.sha256_file(root / n), (root / n).stat().st_size)
                    if n not in absent
                    else FileEntry(n, None)
                    for n in names
                )
            except OSError as exc:
                raise os_error(exc, root, "hash the checkpoint files in") from exc
            # A hub snapshot holds what the stages read (weights, config, tokenizer), not READMEs and the like.
            return entries, [f"{len(absent)} of {len(names)} files not hashed: not in {root}"] if absent else []
    return tuple(FileEntry(n, None) for n in names), [f"checkpoint files not hashed: {source or 'source'} not local"]


def _cached_snapshot(repo_id: str, revision: object) -> Path | None:
    """The hub snapshot new-model downloaded (weights, config and tokenizer files) at the pinned commit, from the
    local cache only: nothing is fetched at promote time. None for a folder source or when it is not cached."""
    if not isinstance(revision, str) or not revision or repo_id.count("/") != 1 or Path(repo_id).exists():
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (or no cache at all): the record says the files were not hashed
        return None


class _FileHash(msgspec.Struct):
    sha256: str | None = None
    size: int | None = None


class _FileRow(msgspec.Struct):
    path: str
    sha256: str | None = None
    size: int | None = None


class _FilesManifest(msgspec.Struct):
    """files.json: a list of {path, sha256, size}, or {path: sha256} / {path: {sha256, size}}."""

    files: list[_FileRow] | dict[str, str | _FileHash]


def _parse_manifest(path: Path) -> tuple[FileEntry, ...]:
    """Decoded by msgspec: a wrong shape names the file and the field ($.files[2].path)."""
    manifest = read_json(path, _FilesManifest, "rerun the pipeline to rewrite it")
    if isinstance(manifest.files, list):
        rows = [(f.path, f) for f in manifest.files]
    else:
        rows = [(name, _FileHash(v) if isinstance(v, str) else v) for name, v in manifest.files.items()]
    return tuple(FileEntry(name, h.sha256, h.size) for name, h in rows)
