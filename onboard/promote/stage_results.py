"""Read the stage results of one model revision (`onboarding/<slug>/<revision>/*.json`), defensively.

A missing stage is simply absent; an unreadable one is kept with its error so the checklist and the report can say
why an item is open instead of crashing. `inspect` has no checks of its own in `profile.json` (a ModelProfile), so
they are derived here from its findings unless the pipeline stored an `inspect.json` with a `checks` list.
Files and checks are decoded by msgspec; a malformed check is reported with its JSON path (`$.checks[2].passed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from onboard.inspect_checkpoint.verdicts import inspect_checks

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


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    required: bool = True
    detail: str = ""
    skipped: bool = False
    """The stage did not run it: the item stays open unless the stage also says `not_applicable`."""
    not_applicable: bool = False
    """Nothing to check for this model (e.g. no boundary for long_context_parity): satisfies the item."""


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
    """Every stage result present in `rev_dir`, keyed by stage name (see STAGE_FILES)."""
    stages: dict[str, StageResult] = {}
    for stage, names in STAGE_FILES.items():
        for name in names:
            path = rev_dir / name
            if path.is_file():
                stages[stage] = _load_one(stage, path)
                break
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
        checks, error = derive_inspect_checks(data), None
    elif raw is None and stage == "verify-tokenizer" and isinstance(data.get("findings"), list):
        checks, error = derive_tokenizer_checks(data), None
    else:
        checks, error = _parse_checks(raw, path.name)
    if stage == "validate" and error is None and not any(c.name == "performance_recorded" for c in checks):
        checks = (*checks, derive_performance_check(data))
    passed = data.get("passed") if isinstance(data.get("passed"), bool) else None
    if passed is None and stage == "inspect" and error is None:
        passed = all(c.passed for c in checks if c.required)
    return StageResult(stage, path.name, passed, checks, data, error)


def _parse_checks(raw: Any, file: str) -> tuple[tuple[Check, ...], str | None]:
    """Each item decoded into a Check by msgspec (types checked); a malformed item is named with its field and
    left out, the others kept, so one bad entry does not hide the stage's other results."""
    if not isinstance(raw, list):
        return (), f"{file} has no `checks` list"
    checks: list[Check] = []
    bad: list[str] = []
    for i, item in enumerate(raw):
        try:
            checks.append(msgspec.convert(item, Check))
        except msgspec.ValidationError as exc:
            where = f"$.checks[{i}]"  # msgspec's path is relative to the item, and omitted at its root
            message = str(exc)
            bad.append(message.replace("`$", f"`{where}") if " - at `$" in message else f"{message} - at `{where}`")
    return tuple(checks), (f"{file}: malformed checks (need name and passed): {'; '.join(bad)}" if bad else None)


def derive_inspect_checks(profile: dict[str, Any]) -> tuple[Check, ...]:
    """The inspect checks the checklist expects, from a ModelProfile's JSON (inspect_checkpoint.verdicts)."""
    return tuple(Check(**check) for check in inspect_checks(profile))


# verify-tokenizer finding code (prefix) -> the check it fails; any other error finding fails tokenizer_parity.
TOKENIZER_CODE_CHECKS: dict[str, str] = {
    "template-": "chat_template_parity",
    "double-bos": "chat_template_parity",
    "golden-drift-render": "chat_template_parity",
    "golden-drift-stop-set": "declared_stop_set",
    "eos-config-disagreement": "declared_stop_set",
}


def derive_tokenizer_checks(report: dict[str, Any]) -> tuple[Check, ...]:
    """tokenizer_parity / chat_template_parity / declared_stop_set from a findings-only verify-tokenizer report."""
    failing: dict[str, list[str]] = {"tokenizer_parity": [], "chat_template_parity": [], "declared_stop_set": []}
    for f in report.get("findings") or []:
        if not isinstance(f, dict) or f.get("severity") not in ("error", "fatal"):
            continue
        code = str(f.get("code", ""))
        name = next((c for prefix, c in TOKENIZER_CODE_CHECKS.items() if code.startswith(prefix)), "tokenizer_parity")
        failing[name].append(f"{code}: {str(f.get('message', ''))[:160]}")
    return tuple(
        Check(name, not bad, True, "; ".join(bad[:3]) + (" …" if len(bad) > 3 else "") if bad else "no error findings")
        for name, bad in failing.items()
    )


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
    detail = (f"prefill at {len(prefill)} lengths, TPOT {perf['tpot_ms']:.3g} ms, ITL p99 {perf['itl_p99_ms']:.3g} ms on {on}"
              if ok else f"incomplete: prefill_by_length {'present' if prefill else 'missing'}, have {have or 'no'} decode timings")  # type: ignore[arg-type]  # fmt: skip
    return Check("performance_recorded", ok, True, detail)
