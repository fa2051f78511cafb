"""`onboard inspect DIR --json` on every malformed-corpus entry: exit 2, `Error:` on stderr, no traceback, nothing run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onboard.cli import main
from tests import malformed as M

# Both the CLI and the library report repository-only code as `remote-code-required` (older CLIs said `remote-code`).
ACCEPTED = {"remote-code-required": {"remote-code", "remote-code-required"}}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


@pytest.mark.parametrize("case", sorted(M.CORPUS))
def test_inspect_exits_2_cleanly(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ONBOARD_DEBUG", raising=False)
    builder, code = M.CORPUS[case]
    root = builder(tmp_path / "repo")
    rc, out, err = _run(capsys, "inspect", str(root), "--json")
    assert rc == 2, (out[-2000:], err)
    assert "Error:" in err and "Traceback" not in err + out
    if out.strip():  # the profile still comes out as JSON, with the fatal finding in it
        codes = {f["code"] for f in json.loads(out)["findings"]}
        assert codes & ACCEPTED.get(code, {code}), codes
    assert not list(tmp_path.glob("*EXECUTED*"))


def test_valid_checkpoint_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "inspect", str(M.valid(tmp_path / "repo")), "--json")
    profile = json.loads(out)
    assert profile["parameters"]["total"] == sum(__import__("math").prod(shape) for _, shape in M.TENSORS.values()), err
    assert rc in (0, 1) and "Traceback" not in err


def test_subprocess_has_no_traceback(tmp_path: Path) -> None:
    root = M.truncated(tmp_path / "repo")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("ONBOARD_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "onboard", "inspect", str(root), "--json"], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "Error:" in proc.stderr and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
