"""validate's tool_calls check against a scripted endpoint (no engine): the reference side is the tool-calling
fixture's template rendering the suite's expected answers (what its greedy answers are, tests/tool_calls/
test_trained_tools.py); the endpoint answers each chat request through the real openai-client types, rendering the
request's messages with a chat template of its own to report its prompt ids as vLLM's `return_token_ids` does.

Covered: an endpoint that answers as the reference passes; a template that renders tools differently, a reasoning
leak, a broken stream, and malformed / unknown / empty calls fail with named errors (never a traceback); goldens
without the suite, a template without tools, an in-process candidate and an endpoint refusing tools are not checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from onboard.tool_calls import suite
from onboard.tool_calls.formats import parse_turn
from onboard.tool_calls.turn import ParsedTurn, ToolCall
from onboard.validate_serving.golden import GoldenSet
from onboard.validate_serving.openai_client import ChatCompletion, HTTPStatusError
from onboard.validate_serving.tool_check import tool_calls_check
from onboard.validate_serving.tool_golden import TOOL_FORMAT, ToolAnswer, ToolGolden, write_tool_golden

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "trained-qwen3-tools"
REASONING = "I check."
END = "<|im_end|>"


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return suite.load_tokenizer(FIXTURE)


@pytest.fixture(scope="module")
def answers(tokenizer: Any) -> list[ToolAnswer]:
    out = []
    for c in suite.CONVERSATIONS:
        rendered = suite.render(tokenizer, c, reasoning="think")
        raw = suite.answer_text(tokenizer, c, c.expected, reasoning=REASONING).removesuffix(END)
        turn = parse_turn("hermes", raw, c.tools, reasoning="think", reasoning_open=rendered.reasoning_open)
        ids = tokenizer(raw + END, add_special_tokens=False)["input_ids"]
        out.append(ToolAnswer(c.name, rendered.prompt, list(rendered.prompt_ids), rendered.reasoning_open, ids, raw,
                              "stop", turn.to_openai()))  # fmt: skip
    return out


@pytest.fixture
def golden(tmp_path: Path, answers: list[ToolAnswer]) -> GoldenSet:
    write_tool_golden(tmp_path, ToolGolden(TOOL_FORMAT, True, "hermes", "<tool_call>", "think", 160, answers))
    return GoldenSet(tmp_path, {}, ())


Answer = Callable[[suite.Conversation], ParsedTurn]


class ScriptedClient:
    """chat / chat_stream as OpenAIClient has them; `answer` says what the engine answers to a conversation,
    `template` (None: the fixture's) renders the request's prompt ids, `chunks` splits a message into deltas."""

    def __init__(self, tokenizer: Any, answer: Answer, template: str | None = None, refuse: bool = False,
                 chunks: Callable[[ParsedTurn], list[dict]] | None = None) -> None:  # fmt: skip
        self.tokenizer, self.answer, self.template, self.refuse = tokenizer, answer, template, refuse
        self.chunks = chunks or _deltas
        self.requests: list[dict] = []

    def _conversation(self, body: dict) -> suite.Conversation:
        self.requests.append(body)
        if self.refuse:
            raise HTTPStatusError(400, "http://x/v1/chat/completions: HTTP 400: auto tool choice requires ...")
        return next(c for c in suite.CONVERSATIONS if suite.api_messages(c) == body["messages"])

    def chat(self, body: dict) -> ChatCompletion:
        conversation = self._conversation(body)
        turn = self.answer(conversation)
        prompt = self.tokenizer.apply_chat_template(body["messages"], tools=body["tools"], tokenize=False,
                                                    add_generation_prompt=True, chat_template=self.template)  # fmt: skip
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        message = turn.to_openai()
        for call in message.get("tool_calls", []):
            call["id"] = "chatcmpl-tool-0"
        return ChatCompletion([{"index": 0, "message": message, "finish_reason": _finish(turn)}], ids)

    def chat_stream(self, body: dict) -> Iterator[ChatCompletion]:
        turn = self.answer(self._conversation(body))
        for delta in self.chunks(turn):
            yield ChatCompletion([{"index": 0, "delta": delta, "finish_reason": None}])
        yield ChatCompletion([{"index": 0, "delta": {}, "finish_reason": _finish(turn)}])


def _finish(turn: ParsedTurn) -> str:
    return "tool_calls" if turn.called else "stop"


def _deltas(turn: ParsedTurn) -> list[dict]:
    """The reasoning, the content, then each call's name and its arguments in two pieces."""
    out: list[dict] = [{"reasoning_content": turn.reasoning_content or ""}, {"content": turn.content or ""}]
    for i, call in enumerate(turn.tool_calls):
        half = len(call.arguments) // 2
        out.append({"tool_calls": [{"index": i, "id": f"c{i}", "function": {"name": call.name, "arguments": ""}}]})
        out += [{"tool_calls": [{"index": i, "function": {"arguments": part}}]}
                for part in (call.arguments[:half], call.arguments[half:])]  # fmt: skip
    return out


class Endpoint:
    model = "m"

    def __init__(self, client: ScriptedClient) -> None:
        self.client = client


def _reference(conversation: suite.Conversation) -> ParsedTurn:
    return replace(conversation.expected, reasoning_content=REASONING)


def _with_calls(*calls: ToolCall) -> Answer:
    """The reference's answers, the first calling conversation's calls replaced by `calls`."""

    def answer(conversation: suite.Conversation) -> ParsedTurn:
        turn = _reference(conversation)
        return replace(turn, tool_calls=calls) if conversation.name == "single_call" else turn

    return answer


def _check(golden: GoldenSet, client: ScriptedClient, **options: Any):
    return tool_calls_check(golden, Endpoint(client), **options)


def test_an_endpoint_answering_as_the_reference_passes(golden, tokenizer) -> None:
    check = _check(golden, ScriptedClient(tokenizer, _reference))
    assert check.passed and check.required and not check.skipped, check.detail
    summary = check.data["summary"]
    assert summary == {"conversations": 6, "agreeing": 6, "trigger_similarity": 1.0, "schema_accuracy": 1.0,
                       "calls": 5}  # fmt: skip
    assert "trigger similarity 100%, schema accuracy 100% over 5 calls" in check.detail


def test_the_requests_offer_the_tools_with_arguments_as_json_text(golden, tokenizer) -> None:
    client = ScriptedClient(tokenizer, _reference)
    _check(golden, client)
    assert len(client.requests) == 12  # each conversation non-streaming and streamed
    assert all(r["tools"] == list(suite.TOOLS) and r["temperature"] == 0.0 for r in client.requests)
    history = next(r for r in client.requests if len(r["messages"]) == 3)["messages"][1]
    assert isinstance(history["tool_calls"][0]["function"]["arguments"], str)


def test_a_seeded_template_that_renders_tools_differently_is_caught(golden, tokenizer) -> None:
    seeded = tokenizer.chat_template.replace("You may call one or more functions", "You can call functions")
    assert seeded != tokenizer.chat_template
    check = _check(golden, ScriptedClient(tokenizer, _reference, template=seeded))
    assert not check.passed
    assert all(any("renders the conversation otherwise than the reference's chat template" in d
                   for d in o["differences"]) for o in check.data["conversations"])  # fmt: skip
    assert "renders the conversation otherwise" in check.detail


def test_reasoning_leaking_into_the_content_fails(golden, tokenizer) -> None:
    def leak(conversation: suite.Conversation) -> ParsedTurn:
        turn = _reference(conversation)
        return replace(turn, content=f"<think>{REASONING}</think> {turn.content or ''}".strip(), reasoning_content=None)

    check = _check(golden, ScriptedClient(tokenizer, leak))
    assert not check.passed and check.data["summary"]["agreeing"] == 0
    assert any("reasoning none, expected 'I check.'" in d for d in check.data["conversations"][4]["differences"])


def test_streaming_deltas_that_do_not_reassemble_fail(golden, tokenizer) -> None:
    def lose_a_piece(turn: ParsedTurn) -> list[dict]:
        return [d for d in _deltas(turn) if not (d.get("tool_calls") and d["tool_calls"][0]["function"].get(
            "arguments", "").endswith("}"))]  # fmt: skip

    check = _check(golden, ScriptedClient(tokenizer, _reference, chunks=lose_a_piece))
    assert not check.passed
    single = check.data["conversations"][0]
    assert single["differences"] == [] and single["stream_differences"]
    assert "streamed: call 0: arguments are not JSON" in single["stream_differences"][0]


def test_a_stream_delta_without_an_index_is_a_named_error(golden, tokenizer) -> None:
    def no_index(turn: ParsedTurn) -> list[dict]:
        return [{"tool_calls": [{"function": {"name": c.name, "arguments": c.arguments}}]} for c in turn.tool_calls]

    check = _check(golden, ScriptedClient(tokenizer, _reference, chunks=no_index))
    assert "streamed: MalformedToolCall: a streamed tool-call delta has no index" in \
        check.data["conversations"][0]["stream_differences"][0]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "named"),
    [(ToolCall("get_weather", '{"city": "Paris"'), "MalformedToolCall: tool call 0 ('get_weather') has arguments "
                                                   "that are not JSON"),
     (ToolCall("get_wether", '{"city": "Paris"}'), "UnknownTool: tool call 0 calls 'get_wether', which is not among "
                                                   "the offered tools (get_weather, create_event)"),
     (ToolCall("get_weather", ""), "EmptyArguments: tool call 0 ('get_weather') has an empty arguments string"),
     (ToolCall("get_weather", '{"city": 5}'), "tool call 0 ('get_weather') breaks its schema: $.city: 5 is not of "
                                              "type 'string'")],
    ids=["malformed-json", "unknown-tool", "empty-arguments", "schema"],
)  # fmt: skip
def test_unusable_calls_from_the_engine_are_named_errors(golden, tokenizer, call: ToolCall, named: str) -> None:
    check = _check(golden, ScriptedClient(tokenizer, _with_calls(call)))
    assert not check.passed
    single = check.data["conversations"][0]
    assert len(single["errors"]) == 1 and single["errors"][0].startswith(named) and single["schema_valid"] == 0
    assert check.data["summary"]["schema_accuracy"] == pytest.approx(4 / 5)
    assert check.data["summary"]["trigger_similarity"] == 1.0
    assert named.split(":")[0] in check.detail or "breaks its schema" in check.detail


