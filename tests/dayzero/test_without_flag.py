"""Without --trust-remote-code nothing from a day-zero repository is imported or executed, anywhere.

Each fixture goes through the CLI as a user runs it: inspect profiles it from headers (a warning, exit 0), and
new-model verifies the tokenizer (it needs no code), composes what it can, and blocks the stages that need the
reference with the exact command to rerun. No traceback, no prompt: stdin is a pseudo-terminal for one fixture
(transformers asks "Do you wish to run the custom code? [y/N]" only on a terminal) and closed for another; generate
and verify-tokenizer run on every fixture. The canary file of each fixture stays absent throughout.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onboard.cli import main
from tests.dayzero.builder import ACCEPTANCE

PROMPT = "Do you wish to run the custom code"
# new-model's stdin: a terminal, a closed descriptor. Two fixtures: the stages' commands run on all four below.
STDIN = {"llama": "pty", "mistral": "closed"}


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("ONBOARD_DEBUG", None)
    env.pop("ONBOARD_DAYZERO_CANARY", None)
    return env


def _run(argv: list[str], stdin: str, timeout: float = 600) -> tuple[int, str]:
    """Run `python -m onboard ARGV` with stdin a pty or closed; (exit code, stdout + stderr)."""
    command = [sys.executable, "-m", "onboard", *argv]
    if stdin == "closed":
        proc = subprocess.run(command, preexec_fn=lambda: os.close(0), capture_output=True, text=True, env=_env(),
                              timeout=timeout)  # fmt: skip
        return proc.returncode, proc.stdout + proc.stderr
    main_fd, child_fd = pty.openpty()  # the child's stdin, stdout and stderr are a terminal
    proc = subprocess.Popen(command, stdin=child_fd, stdout=child_fd, stderr=child_fd, env=_env(),
                            start_new_session=True)  # fmt: skip
    os.close(child_fd)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main_fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk and proc.poll() is not None:
                break
            out += chunk
            if PROMPT.encode() in out:  # would wait for an answer forever: fail now, and never answer
                break
        elif proc.poll() is not None:
            break
    if proc.poll() is None:
        proc.kill()
    os.close(main_fd)
    return proc.wait(), out.decode(errors="replace")


@pytest.mark.parametrize("family", ACCEPTANCE)
def test_inspect_profiles_from_headers(family: str, dayzero, capsys) -> None:
    fixture = dayzero(family)
    with pytest.raises(SystemExit) as info:
        main(["inspect", str(fixture.path), "--json"])
    out, err = capsys.readouterr()
    profile = json.loads(out)
    assert info.value.code == 0, err
    found = {f["code"]: f for f in profile["findings"]}
    assert found["remote-code-required"]["severity"] == "warning"
    assert "--trust-remote-code" in found["remote-code-required"]["hint"]
    assert profile["model_type"] == f"dayzero_{family}" and profile["parameters"]["total"] > 0
    assert "Traceback" not in out + err and fixture.imported() == []


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(STDIN))
def test_new_model_blocks_what_needs_the_reference(family: str, dayzero, tmp_path: Path) -> None:
    fixture = dayzero(family)
    ws = tmp_path / "ws"
    code, out = _run(["new-model", str(fixture.path), "--workspace", str(ws)], STDIN[family])
    assert PROMPT not in out and "Traceback" not in out, out[-3000:]
    assert code == 1, out[-3000:]
    rerun = f"onboard new-model {fixture.path} --workspace {ws} --trust-remote-code"
    assert f"rerun with: {rerun}" in out
    (run_dir,) = (ws / "onboarding").glob("*/*")
    for stage in ("golden", "validate"):
        result = json.loads((run_dir / f"{stage}.json").read_text())
        assert result["passed"] is False and result["blocked"].endswith(f"rerun with: {rerun}")
        assert result["checks"] and all(c["skipped"] and not c["passed"] for c in result["checks"])
    tokenizer = json.loads((run_dir / "verify-tokenizer.json").read_text())
    assert tokenizer["stage"] == "verify-tokenizer" and "error" not in tokenizer  # it ran: the tokenizer needs no code
    generate = json.loads((run_dir / "generate.json").read_text())
    parity = next((c for c in generate.get("checks", []) if c["name"] == "adapter_parity"), None)
    if parity is not None:  # an adapter was composed: its parity is unverified, never passed
        assert parity["passed"] is False and parity["detail"].startswith("unverified: no reference")
    assert not list(ws.rglob("golden_outputs/*/MANIFEST.json"))  # no goldens from anything
    assert fixture.imported() == []


@pytest.mark.slow
@pytest.mark.parametrize("family", ACCEPTANCE)
def test_generate_and_verify_tokenizer_commands(family: str, dayzero, tmp_path: Path, capsys) -> None:
    fixture = dayzero(family)
    out_dir = tmp_path / "generated"
    with pytest.raises(SystemExit) as info:
        main(["generate", str(fixture.path), "--out", str(out_dir), "--parity", "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if info.value.code == 2:  # composition refused the checkpoint (its own Error/Hint): no parity to judge
        assert err.startswith("Error:"), err
    else:  # composed: parity is unverified, never passed, and names the command that would run it
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
        assert info.value.code == 1 and checks["adapter_parity"]["passed"] is False, err
        assert checks["adapter_parity"]["detail"].startswith("unverified: no reference")
        assert checks["adapter_parity"]["detail"].endswith(
            f"rerun with: onboard generate {fixture.path} --out {out_dir} --force --parity --trust-remote-code"
        )
    with pytest.raises(SystemExit) as info:  # the tokenizer needs no code: it is verified without the flag
        main(["verify-tokenizer", str(fixture.path), "--golden", str(tmp_path / "golden"), "--record", "--json"])
    out, err = capsys.readouterr()
    assert info.value.code == 0 and json.loads(out)["tokenizer_class"] == "Qwen2Tokenizer", err
    assert fixture.imported() == []
