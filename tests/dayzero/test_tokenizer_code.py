"""A tokenizer that exists only as the repository's code (how Kimi-K2 ships one): not loaded without
--trust-remote-code (exit 2 naming the rerun command), checked in the sandbox worker with it, with the golden
recorded where the user's goldens are."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from onboard.cli import main
from tests.dayzero.builder import ship_tokenizer_as_code


@pytest.fixture
def code_tokenizer(dayzero, tmp_path):
    fixture = dayzero("llama")
    root = tmp_path / "dayzero_tok"
    shutil.copytree(fixture.path, root, symlinks=True)
    canary = tmp_path / "tokenizer.canary"
    return ship_tokenizer_as_code(root, canary), canary


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_without_the_flag_nothing_is_loaded(code_tokenizer, tmp_path, capsys) -> None:
    root, canary = code_tokenizer
    code, out, err = _cli(capsys, "verify-tokenizer", str(root), "--golden", str(tmp_path / "g"), "--record")
    assert code == 2 and "Traceback" not in err
    assert "the tokenizer exists only as the repository's code (tokenizer_class 'DayzeroTokenizer'" in err
    assert f"then: onboard verify-tokenizer {root} --record --trust-remote-code" in err
    assert not canary.exists() and not (tmp_path / "g").exists()


def test_with_the_flag_it_is_checked_in_the_worker(code_tokenizer, in_process_sandbox, tmp_path, capsys) -> None:
    root, canary = code_tokenizer
    golden = tmp_path / "g"
    code, out, err = _cli(capsys, "verify-tokenizer", str(root), "--golden", str(golden), "--record",
                          "--trust-remote-code", "--json")  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["tokenizer_class"] == "DayzeroTokenizer" and report["source"] == str(root)
    assert report["golden"]["action"] == "recorded" and (golden / "dayzero_tok" / "tokenizer.json").is_file()
    assert [c["target"] for c in in_process_sandbox] == ["onboard.verify_tokenizer.remote:verify_in_worker"]
    # Compared against what was just recorded, in the worker again: no drift.
    code, out, err = _cli(capsys, "verify-tokenizer", str(root), "--golden", str(golden), "--trust-remote-code",
                          "--json")  # fmt: skip
    report = json.loads(out)
    assert code == 0 and report["golden"]["action"] == "compared" and report["golden"]["drift"] == 0, err
    assert not canary.exists()  # the stand-in's imports went to its own canary (ONBOARD_DAYZERO_CANARY)


def test_without_bubblewrap_the_flag_is_refused_unless_unsafe(code_tokenizer, tmp_path, monkeypatch) -> None:
    """No bubblewrap on PATH: --trust-remote-code is an Error/Hint naming the package and --unsafe-no-sandbox;
    with --unsafe-no-sandbox the worker runs unisolated and stderr says so."""
    root, canary = code_tokenizer
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    env = {**os.environ, "PATH": str(no_bwrap), "HF_HUB_OFFLINE": "1"}
    golden = ["--golden", str(tmp_path / "g"), "--record"]
    argv = [sys.executable, "-m", "onboard", "verify-tokenizer", str(root), *golden, "--trust-remote-code"]
    refused = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.startswith("Error: ") and "`bwrap` is not installed" in refused.stderr
    hint = refused.stderr.partition("Hint: ")[2]
    assert "apt-get install bubblewrap" in hint and "--unsafe-no-sandbox" in hint
    assert not canary.exists() and not (tmp_path / "g").exists()
    unsafe = subprocess.run(
        [*argv, "--unsafe-no-sandbox"], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300
    )
    assert unsafe.returncode == 0, unsafe.stderr[-3000:]
    assert "WITHOUT isolation (--unsafe-no-sandbox)" in unsafe.stderr
    assert canary.exists()  # the repository's code ran, and nothing stopped it writing outside its temp dir