def test_a_missed_call_lowers_the_trigger_similarity(golden, tokenizer) -> None:
    check = _check(golden, ScriptedClient(tokenizer, _with_calls()))
    single = check.data["conversations"][0]
    assert not single["triggered"] and single["expected_call"]
    assert check.data["summary"]["trigger_similarity"] == pytest.approx(2 * 3 / (2 * 3 + 1))
    assert "expected a tool call, got none" in single["differences"]


def test_without_a_checkpoint_the_advice_says_it_did_not_run(golden, tokenizer) -> None:
    check = _check(golden, ScriptedClient(tokenizer, _with_calls()), tool_parser="pythonic")
    assert check.data["advice"] == {"matches": [], "line": "parser advice not run: no local checkpoint folder (its "
                                                           "tokenizer is needed)"}  # fmt: skip
    assert check.detail.endswith(check.data["advice"]["line"])


def test_an_endpoint_refusing_tools_is_not_checked_naming_the_flags(golden, tokenizer) -> None:
    check = _check(golden, ScriptedClient(tokenizer, _reference, refuse=True))
    assert check.skipped and not check.passed and not check.not_applicable
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in check.detail


def test_goldens_without_the_suite_a_template_without_tools_and_in_process_candidates(tmp_path, golden) -> None:
    (tmp_path / "old").mkdir()
    missing = tool_calls_check(GoldenSet(tmp_path / "old", {}, ()), Endpoint(None))
    assert missing.skipped and not missing.not_applicable and "re-record" in missing.detail
    (tmp_path / "none").mkdir()
    write_tool_golden(tmp_path / "none", ToolGolden(TOOL_FORMAT, False))
    none = tool_calls_check(GoldenSet(tmp_path / "none", {}, ()), Endpoint(None))
    assert none.not_applicable and none.passed and none.skipped
    in_process = tool_calls_check(golden, object())
    assert in_process.skipped and "in-process candidate" in in_process.detail


