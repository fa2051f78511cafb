"""validate's tool_calls check run for real on vLLM's CPU build, serving the tool-calling fixture
(tests/fixtures/trained-qwen3-tools: Hermes `<tool_call>` JSON, `<think>` reasoning): with the parsers its template
needs (`--tool-call-parser hermes --reasoning-parser qwen3`) every suite conversation agrees with the reference's
parse of its own greedy answers, streamed and not; with a wrong tool parser the check fails and its parser advice
names hermes. One engine start per parser configuration; the check runs inside the start, the server stops before
the next starts.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from onboard.checks import Check
from onboard.validate_serving.endpoint import EndpointCandidate
from onboard.validate_serving.golden import GoldenSet
from onboard.validate_serving.runtime import load_candidate
from onboard.validate_serving.tool_check import tool_calls_check
from onboard.validate_serving.tool_golden import read_tool_golden, record_tool_suite, write_tool_golden
from tests.validate.vllm_server import require_vllm, serve

pytestmark = pytest.mark.vllm

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "trained-qwen3-tools"
RIGHT = ("hermes", "qwen3")
WRONG = ("pythonic", "qwen3")


WRONG_ASKS = ("single_call", "parallel_calls", "no_call")
"""The wrong configuration is asked fewer conversations: a call, two calls, none (CI time)."""


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> GoldenSet:
    require_vllm()
    folder = tmp_path_factory.mktemp("golden")
    reference = load_candidate(FIXTURE, "float32", runtime="reference")
    write_tool_golden(folder, record_tool_suite(reference, FIXTURE))
    reference.close()
    return GoldenSet(folder, {}, ())


@pytest.fixture(scope="module")
def fewer(golden: GoldenSet, tmp_path_factory: pytest.TempPathFactory) -> GoldenSet:
    tools = read_tool_golden(golden.folder)
    folder = tmp_path_factory.mktemp("fewer")
    write_tool_golden(
        folder, msgspec.structs.replace(tools, answers=[a for a in tools.answers if a.name in WRONG_ASKS])
    )
    return GoldenSet(folder, {}, ())


def _check(golden: GoldenSet, log: Path, parsers: tuple[str, str]) -> Check:
    tool_parser, reasoning_parser = parsers
    args = ("--enable-auto-tool-choice", "--tool-call-parser", tool_parser, "--reasoning-parser", reasoning_parser)
    with serve(FIXTURE, "tools", log, extra_args=args) as url:
        endpoint = EndpointCandidate(url, "tools", "float32", timeout_s=120.0)
        return tool_calls_check(golden, endpoint, tool_parser=tool_parser, reasoning_parser=reasoning_parser,
                                tokenizer=FIXTURE)  # fmt: skip


@pytest.fixture(scope="module")
def right(golden: GoldenSet, tmp_path_factory: pytest.TempPathFactory) -> Check:
    return _check(golden, tmp_path_factory.mktemp("right") / "vllm.log", RIGHT)


@pytest.fixture(scope="module")
def wrong(fewer: GoldenSet, tmp_path_factory: pytest.TempPathFactory) -> Check:
    return _check(fewer, tmp_path_factory.mktemp("wrong") / "vllm.log", WRONG)


def test_the_right_parsers_pass_streamed_and_not(right: Check) -> None:
    assert right.passed and not right.skipped, right.detail
    summary = right.data["summary"]
    assert summary["trigger_similarity"] == 1.0 and summary["schema_accuracy"] == 1.0
    assert summary["conversations"] == summary["agreeing"] == 6 and summary["calls"] == 5
    for outcome in right.data["conversations"]:
        assert outcome["differences"] == outcome["stream_differences"] == outcome["errors"] == []
        # vLLM returns its prompt ids: the rendering was compared, and equals the reference's
        assert not any("no prompt token ids" in note for note in outcome["notes"]), outcome


def test_a_wrong_tool_parser_fails_naming_the_parser_that_would_match(wrong: Check) -> None:
    assert not wrong.passed and not wrong.skipped
    assert [o["name"] for o in wrong.data["conversations"]] == list(WRONG_ASKS)
    calling = [o for o in wrong.data["conversations"] if o["expected_call"]]
    assert len(calling) == 2 and all(not o["triggered"] and not o["agrees"] for o in calling)
    assert wrong.data["summary"]["trigger_similarity"] == 0.0
    matches = wrong.data["advice"]["matches"]
    assert {"tool_call_parser": "hermes", "reasoning_parser": "qwen3"} in matches
    assert {"tool_call_parser": "pythonic", "reasoning_parser": "qwen3"} not in matches
    assert "--tool-call-parser hermes --reasoning-parser qwen3" in wrong.detail
