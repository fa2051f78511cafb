"""Arguments that pass a type check but cannot work are refused at once, by name, before any work is done.

Found by feeding every command odd values: `nan` passes every click.FloatRange (all its comparisons are False), an
`--out` that cannot be a folder failed only after the sweep or the reference run (or as an internal error), and
`--revision` with a local folder was ignored without a word by three commands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRAINED = REPO / "tests" / "fixtures" / "trained-qwen3"


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["quantize-plan", str(TRAINED), "--budget-kl", "nan"], "--budget-kl"),
        (["quantize-plan", str(TRAINED), "--budget-kl", "inf"], "--budget-kl"),
        (["validate", str(TRAINED), "--timeout", "nan"], "--timeout"),
        (["draft-check", str(TRAINED), "ngram", "--temperature", "nan"], "--temperature"),
        (["watch", "--author", "Qwen", "--once", "--interval", "nan"], "--interval"),
        (["render-template", str(TRAINED), "--context", "ctx.json", "--timeout", "1e300"], "--timeout"),
        (["render-template", str(TRAINED), "--context", "ctx.json", "--timeout", "-inf"], "--timeout"),
        (["verify-tokenizer", str(TRAINED), "--embedding-rows", "0"], "--embedding-rows"),
    ],
)
def test_non_finite_or_impossible_numbers_are_usage_errors(
    argv: list[str],
    option: str,
    cli_in_process: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "ctx.json").write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    code, _, err = cli_in_process(*argv)
    assert code == 2, err
    assert f"Invalid value for '{option}'" in err and "Traceback" not in err and "internal error" not in err


def test_durations_name_their_range(cli_in_process: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli_in_process("validate", str(TRAINED), "--timeout", "1e300")
    assert code == 2 and "0.1<=x<=604800" in err, err


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A path under a regular file: no folder can be made there (ENOTDIR, whoever runs the test)."""
    (tmp_path / "a-file").write_text("not a folder\n")
    return tmp_path / "a-file" / "out"


def _refused_before_work(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """`target` (looked up by attribute at call time, never imported by name elsewhere) must not run."""

    def work(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(f"{target} ran although the output folder is unusable")

    monkeypatch.setattr(target, work)


def _assert_folder_refused(code: int, err: str, blocked: Path) -> None:
    assert code == 2, err
    assert "cannot create the folder" in err and str(blocked.parent) in err, err
    assert "internal error" not in err and "Traceback" not in err


def test_quantize_plan_checks_out_before_the_sweep(
    blocked: Path, cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _refused_before_work(monkeypatch, "onboard.quantize.plan.prepare")
    code, _, err = cli_in_process("quantize-plan", str(TRAINED), "--budget-kl", "0.1", "--out", str(blocked))
    _assert_folder_refused(code, err, blocked)


def test_draft_check_checks_out_before_loading(
    blocked: Path, cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _refused_before_work(monkeypatch, "onboard.speculative.check._load")
    code, _, err = cli_in_process("draft-check", str(TRAINED), "ngram", "--out", str(blocked))
    _assert_folder_refused(code, err, blocked)


def test_golden_record_checks_out_before_the_reference_runs(
    blocked: Path, cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The class attribute, not onboard.reference.load_transformers: a module imported meanwhile would keep a patched
    # function it imported by name.
    _refused_before_work(monkeypatch, "transformers.AutoModelForCausalLM.from_pretrained")
    code, _, err = cli_in_process("golden", "record", str(TRAINED), "--out", str(blocked))
    _assert_folder_refused(code, err, blocked)


def test_new_model_workspace_that_cannot_be_a_folder(
    blocked: Path, cli_in_process: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = cli_in_process("new-model", str(TRAINED), "--workspace", str(blocked))
    _assert_folder_refused(code, err, blocked)


def test_convert_out_that_cannot_be_a_folder(
    blocked: Path, cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("onboard.engines.llamacpp.require", lambda: None)  # the folder is checked before the converter
    _refused_before_work(monkeypatch, "onboard.engines.llamacpp._partial")  # the converter's first step
    code, _, err = cli_in_process("convert", "gguf", str(TRAINED), "--out", str(blocked / "model.gguf"))
    assert code == 2, err
    assert "cannot create the folder" in err and "internal error" not in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["quantize-plan", str(TRAINED), "--budget-kl", "0.1"],
        ["draft-check", str(TRAINED), "ngram"],
        ["golden", "record", str(TRAINED)],
    ],
)
def test_revision_with_a_local_folder_is_refused(
    argv: list[str], cli_in_process: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = cli_in_process(*argv, "--revision", "v2")
    assert code == 2 and "--revision 'v2' applies to hub repos, not the local folder" in err, err


def test_a_file_name_too_long_is_named_with_what_to_do(cli_in_process: Callable[..., tuple[int, str, str]]) -> None:
    # Before: "internal error: OSError: [Errno 36] File name too long … this is a bug in onboard".
    long_name = "x" * 5000
    code, _, err = cli_in_process("verify-tokenizer", str(TRAINED), "--corpus", long_name)
    assert code == 2 and f"Error: cannot use {long_name}: File name too long" in err, err[-500:]
    assert "Hint: a file or folder name in that path is too long" in err and "internal error" not in err


def test_a_folder_given_for_a_file_is_named(cli_in_process: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli_in_process("verify-tokenizer", str(TRAINED), "--corpus", "")  # "" is the working folder
    assert code == 2 and "Error: cannot use .: Is a directory" in err and "give a file path" in err, err[-500:]


def test_an_os_error_without_a_path_stays_an_internal_error(
    cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only an error about a named path is the input's fault; a refused connection or the like is not mapped.
    from onboard.cli import inspect_cmd

    def refused(*_args: object, **_kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(inspect_cmd, "inspect", refused)
    code, _, err = cli_in_process("inspect", str(TRAINED))
    assert code == 2 and "Error: internal error: ConnectionRefusedError" in err and "Traceback" not in err, err
