"""new-model stages that need a reference, when the reference is the repository's own code.

Without --trust-remote-code such a stage is not run: it is recorded as blocked, with the reason and the exact
command that would run it, on every checklist item it would have ticked (so the checklist and the report say why
they are open). With the flag the stages run and the reference runs in the sandbox worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onboard.checks import Check, stage_result
from onboard.fsutil import atomic_write_json
from onboard.reference import RemoteCodePolicy, classify


def reference_refusal(run_dir: Path, policy: RemoteCodePolicy, rerun: str) -> str | None:
    """Why the reference may not run under `policy` (None when it may), from the profile inspect wrote."""
    from onboard.profile import ModelProfile

    profile_file = run_dir / "profile.json"
    if not profile_file.is_file():
        return None  # no profile: the stage finds out for itself and reports it
    profile = ModelProfile.from_json(profile_file.read_text())
    auto_map = dict(profile.remote_code.auto_map) if profile.remote_code else None
    return classify(profile.model_type, auto_map).refusal(policy, rerun)


def write_refused(run_dir: Path, stage: str, result_file: str, reason: str) -> dict[str, Any]:
    """The stage's result file with every check the checklist expects from it open ("not checked") for `reason`."""
    from onboard.promote.checklist import load_checklist

    names = load_checklist().check_names().get(stage) or [f"{stage}_ran"]
    checks = [Check(name, False, detail=reason, skipped=True) for name in dict.fromkeys(names)]
    result = stage_result(stage, checks, blocked=reason)
    atomic_write_json(run_dir / result_file, result)
    return result
