"""`onboard tokenize`: ids for --text and JSONL in / JSONL out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from onboard.cli import cli
from onboard.errors import OnboardError
from tests.real_data import llamacpp_vectors

QWEN = "qwen/qwen3-1.7b_mlx-bf16-copy"


@pytest.fixture(scope="module")
def qwen(shared_data: Path) -> str:
    return str(shared_data / QWEN)


def test_text(qwen: str) -> None:
    result = CliRunner().invoke(cli, ["tokenize", qwen, "--text", "Hello world 333"], standalone_mode=False)
    assert result.exception is None and result.stdout == "9707 1879 220 18 18 18\n"


def test_text_json_with_tokens(qwen: str) -> None:
    result = CliRunner().invoke(cli, ["tokenize", qwen, "--text", "Hi", "--json"], standalone_mode=False)
    assert json.loads(result.stdout) == {"ids": [13048], "tokens": ["Hi"]}


def test_jsonl_in_jsonl_out(qwen: str, shared_data: Path, tmp_path: Path) -> None:
    cases = llamacpp_vectors(shared_data)["qwen2"]["cases"]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": c["text"]}) + "\n" for c in cases), encoding="utf-8")
    result = CliRunner().invoke(cli, ["tokenize", qwen, "--jsonl", str(src)], standalone_mode=False)
    lines = result.stdout.splitlines()
    assert [json.loads(line)["ids"] for line in lines] == [c["ids"] for c in cases]


def test_add_special_tokens_and_bad_input(shared_data: Path, tmp_path: Path) -> None:
    mixtral = str(shared_data / "mistral/mixtral-8x7b-v0.1_hf-mirror")
    result = CliRunner().invoke(
        cli, ["tokenize", mixtral, "--text", "Hi", "--add-special-tokens"], standalone_mode=False
    )
    assert result.stdout.split()[0] == "1"  # BOS
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"txt": 1}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["tokenize", mixtral, "--jsonl", str(bad)], standalone_mode=False)
    assert isinstance(result.exception, OnboardError) and "line 1" in result.exception.message
