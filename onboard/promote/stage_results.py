"""Where a model's onboarding files live (`<workspace>/onboarding/<slug>/<revision>/`), and its stage results.

Results are read defensively: a missing stage is absent; an unreadable one is kept with its error, so the checklist
and the report say why an item is open instead of crashing. Checks a stage does not emit are derived here: inspect's
from profile.json findings, verify-tokenizer's from a findings-only report, `performance_recorded` from validate.json.
Each check read here carries its stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from onboard.checks import Check, all_passed, read_checks
from onboard.errors import InputError
from onboard.findings import SEVERITIES, Finding
from onboard.inspect_checkpoint.verdicts import inspect_checks
from onboard.verify_tokenizer.checks import build_checks

# stage -> files that may hold its result, first found wins.
STAGE_FILES: dict[str, tuple[str, ...]] = {
    "inspect": ("inspect.json", "profile.json"),
    "generate": ("generate.json",),
    "verify-tokenizer": ("verify-tokenizer.json",),
    "golden": ("golden.json",),
    "validate": ("validate.json",),
    "draft-check": ("draft-check.json",),  # onboard draft-check --out onboarding/<slug>/<revision>
}
STAGES = tuple(STAGE_FILES)


STAGE_MARKERS = ("profile.json", "inspect.json", "checklist.json")


def slug_for(repo_or_folder: str) -> str:
    """`org/name` → `org__name`; a local folder → its name."""
    if Path(repo_or_folder).is_dir() or repo_or_folder.startswith((".", "/")):
        return Path(repo_or_folder).resolve().name
    return repo_or_folder.strip("/").replace("/", "__")


def model_id(slug: str) -> str:
    """The registry's model name: the hub repo id for `org__name` slugs, else the slug itself."""
    return slug.replace("__", "/", 1) if "__" in slug else slug


def model_dir(workspace: Path, slug: str) -> Path:
    return workspace / "onboarding" / slug


def revision_dirs(workspace: Path, slug: str) -> list[Path]:
    """Revision folders of a model that hold stage results, most recently written last."""
    root = model_dir(workspace, slug)
    if not root.is_dir():
        return []
    dirs = [d for d in root.iterdir() if d.is_dir() and any((d / m).is_file() for m in STAGE_MARKERS)]
    return sorted(dirs, key=_last_write)


def _last_write(d: Path) -> float:
    return max((f.stat().st_mtime for f in d.glob("*.json")), default=d.stat().st_mtime)


def resolve_revision(workspace: Path, slug: str, revision: str | None = None) -> Path:
    """The revision folder to act on: `revision` (a full name or unique prefix), else the most recent run."""
    dirs = revision_dirs(workspace, slug)
    if not dirs:
        raise InputError(
            f"no onboarding results for {slug!r} under {model_dir(workspace, slug)}",
            "run `onboard new-model SOURCE` first, or pass --workspace with the folder that holds onboarding/",
        )
    if revision is None:
        return dirs[-1]
    matches = [d for d in dirs if d.name == revision] or [d for d in dirs if d.name.startswith(revision)]
    if len(matches) != 1:
        names = ", ".join(d.name for d in dirs)
        what = "matches several" if matches else "matches none"
        raise InputError(f"revision {revision!r} {what} of {slug}'s runs", f"choose one of: {names}")
    return matches[0]


@dataclass(frozen=True)
class StageResult:
    stage: str
    file: str
    passed: bool | None
    checks: tuple[Check, ...]
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    error: str | None = None
    """Why the file could not be used (malformed JSON, no checks list); checks are then empty."""

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


@dataclass(frozen=True)
class StageResults:
    rev_dir: Path
    stages: dict[str, StageResult]

    def get(self, stage: str) -> StageResult | None:
        return self.stages.get(stage)

    def data(self, stage: str) -> dict[str, Any]:
        result = self.stages.get(stage)
        return result.data if result else {}

    def all_checks(self) -> list[tuple[str, Check]]:
        return [(stage, c) for stage, r in self.stages.items() for c in r.checks]


def load_stage_results(rev_dir: Path) -> StageResults:
    stages: dict[str, StageResult] = {}
    for stage, names in STAGE_FILES.items():
        path = next((rev_dir / name for name in names if (rev_dir / name).is_file()), None)
        if path is not None:
            stages[stage] = _load_one(stage, path)
    return StageResults(rev_dir, stages)


def _load_one(stage: str, path: Path) -> StageResult:
    try:
        data = msgspec.json.decode(path.read_bytes(), type=dict[str, Any])
    except OSError as exc:
        return StageResult(stage, path.name, None, (), {}, f"{path.name} is unreadable: {exc}")
    except msgspec.ValidationError as exc:
        return StageResult(stage, path.name, None, (), {}, f"{path.name} is not a JSON object ({exc})")
    except msgspec.DecodeError as exc:
        return StageResult(stage, path.name, None, (), {}, f"{path.name} is unreadable: not JSON ({exc})")
    raw = data.get("checks")
    if raw is None and stage == "inspect":
        checks, error = tuple(inspect_checks(data)), None
    elif raw is None and stage == "verify-tokenizer" and isinstance(data.get("findings"), list):
        checks, error = derive_tokenizer_checks(data), None
    else:
        checks, error = read_checks(raw, path.name)
    if stage == "validate" and error is None and not any(c.name == "performance_recorded" for c in checks):
        checks = (*checks, derive_performance_check(data))
    passed = data.get("passed") if isinstance(data.get("passed"), bool) else None
    if passed is None and stage == "inspect" and error is None:
        passed = all_passed(checks)
    return StageResult(stage, path.name, passed, tuple(replace(c, stage=stage) for c in checks), data, error)


CHECKLIST_TOKENIZER_CHECKS = ("tokenizer_parity", "chat_template_parity", "declared_stop_set")


def derive_tokenizer_checks(report: dict[str, Any]) -> tuple[Check, ...]:
    """The checklist's verify-tokenizer checks from a findings-only report, by verify-tokenizer's own rules."""
    findings = [
        Finding(str(f.get("code", "")), f["severity"], str(f.get("message", "")))
        for f in report.get("findings") or []
        if isinstance(f, dict) and f.get("severity") in SEVERITIES
    ]
    return tuple(c for c in build_checks(findings, None, None, None) if c.name in CHECKLIST_TOKENIZER_CHECKS)


def derive_performance_check(validate: dict[str, Any]) -> Check:
    """`performance_recorded` from validate.json's `performance`: prefill by length and decode timings present."""
    perf = validate.get("performance")
    if not isinstance(perf, dict):
        return Check("performance_recorded", False, True, "validate.json has no `performance` (run without --no-perf)")
    prefill = perf.get("prefill_by_length")
    have = [k for k in ("tpot_ms", "itl_p50_ms", "itl_p99_ms") if isinstance(perf.get(k), (int, float))]
    ok = isinstance(prefill, list) and bool(prefill) and len(have) == 3
    where = perf.get("hardware") if isinstance(perf.get("hardware"), dict) else {}
    on = where.get("gpu") or where.get("cpu") or "unknown hardware"
    detail = (
        f"prefill at {len(prefill)} lengths, TPOT {perf['tpot_ms']:.3g} ms, ITL p99 {perf['itl_p99_ms']:.3g} ms on {on}"
        if ok
        else f"incomplete: prefill_by_length {'present' if prefill else 'missing'}, have {have or 'no'} decode timings"
    )  # type: ignore[arg-type]
    return Check("performance_recorded", ok, True, detail)
