"""`onboard new-model DIR --trust-remote-code` on the dense day-zero fixture, end to end through the real sandbox:
an adapter composed from the profile, parity against the repository's own code, goldens from that code (recorded
as "repository code sha256:…"), validate passing, and only the sign-offs left open."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# What stays open on a tiny random-weight model that passed every check: the people's items. The architecture is
# new by construction (dayzero_llama), so its review is a sign-off too.
# The sign-offs, and the tool calls: the template declares tools and only an engine can be checked (validate --engine).
STILL_OPEN = {"architecture_reviewed", "licence_reviewed", "model_card_read", "tool_calls"}


@pytest.mark.slow
def test_new_model_with_the_repository_code_as_reference(dayzero, tmp_path) -> None:
    from onboard.sandbox import SandboxUnavailable, code_hash, isolation_method

    fixture = dayzero("llama")
    flags = ["--trust-remote-code"]
    try:
        isolated = isolation_method() != "none (--unsafe-no-sandbox)"
    except SandboxUnavailable:  # still a separate worker process, only without the namespaces
        flags.append("--unsafe-no-sandbox")
        isolated = False
    ws = tmp_path / "ws"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("ONBOARD_DAYZERO_CANARY", None)
    proc = subprocess.run([sys.executable, "-m", "onboard", "new-model", str(fixture.path), "--workspace", str(ws),
                           *flags, "--json"], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=1200)  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    outcomes = {name: stage["outcome"] for name, stage in summary["stages"].items()}
    assert outcomes == {"inspect": "checks-failed", "generate": "ok", "verify-tokenizer": "ok", "golden": "ok",
                        "validate": "ok"}, (outcomes, proc.stderr[-3000:])  # fmt: skip
    assert set(summary["blocking"]) == STILL_OPEN and proc.returncode == 1

    identity = f"repository code sha256:{code_hash(fixture.path)}"
    run_dir = ws / "onboarding" / summary["slug"] / summary["revision"]
    parity = json.loads((run_dir / "generate.json").read_text())["parity"]
    assert parity["status"] == "passed" and parity["worst"] <= 1e-4 and parity["reference"]["identity"] == identity
    manifest = json.loads((ws / "golden_outputs" / summary["slug"] / "MANIFEST.json").read_text())
    assert manifest["reference"]["identity"] == identity and manifest["model_type"] == "dayzero_llama"
    validation = json.loads((run_dir / "validate.json").read_text())
    assert validation["passed"] is True and validation["candidate"]["kind"] == "adapter"
    report = (run_dir / "report.md").read_text()
    assert "dayzero_llama" in report and (run_dir / "report.html").is_file()
    if isolated:  # the repository's code ran only in the worker, which cannot write the canary's folder
        assert fixture.imported() == []
