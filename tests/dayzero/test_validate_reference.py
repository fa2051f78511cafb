"""`onboard validate --candidate reference` (the harness self-check) on a day-zero checkpoint: its candidate would be
the repository's code, so it is refused without --trust-remote-code and runs in the sandbox worker with it."""

from __future__ import annotations

import json

import pytest

from onboard.cli import main
from onboard.reference import RemoteCodePolicy
from onboard.validate_serving.golden import record


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.slow
def test_reference_self_check_needs_the_flag_then_runs_sandboxed(dayzero, in_process_sandbox, tmp_path, capsys):
    fixture = dayzero("llama")
    golden = tmp_path / "golden"
    record(str(fixture.path), golden, policy=RemoteCodePolicy(True), calibrate=("float32",), max_long_tokens=48)
    argv = ["validate", str(fixture.path), "--golden", str(golden), "--candidate", "reference", "--no-performance",
            "--out", str(tmp_path / "validation.json")]  # fmt: skip
    calls = len(in_process_sandbox)
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and "Traceback" not in err, err
    rerun = f"onboard validate {fixture.path} --golden {golden} --candidate reference --trust-remote-code"
    assert "exists only as the repository's code" in err and rerun in err
    assert len(in_process_sandbox) == calls  # refused before anything ran

    code, out, err = _cli(capsys, *argv, "--trust-remote-code", "--json")
    assert in_process_sandbox[-1]["target"] == "onboard.validate_serving.remote_candidate:validate_in_worker"
    result = json.loads(out)
    assert code == 0 and result["passed"] is True, err
    assert result["candidate"]["kind"] == "reference-as-candidate"
    assert fixture.imported() == []
