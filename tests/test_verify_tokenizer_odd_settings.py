"""Tokenizer files with values transformers or tokenizers break on: a clean `Error:` naming the file and field, or a
finding, never an internal error or a traceback. Each case was an internal error (TypeError, RecursionError,
OverflowError) or a Rust panic's traceback before the fix. The tokenizer is the trained fixture's (committed)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

TRAINED = Path(__file__).resolve().parent / "fixtures" / "trained-qwen3"


def _copy(dest: Path, file: str, edit) -> Path:  # type: ignore[no-untyped-def]
    shutil.copytree(TRAINED, dest, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    doc = json.loads((dest / file).read_text(encoding="utf-8"))
    edit(doc)
    (dest / file).write_text(json.dumps(doc), encoding="utf-8")
    return dest


@pytest.mark.parametrize(
    ("file", "field", "value", "says"),
    [
        ("tokenizer_config.json", "model_max_length", "", "model_max_length is '' (str), not a number"),
        ("tokenizer_config.json", "model_max_length", [], "model_max_length is [] (list), not a number"),
        ("tokenizer_config.json", "unk_token", "", "unk_token is an empty string"),
        ("tokenizer_config.json", "unk_token", {"content": "", "special": True}, "unk_token is an empty string"),
    ],
)
def test_a_setting_transformers_breaks_on_is_refused_by_name(
    cli_in_process: Callable[..., tuple[int, str, str]], tmp_path: Path, file: str, field: str, value: object, says: str
) -> None:
    root = _copy(tmp_path / "repo", file, lambda doc: doc.__setitem__(field, value))
    rc, out, err = cli_in_process("verify-tokenizer", str(root), "--json")
    assert rc == 2 and out == "", (rc, out[-500:], err)
    assert f"Error: {file}: {says}" in err and f"Hint: set {field} in {file}" in err, err
    assert "internal error" not in err and "Traceback" not in err


def test_a_number_and_a_null_are_accepted(cli_in_process: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    def edit(doc: dict) -> None:
        doc["model_max_length"], doc["unk_token"] = 1e30, None  # old writers' "no limit", and no unknown token

    rc, out, err = cli_in_process("verify-tokenizer", str(_copy(tmp_path / "repo", "tokenizer_config.json", edit)),
                        "--json")  # fmt: skip
    assert rc == 0, err
    assert json.loads(out)["passed"] is True


@pytest.mark.parametrize(("file", "value"), [("generation_config.json", -1), ("generation_config.json", 10**30),
                                             ("generation_config.json", [4034, 5000]), ("config.json", -1)])  # fmt: skip
def test_an_eos_id_no_token_has_is_an_error_and_stays_out_of_the_stop_set(
    cli_in_process: Callable[..., tuple[int, str, str]], tmp_path: Path, file: str, value: object
) -> None:
    root = _copy(tmp_path / "repo", file, lambda doc: doc.__setitem__("eos_token_id", value))
    rc, out, err = cli_in_process("verify-tokenizer", str(root), "--json")
    assert rc == 1 and "internal error" not in err, err
    report = json.loads(out)
    found = [f for f in report["findings"] if f["code"] == "eos-id-out-of-range"]
    bad = value[-1] if isinstance(value, list) else value
    assert len(found) == 1 and found[0]["file"] == file and f"declares {bad}," in found[0]["message"], found
    checks = {c["name"]: c["passed"] for c in report["checks"]}
    assert checks["declared_stop_set"] is False
    stop_ids = [t["id"] for t in report["stop_set"]]
    assert bad not in stop_ids and 4034 in stop_ids, stop_ids  # <|im_end|>: the tokenizer's EOS still stops
    assert bad in report["special_tokens"]["declared"][file]["eos"]  # the report still says what the file declares


def test_a_pad_id_of_minus_one_is_a_warning(
    cli_in_process: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    # Older conversions wrote pad_token_id -1 for "no pad": worth fixing, not a reason to stop.
    root = _copy(tmp_path / "repo", "config.json", lambda doc: doc.__setitem__("pad_token_id", -1))
    rc, out, err = cli_in_process("verify-tokenizer", str(root), "--json")
    found = [f for f in json.loads(out)["findings"] if f["code"] == "pad-id-out-of-range"]
    assert rc == 0 and [f["severity"] for f in found] == ["warning"], (rc, found, err)


@pytest.fixture(scope="module")
def panicking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's tokenizer plus a tokenizer.json whose BPE model tokenizers panics on (not an Exception)."""
    from onboard.verify_tokenizer.subject import load_subject

    root = tmp_path_factory.mktemp("panicking") / "repo"
    shutil.copytree(TRAINED, root, ignore=shutil.ignore_patterns("corpus.txt.gz"))
    load_subject(root).backend.save(str(root / "tokenizer.json"))
    doc = json.loads((root / "tokenizer.json").read_text(encoding="utf-8"))
    doc["model"]["continuing_subword_prefix"] = "zz"  # tokenizers' BPE builder slices merges by it, and panics
    (root / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    return root


def test_a_tokenizer_json_the_rust_library_panics_on_is_an_input_error(
    cli_in_process: Callable[..., tuple[int, str, str]], panicking: Path
) -> None:
    rc, out, err = cli_in_process("verify-tokenizer", str(panicking), "--json")
    assert rc == 2 and "Error: tokenizer.json: cannot be loaded by the tokenizers library" in err, (rc, err[-2000:])
    assert "panicked" in err and "Traceback" not in err and "internal error" not in err


def test_the_cli_reports_a_native_panic_without_a_traceback(
    cli_in_process: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch, panicking: Path
) -> None:
    # The last line of defence: a panic no loader wraps is an internal error, as any other unexpected exception.
    import tokenizers

    from onboard.cli import inspect_cmd

    def panics(*_args: object, **_kwargs: object) -> None:
        tokenizers.Tokenizer.from_file(str(panicking / "tokenizer.json"))

    monkeypatch.setattr(inspect_cmd, "inspect", panics)
    rc, _, err = cli_in_process("inspect", str(TRAINED))
    assert rc == 2 and "Error: internal error: PanicException" in err and "Traceback" not in err, err
