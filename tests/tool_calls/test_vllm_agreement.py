"""onboard's native-format parsers against vLLM's own parsers (its CPU build's, .venv-vllm) on the same raw texts
(tests/tool_calls/cases.py): vLLM's matching `--tool-call-parser` / `--reasoning-parser`, non-streaming and streamed
token by token, read each text into the turn ours reads; a wrong parser does not, and parser advice names the right
one. Harmony (gpt-oss) texts need o200k_base.tiktoken from the real test data.

Also the answers of the tool-calling fixture (tests/fixtures/trained-qwen3-tools) to the suite, as its chat template
writes them after the suite's real prompts: vLLM's `hermes` + `qwen3` parsers, the pair validate serves it with,
read them into the suite's expected turns.

One worker run for the module (importing vLLM takes tens of seconds), one more for parser advice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.tool_calls import suite
from onboard.tool_calls.formats import FORMATS, parse_turn
from onboard.tool_calls.reasoning import reasoning_open
from onboard.tool_calls.turn import ParsedTurn, diff_turns
from onboard.tool_calls.vllm_parsers import Advice, ParserJob, ParserRun, advice_jobs, matching, run_parsers
from tests.ci import need, real_data_dir
from tests.tool_calls.cases import TOOLS, TextCase, text_cases

pytestmark = pytest.mark.vllm

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO / "tests" / "fixtures" / "trained-qwen3"
CASES = text_cases()
BY_ID = {c.id: c for c in CASES}
HERMES_THINKING = BY_ID["hermes:hermes:reasoning"]
MISCONFIGURED = {"hermes read by pythonic": (HERMES_THINKING, "pythonic", "qwen3"),
                 "hermes read without a reasoning parser": (HERMES_THINKING, "hermes", None),
                 "glm read by hermes": (BY_ID["glm:glm:nested_unicode"], "hermes", None)}  # fmt: skip


def _fixture_jobs() -> list[ParserJob]:
    tokenizer = suite.load_tokenizer(TOKENIZER)
    return [ParserJob(f"fixture:{c.name}", suite.answer_text(tokenizer, c, c.expected, reasoning="I check.")
                      .removesuffix("<|im_end|>"), "hermes", "qwen3", c.tools, suite.render(tokenizer, c).prompt)
            for c in suite.CONVERSATIONS]  # fmt: skip


def _job(case: TextCase, tool_parser: str | None = None, reasoning_parser: str | None = "") -> ParserJob:
    return ParserJob(case.id, case.text, tool_parser or case.vllm_tool_parser,
                     case.vllm_reasoning_parser if reasoning_parser == "" else reasoning_parser, TOOLS, case.prompt,
                     case.chat_template_kwargs, case.markers)  # fmt: skip


def _tiktoken() -> Path | None:
    data = real_data_dir()
    return data / "tiktoken" if data and (data / "tiktoken" / "o200k_base.tiktoken").is_file() else None


@pytest.fixture(scope="module")
def run() -> ParserRun:
    need("vllm")
    cases = [c for c in CASES if c.format != "harmony" or _tiktoken()]
    jobs = [_job(c) for c in cases]
    jobs += [ParserJob(f"wrong:{name}", c.text, tp, rp, TOOLS, c.prompt, c.chat_template_kwargs, c.markers)
             for name, (c, tp, rp) in MISCONFIGURED.items()]  # fmt: skip
    jobs += advice_jobs(_job(HERMES_THINKING, "pythonic", "qwen3"))
    jobs += [
        ParserJob("refused", HERMES_THINKING.text, "mistral", "qwen3", TOOLS, extra_tokens=HERMES_THINKING.markers)
    ]
    jobs += _fixture_jobs()
    return run_parsers(jobs, TOKENIZER, tiktoken_dir=_tiktoken())


def _result(run: ParserRun, job_id: str):
    found = [r for r in run.results if r.id == job_id]
    assert len(found) == 1, job_id
    return found[0]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vllms_parser_reads_each_text_as_ours_does_streaming_and_not(run: ParserRun, case: TextCase) -> None:
    if case.format == "harmony" and not _tiktoken():
        need("real-data")
    ours = parse_turn(case.format, case.text, TOOLS, reasoning=case.reasoning,
                      reasoning_open=reasoning_open(case.prompt or "", case.reasoning))  # fmt: skip
    theirs = _result(run, case.id)
    assert theirs.error is None, theirs.error
    assert diff_turns(ours, theirs.full) == [], "non-streaming"
    assert diff_turns(ours, theirs.streamed) == [], "streamed token by token, reassembled"
    assert diff_turns(case.expected, ours) == []


def test_the_agreement_covers_every_format_with_calls_and_without(run: ParserRun) -> None:
    agreed = {c.format for c in CASES if not _result(run, c.id).error} if _tiktoken() else set(FORMATS) - {"harmony"}
    assert agreed >= set(FORMATS) - ({"harmony"} if not _tiktoken() else set())
    counted = [r for r in run.results if r.id in BY_ID]
    # Harmony's cases need the real data's tiktoken file; without it the floor counts the other formats' cases.
    without_calls = 15 if _tiktoken() else 14
    assert sum(bool(r.full and r.full.called) for r in counted) >= 40
    assert sum(bool(r.full and not r.full.called) for r in counted) >= without_calls


@pytest.mark.parametrize("name", MISCONFIGURED)
def test_a_misconfigured_parser_disagrees_with_the_reference_parse(run: ParserRun, name: str) -> None:
    case = MISCONFIGURED[name][0]
    result = _result(run, f"wrong:{name}")
    assert result.error is None, result.error
    assert diff_turns(case.expected, result.full) and diff_turns(case.expected, result.streamed)


def test_parser_advice_names_the_parsers_that_read_the_text_right(run: ParserRun) -> None:
    configured = _job(HERMES_THINKING, "pythonic", "qwen3")
    found = matching(run, {j.id: HERMES_THINKING.expected for j in advice_jobs(configured)})
    tools, reasoning = found[f"{configured.id}/tools"], found[f"{configured.id}/reasoning"]
    assert Advice("hermes", "qwen3") in tools and Advice("qwen3_json", "qwen3") in tools  # qwen3_json: hermes' alias
    assert Advice("pythonic", "qwen3") not in tools and reasoning == []  # no reasoning parser saves the tool parser
    swept = [r for r in run.results if r.id == f"{configured.id}/reasoning"]
    assert len(swept) == len(run.reasoning_parsers) and sum(r.error is None for r in swept) >= 20
    assert len(run.tool_parsers) >= 40 and {"hermes", "mistral", "kimi_k2", "glm45", "openai"} <= set(run.tool_parsers)
    tried = [r for r in run.results if r.id == f"{configured.id}/tools"]
    assert len(tried) == len(run.tool_parsers)


def test_a_parser_that_refuses_the_models_tokenizer_is_reported_not_raised(run: ParserRun) -> None:
    """vLLM refuses to start with --tool-call-parser mistral for a tokenizer without [TOOL_CALLS]: a result that
    says so, the other jobs unaffected."""
    refused = _result(run, "refused")
    assert refused.full is None and refused.streamed is None
    assert "could not locate the tool call token" in refused.error


def test_advise_names_glms_parser_for_glm_text() -> None:
    need("vllm")
    case = BY_ID["glm:glm:single"]
    jobs = advice_jobs(_job(case, "hermes", None))
    matched = matching(run_parsers(jobs, TOKENIZER), {j.id: case.expected for j in jobs})
    found = list(dict.fromkeys(a for j in jobs for a in matched[j.id]))
    assert Advice("glm45", None) in found and Advice("glm47", None) in found
    assert Advice("hermes", None) not in found
    assert all(isinstance(a, Advice) for a in found) and found == list(dict.fromkeys(found))


@pytest.mark.parametrize("conversation", suite.CONVERSATIONS, ids=lambda c: c.name)
def test_hermes_and_qwen3_read_the_suite_answers_in_the_fixtures_format(run: ParserRun, conversation) -> None:
    theirs = _result(run, f"fixture:{conversation.name}")
    assert theirs.error is None, theirs.error
    for turn in (theirs.full, theirs.streamed):
        assert diff_turns(conversation.expected, turn, reasoning=False) == []
        assert turn.reasoning_content == "I check."


def test_a_whitespace_only_content_is_none_on_both_sides(run: ParserRun) -> None:
    """vLLM streams the newlines after </think> as content and drops them when not streaming: both read as none."""
    theirs = _result(run, HERMES_THINKING.id)
    assert theirs.full == theirs.streamed == ParsedTurn(None, HERMES_THINKING.expected.reasoning_content,
                                                        HERMES_THINKING.expected.tool_calls)  # fmt: skip
