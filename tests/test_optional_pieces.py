"""The suite with its optional pieces hidden (tests/ci.py): it collects, every test that needs a piece skips naming
the one command that provides it, and under CI=true the same tests fail instead (CI installs them), except the real
third-party data, which CI is not promised either."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.ci import HIDE_ENV, ONLY_NEEDING_ENV, PIECES, REPO, hiding_environment

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, list[tuple[str, str, str]], str]:
    """pytest in a subprocess: (exit code, [(test id, outcome, message)], output tail)."""
    report = tmp_path / "report.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
           f"--junitxml={report}", f"--basetemp={tmp_path / 'tmp'}", *args]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    results = []
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = next((c for c in case if c.tag in ("skipped", "failure", "error")), None)
        name = f"{case.get('classname')}::{case.get('name')}"
        results.append((name, "passed" if outcome is None else outcome.tag, "" if outcome is None else
                        str(outcome.get("message")) + (outcome.text or "")))  # fmt: skip
    return done.returncode, results, (done.stdout + done.stderr)[-3000:]


def _environment(tmp_path: Path, ci: bool) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    env = hiding_environment(set(PIECES), base, tmp_path / "path")
    return {**env, "CI": "true"} if ci else env


def test_every_test_that_needs_a_piece_skips_naming_its_command(tmp_path: Path) -> None:
    env = {**_environment(tmp_path, ci=False), ONLY_NEEDING_ENV: "any"}
    code, results, tail = _run(tmp_path, env, "tests")
    assert code == 0, tail
    assert len(results) > 100, tail  # the engines', the sandbox's, the browser's and the real-data tests
    not_skipped = [(name, outcome) for name, outcome, _ in results if outcome != "skipped"]
    assert not not_skipped, not_skipped[:10]
    commands = {p.command for p in PIECES.values()}
    unnamed = [(name, message) for name, _, message in results if not any(c in message for c in commands)]
    assert not unnamed, unnamed[:10]
    named = {p.name for p in PIECES.values() if any(p.command in message for _, _, message in results)}
    assert named == set(PIECES), f"no test skipped for {set(PIECES) - named}: does anything still need them?"


def test_under_ci_a_missing_piece_fails_and_missing_real_data_skips(tmp_path: Path) -> None:
    env = _environment(tmp_path, ci=True)
    files = ["tests/validate/test_vllm.py", "tests/engines/test_ggml_native.py", "tests/promote/test_report.py",
             "tests/sandbox/test_isolation.py", "tests/test_real_folders.py", "tests/dayzero/test_reference_health.py"]  # fmt: skip
    code, results, tail = _run(tmp_path, {**env, ONLY_NEEDING_ENV: "any"}, *files)
    assert code == 1, tail
    by_piece: dict[str, set[str]] = {}
    for _, outcome, message in results:
        piece = next((p.name for p in PIECES.values() if p.command in message), "?")
        by_piece.setdefault(piece, set()).add(outcome)
    assert by_piece.pop("real-data") == {"skipped"}, tail
    # A piece checked before the test body fails in setup, which junit calls an error: either way the run is red.
    assert by_piece and all(outcomes <= {"failure", "error"} for outcomes in by_piece.values()), by_piece
    assert set(by_piece) == {n for n, p in PIECES.items() if p.required_in_ci}, by_piece


def test_an_unknown_piece_name_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, HIDE_ENV: "vllm,nonsense"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--co", "tests/test_fsutil.py"], cwd=REPO, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 4 and "unknown piece(s) ['nonsense']" in done.stdout + done.stderr