def test_a_malformed_tool_golden_is_a_named_input_error(tmp_path) -> None:
    from onboard.errors import InputError

    (tmp_path / "tool_calls.json").write_text(json.dumps({"format": TOOL_FORMAT, "declared": "yes"}))
    with pytest.raises(InputError, match=r"tool_calls.json: Expected `bool`, got `str` - at `\$.declared`"):
        tool_calls_check(GoldenSet(tmp_path, {}, ()), Endpoint(None))


def test_the_report_section_shows_the_summary_each_conversation_and_the_advice(golden, tokenizer) -> None:
    from onboard.tool_calls.report import HEADER, section
    from onboard.validate_serving.report import json_safe

    check = _check(golden, ScriptedClient(tokenizer, _with_calls()), tool_parser="pythonic", reasoning_parser="qwen3")
    [(title, header, rows)] = section({"check_data": {"tool_calls": json_safe(check.data)}})
    assert (title, header) == ("Tool calls", HEADER)
    assert rows[0] == ("summary", "format hermes", "parsers pythonic / qwen3", "5/6",
                       "trigger similarity 86%, schema accuracy 100%")  # fmt: skip
    assert rows[1][:4] == ("single_call", "yes", "none", "NO") and "expected a tool call, got none" in rows[1][4]
    assert rows[-1][0] == "parser advice" and "not run" in rows[-1][4]
    assert section({"check_data": {}}) == [] and section({}) == []


def test_the_checklist_item_is_not_applicable_when_the_template_declares_no_tools(tmp_path) -> None:
    from onboard.promote.checklist import evaluate, load_checklist, load_signoffs
    from onboard.promote.stage_results import load_stage_results
    from tests.promote.workspaces import REV_A, SLUG, make_workspace

    rev = make_workspace(tmp_path, skip={"validate": ("tool_calls",)})
    state = evaluate(load_checklist(), load_stage_results(rev), load_signoffs(rev), slug=SLUG, revision=REV_A)
    item = next(it for it in state.items if it.id == "tool_calls")
    assert item.required and item.status == "open"  # a validate result without the check blocks promotion
    validate = json.loads((rev / "validate.json").read_text())
    validate["checks"].append({"name": "tool_calls", "passed": True, "required": False, "skipped": True,
                               "not_applicable": True, "detail": "not applicable: no tool support"})  # fmt: skip
    (rev / "validate.json").write_text(json.dumps(validate))
    state = evaluate(load_checklist(), load_stage_results(rev), load_signoffs(rev), slug=SLUG, revision=REV_A)
    assert next(it for it in state.items if it.id == "tool_calls").status == "not_applicable"
