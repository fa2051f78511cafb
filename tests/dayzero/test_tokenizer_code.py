"""A tokenizer that exists only as the repository's code (how Kimi-K2 ships one): not loaded without
--trust-remote-code (exit 2 naming the rerun command), checked in the sandbox worker with it, with the golden
recorded where the user's goldens are."""

from __future__ import annotations

import json
import shutil

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
