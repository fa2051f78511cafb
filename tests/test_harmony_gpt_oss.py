"""openai/harmony's golden renders (../shared/data/gpt-oss/harmony/test-data) vs gpt-oss-20b's HF chat template,
rendered with `onboard render-template`; expected ids = o200k_base + the gpt-oss special tokens (o200k_harmony).

The conversations are rebuilt from harmony's tests in tests/fixtures/harmony_gpt_oss_cases.json (provenance there).
Of the 23 files: 19 are renders of a conversation, 4 are parser inputs (see `not_renders`). Of the 19: 3 reproduce
exactly (system-only conversations: no_tools, browser_tool_only, browser_and_python_tool), 15 differ only by the
documented harmony features the HF template lacks (no date line unless given, required channels, knowledge cutoff,
no system message, kept analysis, <|end|> vs <|return|>, tool-message header, developer-only-tools spacing, last
parameter comma), and 1 is rejected by the HF template itself (an integer oneOf default). Each difference is asserted
(present in the render, and the render equals the golden once it is undone), none skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from onboard.cli import cli
from onboard.errors import OnboardError
from onboard.verify_tokenizer.references import Reference, RepoTokenizerInfo, load_tiktoken, read_tiktoken_ranks

FIXTURE = Path(__file__).parent / "fixtures" / "harmony_gpt_oss_cases.json"
DOC = json.loads(FIXTURE.read_text(encoding="utf-8"))
CASES: dict[str, dict[str, Any]] = DOC["cases"]
GPT_OSS = "gpt-oss/gpt-oss-20b_hf-mirror"
EXACT = {"test_no_tools", "test_browser_tool_only", "test_browser_and_python_tool"}


@pytest.fixture(scope="module")
def goldens(shared_data: Path) -> Path:
    return shared_data / "gpt-oss/harmony/test-data"


@pytest.fixture(scope="module")
def harmony(shared_data: Path) -> tuple[Any, dict[int, bytes]]:
    """o200k_harmony: (encoder with every special token allowed, id -> bytes for decoding)."""
    config = json.loads((shared_data / GPT_OSS / "tokenizer_config.json").read_text(encoding="utf-8"))
    special = {v["content"]: int(k) for k, v in config["added_tokens_decoder"].items()}
    path = shared_data / "tiktoken/o200k_base.tiktoken"
    encoder = load_tiktoken(path, RepoTokenizerInfo(special, None, None))
    assert isinstance(encoder, Reference), encoder
    ranks = read_tiktoken_ranks(path) or {}
    decoder = {i: t for t, i in ranks.items()} | {i: s.encode() for s, i in special.items()}
    return encoder.encode, decoder


def _render(tmp_path: Path, shared_data: Path, case: dict[str, Any]):
    context = tmp_path / "context.json"
    context.write_text(json.dumps(case["context"], ensure_ascii=False), encoding="utf-8")
    args = ["render-template", str(shared_data / GPT_OSS / "chat_template.jinja"), "--context", str(context)]
    args += ["--now", case["now"]] if case.get("now") else []
    return CliRunner().invoke(cli, args, standalone_mode=False)


def test_fixture_covers_every_golden(goldens: Path) -> None:
    files = {p.stem for p in goldens.glob("*.txt")}
    assert files == set(CASES) | set(DOC["not_renders"]) and len(files) == 23
    assert {n for n, c in CASES.items() if c["expect"] == "exact"} == EXACT


@pytest.mark.parametrize("name", sorted(CASES))
def test_render_vs_harmony_golden(
    name: str, tmp_path: Path, shared_data: Path, goldens: Path, harmony: tuple[Any, dict[int, bytes]]
) -> None:
    case = CASES[name]
    golden = (goldens / f"{name}.txt").read_text(encoding="utf-8").rstrip()  # harmony's tests rstrip() too
    result = _render(tmp_path, shared_data, case)
    expect = case["expect"]
    if isinstance(expect, dict):  # the HF template itself fails on this conversation
        assert isinstance(result.exception, OnboardError) and result.exception.exit_code == 1
        assert expect["rejected"] in result.exception.message
        return
    assert result.exception is None, result.exception
    text = result.stdout
    encode, _ = harmony
    if expect == "exact":
        assert text == golden
        assert encode(text) == encode(golden)  # the ids harmony's tests expect
        return
    for diff in expect:
        assert text.count(diff["render"]) == 1, (diff["why"], text)
        text = text.replace(diff["render"], diff["golden"])
    assert text == golden
    assert encode(text) == encode(golden)


def test_empty_conversation_is_rejected_by_the_hf_template(tmp_path: Path, shared_data: Path) -> None:
    """Why the system-only cases carry one empty system message (the HF template indexes messages[0])."""
    case = {**CASES["test_no_tools"], "context": {**CASES["test_no_tools"]["context"], "messages": []}}
    result = _render(tmp_path, shared_data, case)
    assert isinstance(result.exception, OnboardError) and "no element 0" in result.exception.message


def test_special_tokens_are_single_ids(goldens: Path, harmony: tuple[Any, dict[int, bytes]]) -> None:
    encode, decode = harmony
    text = (goldens / "test_does_not_drop_if_ongoing_analysis.txt").read_text(encoding="utf-8").rstrip()
    ids = encode(text)
    assert ids.count(200006) == text.count("<|start|>") == 5 and ids.count(200003) == 1  # <|start|>, <|constrain|>
    assert b"".join(decode[i] for i in ids).decode() == text


@pytest.mark.parametrize(
    ("name", "contents"),
    [
        ("test_simple_reasoning_response", ['User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.', "2 + 2 = 4."]),
        ("test_simple_tool_call", ['User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.',
                                   '{"location": "Tokyo"}']),
    ],
)  # fmt: skip
def test_completion_token_files_round_trip(
    name: str, contents: list[str], goldens: Path, harmony: tuple[Any, dict[int, bytes]]
) -> None:
    """Parser inputs, not renders: our o200k_harmony decodes them to the messages harmony parses and re-encodes them."""
    encode, decode = harmony
    ids = [int(x) for x in (goldens / f"{name}.txt").read_text(encoding="utf-8").split()]
    text = b"".join(decode[i] for i in ids).decode()
    assert all(c in text for c in contents)
    assert encode(text) == ids


@pytest.mark.parametrize(("name", "messages"), [("test_tool_response_parsing", 1), ("test_streamable_parser", 3)])
def test_completion_text_files_tokenize(
    name: str, messages: int, goldens: Path, harmony: tuple[Any, dict[int, bytes]]
) -> None:
    encode, decode = harmony
    text = (goldens / f"{name}.txt").read_text(encoding="utf-8").rstrip()
    ids = encode(text)
    assert b"".join(decode[i] for i in ids).decode() == text
    # Messages end in <|end|> or <|call|> (the tool-response file is cut before its <|end|>).
    ends = ids.count(200007) + ids.count(200012)
    assert ends == (messages if name == "test_streamable_parser" else 0) and ids.count(200008) == messages
