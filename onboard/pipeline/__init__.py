"""`onboard new-model`: inspect → generate → verify-tokenizer → golden → validate → checklist → report (→ promote).

Each stage's result is cached by the hash of its inputs in `<workspace>/onboarding/<slug>/<revision>/`, so an
interrupted run resumes where it stopped. A stage that fails blocks only what depends on it; the checklist and the
report are always written with everything known.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.checkpoint_id import checkpoint_fingerprint
from onboard.checks import Check, failed_names, read_checks, stage_result
from onboard.errors import OnboardError
from onboard.fsutil import atomic_write_json, make_dirs
from onboard.inspect_checkpoint.checkpoint_types import RepoListing
from onboard.pipeline.cache import cached, forget, remember, stage_key
from onboard.pipeline.stages import STAGES, RunContext, write_refused
from onboard.reference import RemoteCodePolicy

__all__ = ["PipelineResult", "run_new_model"]


@dataclass
class PipelineResult:
    slug: str
    revision: str
    run_dir: Path
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """stage → {outcome: ok|cached|failed|error|blocked, seconds, detail, passed}"""
    ready: bool = False
    blocking: list[str] = field(default_factory=list)
    report: dict[str, str] = field(default_factory=dict)
    checklist_md: str | None = None
    promoted: bool | None = None
    unusable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": "new-model",
            "slug": self.slug,
            "revision": self.revision,
            "run_dir": str(self.run_dir),
            "passed": self.ready,
            "ready_to_promote": self.ready,
            "blocking": self.blocking,
            "stages": self.stages,
            "report": self.report,
            "checklist": self.checklist_md,
            "promoted": self.promoted,
        }


_MARK = {"ok": "✓", "cached": "✓", "failed": "✗", "blocked": "·", "error": "✗"}


class Progress:
    """Progress on stderr: a live rich display on a terminal, plain lines in CI."""

    def __init__(self, stages: list[str], quiet: bool = False) -> None:
        self.stages = stages
        self.quiet = quiet
        self.console: Any = None
        if not quiet and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True)
        self._started = 0.0
        self._status: Any = None

    def start(self, stage: str) -> None:
        self._started = time.perf_counter()
        n = self.stages.index(stage) + 1
        if self.console is not None:
            self._status = self.console.status(f"[{n}/{len(self.stages)}] {stage} …")
            self._status.start()
        elif not self.quiet:
            print(f"[{n}/{len(self.stages)}] {stage} …", file=sys.stderr, flush=True)

    def done(self, stage: str, outcome: str, detail: str = "") -> float:
        seconds = time.perf_counter() - self._started
        if self._status is not None:
            self._status.stop()
            self._status = None
        line = f"  {_MARK.get(outcome, '?')} {stage}: {outcome} ({seconds:.1f} s){' — ' + detail if detail else ''}"
        if self.console is not None:
            colour = {"ok": "green", "cached": "green", "failed": "red", "error": "red"}.get(outcome, "yellow")
            self.console.print(f"[{colour}]{line}[/{colour}]", highlight=False)
        elif not self.quiet:
            print(line, file=sys.stderr, flush=True)
        return seconds

    def skip(self, stage: str, reason: str) -> None:
        if not self.quiet:
            print(f"  · {stage}: blocked — {reason}", file=sys.stderr, flush=True)


def _identify(source: str, revision: str | None) -> tuple[str, Path | None, str, RepoListing | None]:
    """(run folder's revision id, local folder or None, checkpoint fingerprint, hub listing or None). The listing is
    made here once and handed to the stages (RunContext.listing): inspect does not list again."""
    from onboard.inspect_checkpoint.source import open_source

    src = open_source(source, revision, prefetch=False)  # only the listing: inspect fetches what it reads
    try:
        if src.local_dir is not None:
            fp = checkpoint_fingerprint(src.local_dir)
            return (src.revision or f"local-{fp[:12]}"), src.local_dir, fp, None
        return src.revision or (revision or "main"), None, src.revision or "", getattr(src, "listing", None)
    finally:
        close = getattr(src, "close", None)
        if close:
            close()


def run_new_model(
    source: str,
    *,
    revision: str | None = None,
    target: str | None = None,
    endpoint: str | None = None,
    served_model: str | None = None,
    workspace: Path | str = ".",
    resume: bool = True,
    promote: bool = False,
    quiet: bool = False,
    policy: RemoteCodePolicy | None = None,
    max_long_tokens: int | None = None,
    dtype: str | None = None,
    registry: Path | str | None = None,
) -> PipelineResult:
    from onboard.promote.stage_results import slug_for

    workspace = Path(workspace).resolve()
    slug = slug_for(source)
    rev, local_dir, fingerprint, listing = _identify(source, revision)
    run_dir = workspace / "onboarding" / slug / rev
    make_dirs(run_dir)
    ctx = RunContext(
        source,
        revision or (rev if local_dir is None else None),
        slug,
        run_dir,
        workspace,
        target,
        endpoint,
        served_model,
        local_dir=local_dir,
        run_id=rev,
        policy=policy or RemoteCodePolicy(),
        max_long_tokens=max_long_tokens,
        dtype=dtype,
        listing=listing,
    )
    result = PipelineResult(slug, rev, run_dir)
    names = [s.name for s in STAGES] + ["checklist", "report"] + (["promote"] if promote else [])
    progress = Progress(names, quiet)
    keys: dict[str, str] = {}
    for stage in STAGES:
        # A stage whose checks failed still feeds later stages; errors, and unusable outputs, block them.
        blocked = [n for n in stage.needs if not result.stages.get(n, {}).get("usable")]
        refused = None if result.unusable or stage.refuses is None else stage.refuses(ctx)
        if result.unusable or blocked or refused:
            reason = "the checkpoint is unusable" if result.unusable else refused or f"needs {', '.join(blocked)}"
            result.stages[stage.name] = {"outcome": "blocked", "detail": reason, "passed": None}
            progress.skip(stage.name, reason)
            forget(run_dir, stage.name)
            if refused:  # the checklist and the report say why, and what to run
                write_refused(run_dir, stage.name, stage.outputs[-1], refused)
            continue
        key = stage_key(stage.name, fingerprint, stage.params(ctx), [keys[n] for n in stage.needs], stage.code)
        keys[stage.name] = key
        progress.start(stage.name)
        failed: list[str] = []
        if resume and cached(run_dir, stage.name, key, list(stage.outputs)):
            out, outcome = json.loads((run_dir / stage.outputs[-1]).read_text()), "cached"
        else:
            forget(run_dir, stage.name)
            try:
                out = stage.run(ctx)
            except Exception as exc:  # a failing stage must not hide what the others find
                if os.environ.get("ONBOARD_DEBUG") == "1":
                    raise
                detail = _error_detail(exc)
                seconds = progress.done(stage.name, "error", detail)
                result.stages[stage.name] = {
                    "outcome": "error",
                    "seconds": round(seconds, 2),
                    "passed": False,
                    "detail": detail,
                }
                # Recorded in the run folder, so the checklist and the report say why the stage's items are open.
                ran = Check(f"{stage.name}_ran", False, detail=detail)
                atomic_write_json(run_dir / f"{stage.name}.json", stage_result(stage.name, [ran], error=detail))
                if stage.name == "inspect":
                    result.unusable = True
                continue
            remember(run_dir, stage.name, key)
            failed = failed_names(read_checks(out.get("checks", []), f"{stage.name}.json")[0])
            outcome = "ok" if out.get("passed", True) else "checks-failed"
        ctx.results[stage.name] = out
        seconds = progress.done(stage.name, outcome, ", ".join(failed[:4]))
        result.stages[stage.name] = {
            "outcome": outcome,
            "seconds": round(seconds, 2),
            "passed": out.get("passed"),
            "detail": ", ".join(failed),
            "usable": _usable(stage.name, out),
        }
        if stage.name == "inspect" and out.get("unusable"):
            result.unusable = True
    _finish(result, workspace, progress, promote, registry)
    return result


def _usable(stage: str, out: dict[str, Any]) -> bool:
    """Can later stages build on this result? Inspect: the checkpoint is readable. Generate: the adapter runs."""
    if stage == "inspect":
        return not out.get("unusable")
    if stage == "generate":
        checks, _ = read_checks(out.get("checks", []), "generate.json")
        return all(c.passed for c in checks if c.name in ("adapter_imports", "kernels_implemented"))
    return True


def _error_detail(exc: Exception) -> str:
    if isinstance(exc, OnboardError):
        return exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    return f"internal error: {type(exc).__name__}: {exc} (rerun with ONBOARD_DEBUG=1 for the traceback)"


def _finish(
    result: PipelineResult, workspace: Path, progress: Progress, promote: bool, registry: Path | str | None = None
) -> None:
    from onboard.promote.promote import evaluate_revision
    from onboard.promote.promote import promote as do_promote
    from onboard.promote.report import render_report

    progress.start("checklist")
    ev = evaluate_revision(result.slug, workspace, revision=result.revision, registry=registry)
    result.ready = ev.state.ready
    result.blocking = [status.id for status in ev.state.blocking]
    result.checklist_md = str(ev.checklist_md)
    progress.done(
        "checklist",
        "ok" if result.ready else "failed",
        "ready to promote" if result.ready else f"open: {', '.join(result.blocking[:6])}",
    )
    progress.start("report")
    paths = render_report(result.slug, workspace, revision=result.revision, state=ev.state)
    result.report = {"markdown": str(paths.markdown), "html": str(paths.html)}
    progress.done("report", "ok", str(paths.html))
    if promote:
        progress.start("promote")
        if not result.ready:
            result.promoted = False
            progress.done("promote", "failed", "refused: required checklist items are open")
            return
        started = time.perf_counter()
        outcome = do_promote(result.slug, workspace, revision=result.revision, registry=registry)
        result.promoted = True
        progress.done("promote", "ok", f"record {outcome.record_path} in {time.perf_counter() - started:.1f} s")
